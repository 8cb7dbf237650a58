package endpointslicemirroring

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

// newTest returns a controller whose caches hold objs and whose client
// holds the same objects, so a sync's writes can be read back.
func newTest(t *testing.T, objs ...runtime.Object) (*Controller, *fake.Clientset) {
	t.Helper()
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	c := New(client, factory)
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *corev1.Endpoints:
			err = factory.Core().V1().Endpoints().Informer().GetStore().Add(o)
		case *corev1.Service:
			err = factory.Core().V1().Services().Informer().GetStore().Add(o)
		case *discoveryv1.EndpointSlice:
			err = factory.Discovery().V1().EndpointSlices().Informer().GetStore().Add(o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return c, client
}

func listSlices(t *testing.T, client *fake.Clientset) []discoveryv1.EndpointSlice {
	t.Helper()
	l, err := client.DiscoveryV1().EndpointSlices("ns").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

func existingSlice(name string, at discoveryv1.AddressType, ep *corev1.Endpoints) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{
			discoveryv1.LabelServiceName: ep.Name, discoveryv1.LabelManagedBy: ManagedBy}},
		AddressType: at,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.9.9.9"}}},
	}
}

func TestSyncCreatesAndRepairs(t *testing.T) {
	ep := endpoints(corev1.EndpointSubset{Addresses: addrs("10.0.0.1"), Ports: []corev1.EndpointPort{port("http", 80)}})
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "ext", Namespace: "ns"}}
	c, client := newTest(t, ep, svc)
	if err := c.sync(context.Background(), "ns/ext"); err != nil {
		t.Fatal(err)
	}
	got := listSlices(t, client)
	if len(got) != 1 || got[0].Labels[discoveryv1.LabelManagedBy] != ManagedBy || got[0].Endpoints[0].Addresses[0] != "10.0.0.1" {
		t.Fatalf("slices after first sync %+v", got)
	}

	// Two stale slices of ours: the IPv4 one is rewritten in place (its
	// name kept), the IPv6 one nobody wants is deleted.
	v4 := existingSlice("ext-a", discoveryv1.AddressTypeIPv4, ep)
	v6 := existingSlice("ext-b", discoveryv1.AddressTypeIPv6, ep)
	c, client = newTest(t, ep, svc, v4, v6)
	if err := c.sync(context.Background(), "ns/ext"); err != nil {
		t.Fatal(err)
	}
	got = listSlices(t, client)
	if len(got) != 1 || got[0].Name != "ext-a" || got[0].Endpoints[0].Addresses[0] != "10.0.0.1" || len(got[0].Ports) != 1 {
		t.Fatalf("slices after repair %+v", got)
	}
}

func TestSyncDeletesWhenNotMirrored(t *testing.T) {
	ep := endpoints(corev1.EndpointSubset{Addresses: addrs("10.0.0.1")})
	selector := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "ext", Namespace: "ns"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"a": "b"}}}
	ours := existingSlice("ext-a", discoveryv1.AddressTypeIPv4, ep)
	theirs := existingSlice("ext-other", discoveryv1.AddressTypeIPv4, ep)
	theirs.Labels[discoveryv1.LabelManagedBy] = "endpointslice-controller.k8s.io"
	for name, objs := range map[string][]runtime.Object{
		"selector":     {ep, selector, ours, theirs},
		"no Service":   {ep, ours, theirs},
		"no Endpoints": {selector, ours, theirs},
		"all gone":     {ours, theirs},
	} {
		c, client := newTest(t, objs...)
		if err := c.sync(context.Background(), "ns/ext"); err != nil {
			t.Fatal(err)
		}
		got := listSlices(t, client)
		if len(got) != 1 || got[0].Name != "ext-other" {
			t.Errorf("%s: slices %+v, want only the other controller's", name, got)
		}
	}
}
