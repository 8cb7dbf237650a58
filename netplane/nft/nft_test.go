package nft

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"net/netip"
	"os"
	"os/exec"
	"reflect"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

func TestMatchPrefixExprs(t *testing.T) {
	for _, tc := range []struct {
		name   string
		got    []expr.Any
		offset uint32
		mask   []byte
		addr   []byte
		op     expr.CmpOp
	}{
		{"saddr /16", SAddrIn(netip.MustParsePrefix("10.42.0.0/16")), 12, []byte{255, 255, 0, 0}, []byte{10, 42, 0, 0}, expr.CmpOpEq},
		{"unmasked input is masked", SAddrIn(netip.MustParsePrefix("10.42.3.7/24")), 12, []byte{255, 255, 255, 0}, []byte{10, 42, 3, 0}, expr.CmpOpEq},
		{"daddr /4", DAddrIn(netip.MustParsePrefix("224.0.0.0/4")), 16, []byte{0xf0, 0, 0, 0}, []byte{224, 0, 0, 0}, expr.CmpOpEq},
		{"saddr != /20", SAddrNotIn(netip.MustParsePrefix("10.42.16.0/20")), 12, []byte{255, 255, 0xf0, 0}, []byte{10, 42, 16, 0}, expr.CmpOpNeq},
		{"daddr != /8", DAddrNotIn(netip.MustParsePrefix("127.0.0.0/8")), 16, []byte{255, 0, 0, 0}, []byte{127, 0, 0, 0}, expr.CmpOpNeq},
		{"/32", MatchPrefix(OffsetDAddr, netip.MustParsePrefix("192.168.1.9/32"), expr.CmpOpEq), 16, []byte{255, 255, 255, 255}, []byte{192, 168, 1, 9}, expr.CmpOpEq},
		{"/0", MatchPrefix(OffsetSAddr, netip.MustParsePrefix("0.0.0.0/0"), expr.CmpOpEq), 12, []byte{0, 0, 0, 0}, []byte{0, 0, 0, 0}, expr.CmpOpEq},
	} {
		want := []expr.Any{
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: tc.offset, Len: 4},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: tc.mask, Xor: []byte{0, 0, 0, 0}},
			&expr.Cmp{Op: tc.op, Register: 1, Data: tc.addr},
		}
		if !reflect.DeepEqual(tc.got, want) {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, dump(tc.got), dump(want))
		}
	}
}

// TestMatchPrefixSemantics runs the expressions the way the kernel does
// (load the field, AND the mask, XOR, compare) over addresses on both
// sides of each prefix's edges, against netip.Prefix.Contains.
func TestMatchPrefixSemantics(t *testing.T) {
	for _, ps := range []string{"0.0.0.0/0", "10.0.0.0/8", "10.42.0.0/16", "10.42.16.0/20", "10.42.3.0/24", "10.42.3.4/30", "10.42.3.9/32", "224.0.0.0/4"} {
		p := netip.MustParsePrefix(ps)
		first, last := p.Addr(), lastAddr(p)
		probes := []netip.Addr{first, last, first.Next(), netip.MustParseAddr("10.42.3.9"), netip.MustParseAddr("192.168.0.1"), netip.MustParseAddr("255.255.255.255")}
		if prev := first.Prev(); prev.IsValid() {
			probes = append(probes, prev)
		}
		if next := last.Next(); next.IsValid() {
			probes = append(probes, next)
		}
		for _, a := range probes {
			for _, op := range []expr.CmpOp{expr.CmpOpEq, expr.CmpOpNeq} {
				for _, off := range []uint32{OffsetSAddr, OffsetDAddr} {
					want := p.Contains(a) == (op == expr.CmpOpEq)
					if got := eval(t, MatchPrefix(off, p, op), off, a); got != want {
						t.Errorf("%s op %d offset %d on %s: matched %v, want %v", p, op, off, a, got, want)
					}
				}
			}
		}
	}
}

// eval interprets a MatchPrefix expression list on an IPv4 header whose
// field at off holds a (the other address field holds its complement, so
// reading the wrong field shows).
func eval(t *testing.T, ex []expr.Any, off uint32, a netip.Addr) bool {
	t.Helper()
	hdr := make([]byte, 20)
	a4 := a.As4()
	other := OffsetSAddr + OffsetDAddr - off
	copy(hdr[off:], a4[:])
	for i := range 4 {
		hdr[int(other)+i] = ^a4[i]
	}
	var reg []byte
	for _, e := range ex {
		switch e := e.(type) {
		case *expr.Payload:
			if e.Base != expr.PayloadBaseNetworkHeader || e.DestRegister != 1 {
				t.Fatalf("payload %+v", e)
			}
			reg = append([]byte(nil), hdr[e.Offset:e.Offset+e.Len]...)
		case *expr.Bitwise:
			for i := range reg {
				reg[i] = reg[i]&e.Mask[i] ^ e.Xor[i]
			}
		case *expr.Cmp:
			eq := bytes.Equal(reg, e.Data)
			return eq == (e.Op == expr.CmpOpEq)
		default:
			t.Fatalf("unexpected %T", e)
		}
	}
	t.Fatal("no cmp")
	return false
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().As4()
	for i := p.Bits(); i < 32; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	return netip.AddrFrom4(b)
}

func dump(ex []expr.Any) string {
	var b bytes.Buffer
	for _, e := range ex {
		b.WriteString(reflect.TypeOf(e).Elem().Name())
		b.WriteString(hex.EncodeToString([]byte(reflect.ValueOf(e).Elem().String())))
		b.WriteString(" ")
	}
	return b.String()
}

// TestDropIfEmpty needs root: it works in a fresh network namespace
// (`ip netns add kelp-nft-test-<rand>`, deleted at cleanup) and never in
// the host's.
func TestDropIfEmpty(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (network namespaces, nftables); run `go test` as root")
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	name := "kelp-nft-test-" + hex.EncodeToString(rnd[:])
	path := "/run/netns/" + name
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	c, done, err := conn(path)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	// Prove the connection is in the test namespace before touching table
	// kelp through it: a marker table made there by the nft CLI must be
	// visible (and nothing of the host's may be reached by mistake).
	marker := name + "-marker"
	if out, err := exec.Command("ip", "netns", "exec", name, "nft", "add", "table", "ip", marker).CombinedOutput(); err != nil {
		t.Fatalf("nft add table in %s: %v: %s", name, err, out)
	}
	if _, err := c.ListTableOfFamily(marker, Family); err != nil {
		t.Fatalf("the connection is not in namespace %s: %v", name, err)
	}
	exists := func() bool {
		_, err := c.ListTableOfFamily(TableName, Family)
		return err == nil
	}

	// No table: nothing to do, no error.
	if err := DropIfEmpty(path); err != nil {
		t.Fatalf("no table: %v", err)
	}

	// A chain of someone's keeps the table.
	tb := c.AddTable(Table())
	c.AddChain(&nftables.Chain{Table: tb, Name: "someone-else"})
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := DropIfEmpty(path); err != nil || !exists() {
		t.Fatalf("table with a chain: err %v, exists %v; want kept", err, exists())
	}

	// So does a named set alone.
	c.DelChain(&nftables.Chain{Table: tb, Name: "someone-else"})
	if err := c.AddSet(&nftables.Set{Table: tb, Name: "someones-set", KeyType: nftables.TypeIPAddr}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := DropIfEmpty(path); err != nil || !exists() {
		t.Fatalf("table with a set: err %v, exists %v; want kept", err, exists())
	}

	// Empty: dropped. Another table (the marker) is not touched.
	c.DelSet(&nftables.Set{Table: tb, Name: "someones-set"})
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := DropIfEmpty(path); err != nil || exists() {
		t.Fatalf("empty table: err %v, exists %v; want dropped", err, exists())
	}
	if _, err := c.ListTableOfFamily(marker, Family); err != nil {
		t.Fatalf("DropIfEmpty touched another table: %v", err)
	}
}
