package overlay

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// BenchmarkOverlayConvergence is issue 10's "overlay convergence, 100
// simulated Nodes" (target ≤ 1 s): a vxlan node in its own lab netns and
// a fake API. "100-added": 100 peer Nodes are created, one after another;
// the time runs until the node has programmed all 100 routes (with their
// neighbour and FDB entries, added before each route). "join-101st": with
// 100 peers programmed, one more Node joins; the time runs until its
// route is there. The informer runs over client-go's fake clientset, so
// the API server's own latency is not in the figure; netlink's is.
func BenchmarkOverlayConvergence(b *testing.B) {
	a := newLabNode(b, "node-a", "198.18.7.1", "10.42.1.0/24")
	connect(b, a, newLabNode(b, "unused", "198.18.7.2", "10.42.200.0/24"))
	client := fake.NewClientset(a.node())
	a.start(b, VXLAN, client)
	dev, err := a.nl.LinkByName(DeviceName)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	routes := func() int {
		rs, err := a.nl.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{LinkIndex: dev.Attrs().Index}, netlink.RT_FILTER_OIF)
		if err != nil {
			b.Fatal(err)
		}
		return len(rs)
	}
	waitRoutes := func(n int) {
		deadline := time.Now().Add(30 * time.Second)
		for routes() != n {
			if time.Now().After(deadline) {
				b.Fatalf("%d routes after 30 s, want %d", routes(), n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	peerNode := func(i int) *labNode {
		return &labNode{name: fmt.Sprintf("sim-%03d", i), ip: netipAddr(198, 18, 8+i/250, 1+i%250), podCIDR: fmt.Sprintf("10.42.%d.0/24", 2+i)}
	}
	create := func(i int) {
		p := peerNode(i)
		n := p.node()
		n.Annotations = map[string]string{AnnotationBackend: VXLAN, AnnotationPublicIP: p.ip.String(), AnnotationVTEPMAC: vtepMAC(p.name).String()}
		if _, err := client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	remove := func(i int) {
		if err := client.CoreV1().Nodes().Delete(ctx, peerNode(i).name, metav1.DeleteOptions{}); err != nil {
			b.Fatal(err)
		}
	}

	b.Run("100-added", func(b *testing.B) {
		var creating time.Duration
		for range b.N {
			t0 := time.Now()
			for i := range 100 {
				create(i)
			}
			creating += time.Since(t0)
			waitRoutes(100)
			b.StopTimer()
			for i := range 100 {
				remove(i)
			}
			waitRoutes(0)
			b.StartTimer()
		}
		// How much of ns/op the fake API's 100 Creates themselves took.
		b.ReportMetric(float64(creating.Milliseconds())/float64(b.N), "create-ms/op")
	})
	b.Run("join-101st", func(b *testing.B) {
		b.StopTimer()
		for i := range 100 {
			create(i)
		}
		waitRoutes(100)
		for range b.N {
			b.StartTimer()
			create(100)
			waitRoutes(101)
			b.StopTimer()
			remove(100)
			waitRoutes(100)
		}
		// The framework runs this function once per b.N it tries.
		for i := range 100 {
			remove(i)
		}
		waitRoutes(0)
	})
}

func netipAddr(a, b, c, d int) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(a), byte(b), byte(c), byte(d)})
}
