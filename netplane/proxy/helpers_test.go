package proxy

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netns"

	"github.com/kelp-project/kelp/netplane/nft"
)

// Every root test works in a fresh network namespace `kelp-px-test-<rand>`
// (created with `ip netns add`, deleted at cleanup). Nothing is done in the
// host namespace.

type testNS struct {
	t    testing.TB
	name string
	path string
}

func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (network namespaces, nftables, conntrack); run `go test` as root")
	}
}

func newTestNS(t testing.TB) *testNS {
	t.Helper()
	requireRoot(t)
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	n := &testNS{t: t, name: "kelp-px-test-" + hex.EncodeToString(rnd[:])}
	n.path = "/run/netns/" + n.name
	if out, err := exec.Command("ip", "netns", "add", n.name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", n.name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", n.name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", n.name, err, out)
		}
	})
	n.ip("link", "set", "lo", "up")
	return n
}

// ip runs `ip -n <ns> args...`.
func (n *testNS) ip(args ...string) {
	n.t.Helper()
	out, err := exec.Command("ip", append([]string{"-n", n.name}, args...)...).CombinedOutput()
	if err != nil {
		n.t.Fatalf("ip -n %s %s: %v: %s", n.name, strings.Join(args, " "), err, out)
	}
}

// run runs fn on a dedicated OS thread switched into the namespace. A
// thread that cannot be switched back is discarded.
func (n *testNS) run(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		h, err := netns.GetFromPath(n.path)
		if err != nil {
			errc <- err
			return
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			errc <- err
			return
		}
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("restore netns: %w", err))
			return // thread stays locked and dies with the goroutine
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

func (n *testNS) conn() *nftables.Conn {
	n.t.Helper()
	h, err := netns.GetFromPath(n.path)
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(func() { h.Close() })
	c, err := nftables.New(nftables.WithNetNSFd(int(h)))
	if err != nil {
		n.t.Fatal(err)
	}
	return c
}

func (n *testNS) proxier(nodeIPs ...string) *Proxier {
	n.t.Helper()
	var ips []netip.Addr
	for _, s := range nodeIPs {
		ips = append(ips, netip.MustParseAddr(s))
	}
	p, err := newProxier(Config{NodeName: "node1", NodeIPs: ips, ClusterCIDR: "10.42.0.0/16", NetNS: n.path})
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(func() { p.Close() })
	return p
}

// chains returns chain name -> chain for table ip kelp.
func (n *testNS) chains(c *nftables.Conn) map[string]*nftables.Chain {
	n.t.Helper()
	all, err := c.ListChainsOfTableFamily(nftables.TableFamilyIPv4)
	if err != nil {
		n.t.Fatal(err)
	}
	out := map[string]*nftables.Chain{}
	for _, ch := range all {
		if ch.Table.Name == nft.TableName {
			out[ch.Name] = ch
		}
	}
	return out
}

func (n *testNS) sets(c *nftables.Conn) map[string]*nftables.Set {
	n.t.Helper()
	ss, err := c.GetSets(nft.Table())
	if err != nil {
		n.t.Fatal(err)
	}
	out := map[string]*nftables.Set{}
	for _, s := range ss {
		out[s.Name] = s
	}
	return out
}

func (n *testNS) elements(c *nftables.Conn, name string) []nftables.SetElement {
	n.t.Helper()
	s, err := c.GetSetByName(nft.Table(), name)
	if err != nil {
		n.t.Fatalf("get set %s: %v", name, err)
	}
	el, err := c.GetSetElements(s)
	if err != nil {
		n.t.Fatalf("get elements of %s: %v", name, err)
	}
	for i := range el {
		if el[i].VerdictData == nil && len(el[i].Val) > 0 {
			el[i].VerdictData = decodeVerdict(el[i].Val)
		}
	}
	return el
}

// decodeVerdict parses the nested NFTA_VERDICT_* attributes that the
// library leaves undecoded in SetElement.Val.
func decodeVerdict(b []byte) *expr.Verdict {
	v := &expr.Verdict{}
	for len(b) >= 4 {
		l := int(binary.LittleEndian.Uint16(b[0:2]))
		typ := binary.LittleEndian.Uint16(b[2:4]) &^ 0xc000
		if l < 4 || l > len(b) {
			break
		}
		data := b[4:l]
		switch typ {
		case 1: // NFTA_VERDICT_CODE
			if len(data) == 4 {
				v.Kind = expr.VerdictKind(int32(binary.BigEndian.Uint32(data)))
			}
		case 2: // NFTA_VERDICT_CHAIN
			v.Chain = strings.TrimRight(string(data), "\x00")
		}
		l = (l + 3) &^ 3
		if l > len(b) {
			break
		}
		b = b[l:]
	}
	return v
}

// targets returns the endpoints (ip:port) a service chain balances over:
// the DNAT targets of its rules that are not affinity lookups.
func (n *testNS) targets(c *nftables.Conn, chain string) []string {
	n.t.Helper()
	rules, err := c.GetRules(nft.Table(), &nftables.Chain{Table: nft.Table(), Name: chain})
	if err != nil {
		n.t.Fatalf("rules of %s: %v", chain, err)
	}
	var out []string
	for _, r := range rules {
		var lookup bool
		var ip, port []byte
		for _, e := range r.Exprs {
			switch e := e.(type) {
			case *expr.Lookup:
				lookup = true // affinity check
			case *expr.Immediate:
				if e.Register == 1 {
					ip = e.Data
				} else if e.Register == 2 {
					port = e.Data
				}
			case *expr.NAT:
				if !lookup && len(ip) == 4 && len(port) == 2 {
					a, _ := netip.AddrFromSlice(ip)
					out = append(out, netip.AddrPortFrom(a, uint16(port[0])<<8|uint16(port[1])).String())
				}
			}
		}
	}
	sort.Strings(out)
	return out
}
