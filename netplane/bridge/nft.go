package bridge

import (
	"fmt"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"

	"github.com/kelp-project/kelp/netplane/nft"
)

// NFTPostroutingChain is the bridge's masquerade chain in table ip kelp
// (netplane/nft): type nat, hook postrouting, priority srcnat (100). It is
// the only object of the table this package touches.
const NFTPostroutingChain = "bridge-postrouting"

var multicastPrefix = netip.MustParsePrefix("224.0.0.0/4")

// installMasquerade (re)installs, in one nftables transaction in the node
// netns, the chain
//
//	table ip kelp {
//	  chain bridge-postrouting {
//	    type nat hook postrouting priority srcnat; policy accept;
//	    ip saddr <podCIDR> ip daddr <clusterCIDR> return
//	    ip saddr <podCIDR> ip daddr 224.0.0.0/4 return
//	    ip saddr <podCIDR> masquerade
//	  }
//	}
//
// The table is created if missing and never flushed or deleted; only the
// chain's rules are replaced, so running it again is idempotent.
func installMasquerade(nsFd int, podCIDR, clusterCIDR netip.Prefix) error {
	c, err := nftables.New(nftables.WithNetNSFd(nsFd))
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	table := c.AddTable(nft.Table())
	policy := nftables.ChainPolicyAccept
	chain := c.AddChain(&nftables.Chain{
		Name:     NFTPostroutingChain,
		Table:    table,
		Type:     nftables.ChainTypeNAT,
		Hooknum:  nftables.ChainHookPostrouting,
		Priority: nftables.ChainPriorityNATSource,
		Policy:   &policy,
	})
	c.FlushChain(chain)
	ret := &expr.Verdict{Kind: expr.VerdictReturn}
	for _, dst := range []netip.Prefix{clusterCIDR, multicastPrefix} {
		exprs := append(nft.SAddrIn(podCIDR), nft.DAddrIn(dst)...)
		c.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: append(exprs, ret)})
	}
	c.AddRule(&nftables.Rule{Table: table, Chain: chain,
		Exprs: append(nft.SAddrIn(podCIDR), &expr.Masq{})})
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables: install table ip %s chain %s: %w", nft.TableName, NFTPostroutingChain, err)
	}
	return nil
}

// removeMasquerade deletes this package's chain (not the table).
func removeMasquerade(nsFd int) error {
	c, err := nftables.New(nftables.WithNetNSFd(nsFd))
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	table := nft.Table()
	if _, err := c.ListChain(table, NFTPostroutingChain); err != nil {
		return nil // not there
	}
	c.DelChain(&nftables.Chain{Name: NFTPostroutingChain, Table: table})
	return c.Flush()
}
