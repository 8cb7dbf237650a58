package nodenet

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kelp-project/kelp/netplane/bridge"
	"github.com/kelp-project/kelp/netplane/overlay"
)

// TestVXLANThroughOptions runs the vxlan backend as the agent builds it
// (Options, no netns of its own: "" is the calling thread's), on a thread
// switched into a network namespace the test pins, with a link holding
// the node IP (198.18.7.1, a test range); then nodenet.Cleanup
// there as killall runs it. The host's namespace is never changed.
func TestVXLANThroughOptions(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (network namespaces, netlink, mounts)")
	}
	dir := t.TempDir()
	nsPath := filepath.Join(dir, "node-ns")
	if err := bridge.PinNewNetNS(nsPath); err != nil {
		t.Fatal(err)
	}
	opts := Options{PodCIDR: "10.42.1.0/24", ClusterCIDR: "10.42.0.0/16", AgentDir: filepath.Join(dir, "agent"), RunDir: filepath.Join(dir, "run"),
		NodeName: "n1", NodeIP: "198.18.7.1"}
	t.Cleanup(func() {
		_ = unix.Unmount(filepath.Join(opts.RunDir, "netns"), unix.MNT_DETACH)
		_ = bridge.UnpinNetNS(nsPath)
	})
	ns, err := netns.GetFromPath(nsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		self, _ := netns.Get()
		defer self.Close()
		if self.Equal(ns) {
			t.Fatal("the test's own namespace is the node's; refusing to change it")
		}
	}()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	attrs := netlink.NewLinkAttrs()
	attrs.Name, attrs.MTU = "uplink", 9000
	// A veth pair with both ends here (this kernel has no dummy links).
	if err := h.LinkAdd(&netlink.Veth{LinkAttrs: attrs, PeerName: "uplink-peer"}); err != nil {
		t.Fatal(err)
	}
	up, _ := h.LinkByName("uplink")
	if err := h.AddrAdd(up, &netlink.Addr{IPNet: &net.IPNet{IP: net.ParseIP("198.18.7.1"), Mask: net.CIDRMask(24, 32)}}); err != nil {
		t.Fatal(err)
	}
	if err := h.LinkSetUp(up); err != nil {
		t.Fatal(err)
	}

	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opts.Context, opts.Client = ctx, client
	b, err := Lookup("")
	if err != nil {
		t.Fatal(err)
	}
	if err := bridge.InNetNSPath(nsPath, func() error { _, err := b.New(opts); return err }); err != nil {
		t.Fatalf("New: %v", err)
	}
	dev, err := h.LinkByName(overlay.DeviceName)
	if err != nil || dev.Attrs().MTU != 8950 {
		t.Fatalf("%s: %v (MTU %d, want 9000-50)", overlay.DeviceName, err, dev.Attrs().MTU)
	}
	if br, err := h.LinkByName("cni0"); err != nil || br.Attrs().MTU != 8950 {
		t.Fatalf("cni0: %v", err)
	}
	node, _ := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if node.Annotations[overlay.AnnotationBackend] != "vxlan" || node.Annotations[overlay.AnnotationPublicIP] != "198.18.7.1" {
		t.Fatalf("annotations %v", node.Annotations)
	}
	cancel()

	if err := bridge.InNetNSPath(nsPath, func() error { return Cleanup(Options{AgentDir: opts.AgentDir, RunDir: opts.RunDir}) }); err != nil {
		t.Fatalf("Cleanup: %v", err)
	}
	for _, name := range []string{overlay.DeviceName, "cni0"} {
		if _, err := h.LinkByName(name); err == nil {
			t.Errorf("%s left after Cleanup", name)
		}
	}
}
