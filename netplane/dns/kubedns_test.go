package dns

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestEnsureService(t *testing.T) {
	cs := fake.NewClientset()
	ctx := context.Background()
	EnsureService(ctx, cs, "10.43.0.10")
	svc, err := cs.CoreV1().Services("kube-system").Get(ctx, ServiceName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if svc.Spec.ClusterIP != "10.43.0.10" || svc.Spec.Selector != nil || svc.Spec.InternalTrafficPolicy == nil ||
		*svc.Spec.InternalTrafficPolicy != corev1.ServiceInternalTrafficPolicyLocal || len(svc.Spec.Ports) != 2 ||
		svc.Labels["k8s-app"] != "kube-dns" {
		t.Fatalf("kube-dns Service: %+v", svc)
	}
	// Already there: left alone, returns at once.
	svc.Labels["touched"] = "yes"
	if _, err := cs.CoreV1().Services("kube-system").Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	EnsureService(ctx, cs, "10.43.0.99")
	if got, _ := cs.CoreV1().Services("kube-system").Get(ctx, ServiceName, metav1.GetOptions{}); got.Spec.ClusterIP != "10.43.0.10" || got.Labels["touched"] != "yes" {
		t.Fatalf("an existing Service was changed: %+v", got)
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
