package bridge

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/kelp-project/kelp/netplane/nft"
)

// Every root test runs its "node" in a fresh network namespace pinned in
// the test's temp dir (kelp-br-test-<rand>), and its pod netns in a temp
// NetNSDir. Nothing in the host namespace is touched; cleanup unpins
// everything, which destroys the namespaces with their links and nftables.

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (network namespaces, netlink, nftables, mounts); run `go test` as root")
	}
}

type testNode struct {
	t        *testing.T
	nsPath   string
	netnsDir string
	stateDir string
}

func newTestNode(t *testing.T) *testNode {
	t.Helper()
	requireRoot(t)
	base := t.TempDir()
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	n := &testNode{
		t:        t,
		nsPath:   filepath.Join(base, "node", "kelp-br-test-"+hex.EncodeToString(rnd[:])),
		netnsDir: filepath.Join(base, "netns"),
		stateDir: filepath.Join(base, "ipam"),
	}
	if err := PinNewNetNS(n.nsPath); err != nil {
		t.Fatalf("create node netns: %v", err)
	}
	// Registered after TempDir, so it runs before the dir is removed.
	t.Cleanup(func() {
		if entries, err := os.ReadDir(n.netnsDir); err == nil {
			for _, e := range entries {
				_ = UnpinNetNS(filepath.Join(n.netnsDir, e.Name()))
			}
		}
		// The self bind mount ensureSharedMountDir made.
		_ = unix.Unmount(n.netnsDir, unix.MNT_DETACH)
		if err := UnpinNetNS(n.nsPath); err != nil {
			t.Errorf("cleanup node netns: %v", err)
		}
	})
	return n
}

func (n *testNode) config(podCIDR string) Config {
	return Config{
		PodCIDR:     podCIDR,
		ClusterCIDR: "10.42.0.0/16",
		StateDir:    n.stateDir,
		NetNSDir:    n.netnsDir,
		NodeNetNS:   n.nsPath,
	}
}

func (n *testNode) newBridge(cfg Config) *Bridge {
	n.t.Helper()
	b, err := New(cfg)
	if err != nil {
		n.t.Fatalf("New: %v", err)
	}
	n.t.Cleanup(func() { b.Close() })
	return b
}

func nlHandle(t *testing.T, path string) *netlink.Handle {
	t.Helper()
	ns, err := netns.GetFromPath(path)
	if err != nil {
		t.Fatalf("open netns %s: %v", path, err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatalf("netlink handle in %s: %v", path, err)
	}
	t.Cleanup(h.Close)
	return h
}

func v4Addrs(t *testing.T, h *netlink.Handle, name string) []string {
	t.Helper()
	l, err := h.LinkByName(name)
	if err != nil {
		t.Fatalf("link %s: %v", name, err)
	}
	addrs, err := h.AddrList(l, netlink.FAMILY_V4)
	if err != nil {
		t.Fatalf("addrs of %s: %v", name, err)
	}
	var out []string
	for _, a := range addrs {
		out = append(out, a.IPNet.String())
	}
	return out
}

// listen opens a TCP listener inside the netns at path; it answers every
// connection with "hello from <ip>".
func listen(t *testing.T, path string, ip netip.Addr) {
	t.Helper()
	var ln net.Listener
	if err := InNetNSPath(path, func() (err error) {
		ln, err = net.Listen("tcp4", net.JoinHostPort(ip.String(), "8080"))
		return err
	}); err != nil {
		t.Fatalf("listen in %s: %v", path, err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			fmt.Fprintf(c, "hello from %s", ip)
			c.Close()
		}
	}()
}

// dial connects from the netns at path to ip:8080 and returns the greeting.
func dial(path string, ip netip.Addr) (string, error) {
	var c net.Conn
	if err := InNetNSPath(path, func() (err error) {
		c, err = net.DialTimeout("tcp4", net.JoinHostPort(ip.String(), "8080"), 3*time.Second)
		return err
	}); err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	b, err := io.ReadAll(c)
	return string(b), err
}

func TestNewCreatesBridge(t *testing.T) {
	n := newTestNode(t)
	b := n.newBridge(n.config("10.42.3.0/24"))
	if b.Gateway().String() != "10.42.3.1" {
		t.Fatalf("gateway = %s", b.Gateway())
	}
	h := nlHandle(t, n.nsPath)
	l, err := h.LinkByName("cni0")
	if err != nil {
		t.Fatalf("cni0 missing: %v", err)
	}
	if l.Type() != "bridge" || l.Attrs().Flags&net.FlagUp == 0 {
		t.Fatalf("cni0: type %s flags %v", l.Type(), l.Attrs().Flags)
	}
	if got := v4Addrs(t, h, "cni0"); len(got) != 1 || got[0] != "10.42.3.1/24" {
		t.Fatalf("cni0 addresses = %v, want [10.42.3.1/24]", got)
	}
	var fwd []byte
	if err := InNetNSPath(n.nsPath, func() (err error) {
		fwd, err = os.ReadFile("/proc/sys/net/ipv4/ip_forward")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(fwd)) != "1" {
		t.Fatalf("ip_forward in node netns = %q", fwd)
	}

	// New again (agent restart) is a no-op; a changed pod CIDR replaces
	// the gateway address.
	n.newBridge(n.config("10.42.3.0/24"))
	if got := v4Addrs(t, h, "cni0"); len(got) != 1 || got[0] != "10.42.3.1/24" {
		t.Fatalf("after second New: cni0 addresses = %v", got)
	}
	cfg := n.config("10.42.9.0/24")
	cfg.StateDir = filepath.Join(t.TempDir(), "ipam2")
	n.newBridge(cfg)
	if got := v4Addrs(t, h, "cni0"); len(got) != 1 || got[0] != "10.42.9.1/24" {
		t.Fatalf("after CIDR change: cni0 addresses = %v, want [10.42.9.1/24]", got)
	}
}

func TestPodsConnectivity(t *testing.T) {
	n := newTestNode(t)
	b := n.newBridge(n.config("10.42.5.0/24"))
	h := nlHandle(t, n.nsPath)

	podA, podB := "pod-a-0001", "pod-b-0002"
	pathA, ipA, err := b.Setup(podA)
	if err != nil {
		t.Fatalf("Setup A: %v", err)
	}
	pathB, ipB, err := b.Setup(podB)
	if err != nil {
		t.Fatalf("Setup B: %v", err)
	}
	if pathA != filepath.Join(n.netnsDir, podA) || !isNSPin(pathA) || !isNSPin(pathB) {
		t.Fatalf("pod netns not pinned: %s %s", pathA, pathB)
	}
	if ipA.String() != "10.42.5.2" || ipB.String() != "10.42.5.3" {
		t.Fatalf("IPs = %s, %s; want 10.42.5.2, 10.42.5.3", ipA, ipB)
	}
	if ip, ok := b.PodIP(podA); !ok || ip != ipA {
		t.Fatalf("PodIP(A) = %v %v", ip, ok)
	}

	br, _ := h.LinkByName("cni0")
	for pod, ip := range map[string]netip.Addr{podA: ipA, podB: ipB} {
		// Host end: on the bridge, up, hairpin.
		veth, err := h.LinkByName(VethName(pod))
		if err != nil {
			t.Fatalf("host veth of %s: %v", pod, err)
		}
		if veth.Attrs().MasterIndex != br.Attrs().Index || veth.Attrs().Flags&net.FlagUp == 0 {
			t.Fatalf("%s: master %d (bridge %d), flags %v", VethName(pod), veth.Attrs().MasterIndex, br.Attrs().Index, veth.Attrs().Flags)
		}
		pi, err := h.LinkGetProtinfo(veth)
		if err != nil {
			t.Fatalf("protinfo %s: %v", VethName(pod), err)
		}
		if !pi.Hairpin {
			t.Fatalf("hairpin off on %s", VethName(pod))
		}
		// Pod end: eth0 with the IP, MTU, default route; lo up.
		ph := nlHandle(t, b.NetNSPath(pod))
		if got := v4Addrs(t, ph, "eth0"); len(got) != 1 || got[0] != ip.String()+"/24" {
			t.Fatalf("pod %s eth0 addrs = %v", pod, got)
		}
		eth, _ := ph.LinkByName("eth0")
		if eth.Attrs().MTU != 1500 || eth.Attrs().Flags&net.FlagUp == 0 {
			t.Fatalf("pod eth0 mtu %d flags %v", eth.Attrs().MTU, eth.Attrs().Flags)
		}
		lo, _ := ph.LinkByName("lo")
		if lo.Attrs().Flags&net.FlagUp == 0 {
			t.Fatal("pod lo down")
		}
		routes, err := ph.RouteList(eth, netlink.FAMILY_V4)
		if err != nil {
			t.Fatal(err)
		}
		var def bool
		for _, r := range routes {
			if (r.Dst == nil || r.Dst.String() == "0.0.0.0/0") && r.Gw.String() == "10.42.5.1" {
				def = true
			}
		}
		if !def {
			t.Fatalf("pod %s: no default route via 10.42.5.1: %v", pod, routes)
		}
		listen(t, b.NetNSPath(pod), ip)
	}

	// Pod to pod, both ways; node to pods; pod to itself.
	for _, c := range []struct {
		from string
		to   netip.Addr
	}{{pathA, ipB}, {pathB, ipA}, {n.nsPath, ipA}, {n.nsPath, ipB}, {pathA, ipA}} {
		got, err := dial(c.from, c.to)
		if err != nil {
			t.Fatalf("dial %s from %s: %v", c.to, c.from, err)
		}
		if got != "hello from "+c.to.String() {
			t.Fatalf("dial %s from %s: got %q", c.to, c.from, got)
		}
	}
	// Pod to the gateway (node) address.
	if err := InNetNSPath(n.nsPath, func() error {
		ln, err := net.Listen("tcp4", "10.42.5.1:9090")
		if err != nil {
			return err
		}
		go func() {
			c, err := ln.Accept()
			if err == nil {
				c.Write([]byte("node"))
				c.Close()
			}
			ln.Close()
		}()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := InNetNSPath(pathA, func() error {
		c, err := net.DialTimeout("tcp4", "10.42.5.1:9090", 3*time.Second)
		if err != nil {
			return err
		}
		c.Close()
		return nil
	}); err != nil {
		t.Fatalf("pod to node gateway: %v", err)
	}

	// busybox ping too, when available (TCP above is the real check).
	if _, err := os.Stat("/usr/bin/busybox"); err == nil {
		if out, err := execIn(pathA, "/usr/bin/busybox", "ping", "-c1", "-W2", ipB.String()); err != nil {
			t.Fatalf("busybox ping %s from pod A: %v\n%s", ipB, err, out)
		}
	}
}

func TestSetupIdempotentAndTeardown(t *testing.T) {
	n := newTestNode(t)
	b := n.newBridge(n.config("10.42.6.0/24"))
	h := nlHandle(t, n.nsPath)
	pod := "idem-pod"
	path1, ip1, err := b.Setup(pod)
	if err != nil {
		t.Fatal(err)
	}
	veth1, _ := h.LinkByName(VethName(pod))
	path2, ip2, err := b.Setup(pod)
	if err != nil {
		t.Fatal(err)
	}
	veth2, _ := h.LinkByName(VethName(pod))
	if path1 != path2 || ip1 != ip2 || veth1.Attrs().Index != veth2.Attrs().Index {
		t.Fatalf("second Setup changed things: %s %s %d vs %s %s %d", path1, ip1, veth1.Attrs().Index, path2, ip2, veth2.Attrs().Index)
	}

	// Broken veth (deleted behind our back): Setup repairs, keeping the
	// netns and IP.
	if err := h.LinkDel(veth2); err != nil {
		t.Fatal(err)
	}
	path3, ip3, err := b.Setup(pod)
	if err != nil {
		t.Fatalf("repair Setup: %v", err)
	}
	if path3 != path1 || ip3 != ip1 {
		t.Fatalf("repair changed netns/IP: %s %s", path3, ip3)
	}
	if _, err := h.LinkByName(VethName(pod)); err != nil {
		t.Fatalf("veth not recreated: %v", err)
	}

	if err := b.Teardown(pod); err != nil {
		t.Fatalf("Teardown: %v", err)
	}
	if err := b.Teardown(pod); err != nil {
		t.Fatalf("second Teardown: %v", err)
	}
	if _, err := os.Stat(path1); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("netns pin still there: %v", err)
	}
	if _, err := h.LinkByName(VethName(pod)); err == nil {
		t.Fatal("veth still there after Teardown")
	}
	if _, ok := b.PodIP(pod); ok {
		t.Fatal("IP still allocated after Teardown")
	}
	// The IP is reusable: the range wraps back to it once the others are used.
	seen := false
	for i := 0; i < 253; i++ {
		ip, err := b.ipam.allocate(fmt.Sprintf("filler-%d", i))
		if err != nil {
			t.Fatalf("allocate filler %d: %v", i, err)
		}
		if ip == ip1 {
			seen = true
		}
	}
	if !seen {
		t.Fatalf("released IP %s never handed out again", ip1)
	}
}

func TestPersistAndRecover(t *testing.T) {
	n := newTestNode(t)
	cfg := n.config("10.42.7.0/24")
	b := n.newBridge(cfg)
	pods := []string{"keep-1", "keep-2", "gone-1", "gone-2"}
	ips := map[string]netip.Addr{}
	for _, p := range pods {
		_, ip, err := b.Setup(p)
		if err != nil {
			t.Fatalf("Setup %s: %v", p, err)
		}
		ips[p] = ip
	}
	b.Close()

	// Agent restart: a new Bridge over the same state.
	b2 := n.newBridge(cfg)
	for _, p := range pods {
		if ip, ok := b2.PodIP(p); !ok || ip != ips[p] {
			t.Fatalf("after restart PodIP(%s) = %v %v, want %s", p, ip, ok, ips[p])
		}
	}
	h := nlHandle(t, n.nsPath)
	idx, _ := h.LinkByName(VethName("keep-1"))
	path, ip, err := b2.Setup("keep-1")
	if err != nil || ip != ips["keep-1"] || path != b2.NetNSPath("keep-1") {
		t.Fatalf("Setup after restart: %s %s %v", path, ip, err)
	}
	if idx2, _ := h.LinkByName(VethName("keep-1")); idx2.Attrs().Index != idx.Attrs().Index {
		t.Fatal("Setup after restart recreated the veth")
	}

	// A stray pin with no IP and a stray veth with no state.
	if err := PinNewNetNS(filepath.Join(n.netnsDir, "orphan-ns")); err != nil {
		t.Fatal(err)
	}
	attrs := netlink.NewLinkAttrs()
	attrs.Name = VethName("orphan-veth")
	br, _ := h.LinkByName("cni0")
	attrs.MasterIndex = br.Attrs().Index
	if err := h.LinkAdd(&netlink.Veth{LinkAttrs: attrs, PeerName: "orphanpeer"}); err != nil {
		t.Fatal(err)
	}

	if err := b2.Recover(map[string]bool{"keep-1": true, "keep-2": true}); err != nil {
		t.Fatalf("Recover: %v", err)
	}
	for _, p := range []string{"keep-1", "keep-2"} {
		if _, ok := b2.PodIP(p); !ok || !isNSPin(b2.NetNSPath(p)) {
			t.Fatalf("kept pod %s lost its IP or netns", p)
		}
		if _, err := h.LinkByName(VethName(p)); err != nil {
			t.Fatalf("kept pod %s lost its veth", p)
		}
	}
	for _, p := range []string{"gone-1", "gone-2", "orphan-ns"} {
		if _, ok := b2.PodIP(p); ok {
			t.Fatalf("stray pod %s still has an IP", p)
		}
		if _, err := os.Stat(b2.NetNSPath(p)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("stray pod %s still has a netns pin", p)
		}
		if _, err := h.LinkByName(VethName(p)); err == nil {
			t.Fatalf("stray pod %s still has a veth", p)
		}
	}
	if _, err := h.LinkByName(VethName("orphan-veth")); err == nil {
		t.Fatal("stray veth survived Recover")
	}
	// Persisted release: a third instance agrees.
	b3 := n.newBridge(cfg)
	if _, ok := b3.PodIP("gone-1"); ok {
		t.Fatal("released IP came back after restart")
	}
	if ip, ok := b3.PodIP("keep-2"); !ok || ip != ips["keep-2"] {
		t.Fatal("kept IP lost after restart")
	}
}

func TestMasqueradeRules(t *testing.T) {
	n := newTestNode(t)
	ns, err := netns.GetFromPath(n.nsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	c, err := nftables.New(nftables.WithNetNSFd(int(ns)))
	if err != nil {
		t.Fatal(err)
	}
	table := nft.Table()

	n.newBridge(n.config("10.42.8.0/24"))
	// Another component's chain in the same table must survive New.
	c.AddTable(table)
	c.AddChain(&nftables.Chain{Name: "someone-else", Table: table})
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	n.newBridge(n.config("10.42.8.0/24")) // idempotent reinstall

	tables, err := c.ListTables()
	if err != nil {
		t.Fatal(err)
	}
	if len(tables) != 1 || tables[0].Name != nft.TableName || tables[0].Family != nft.Family {
		t.Fatalf("tables in node netns: %+v", tables)
	}
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyIPv4)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]*nftables.Chain{}
	for _, ch := range chains {
		names[ch.Name] = ch
	}
	if names["someone-else"] == nil {
		t.Fatal("New removed another component's chain")
	}
	ch := names[NFTPostroutingChain]
	if ch == nil {
		t.Fatalf("chain %s missing: %v", NFTPostroutingChain, names)
	}
	if ch.Type != nftables.ChainTypeNAT || ch.Hooknum == nil || *ch.Hooknum != *nftables.ChainHookPostrouting ||
		ch.Priority == nil || *ch.Priority != *nftables.ChainPriorityNATSource {
		t.Fatalf("chain %s: type %s hook %v prio %v", ch.Name, ch.Type, ch.Hooknum, ch.Priority)
	}
	rules, err := c.GetRules(table, ch)
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) != 3 {
		t.Fatalf("want 3 rules after two New calls, got %d", len(rules))
	}
	var masq bool
	var srcMatch bool
	for _, e := range rules[2].Exprs {
		switch v := e.(type) {
		case *expr.Masq:
			masq = true
		case *expr.Cmp:
			if net.IP(v.Data).String() == "10.42.8.0" {
				srcMatch = true
			}
		}
	}
	if !masq || !srcMatch {
		t.Fatalf("last rule is not `ip saddr 10.42.8.0/24 masquerade`: %+v", rules[2].Exprs)
	}
	var clusterRet bool
	for _, e := range rules[0].Exprs {
		if v, ok := e.(*expr.Cmp); ok && net.IP(v.Data).String() == "10.42.0.0" {
			clusterRet = true
		}
	}
	if !clusterRet {
		t.Fatalf("first rule does not exempt the cluster CIDR: %+v", rules[0].Exprs)
	}
}

func TestConcurrentSetup(t *testing.T) {
	n := newTestNode(t)
	b := n.newBridge(n.config("10.42.10.0/24"))
	const count = 8
	errc := make(chan error, count)
	ipc := make(chan netip.Addr, count)
	for i := 0; i < count; i++ {
		go func(i int) {
			_, ip, err := b.Setup(fmt.Sprintf("conc-%d", i))
			errc <- err
			ipc <- ip
		}(i)
	}
	seen := map[netip.Addr]bool{}
	for i := 0; i < count; i++ {
		if err := <-errc; err != nil {
			t.Fatalf("Setup: %v", err)
		}
		ip := <-ipc
		if seen[ip] {
			t.Fatalf("IP %s handed out twice", ip)
		}
		seen[ip] = true
	}
	for i := 0; i < count; i++ {
		if err := b.Teardown(fmt.Sprintf("conc-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDestroy(t *testing.T) {
	n := newTestNode(t)
	b := n.newBridge(n.config("10.42.11.0/24"))
	for _, p := range []string{"d-1", "d-2"} {
		if _, _, err := b.Setup(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Destroy(); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	h := nlHandle(t, n.nsPath)
	if _, err := h.LinkByName("cni0"); err == nil {
		t.Fatal("bridge survived Destroy")
	}
	for _, p := range []string{"d-1", "d-2"} {
		if _, err := os.Stat(b.NetNSPath(p)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("pin of %s survived Destroy", p)
		}
	}
	ns, _ := netns.GetFromPath(n.nsPath)
	defer ns.Close()
	c, _ := nftables.New(nftables.WithNetNSFd(int(ns)))
	table := nft.Table()
	if _, err := c.ListChain(table, NFTPostroutingChain); err == nil {
		t.Fatal("masquerade chain survived Destroy")
	}
	if _, err := c.ListTableOfFamily(nft.TableName, nft.Family); err != nil {
		t.Fatalf("Destroy removed the shared kelp table: %v", err)
	}
}

// TestCleanup is kelp killall's path: no running Bridge, only the config;
// the pod CIDR comes from ipam.json.
func TestCleanup(t *testing.T) {
	n := newTestNode(t)
	cfg := n.config("10.42.13.0/24")
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var pins []string
	for _, p := range []string{"c-1", "c-2"} {
		path, _, err := b.Setup(p)
		if err != nil {
			t.Fatal(err)
		}
		pins = append(pins, path)
	}
	b.Close() // the agent has stopped; the data plane stays

	// Only what Cleanup needs.
	if err := Cleanup(Config{StateDir: cfg.StateDir, NetNSDir: cfg.NetNSDir, NodeNetNS: cfg.NodeNetNS}); err != nil {
		t.Fatalf("Cleanup: %v", err)
	}
	h := nlHandle(t, n.nsPath)
	if _, err := h.LinkByName("cni0"); err == nil {
		t.Fatal("bridge survived Cleanup")
	}
	for _, p := range []string{"c-1", "c-2"} {
		if _, err := h.LinkByName(VethName(p)); err == nil {
			t.Fatalf("veth of %s survived Cleanup", p)
		}
	}
	for _, p := range pins {
		if isNSPin(p) {
			t.Fatalf("pin %s survived Cleanup", p)
		}
	}
	if _, err := os.Stat(n.netnsDir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("NetNSDir survived Cleanup: %v", err)
	}
	ns, _ := netns.GetFromPath(n.nsPath)
	defer ns.Close()
	c, _ := nftables.New(nftables.WithNetNSFd(int(ns)))
	if _, err := c.ListChain(nft.Table(), NFTPostroutingChain); err == nil {
		t.Fatal("masquerade chain survived Cleanup")
	}
	if _, err := c.ListTableOfFamily(nft.TableName, nft.Family); err != nil {
		t.Fatalf("Cleanup removed the shared kelp table (nft.DropIfEmpty's job): %v", err)
	}
	st, err := readIPAMState(cfg.StateDir)
	if err != nil || len(st.Allocations) != 0 {
		t.Fatalf("IPAM state after Cleanup: %+v, %v; want no allocations", st, err)
	}
	if err := Cleanup(cfg); err != nil {
		t.Fatalf("second Cleanup: %v", err)
	}
}

// TestCleanupWithoutState: with no ipam.json nothing says the bridge is
// kelp's, so Cleanup leaves the network alone.
func TestCleanupWithoutState(t *testing.T) {
	n := newTestNode(t)
	h := nlHandle(t, n.nsPath)
	attrs := netlink.NewLinkAttrs()
	attrs.Name = "cni0"
	if err := h.LinkAdd(&netlink.Bridge{LinkAttrs: attrs}); err != nil {
		t.Fatal(err)
	}
	if err := Cleanup(Config{StateDir: n.stateDir, NetNSDir: n.netnsDir, NodeNetNS: n.nsPath}); err != nil {
		t.Fatalf("Cleanup: %v", err)
	}
	if _, err := h.LinkByName("cni0"); err != nil {
		t.Fatalf("Cleanup without IPAM state deleted a cni0 it has no record of: %v", err)
	}
}

func TestOverlayMTU(t *testing.T) {
	n := newTestNode(t)
	cfg := n.config("10.42.12.0/24")
	cfg.MTU = 1450
	b := n.newBridge(cfg)
	path, _, err := b.Setup("mtu-pod")
	if err != nil {
		t.Fatal(err)
	}
	h := nlHandle(t, n.nsPath)
	for _, name := range []string{"cni0", VethName("mtu-pod")} {
		if l, _ := h.LinkByName(name); l.Attrs().MTU != 1450 {
			t.Fatalf("%s MTU %d, want 1450", name, l.Attrs().MTU)
		}
	}
	if l, _ := nlHandle(t, path).LinkByName("eth0"); l.Attrs().MTU != 1450 {
		t.Fatalf("pod eth0 MTU %d, want 1450", l.Attrs().MTU)
	}
}

// TestMasqueradeWorks sends traffic from a pod to an "outside" namespace
// (not in the cluster CIDR, with no route back to pods) and checks it
// arrives from the node's address.
func TestMasqueradeWorks(t *testing.T) {
	n := newTestNode(t)
	b := n.newBridge(n.config("10.42.13.0/24"))
	podPath, _, err := b.Setup("masq-pod")
	if err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(filepath.Dir(n.nsPath), "outside")
	if err := PinNewNetNS(outside); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = UnpinNetNS(outside) })
	oh := nlHandle(t, outside)
	outNS, err := netns.GetFromPath(outside)
	if err != nil {
		t.Fatal(err)
	}
	defer outNS.Close()
	h := nlHandle(t, n.nsPath)
	attrs := netlink.NewLinkAttrs()
	attrs.Name = "ext0"
	if err := h.LinkAdd(&netlink.Veth{LinkAttrs: attrs, PeerName: "ext0", PeerNamespace: netlink.NsFd(int(outNS))}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		h    *netlink.Handle
		addr string
	}{{h, "192.168.200.1/24"}, {oh, "192.168.200.2/24"}} {
		l, err := s.h.LinkByName("ext0")
		if err != nil {
			t.Fatal(err)
		}
		a, _ := netlink.ParseAddr(s.addr)
		if err := s.h.AddrAdd(l, a); err != nil {
			t.Fatal(err)
		}
		if err := s.h.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
	}
	var ln net.Listener
	if err := InNetNSPath(outside, func() (err error) {
		ln, err = net.Listen("tcp4", "192.168.200.2:7070")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Write([]byte(c.RemoteAddr().(*net.TCPAddr).IP.String()))
			c.Close()
		}
	}()
	var got []byte
	if err := InNetNSPath(podPath, func() error {
		c, err := net.DialTimeout("tcp4", "192.168.200.2:7070", 3*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(3 * time.Second))
		got, err = io.ReadAll(c)
		return err
	}); err != nil {
		t.Fatalf("pod to outside: %v", err)
	}
	if string(got) != "192.168.200.1" {
		t.Fatalf("outside saw source %q, want the node address 192.168.200.1 (masquerade)", got)
	}
}

// TestMTUChangeKeepsPods: a Bridge built again with another MTU (the
// backend changed from none to vxlan) sets cni0's, and Setup of a running
// pod sets both ends of its veth in place: same veth, same IP.
func TestMTUChangeKeepsPods(t *testing.T) {
	n := newTestNode(t)
	b := n.newBridge(n.config("10.42.8.0/24"))
	h := nlHandle(t, n.nsPath)
	path, ip, err := b.Setup("mtu-pod")
	if err != nil {
		t.Fatal(err)
	}
	before, _ := h.LinkByName(VethName("mtu-pod"))
	cfg := n.config("10.42.8.0/24")
	cfg.MTU = 1450
	b2 := n.newBridge(cfg)
	if br, _ := h.LinkByName("cni0"); br.Attrs().MTU != 1450 {
		t.Fatalf("cni0 MTU %d, want 1450", br.Attrs().MTU)
	}
	path2, ip2, err := b2.Setup("mtu-pod")
	if err != nil || path2 != path || ip2 != ip {
		t.Fatalf("Setup after the MTU change: %s %s %v; want %s %s", path2, ip2, err, path, ip)
	}
	after, _ := h.LinkByName(VethName("mtu-pod"))
	if after.Attrs().Index != before.Attrs().Index || after.Attrs().MTU != 1450 {
		t.Fatalf("host veth: index %d → %d, MTU %d; want the same veth at 1450", before.Attrs().Index, after.Attrs().Index, after.Attrs().MTU)
	}
	if eth, _ := nlHandle(t, path).LinkByName(PodInterface); eth.Attrs().MTU != 1450 {
		t.Fatalf("pod eth0 MTU %d, want 1450", eth.Attrs().MTU)
	}
}

// TestCleanupWithoutPods: a node that never ran a pod is cleaned up too
// (New records the pod CIDR; the first allocation used to).
func TestCleanupWithoutPods(t *testing.T) {
	n := newTestNode(t)
	cfg := n.config("10.42.14.0/24")
	b := n.newBridge(cfg)
	b.Close()
	if err := Cleanup(Config{StateDir: cfg.StateDir, NetNSDir: cfg.NetNSDir, NodeNetNS: cfg.NodeNetNS}); err != nil {
		t.Fatalf("Cleanup: %v", err)
	}
	if _, err := nlHandle(t, n.nsPath).LinkByName("cni0"); err == nil {
		t.Fatal("bridge survived Cleanup")
	}
}
