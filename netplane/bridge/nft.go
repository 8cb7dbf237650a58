package bridge

import (
	"fmt"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

const (
	// NFTTable is the one nftables table kelp owns (family ip). Other
	// components add their own chains to it; this package only ever touches
	// the chains below.
	NFTTable = "kelp"
	// NFTPostroutingChain is the bridge's masquerade chain: type nat, hook
	// postrouting, priority srcnat (100).
	NFTPostroutingChain = "bridge-postrouting"
)

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
	table := c.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: NFTTable})
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
		exprs := append(matchPrefix(12, podCIDR), matchPrefix(16, dst)...)
		c.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: append(exprs, ret)})
	}
	c.AddRule(&nftables.Rule{Table: table, Chain: chain,
		Exprs: append(matchPrefix(12, podCIDR), &expr.Masq{})})
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables: install table ip %s chain %s: %w", NFTTable, NFTPostroutingChain, err)
	}
	return nil
}

// removeMasquerade deletes this package's chain (not the table).
func removeMasquerade(nsFd int) error {
	c, err := nftables.New(nftables.WithNetNSFd(nsFd))
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	table := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: NFTTable}
	if _, err := c.ListChain(table, NFTPostroutingChain); err != nil {
		return nil // not there
	}
	c.DelChain(&nftables.Chain{Name: NFTPostroutingChain, Table: table})
	return c.Flush()
}

// matchPrefix matches the IPv4 header field at offset (12 = saddr,
// 16 = daddr) against p.
func matchPrefix(offset uint32, p netip.Prefix) []expr.Any {
	p = p.Masked()
	mask := make([]byte, 4)
	for i := 0; i < p.Bits(); i++ {
		mask[i/8] |= 0x80 >> (i % 8)
	}
	addr := p.Addr().As4()
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: 4},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: mask, Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: addr[:]},
	}
}
