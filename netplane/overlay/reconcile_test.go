package overlay

import (
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fakePlane records what the reconciler asks for and holds the resulting
// state; fail makes add or del of a node fail.
type fakePlane struct {
	calls  []string
	state  map[string]peer // by node name
	fail   map[string]bool
	pruned [][]string
}

func newFakePlane() *fakePlane { return &fakePlane{state: map[string]peer{}, fail: map[string]bool{}} }

func (f *fakePlane) add(p peer) error {
	f.calls = append(f.calls, "add "+p.Name+" "+p.PodCIDR.String()+" "+p.IP.String()+" "+p.MAC)
	if f.fail[p.Name] {
		return errors.New("boom")
	}
	f.state[p.Name] = p
	return nil
}

func (f *fakePlane) del(p peer) error {
	f.calls = append(f.calls, "del "+p.Name+" "+p.PodCIDR.String())
	if f.fail[p.Name] {
		return errors.New("boom")
	}
	delete(f.state, p.Name)
	return nil
}

func (f *fakePlane) prune(keep []peer) error {
	var names []string
	for _, p := range keep {
		names = append(names, p.Name)
	}
	sort.Strings(names)
	f.pruned = append(f.pruned, names)
	return nil
}

func (f *fakePlane) repair() error { f.calls = append(f.calls, "repair"); return nil }

func (f *fakePlane) take() []string { c := f.calls; f.calls = nil; return c }

func vxNode(name, cidr, ip, mac string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{
		AnnotationBackend: VXLAN, AnnotationPublicIP: ip, AnnotationVTEPMAC: mac}}}
	n.Spec.PodCIDR = cidr
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}
	return n
}

func TestPeerOf(t *testing.T) {
	good := vxNode("b", "10.42.2.0/24", "198.18.7.2", "02:00:00:00:00:02")
	if p, err := peerOf(VXLAN, good); err != nil || p != (peer{Name: "b", PodCIDR: netip.MustParsePrefix("10.42.2.0/24"),
		IP: netip.MustParseAddr("198.18.7.2"), MAC: "02:00:00:00:00:02"}) {
		t.Fatalf("vxlan peer = %+v, %v", p, err)
	}
	hg := good.DeepCopy()
	hg.Annotations = map[string]string{AnnotationBackend: HostGW}
	hg.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "b"}, {Type: corev1.NodeInternalIP, Address: "198.18.7.9"}}
	if p, err := peerOf(HostGW, hg); err != nil || p.IP.String() != "198.18.7.9" || p.MAC != "" {
		t.Fatalf("host-gw peer = %+v, %v", p, err)
	}
	for _, c := range []struct {
		name string
		mut  func(*corev1.Node)
		want string
	}{
		{"no podCIDR", func(n *corev1.Node) { n.Spec.PodCIDR = "" }, "no podCIDR"},
		{"bad podCIDR", func(n *corev1.Node) { n.Spec.PodCIDR = "fd00::/64" }, "not an IPv4 prefix"},
		{"no annotations", func(n *corev1.Node) { n.Annotations = nil }, "no kelp.io/backend"},
		{"other backend", func(n *corev1.Node) { n.Annotations[AnnotationBackend] = HostGW }, `backend "host-gw"`},
		{"bad public IP", func(n *corev1.Node) { n.Annotations[AnnotationPublicIP] = "x" }, "kelp.io/public-ip"},
		{"bad MAC", func(n *corev1.Node) { n.Annotations[AnnotationVTEPMAC] = "zz" }, "kelp.io/vtep-mac"},
	} {
		n := good.DeepCopy()
		c.mut(n)
		if _, err := peerOf(VXLAN, n); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", c.name, err, c.want)
		}
	}
	hg.Status.Addresses = hg.Status.Addresses[:1]
	if _, err := peerOf(HostGW, hg); err == nil || !strings.Contains(err.Error(), "InternalIP") {
		t.Errorf("host-gw without InternalIP: %v", err)
	}
}

func TestReconcileAddUpdateDelete(t *testing.T) {
	f := newFakePlane()
	r := newReconciler(VXLAN, "a", netip.MustParsePrefix("10.42.1.0/24"), f)
	a := vxNode("a", "10.42.1.0/24", "198.18.7.1", "02:00:00:00:00:01")
	b := vxNode("b", "10.42.2.0/24", "198.18.7.2", "02:00:00:00:00:02")
	c := vxNode("c", "10.42.3.0/24", "198.18.7.3", "02:00:00:00:00:03")
	pending := vxNode("d", "", "198.18.7.4", "02:00:00:00:00:04")

	// The own node and one without a podCIDR are not peers.
	if err := r.sync([]*corev1.Node{a, b, c, pending}, true); err != nil {
		t.Fatal(err)
	}
	want := []string{"repair", "add b 10.42.2.0/24 198.18.7.2 02:00:00:00:00:02", "add c 10.42.3.0/24 198.18.7.3 02:00:00:00:00:03"}
	if got := f.take(); !reflect.DeepEqual(got, want) {
		t.Fatalf("first sync: %v, want %v", got, want)
	}
	if !reflect.DeepEqual(f.pruned, [][]string{{"b", "c"}}) {
		t.Fatalf("prune kept %v", f.pruned)
	}
	// Nothing changed: nothing is done (an update of, say, the status).
	if err := r.sync([]*corev1.Node{a, b, c, pending}, false); err != nil || len(f.take()) != 0 {
		t.Fatalf("idempotent sync did something: %v", err)
	}
	// b's public IP changes: its old entries go, then the new ones come.
	b2 := b.DeepCopy()
	b2.Annotations[AnnotationPublicIP] = "198.18.7.22"
	if err := r.sync([]*corev1.Node{a, b2, c, pending}, false); err != nil {
		t.Fatal(err)
	}
	want = []string{"del b 10.42.2.0/24", "add b 10.42.2.0/24 198.18.7.22 02:00:00:00:00:02"}
	if got := f.take(); !reflect.DeepEqual(got, want) {
		t.Fatalf("update: %v, want %v", got, want)
	}
	// c is deleted, d gets its podCIDR.
	d := vxNode("d", "10.42.4.0/24", "198.18.7.4", "02:00:00:00:00:04")
	if err := r.sync([]*corev1.Node{a, b2, d}, false); err != nil {
		t.Fatal(err)
	}
	want = []string{"del c 10.42.3.0/24", "add d 10.42.4.0/24 198.18.7.4 02:00:00:00:00:04"}
	if got := f.take(); !reflect.DeepEqual(got, want) {
		t.Fatalf("delete+add: %v, want %v", got, want)
	}
	if len(f.state) != 2 || f.state["b"].IP.String() != "198.18.7.22" || f.state["d"].PodCIDR.String() != "10.42.4.0/24" {
		t.Fatalf("state %v", f.state)
	}
	// A node switching to another backend stops being a peer.
	d2 := d.DeepCopy()
	d2.Annotations[AnnotationBackend] = HostGW
	if err := r.sync([]*corev1.Node{a, b2, d2}, false); err != nil {
		t.Fatal(err)
	}
	if got := f.take(); !reflect.DeepEqual(got, []string{"del d 10.42.4.0/24"}) {
		t.Fatalf("backend switch: %v", got)
	}
	// Everyone gone.
	if err := r.sync([]*corev1.Node{a}, false); err != nil || len(f.state) != 0 {
		t.Fatalf("all deleted: %v, state %v", err, f.state)
	}
}

func TestReconcileRetriesFailures(t *testing.T) {
	f := newFakePlane()
	r := newReconciler(VXLAN, "a", netip.MustParsePrefix("10.42.1.0/24"), f)
	b := vxNode("b", "10.42.2.0/24", "198.18.7.2", "02:00:00:00:00:02")
	c := vxNode("c", "10.42.3.0/24", "198.18.7.3", "02:00:00:00:00:03")
	f.fail["b"] = true
	err := r.sync([]*corev1.Node{b, c}, false)
	if err == nil || !strings.Contains(err.Error(), "node b") {
		t.Fatalf("err %v, want node b's failure", err)
	}
	if _, ok := f.state["c"]; !ok {
		t.Fatal("c not programmed: one peer's failure must not hold up the others")
	}
	f.take()
	f.fail["b"] = false
	if err := r.sync([]*corev1.Node{b, c}, false); err != nil {
		t.Fatal(err)
	}
	if got := f.take(); !reflect.DeepEqual(got, []string{"add b 10.42.2.0/24 198.18.7.2 02:00:00:00:00:02"}) {
		t.Fatalf("retry: %v", got)
	}
	// A failed delete is repeated on the next pass, not forgotten.
	f.fail["b"] = true
	if err := r.sync([]*corev1.Node{c}, false); err == nil {
		t.Fatal("failed delete not reported")
	}
	f.fail["b"] = false
	f.take()
	if err := r.sync([]*corev1.Node{c}, false); err != nil {
		t.Fatal(err)
	}
	if got := f.take(); !reflect.DeepEqual(got, []string{"del b 10.42.2.0/24"}) || len(f.state) != 1 {
		t.Fatalf("delete retry: %v, state %v", got, f.state)
	}
}

func TestReconcileConflictingPodCIDRs(t *testing.T) {
	f := newFakePlane()
	r := newReconciler(VXLAN, "a", netip.MustParsePrefix("10.42.1.0/24"), f)
	b := vxNode("b", "10.42.2.0/24", "198.18.7.2", "02:00:00:00:00:02")
	stale := vxNode("stale", "10.42.2.0/24", "198.18.7.9", "02:00:00:00:00:09")
	mine := vxNode("mine", "10.42.1.0/24", "198.18.7.8", "02:00:00:00:00:08")
	if err := r.sync([]*corev1.Node{b}, false); err != nil {
		t.Fatal(err)
	}
	f.take()
	// Two nodes with one podCIDR: neither is routed; one with the own
	// podCIDR never is.
	if err := r.sync([]*corev1.Node{b, stale, mine}, false); err != nil {
		t.Fatal(err)
	}
	if got := f.take(); !reflect.DeepEqual(got, []string{"del b 10.42.2.0/24"}) || len(f.state) != 0 {
		t.Fatalf("conflict: %v, state %v", got, f.state)
	}
	if err := r.sync([]*corev1.Node{b, mine}, false); err != nil || len(f.state) != 1 {
		t.Fatalf("conflict resolved: %v, state %v", err, f.state)
	}
}

func TestVTEPMAC(t *testing.T) {
	m1, m2 := vtepMAC("node-1"), vtepMAC("node-2")
	if m1.String() != vtepMAC("node-1").String() || m1.String() == m2.String() {
		t.Fatalf("vtepMAC not a stable function of the name: %s %s", m1, m2)
	}
	for _, m := range []string{m1.String(), m2.String()} {
		mac := vtepMAC(strings.TrimSpace(fmt.Sprint(m)))
		if len(mac) != 6 || mac[0]&0x01 != 0 || mac[0]&0x02 == 0 {
			t.Fatalf("%s is not a locally administered unicast MAC", mac)
		}
	}
}

// TestReconcileFullPass: a full pass repairs the own side, adds every peer
// again (the kernel may have lost them) and prunes around them; an
// incremental pass with nothing changed does nothing.
func TestReconcileFullPass(t *testing.T) {
	f := newFakePlane()
	r := newReconciler(HostGW, "a", netip.MustParsePrefix("10.42.1.0/24"), f)
	b := vxNode("b", "10.42.2.0/24", "198.18.7.2", "")
	b.Annotations = map[string]string{AnnotationBackend: HostGW}
	if err := r.sync([]*corev1.Node{b}, false); err != nil {
		t.Fatal(err)
	}
	f.take()
	if err := r.sync([]*corev1.Node{b}, false); err != nil || len(f.take()) != 0 {
		t.Fatalf("incremental pass did something: %v", err)
	}
	if err := r.sync([]*corev1.Node{b}, true); err != nil {
		t.Fatal(err)
	}
	if got := f.take(); !reflect.DeepEqual(got, []string{"repair", "add b 10.42.2.0/24 198.18.7.2 "}) {
		t.Fatalf("full pass: %v", got)
	}
	if !reflect.DeepEqual(f.pruned, [][]string{{"b"}}) {
		t.Fatalf("prune kept %v", f.pruned)
	}
}
