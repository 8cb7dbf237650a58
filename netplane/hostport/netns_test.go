package hostport

import (
	"crypto/rand"
	"encoding/hex"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"github.com/kelp-project/kelp/netplane/bridge"
	"github.com/kelp-project/kelp/netplane/nft"
)

// The root tests build a node in a fresh network namespace: the bridge
// (netplane/bridge, cni0 10.42.0.1/24), a "node address" 192.0.2.10 on a
// veth, and pods as the bridge makes them, each with servers
// on port 8080 that answer with the pod's name. Nothing in the host
// namespace is touched.

const nodeAddr = "192.0.2.10"

type testNode struct {
	t      *testing.T
	nsPath string
	br     *bridge.Bridge
	mapper *Mapper
}

func newTestNode(t *testing.T) *testNode {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (network namespaces, netlink, nftables); run `go test` as root")
	}
	base := t.TempDir()
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	n := &testNode{t: t, nsPath: filepath.Join(base, "node", "kelp-hp-test-"+hex.EncodeToString(rnd[:]))}
	netnsDir := filepath.Join(base, "netns")
	if err := bridge.PinNewNetNS(n.nsPath); err != nil {
		t.Fatalf("create node netns: %v", err)
	}
	t.Cleanup(func() {
		if entries, err := os.ReadDir(netnsDir); err == nil {
			for _, e := range entries {
				_ = bridge.UnpinNetNS(filepath.Join(netnsDir, e.Name()))
			}
		}
		_ = unix.Unmount(netnsDir, unix.MNT_DETACH)
		if err := bridge.UnpinNetNS(n.nsPath); err != nil {
			t.Errorf("cleanup node netns: %v", err)
		}
	})
	br, err := bridge.New(bridge.Config{PodCIDR: "10.42.0.0/24", ClusterCIDR: "10.42.0.0/16",
		StateDir: filepath.Join(base, "ipam"), NetNSDir: netnsDir, NodeNetNS: n.nsPath})
	if err != nil {
		t.Fatalf("bridge: %v", err)
	}
	t.Cleanup(func() { br.Close() })
	n.br = br
	if err := bridge.InNetNSPath(n.nsPath, func() error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		if err := netlink.LinkSetUp(lo); err != nil {
			return err
		}
		// A veth pair stands for the node's uplink (no dummy module here).
		d := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "node0"}, PeerName: "node0-peer"}
		if err := netlink.LinkAdd(d); err != nil {
			return err
		}
		if err := netlink.AddrAdd(d, &netlink.Addr{IPNet: &net.IPNet{IP: net.ParseIP(nodeAddr), Mask: net.CIDRMask(24, 32)}}); err != nil {
			return err
		}
		return netlink.LinkSetUp(d)
	}); err != nil {
		t.Fatalf("node interfaces: %v", err)
	}
	n.mapper = New(Config{NetNS: n.nsPath, Bridge: bridge.DefaultBridgeName})
	return n
}

// pod sets up a pod's network and its TCP and UDP servers on 8080.
func (n *testNode) pod(uid string) netip.Addr {
	t := n.t
	t.Helper()
	path, ip, err := n.br.Setup(uid)
	if err != nil {
		t.Fatalf("Setup %s: %v", uid, err)
	}
	var ln net.Listener
	var pc net.PacketConn
	if err := bridge.InNetNSPath(path, func() (err error) {
		if ln, err = net.Listen("tcp4", ":8080"); err != nil {
			return err
		}
		pc, err = net.ListenPacket("udp4", ":8080")
		return err
	}); err != nil {
		t.Fatalf("servers in %s: %v", uid, err)
	}
	t.Cleanup(func() { ln.Close(); pc.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, uid+" tcp")
			c.Close()
		}
	}()
	go func() {
		buf := make([]byte, 64)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo([]byte(uid+" udp"), from)
		}
	}()
	return ip
}

// ask connects from the node (optionally from local address src) to
// addr over network and returns what the server said, or "" if nothing
// answered.
func (n *testNode) ask(network, src, addr string) string {
	n.t.Helper()
	var got string
	err := bridge.InNetNSPath(n.nsPath, func() error {
		d := net.Dialer{Timeout: 2 * time.Second}
		if src != "" {
			if network == "tcp4" {
				d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(src)}
			} else {
				d.LocalAddr = &net.UDPAddr{IP: net.ParseIP(src)}
			}
		}
		c, err := d.Dial(network, addr)
		if err != nil {
			return nil
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		if network == "udp4" {
			if _, err := c.Write([]byte("hostname")); err != nil {
				return nil
			}
		}
		if network == "udp4" {
			buf := make([]byte, 64)
			k, _ := c.Read(buf) // one datagram
			got = string(buf[:k])
			return nil
		}
		b, _ := io.ReadAll(io.LimitReader(c, 64))
		got = string(b)
		return nil
	})
	if err != nil {
		n.t.Fatal(err)
	}
	return got
}

// owners lists the pods the mapping rules are tagged with, per chain.
func (n *testNode) owners() map[string][]string {
	n.t.Helper()
	c, done, err := connIn(n.nsPath)
	if err != nil {
		n.t.Fatal(err)
	}
	defer done()
	out := map[string][]string{}
	for _, name := range []string{ChainDNAT, ChainMasq} {
		rules, err := c.GetRules(nft.Table(), &nftables.Chain{Name: name, Table: nft.Table()})
		if err != nil {
			continue
		}
		for _, r := range rules {
			out[name] = append(out[name], owner(r))
		}
	}
	return out
}

func (n *testNode) hostportChains() []string {
	n.t.Helper()
	c, done, err := connIn(n.nsPath)
	if err != nil {
		n.t.Fatal(err)
	}
	defer done()
	chains, err := c.ListChainsOfTableFamily(nft.Family)
	if err != nil {
		n.t.Fatal(err)
	}
	var out []string
	for _, ch := range chains {
		if strings.HasPrefix(ch.Name, Prefix) {
			out = append(out, ch.Name)
		}
	}
	return out
}

// The conformance spec's three pods on one host port: TCP on 127.0.0.1,
// TCP on the node address, UDP on the node address; each reached from the
// node, by address and from 127.0.0.1, and gone with its pod.
func TestSameHostPortDifferentIPAndProtocol(t *testing.T) {
	n := newTestNode(t)
	node := netip.MustParseAddr(nodeAddr)
	lo := netip.MustParseAddr("127.0.0.1")
	pods := map[string]Mapping{
		"pod1": {Protocol: corev1.ProtocolTCP, HostIP: lo, HostPort: 54323, ContainerPort: 8080},
		"pod2": {Protocol: corev1.ProtocolTCP, HostIP: node, HostPort: 54323, ContainerPort: 8080},
		"pod3": {Protocol: corev1.ProtocolUDP, HostIP: node, HostPort: 54323, ContainerPort: 8080},
	}
	for _, uid := range []string{"pod1", "pod2", "pod3"} {
		ip := n.pod(uid)
		if err := n.mapper.Map(uid, ip, []Mapping{pods[uid]}); err != nil {
			t.Fatalf("Map %s: %v", uid, err)
		}
	}
	// Mapping again replaces, it does not add.
	if err := n.mapper.Map("pod1", mustIP(t, n.br, "pod1"), []Mapping{pods["pod1"]}); err != nil {
		t.Fatal(err)
	}
	if got := n.owners(); len(got[ChainDNAT]) != 3 || len(got[ChainMasq]) != 6 {
		t.Fatalf("rules by owner after mapping three pods (one twice): %v", got)
	}
	for _, c := range []struct{ network, src, addr, want string }{
		{"tcp4", nodeAddr, "127.0.0.1:54323", "pod1 tcp"}, // the spec's curl --interface <node IP>
		{"tcp4", "", "127.0.0.1:54323", "pod1 tcp"},       // from 127.0.0.1: route_localnet and masquerade
		{"tcp4", "", nodeAddr + ":54323", "pod2 tcp"},
		{"udp4", "", nodeAddr + ":54323", "pod3 udp"},
	} {
		if got := n.ask(c.network, c.src, c.addr); got != c.want {
			t.Errorf("%s %s (from %q): got %q, want %q", c.network, c.addr, c.src, got, c.want)
		}
	}
	if b, err := readSysctl(n.nsPath, "/proc/sys/net/ipv4/conf/cni0/route_localnet"); err != nil || b != "1" {
		t.Errorf("route_localnet on cni0 = %q (%v), want 1", b, err)
	}

	// A host port on every address answers on all of them.
	ip4 := n.pod("pod4")
	if err := n.mapper.Map("pod4", ip4, []Mapping{{Protocol: corev1.ProtocolTCP, HostPort: 54400, ContainerPort: 8080}}); err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{"127.0.0.1:54400", nodeAddr + ":54400", "10.42.0.1:54400"} {
		if got := n.ask("tcp4", "", addr); got != "pod4 tcp" {
			t.Errorf("hostPort on every address, %s: got %q", addr, got)
		}
	}

	if err := n.mapper.Unmap("pod2"); err != nil {
		t.Fatal(err)
	}
	if got := n.ask("tcp4", "", nodeAddr+":54323"); got != "" {
		t.Errorf("pod2's host port still answers after Unmap: %q", got)
	}
	if got := n.ask("tcp4", "", "127.0.0.1:54323"); got != "pod1 tcp" {
		t.Errorf("pod1 lost its host port with pod2's: %q", got)
	}
	if err := n.mapper.Recover(map[string]bool{"pod1": true}); err != nil {
		t.Fatal(err)
	}
	if got := n.owners(); !reflect2(got, map[string][]string{ChainDNAT: {"pod1"}, ChainMasq: {"pod1", "pod1"}}) {
		t.Errorf("rules after Recover keeping pod1: %v", got)
	}
	if err := n.mapper.Unmap("pod1"); err != nil {
		t.Fatal(err)
	}
	if got := n.owners(); len(got[ChainDNAT])+len(got[ChainMasq]) != 0 {
		t.Errorf("rules left after every pod went: %v", got)
	}
	if err := Cleanup(n.nsPath); err != nil {
		t.Fatal(err)
	}
	if got := n.hostportChains(); len(got) != 0 {
		t.Errorf("chains left after Cleanup: %v", got)
	}
	if err := Cleanup(n.nsPath); err != nil {
		t.Errorf("a second Cleanup: %v", err)
	}
}

// The guard: with route_localnet on, a pod still cannot reach the node's
// loopback-only services by sending to 127.0.0.1 through the bridge.
func TestPodsCannotReachNodeLoopback(t *testing.T) {
	n := newTestNode(t)
	ip := n.pod("pod1")
	if err := n.mapper.Map("pod1", ip, []Mapping{{Protocol: corev1.ProtocolTCP, HostPort: 54500, ContainerPort: 8080}}); err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	if err := bridge.InNetNSPath(n.nsPath, func() (err error) {
		ln, err = net.Listen("tcp4", "127.0.0.1:9099")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, "node loopback")
			c.Close()
		}
	}()
	// From the pod, with its loopback address gone and a route to
	// 127.0.0.0/8 via the bridge, as a rogue pod with NET_ADMIN would set.
	path := n.br.NetNSPath("pod1")
	if err := bridge.InNetNSPath(path, func() error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		_ = netlink.AddrDel(lo, &netlink.Addr{IPNet: &net.IPNet{IP: net.ParseIP("127.0.0.1"), Mask: net.CIDRMask(8, 32)}})
		eth0, err := netlink.LinkByName(bridge.PodInterface)
		if err != nil {
			return err
		}
		// ... and accepting answers from 127.0.0.1 on eth0.
		if err := os.WriteFile("/proc/sys/net/ipv4/conf/eth0/route_localnet", []byte("1"), 0o644); err != nil {
			return err
		}
		_, dst, _ := net.ParseCIDR("127.0.0.0/8")
		return netlink.RouteAdd(&netlink.Route{LinkIndex: eth0.Attrs().Index, Dst: dst, Gw: net.ParseIP("10.42.0.1")})
	}); err != nil {
		t.Fatalf("in the pod: %v", err)
	}
	askFromPod := func() string {
		var got string
		if err := bridge.InNetNSPath(path, func() error {
			c, err := (&net.Dialer{Timeout: time.Second}).Dial("tcp4", "127.0.0.1:9099")
			if err == nil {
				_ = c.SetDeadline(time.Now().Add(time.Second))
				b, _ := io.ReadAll(c)
				got = string(b)
				c.Close()
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	// Without the guard the hole is there (which shows this test can see
	// it), with it, it is closed.
	c, done, err := connIn(n.nsPath)
	if err != nil {
		t.Fatal(err)
	}
	c.FlushChain(&nftables.Chain{Name: ChainGuard, Table: nft.Table()})
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	done()
	if got := askFromPod(); got != "node loopback" {
		t.Fatalf("without the guard, the pod did not reach the node's 127.0.0.1:9099 (%q): the test cannot tell", got)
	}
	if err := n.mapper.Map("pod1", ip, []Mapping{{Protocol: corev1.ProtocolTCP, HostPort: 54500, ContainerPort: 8080}}); err != nil {
		t.Fatal(err)
	}
	if got := askFromPod(); got != "" {
		t.Errorf("a pod reached the node's 127.0.0.1:9099 through the bridge: %q", got)
	}
}

func mustIP(t *testing.T, b *bridge.Bridge, uid string) netip.Addr {
	ip, ok := b.PodIP(uid)
	if !ok {
		t.Fatalf("no IP for %s", uid)
	}
	return ip
}

func readSysctl(nsPath, p string) (string, error) {
	var out string
	err := bridge.InNetNSPath(nsPath, func() error {
		b, err := os.ReadFile(p)
		out = strings.TrimSpace(string(b))
		return err
	})
	return out, err
}

func reflect2(a, b map[string][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if strings.Join(v, ",") != strings.Join(b[k], ",") {
			return false
		}
	}
	return true
}
