package overlay

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kelp-project/kelp/netplane/bridge"
)

// The lab: every "node" is a network namespace the test creates and pins
// in its temp dir; two nodes are joined by a veth pair "lab0" holding
// addresses of 198.18.7.0/24 (the benchmarking range, RFC 2544: overlaps
// neither 10.42/16 nor 10.43/16 and is routed nowhere). Every change goes
// through a handle opened on such a pin, and mustNotBeHost checks, before
// the first change, that the namespace is not the one the test runs in.
// Unpinning at cleanup destroys the namespaces with everything in them.

const (
	labNet      = "198.18.7.0/24"
	clusterCIDR = "10.42.0.0/16"
)

func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (network namespaces, netlink, mounts); run `go test` as root")
	}
}

type labNode struct {
	name     string
	nsPath   string
	netnsDir string
	stateDir string
	ip       netip.Addr
	podCIDR  string
	nl       *netlink.Handle
	resync   time.Duration // Config.ResyncPeriod (0: the default)
}

func inode(t testing.TB, path string) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatalf("stat %s: %v", path, err)
	}
	return st.Ino
}

// mustNotBeHost fails the test unless path is a network namespace other
// than the one the test runs in: the calling thread's, which is the
// host's (every thread that switches is switched back or discarded). Not
// /proc/self/ns/net: that is the main thread's, which Go wedges (with
// whatever netns it was switched to) when a goroutine locked to it exits.
func mustNotBeHost(t testing.TB, path string) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if inode(t, path) == inode(t, "/proc/thread-self/ns/net") {
		t.Fatalf("%s is the test's own network namespace; refusing to change it", path)
	}
}

func newLabNode(t testing.TB, name string, ip, podCIDR string) *labNode {
	t.Helper()
	requireRoot(t)
	base := t.TempDir()
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	n := &labNode{name: name, nsPath: filepath.Join(base, "kelp-ovl-test-"+hex.EncodeToString(rnd[:])),
		netnsDir: filepath.Join(base, "netns"), stateDir: filepath.Join(base, "ipam"),
		ip: netip.MustParseAddr(ip), podCIDR: podCIDR}
	if err := bridge.PinNewNetNS(n.nsPath); err != nil {
		t.Fatalf("create node netns: %v", err)
	}
	t.Cleanup(func() {
		if entries, err := os.ReadDir(n.netnsDir); err == nil {
			for _, e := range entries {
				_ = bridge.UnpinNetNS(filepath.Join(n.netnsDir, e.Name()))
			}
		}
		_ = unix.Unmount(n.netnsDir, unix.MNT_DETACH)
		if err := bridge.UnpinNetNS(n.nsPath); err != nil {
			t.Errorf("cleanup node netns: %v", err)
		}
	})
	mustNotBeHost(t, n.nsPath)
	n.nl = handleAt(t, n.nsPath)
	lo, err := n.nl.LinkByName("lo")
	if err != nil || n.nl.LinkSetUp(lo) != nil {
		t.Fatalf("lo in %s: %v", name, err)
	}
	return n
}

func handleAt(t testing.TB, path string) *netlink.Handle {
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

// connect joins a and b by a veth pair named lab0 on both sides.
func connect(t testing.TB, a, b *labNode) {
	t.Helper()
	bns, err := netns.GetFromPath(b.nsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer bns.Close()
	attrs := netlink.NewLinkAttrs()
	attrs.Name = "lab0"
	if err := a.nl.LinkAdd(&netlink.Veth{LinkAttrs: attrs, PeerName: "lab1", PeerNamespace: netlink.NsFd(int(bns))}); err != nil {
		t.Fatalf("veth: %v", err)
	}
	if l, err := b.nl.LinkByName("lab1"); err != nil || b.nl.LinkSetName(l, "lab0") != nil {
		t.Fatalf("rename peer: %v", err)
	}
	for _, n := range []*labNode{a, b} {
		l, err := n.nl.LinkByName("lab0")
		if err != nil {
			t.Fatal(err)
		}
		addr := &netlink.Addr{IPNet: &net.IPNet{IP: net.IP(n.ip.AsSlice()), Mask: net.CIDRMask(24, 32)}}
		if err := n.nl.AddrAdd(l, addr); err != nil {
			t.Fatal(err)
		}
		if err := n.nl.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
	}
}

func (n *labNode) node() *corev1.Node {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name}}
	node.Spec.PodCIDR = n.podCIDR
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: n.ip.String()}}
	return node
}

func (n *labNode) config(backend string, client *fake.Clientset) Config {
	return Config{Backend: backend, NodeName: n.name, NodeIP: n.ip.String(), Client: client, ResyncPeriod: n.resync,
		Bridge: bridge.Config{PodCIDR: n.podCIDR, ClusterCIDR: clusterCIDR, StateDir: n.stateDir,
			NetNSDir: n.netnsDir, NodeNetNS: n.nsPath}}
}

// start runs the overlay on n until the test ends (or stop is called).
func (n *labNode) start(t testing.TB, backend string, client *fake.Clientset) (*Overlay, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	o, err := New(ctx, n.config(backend, client))
	if err != nil {
		t.Fatalf("New(%s) on %s: %v", backend, n.name, err)
	}
	t.Cleanup(func() { cancel(); o.Bridge.Close() })
	select {
	case <-o.Synced():
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no first reconcile pass in 10s", n.name)
	}
	return o, cancel
}

// eventually polls cond every 5 ms for up to 5 s.
func eventually(t testing.TB, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// kelpRoutes lists n's main-table routes marked RouteProtocol, as
// "dst via gw dev onlink".
func kelpRoutes(t testing.TB, n *labNode) []string {
	t.Helper()
	rs, err := n.nl.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Protocol: RouteProtocol}, netlink.RT_FILTER_PROTOCOL)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rs {
		l, err := n.nl.LinkByIndex(r.LinkIndex)
		dev := "?"
		if err == nil {
			dev = l.Attrs().Name
		}
		s := fmt.Sprintf("%s via %s dev %s", r.Dst, r.Gw, dev)
		if r.Flags&int(netlink.FLAG_ONLINK) != 0 {
			s += " onlink"
		}
		out = append(out, s)
	}
	return out
}

// serve answers every TCP connection to ip:8080 inside the netns at path
// with the address the connection came from.
func serve(t testing.TB, path string, ip netip.Addr) {
	t.Helper()
	var ln net.Listener
	if err := bridge.InNetNSPath(path, func() (err error) {
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
			host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
			fmt.Fprint(c, host)
			c.Close()
		}
	}()
}

// dial connects from the netns at path to ip:8080 and returns what the
// server saw as the source address.
func dial(path string, ip netip.Addr) (string, error) {
	var c net.Conn
	if err := bridge.InNetNSPath(path, func() (err error) {
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

// ping runs busybox ping with only the network namespace switched (the
// child inherits the locked thread's netns, as `nsenter --net=` does).
func ping(path string, ip netip.Addr, size int) error {
	var out []byte
	var runErr error
	if err := bridge.InNetNSPath(path, func() error {
		out, runErr = exec.Command("busybox", "ping", "-c1", "-W2", "-s", fmt.Sprint(size), ip.String()).CombinedOutput()
		return nil
	}); err != nil {
		return err
	}
	if runErr != nil {
		return fmt.Errorf("%v: %s", runErr, strings.TrimSpace(string(out)))
	}
	return nil
}
