package overlay

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kelp-project/kelp/netplane/bridge"
)

// twoNodes is the two-node lab: a (198.18.7.1, pods 10.42.1.0/24) and b
// (198.18.7.2, pods 10.42.2.0/24), with their Nodes in one fake API.
func twoNodes(t *testing.T) (a, b *labNode, client *fake.Clientset) {
	a = newLabNode(t, "node-a", "198.18.7.1", "10.42.1.0/24")
	b = newLabNode(t, "node-b", "198.18.7.2", "10.42.2.0/24")
	connect(t, a, b)
	return a, b, fake.NewClientset(a.node(), b.node())
}

// crossNodePods sets up a pod on each node and checks that each reaches
// the other by TCP with its own pod IP as the source (no masquerade), and
// by ping, including a packet of the full pod MTU (mtu) that must fit;
// and that each node reaches the other node's pod.
func crossNodePods(t *testing.T, a, b *labNode, oa, ob *Overlay, mtu int) {
	t.Helper()
	pathA, ipA, err := oa.Setup("pod-a")
	if err != nil {
		t.Fatalf("Setup on a: %v", err)
	}
	pathB, ipB, err := ob.Setup("pod-b")
	if err != nil {
		t.Fatalf("Setup on b: %v", err)
	}
	for _, path := range []string{pathA, pathB} {
		eth, err := handleAt(t, path).LinkByName(bridge.PodInterface)
		if err != nil || eth.Attrs().MTU != mtu {
			t.Fatalf("pod eth0 in %s: %v, MTU %d, want %d", path, err, eth.Attrs().MTU, mtu)
		}
	}
	serve(t, pathA, ipA)
	serve(t, pathB, ipB)
	for _, c := range []struct {
		from    string
		src, to netip.Addr
	}{{pathA, ipA, ipB}, {pathB, ipB, ipA}} {
		got, err := dial(c.from, c.to)
		if err != nil {
			t.Fatalf("TCP %s → %s: %v", c.src, c.to, err)
		}
		if got != c.src.String() {
			t.Fatalf("TCP %s → %s: the server saw source %s; the pod IP must be kept", c.src, c.to, got)
		}
		// 28 = IPv4 + ICMP headers: a packet of exactly the pod MTU.
		if err := ping(c.from, c.to, mtu-28); err != nil {
			t.Fatalf("ping %s → %s (%d bytes): %v", c.src, c.to, mtu, err)
		}
	}
	for _, c := range []struct {
		node *labNode
		to   netip.Addr
	}{{a, ipB}, {b, ipA}} {
		if _, err := dial(c.node.nsPath, c.to); err != nil {
			t.Fatalf("TCP from node %s to the other node's pod %s: %v", c.node.name, c.to, err)
		}
	}
}

func TestVXLANTwoNodes(t *testing.T) {
	a, b, client := twoNodes(t)
	oa, _ := a.start(t, VXLAN, client)
	ob, _ := b.start(t, VXLAN, client)
	macA, macB := vtepMAC("node-a").String(), vtepMAC("node-b").String()

	// Own side: the annotations, kelp.1 and the MTU everywhere.
	for _, c := range []struct {
		n   *labNode
		o   *Overlay
		mac string
	}{{a, oa, macA}, {b, ob, macB}} {
		node, err := client.CoreV1().Nodes().Get(context.Background(), c.n.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{AnnotationBackend: "vxlan", AnnotationPublicIP: c.n.ip.String(), AnnotationVTEPMAC: c.mac}
		if !reflect.DeepEqual(node.Annotations, want) {
			t.Fatalf("%s annotations %v, want %v", c.n.name, node.Annotations, want)
		}
		if c.o.Interface() != "lab0" || c.o.PublicIP() != c.n.ip || c.o.MTU() != 1450 || c.o.VTEPMAC() != c.mac {
			t.Fatalf("%s: iface %s, public IP %s, MTU %d, MAC %s", c.n.name, c.o.Interface(), c.o.PublicIP(), c.o.MTU(), c.o.VTEPMAC())
		}
		l, err := c.n.nl.LinkByName(DeviceName)
		if err != nil {
			t.Fatalf("%s: %s missing: %v", c.n.name, DeviceName, err)
		}
		v, ok := l.(*netlink.Vxlan)
		lab0, _ := c.n.nl.LinkByName("lab0")
		if !ok || v.VxlanId != 1 || v.Port != 8472 || v.Learning || v.VtepDevIndex != lab0.Attrs().Index ||
			!v.SrcAddr.Equal(net.IP(c.n.ip.AsSlice())) || v.MTU != 1450 || v.HardwareAddr.String() != c.mac || v.Flags&net.FlagUp == 0 {
			t.Fatalf("%s: %s is %s, MTU %d, MAC %s, flags %v", c.n.name, DeviceName, describe(l), l.Attrs().MTU, l.Attrs().HardwareAddr, l.Attrs().Flags)
		}
		addrs, _ := c.n.nl.AddrList(l, netlink.FAMILY_V4)
		if len(addrs) != 1 || addrs[0].IPNet.String() != strings.Replace(c.n.podCIDR, "/24", "/32", 1) {
			t.Fatalf("%s: %s addresses %v", c.n.name, DeviceName, addrs)
		}
		if br, err := c.n.nl.LinkByName("cni0"); err != nil || br.Attrs().MTU != 1450 {
			t.Fatalf("%s: cni0 %v, MTU %d", c.n.name, err, br.Attrs().MTU)
		}
	}

	// Peer side on a: route, neighbour, FDB for b.
	eventually(t, "a's route to b's pods", func() error {
		if got := kelpRoutes(t, a); !reflect.DeepEqual(got, []string{"10.42.2.0/24 via 10.42.2.0 dev kelp.1 onlink"}) {
			return fmt.Errorf("routes %v", got)
		}
		return nil
	})
	dev, _ := a.nl.LinkByName(DeviceName)
	neighs, err := a.nl.NeighList(dev.Attrs().Index, netlink.FAMILY_V4)
	if err != nil || len(neighs) != 1 || neighs[0].IP.String() != "10.42.2.0" || neighs[0].HardwareAddr.String() != macB || neighs[0].State&netlink.NUD_PERMANENT == 0 {
		t.Fatalf("a's neighbours on kelp.1: %v %+v", err, neighs)
	}
	fdb := fdbEntries(t, a)
	if !reflect.DeepEqual(fdb, []string{macB + " dst 198.18.7.2"}) {
		t.Fatalf("a's fdb on kelp.1: %v", fdb)
	}
	eventually(t, "b's route to a's pods", func() error {
		if got := kelpRoutes(t, b); !reflect.DeepEqual(got, []string{"10.42.1.0/24 via 10.42.1.0 dev kelp.1 onlink"}) {
			return fmt.Errorf("routes %v", got)
		}
		return nil
	})

	crossNodePods(t, a, b, oa, ob, 1450)
	// And it went through the VTEPs (the only route there is).
	for _, n := range []*labNode{a, b} {
		l, _ := n.nl.LinkByName(DeviceName)
		if st := l.Attrs().Statistics; st == nil || st.TxPackets == 0 || st.RxPackets == 0 {
			t.Fatalf("%s: %s counters %+v; the traffic did not cross it", n.name, DeviceName, st)
		}
	}

	// b's Node is deleted: a drops everything it had for b.
	if err := client.CoreV1().Nodes().Delete(context.Background(), "node-b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a forgets b", func() error {
		if got := kelpRoutes(t, a); len(got) != 0 {
			return fmt.Errorf("routes %v", got)
		}
		if n, _ := a.nl.NeighList(dev.Attrs().Index, netlink.FAMILY_V4); len(n) != 0 {
			return fmt.Errorf("neighbours %v", n)
		}
		if f := fdbEntries(t, a); len(f) != 0 {
			return fmt.Errorf("fdb %v", f)
		}
		return nil
	})
}

// fdbEntries lists the FDB entries on n's kelp.1 as "mac dst ip".
func fdbEntries(t *testing.T, n *labNode) []string {
	t.Helper()
	dev, err := n.nl.LinkByName(DeviceName)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := n.nl.NeighList(dev.Attrs().Index, unix.AF_BRIDGE)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range fs {
		if f.IP != nil {
			out = append(out, f.HardwareAddr.String()+" dst "+f.IP.String())
		}
	}
	return out
}

func TestHostGWTwoNodes(t *testing.T) {
	a, b, client := twoNodes(t)
	oa, _ := a.start(t, HostGW, client)
	ob, _ := b.start(t, HostGW, client)
	node, _ := client.CoreV1().Nodes().Get(context.Background(), "node-a", metav1.GetOptions{})
	if want := map[string]string{AnnotationBackend: "host-gw", AnnotationPublicIP: "198.18.7.1"}; !reflect.DeepEqual(node.Annotations, want) {
		t.Fatalf("annotations %v, want %v", node.Annotations, want)
	}
	if _, err := a.nl.LinkByName(DeviceName); err == nil {
		t.Fatalf("host-gw created %s", DeviceName)
	}
	eventually(t, "a's route to b's pods", func() error {
		if got := kelpRoutes(t, a); !reflect.DeepEqual(got, []string{"10.42.2.0/24 via 198.18.7.2 dev lab0"}) {
			return fmt.Errorf("routes %v", got)
		}
		return nil
	})
	eventually(t, "b's route to a's pods", func() error {
		if got := kelpRoutes(t, b); !reflect.DeepEqual(got, []string{"10.42.1.0/24 via 198.18.7.1 dev lab0"}) {
			return fmt.Errorf("routes %v", got)
		}
		return nil
	})
	// No encapsulation: the pods keep the link's MTU.
	crossNodePods(t, a, b, oa, ob, 1500)

	if err := client.CoreV1().Nodes().Delete(context.Background(), "node-b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a forgets b", func() error {
		if got := kelpRoutes(t, a); len(got) != 0 {
			return fmt.Errorf("routes %v", got)
		}
		return nil
	})
}

// TestVXLANOneNode: alone, the node has kelp.1 up and no routes, and its
// pods reach each other as with the bridge alone.
func TestVXLANOneNode(t *testing.T) {
	a := newLabNode(t, "solo", "198.18.7.1", "10.42.1.0/24")
	connect(t, a, newLabNode(t, "unused", "198.18.7.2", "10.42.2.0/24"))
	client := fake.NewClientset(a.node())
	o, _ := a.start(t, VXLAN, client)
	if l, err := a.nl.LinkByName(DeviceName); err != nil || l.Attrs().Flags&net.FlagUp == 0 {
		t.Fatalf("%s: %v", DeviceName, err)
	}
	if got := kelpRoutes(t, a); len(got) != 0 {
		t.Fatalf("routes with no peers: %v", got)
	}
	p1, ip1, err := o.Setup("pod-1")
	if err != nil {
		t.Fatal(err)
	}
	p2, ip2, err := o.Setup("pod-2")
	if err != nil {
		t.Fatal(err)
	}
	serve(t, p2, ip2)
	if got, err := dial(p1, ip2); err != nil || got != ip1.String() {
		t.Fatalf("same-node pods: %q, %v", got, err)
	}
}

// TestRestartPrunesAndAdopts: an agent restart adopts kelp.1 as it is, and
// removes the entries of a node deleted while no agent ran.
func TestRestartPrunesAndAdopts(t *testing.T) {
	a, b, client := twoNodes(t)
	// b only publishes its annotations; its dataplane does not matter here.
	_, _ = b.start(t, VXLAN, client)
	c := newLabNode(t, "node-c", "198.18.7.3", "10.42.3.0/24")
	nc := c.node()
	nc.Annotations = map[string]string{AnnotationBackend: VXLAN, AnnotationPublicIP: "198.18.7.3", AnnotationVTEPMAC: vtepMAC("node-c").String()}
	if _, err := client.CoreV1().Nodes().Create(context.Background(), nc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, stop := a.start(t, VXLAN, client)
	eventually(t, "a's routes", func() error {
		if got := kelpRoutes(t, a); len(got) != 2 {
			return fmt.Errorf("routes %v", got)
		}
		return nil
	})
	before, _ := a.nl.LinkByName(DeviceName)
	stop()
	if err := client.CoreV1().Nodes().Delete(context.Background(), "node-c", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	a.start(t, VXLAN, client)
	after, _ := a.nl.LinkByName(DeviceName)
	if after.Attrs().Index != before.Attrs().Index {
		t.Fatalf("kelp.1 recreated on restart (index %d → %d)", before.Attrs().Index, after.Attrs().Index)
	}
	eventually(t, "c's entries pruned", func() error {
		if got := kelpRoutes(t, a); !reflect.DeepEqual(got, []string{"10.42.2.0/24 via 10.42.2.0 dev kelp.1 onlink"}) {
			return fmt.Errorf("routes %v", got)
		}
		if f := fdbEntries(t, a); !reflect.DeepEqual(f, []string{vtepMAC("node-b").String() + " dst 198.18.7.2"}) {
			return fmt.Errorf("fdb %v", f)
		}
		return nil
	})
}

// TestSetupFailures: what stops the agent, with a message saying why.
func TestSetupFailures(t *testing.T) {
	a, _, client := twoNodes(t)
	for _, c := range []struct {
		name string
		mut  func(*Config)
		want string
	}{
		{"missing interface", func(c *Config) { c.Iface = "nope0" }, "--flannel-iface nope0"},
		{"node IP on no interface", func(c *Config) { c.NodeIP = "198.18.9.9" }, "no interface holds the node IP 198.18.9.9"},
		{"unknown backend", func(c *Config) { c.Backend = "udp" }, `unknown backend "udp"`},
	} {
		cfg := a.config(VXLAN, client)
		c.mut(&cfg)
		if _, err := New(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", c.name, err, c.want)
		}
	}

	// UDP 8472 held by a process: the device cannot come up.
	var sock net.PacketConn
	if err := bridge.InNetNSPath(a.nsPath, func() (err error) {
		sock, err = net.ListenPacket("udp4", ":8472")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	_, err := New(context.Background(), a.config(VXLAN, client))
	if err == nil || !strings.Contains(err.Error(), "UDP port 8472 is already in use") {
		t.Fatalf("port taken: err %v", err)
	}
	sock.Close()
	// Nothing half-made stays in the way: the next New succeeds.
	a.start(t, VXLAN, client)
}

// TestCleanup: Cleanup removes kelp.1 (and with it the peer entries) and
// host-gw's routes, and only those.
func TestCleanup(t *testing.T) {
	a, b, client := twoNodes(t)
	b.start(t, VXLAN, client)
	_, stop := a.start(t, VXLAN, client)
	eventually(t, "a's route", func() error {
		if len(kelpRoutes(t, a)) != 1 {
			return fmt.Errorf("routes %v", kelpRoutes(t, a))
		}
		return nil
	})
	stop()
	// A host-gw route too, and someone else's route that must stay.
	lab0, _ := a.nl.LinkByName("lab0")
	hg := &hostGWPlane{nl: a.nl}
	if err := hg.add(peer{PodCIDR: netip.MustParsePrefix("10.42.9.0/24"), IP: netip.MustParseAddr("198.18.7.2")}); err != nil {
		t.Fatal(err)
	}
	other := &netlink.Route{LinkIndex: lab0.Attrs().Index, Dst: prefixNet(netip.MustParsePrefix("10.99.0.0/16")), Gw: net.ParseIP("198.18.7.2")}
	if err := a.nl.RouteAdd(other); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ { // idempotent
		if err := Cleanup(a.nsPath); err != nil {
			t.Fatalf("Cleanup #%d: %v", i+1, err)
		}
	}
	if _, err := a.nl.LinkByName(DeviceName); err == nil {
		t.Fatalf("%s still there", DeviceName)
	}
	if got := kelpRoutes(t, a); len(got) != 0 {
		t.Fatalf("kelp routes left: %v", got)
	}
	rs, _ := a.nl.RouteList(lab0, netlink.FAMILY_V4)
	found := false
	for _, r := range rs {
		if r.Dst != nil && r.Dst.String() == "10.99.0.0/16" {
			found = true
		}
	}
	if !found {
		t.Fatal("Cleanup removed a route that is not kelp's")
	}
}

// TestSwitchBackend: a node restarted with another backend leaves nothing
// of the previous one (kelp.1, its routes, the vtep-mac annotation), and
// pods still reach each other across the nodes.
func TestSwitchBackend(t *testing.T) {
	a, b, client := twoNodes(t)
	_, stopB := b.start(t, VXLAN, client)
	_, stopA := a.start(t, VXLAN, client)
	eventually(t, "vxlan route", func() error {
		if got := kelpRoutes(t, a); !reflect.DeepEqual(got, []string{"10.42.2.0/24 via 10.42.2.0 dev kelp.1 onlink"}) {
			return fmt.Errorf("routes %v", got)
		}
		return nil
	})
	stopA()
	stopB()
	_, stopB = b.start(t, HostGW, client)
	oa, stopA := a.start(t, HostGW, client)
	if _, err := a.nl.LinkByName(DeviceName); err == nil {
		t.Fatalf("%s left after switching to host-gw", DeviceName)
	}
	node, _ := client.CoreV1().Nodes().Get(context.Background(), "node-a", metav1.GetOptions{})
	if _, ok := node.Annotations[AnnotationVTEPMAC]; ok || node.Annotations[AnnotationBackend] != HostGW {
		t.Fatalf("annotations after the switch: %v", node.Annotations)
	}
	eventually(t, "host-gw route", func() error {
		if got := kelpRoutes(t, a); !reflect.DeepEqual(got, []string{"10.42.2.0/24 via 198.18.7.2 dev lab0"}) {
			return fmt.Errorf("routes %v", got)
		}
		return nil
	})
	if oa.MTU() != 1500 {
		t.Fatalf("host-gw MTU %d", oa.MTU())
	}
	stopA()
	stopB()
	ob, _ := b.start(t, VXLAN, client)
	oa, _ = a.start(t, VXLAN, client)
	eventually(t, "vxlan route again", func() error {
		if got := kelpRoutes(t, a); !reflect.DeepEqual(got, []string{"10.42.2.0/24 via 10.42.2.0 dev kelp.1 onlink"}) {
			return fmt.Errorf("routes %v", got)
		}
		return nil
	})
	crossNodePods(t, a, b, oa, ob, 1450)
}

// TestRepair: what is removed behind the agent's back comes back at the
// next full pass: a host-gw route (the kernel flushes them with a link
// that goes down), and kelp.1 with all its peer entries.
func TestRepair(t *testing.T) {
	for _, backend := range []string{HostGW, VXLAN} {
		t.Run(backend, func(t *testing.T) {
			a, b, client := twoNodes(t)
			a.resync = 100 * time.Millisecond
			ob, _ := b.start(t, backend, client)
			oa, _ := a.start(t, backend, client)
			want := map[string][]string{HostGW: {"10.42.2.0/24 via 198.18.7.2 dev lab0"}, VXLAN: {"10.42.2.0/24 via 10.42.2.0 dev kelp.1 onlink"}}[backend]
			programmed := func() error {
				if got := kelpRoutes(t, a); !reflect.DeepEqual(got, want) {
					return fmt.Errorf("routes %v", got)
				}
				if backend == VXLAN && len(fdbEntries(t, a)) != 1 {
					return fmt.Errorf("fdb %v", fdbEntries(t, a))
				}
				return nil
			}
			eventually(t, "programmed", programmed)
			if backend == HostGW {
				rs, _ := a.nl.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Protocol: RouteProtocol}, netlink.RT_FILTER_PROTOCOL)
				if err := a.nl.RouteDel(&rs[0]); err != nil {
					t.Fatal(err)
				}
			} else {
				l, _ := a.nl.LinkByName(DeviceName)
				if err := a.nl.LinkDel(l); err != nil {
					t.Fatal(err)
				}
			}
			eventually(t, "repaired", programmed)
			crossNodePods(t, a, b, oa, ob, oa.MTU())
		})
	}
}

// TestHostGWUnreachablePeer: a peer that is not on a connected network
// cannot be routed by host-gw, and the error says so.
func TestHostGWUnreachablePeer(t *testing.T) {
	a, _, _ := twoNodes(t)
	err := (&hostGWPlane{nl: a.nl}).add(peer{Name: "far", PodCIDR: netip.MustParsePrefix("10.42.5.0/24"), IP: netip.MustParseAddr("198.19.0.5")})
	if err == nil || !strings.Contains(err.Error(), "not on a directly connected network") {
		t.Fatalf("err %v", err)
	}
}
