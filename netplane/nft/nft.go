// Package nft owns kelp's one nftables table, `ip kelp` (design: "one
// table named kelp, and nothing else is touched").
//
// The table is shared: each netplane component (the bridge's masquerade,
// the service proxy, the coming overlays) keeps its own chains and sets in
// it, named so that the component can find exactly its own objects, and
// removes only those in its Cleanup. No component flushes or deletes the
// table; it is created by whoever needs it first (adding an existing table
// is a no-op) and deleted only by DropIfEmpty, once nobody has anything in
// it any more.
//
// The package also holds the expression builders more than one component
// needs, so that a match means the same thing everywhere.
package nft

import (
	"fmt"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netns"
)

const (
	// TableName is the name of kelp's table.
	TableName = "kelp"
	// Family is the table's family: ip (IPv4 only, as is the pod network).
	Family = nftables.TableFamilyIPv4
)

// Table returns a fresh *nftables.Table for `ip kelp`, for use in one
// transaction (the library keeps no state in it, but callers pass it
// around and a fresh value per call keeps them from sharing one by
// accident).
func Table() *nftables.Table {
	return &nftables.Table{Family: Family, Name: TableName}
}

// Offsets of the IPv4 header fields the matchers read.
const (
	OffsetSAddr uint32 = 12 // ip saddr
	OffsetDAddr uint32 = 16 // ip daddr
)

// MatchPrefix is `ip saddr|daddr [!=] p`: it loads the 4-byte IPv4 header
// field at offset (OffsetSAddr or OffsetDAddr) into register 1, masks it
// with p's netmask and compares it with p's (masked) network address using
// op (expr.CmpOpEq or expr.CmpOpNeq). This is what `nft` itself emits for
// a prefix match. p must be IPv4; register 1 is clobbered.
func MatchPrefix(offset uint32, p netip.Prefix, op expr.CmpOp) []expr.Any {
	p = p.Masked()
	mask := make([]byte, 4)
	for i := 0; i < p.Bits(); i++ {
		mask[i/8] |= 0x80 >> (i % 8)
	}
	addr := p.Addr().As4()
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: 4},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: mask, Xor: make([]byte, 4)},
		&expr.Cmp{Op: op, Register: 1, Data: addr[:]},
	}
}

// SAddrIn is `ip saddr p`.
func SAddrIn(p netip.Prefix) []expr.Any { return MatchPrefix(OffsetSAddr, p, expr.CmpOpEq) }

// SAddrNotIn is `ip saddr != p`.
func SAddrNotIn(p netip.Prefix) []expr.Any { return MatchPrefix(OffsetSAddr, p, expr.CmpOpNeq) }

// DAddrIn is `ip daddr p`.
func DAddrIn(p netip.Prefix) []expr.Any { return MatchPrefix(OffsetDAddr, p, expr.CmpOpEq) }

// DAddrNotIn is `ip daddr != p`.
func DAddrNotIn(p netip.Prefix) []expr.Any { return MatchPrefix(OffsetDAddr, p, expr.CmpOpNeq) }

// conn opens an nftables connection in the network namespace at netnsPath
// ("" = the caller's). The library dials a netlink socket per operation
// with the namespace's fd, so the fd must stay open as long as the
// connection is used: call done after the last use.
func conn(netnsPath string) (c *nftables.Conn, done func(), err error) {
	var opts []nftables.ConnOption
	done = func() {}
	if netnsPath != "" {
		h, err := netns.GetFromPath(netnsPath)
		if err != nil {
			return nil, nil, fmt.Errorf("nftables: open netns %s: %w", netnsPath, err)
		}
		done = func() { h.Close() }
		opts = append(opts, nftables.WithNetNSFd(int(h)))
	}
	if c, err = nftables.New(opts...); err != nil {
		done()
		return nil, nil, fmt.Errorf("nftables: %w", err)
	}
	return c, done, nil
}

// DropIfEmpty deletes table ip kelp in the network namespace at netnsPath
// ("" = the caller's) if it holds no chain and no named set of anyone. A
// missing table is not an error; a table something still uses is left as
// it is. Call it after every component's Cleanup (kelp killall does).
//
// The check and the delete are two transactions (the kernel deletes a
// table with its contents, it has no "delete if empty"), so a component
// that adds a chain in between would lose it: only call this when no kelp
// component is running, as killall does.
func DropIfEmpty(netnsPath string) error {
	c, done, err := conn(netnsPath)
	if err != nil {
		return err
	}
	defer done()
	empty, err := isEmpty(c)
	if err != nil || !empty {
		return err
	}
	c.DelTable(Table())
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables: delete table ip %s: %w", TableName, err)
	}
	return nil
}

// isEmpty reports whether table ip kelp exists and holds no chains and no
// named sets (anonymous sets only live inside rules, so none are left
// without chains).
func isEmpty(c *nftables.Conn) (bool, error) {
	if _, err := c.ListTableOfFamily(TableName, Family); err != nil {
		return false, nil // no table (the library does not tell ENOENT apart)
	}
	chains, err := c.ListChainsOfTableFamily(Family)
	if err != nil {
		return false, fmt.Errorf("nftables: list chains: %w", err)
	}
	for _, ch := range chains {
		if ch.Table != nil && ch.Table.Name == TableName {
			return false, nil
		}
	}
	sets, err := c.GetSets(Table())
	if err != nil {
		return false, fmt.Errorf("nftables: list sets of table ip %s: %w", TableName, err)
	}
	return len(sets) == 0, nil
}
