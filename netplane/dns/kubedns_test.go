package dns

import (
	"context"
	"strings"
	"testing"
	"time"

	logtest "github.com/sirupsen/logrus/hooks/test"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

// WatchService says once when pods' DNS lacks its Service, and when it
// comes back or sits at the wrong address.
func TestWatchService(t *testing.T) {
	hook := logtest.NewGlobal()
	defer hook.Reset()
	cs := fake.NewClientset()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory := informers.NewSharedInformerFactory(cs, 0)
	WatchService(ctx, factory.Core().V1().Services().Informer(), "10.43.0.10")
	factory.Start(ctx.Done())
	said := func(want string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			for _, e := range hook.AllEntries() {
				if strings.Contains(e.Message, want) {
					return
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
		var got []string
		for _, e := range hook.AllEntries() {
			got = append(got, e.Level.String()+": "+e.Message)
		}
		t.Fatalf("no log line with %q; got %q", want, got)
	}
	said("Service kube-system/kube-dns does not exist (the server's coredns manifest is disabled with --disable coredns, or skipped): pods' queries to 10.43.0.10 go unanswered")

	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: ServiceName, Namespace: "kube-system"}, Spec: corev1.ServiceSpec{ClusterIP: "10.43.0.10"}}
	if _, err := cs.CoreV1().Services("kube-system").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	said("dns: Service kube-system/kube-dns at 10.43.0.10")
	svc.Spec.ClusterIP = "10.43.0.99"
	if _, err := cs.CoreV1().Services("kube-system").Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	said("has address 10.43.0.99, not the cluster DNS address 10.43.0.10")
	if err := cs.CoreV1().Services("kube-system").Delete(ctx, ServiceName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	said("Service kube-system/kube-dns was deleted")
	n := 0
	for _, e := range hook.AllEntries() {
		if strings.Contains(e.Message, "does not exist") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("said %d times that the Service does not exist, want once", n)
	}
}

func TestSyncEndpoint(t *testing.T) {
	cs := fake.NewClientset()
	ctx := context.Background()
	slices := cs.DiscoveryV1().EndpointSlices("kube-system")
	want := endpointSlice("node1", "192.168.5.1", 53)
	if err := syncEndpoint(ctx, slices, want); err != nil {
		t.Fatal(err)
	}
	got, err := slices.Get(ctx, "kube-dns-node1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels[discoveryv1.LabelServiceName] != ServiceName || got.Labels[discoveryv1.LabelManagedBy] != endpointManagedBy ||
		len(got.Endpoints) != 1 || got.Endpoints[0].Addresses[0] != "192.168.5.1" || *got.Endpoints[0].NodeName != "node1" ||
		len(got.Ports) != 2 || *got.Ports[0].Port != 53 || *got.Ports[0].Protocol != corev1.ProtocolUDP || *got.Ports[1].Protocol != corev1.ProtocolTCP {
		t.Fatalf("slice: %+v", got)
	}
	// Someone changes it: the next sync puts it back, labels included.
	got.Endpoints[0].Addresses = []string{"192.168.5.9"}
	got.Labels = map[string]string{"other": "x"}
	if _, err := slices.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := syncEndpoint(ctx, slices, want); err != nil {
		t.Fatal(err)
	}
	got, _ = slices.Get(ctx, "kube-dns-node1", metav1.GetOptions{})
	if got.Endpoints[0].Addresses[0] != "192.168.5.1" || got.Labels[discoveryv1.LabelServiceName] != ServiceName {
		t.Fatalf("slice not repaired: %+v", got)
	}
}

func TestPublishEndpointStopsWithContext(t *testing.T) {
	cs := fake.NewClientset()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { PublishEndpoint(ctx, cs, "node2", "192.168.5.2", 5353); close(done) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := cs.DiscoveryV1().EndpointSlices("kube-system").Get(ctx, "kube-dns-node2", metav1.GetOptions{}); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("slice never published")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("PublishEndpoint did not return after its context ended")
	}
}
