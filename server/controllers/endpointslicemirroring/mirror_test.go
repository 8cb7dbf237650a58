package endpointslicemirroring

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func endpoints(subsets ...corev1.EndpointSubset) *corev1.Endpoints {
	return &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: "ext", Namespace: "ns", UID: "ep-uid",
			Labels: map[string]string{"app": "x", discoveryv1.LabelManagedBy: "someone"},
			Annotations: map[string]string{
				"keep":                                "me",
				corev1.EndpointsLastChangeTriggerTime: "2026-01-01T00:00:00Z",
				corev1.LastAppliedConfigAnnotation:    "{}",
			}},
		Subsets: subsets,
	}
}

func port(name string, p int32) corev1.EndpointPort {
	return corev1.EndpointPort{Name: name, Port: p, Protocol: corev1.ProtocolTCP}
}

func addrs(ips ...string) []corev1.EndpointAddress {
	out := make([]corev1.EndpointAddress, 0, len(ips))
	for _, ip := range ips {
		out = append(out, corev1.EndpointAddress{IP: ip})
	}
	return out
}

func ready(s *discoveryv1.EndpointSlice) (r, n []string) {
	for _, e := range s.Endpoints {
		if e.Conditions.Ready != nil && *e.Conditions.Ready {
			r = append(r, e.Addresses[0])
		} else {
			n = append(n, e.Addresses[0])
		}
	}
	return r, n
}

func TestShouldMirror(t *testing.T) {
	ep := endpoints()
	plain := &corev1.Service{}
	selector := &corev1.Service{Spec: corev1.ServiceSpec{Selector: map[string]string{"a": "b"}}}
	if !ShouldMirror(ep, plain) {
		t.Error("selectorless Service not mirrored")
	}
	if ShouldMirror(ep, selector) {
		t.Error("selector Service mirrored")
	}
	if ShouldMirror(ep, nil) || ShouldMirror(nil, plain) {
		t.Error("mirrored without Service or Endpoints")
	}
	skip := endpoints()
	skip.Labels[discoveryv1.LabelSkipMirror] = "true"
	if ShouldMirror(skip, plain) {
		t.Error("skip-mirror label ignored")
	}
	leader := endpoints()
	leader.Annotations[leaderAnnotation] = "{}"
	if ShouldMirror(leader, plain) {
		t.Error("leader-election lock mirrored")
	}
}

func TestDesiredMetadataAndAddresses(t *testing.T) {
	node := "node-1"
	ep := endpoints(corev1.EndpointSubset{
		Addresses: []corev1.EndpointAddress{
			{IP: "10.0.0.1", Hostname: "h1", NodeName: &node},
			{IP: "10.0.0.2"},
			{IP: "not-an-ip"},
		},
		NotReadyAddresses: addrs("10.0.0.3"),
		Ports:             []corev1.EndpointPort{port("http", 80)},
	})
	got := Desired(ep, MaxEndpointsPerSubset)
	if len(got) != 1 {
		t.Fatalf("got %d slices, want 1", len(got))
	}
	s := got[0]
	if s.GenerateName != "ext-" || s.Namespace != "ns" || s.AddressType != discoveryv1.AddressTypeIPv4 {
		t.Errorf("meta %+v type %s", s.ObjectMeta, s.AddressType)
	}
	if s.Labels[discoveryv1.LabelManagedBy] != ManagedBy || s.Labels[discoveryv1.LabelServiceName] != "ext" || s.Labels["app"] != "x" {
		t.Errorf("labels %v", s.Labels)
	}
	if s.Annotations["keep"] != "me" || len(s.Annotations) != 1 {
		t.Errorf("annotations %v, want only keep", s.Annotations)
	}
	if ref := metav1.GetControllerOf(s); ref == nil || ref.Kind != "Endpoints" || ref.Name != "ext" || ref.UID != "ep-uid" {
		t.Errorf("owner %+v", s.OwnerReferences)
	}
	if len(s.Ports) != 1 || *s.Ports[0].Name != "http" || *s.Ports[0].Port != 80 || *s.Ports[0].Protocol != corev1.ProtocolTCP {
		t.Errorf("ports %+v", s.Ports)
	}
	r, n := ready(s)
	if len(r) != 2 || r[0] != "10.0.0.1" || r[1] != "10.0.0.2" || len(n) != 1 || n[0] != "10.0.0.3" {
		t.Errorf("ready %v notReady %v", r, n)
	}
	if e := s.Endpoints[0]; e.Hostname == nil || *e.Hostname != "h1" || e.NodeName == nil || *e.NodeName != "node-1" {
		t.Errorf("endpoint %+v", e)
	}
}

func TestDesiredGroupsByFamilyAndPorts(t *testing.T) {
	ep := endpoints(
		corev1.EndpointSubset{Addresses: addrs("10.0.0.1", "fd00::1"), Ports: []corev1.EndpointPort{port("a", 1), port("b", 2)}},
		// Same ports in another order: repacked into the first subset.
		corev1.EndpointSubset{Addresses: addrs("10.0.0.2"), NotReadyAddresses: addrs("10.0.0.1"), Ports: []corev1.EndpointPort{port("b", 2), port("a", 1)}},
		corev1.EndpointSubset{Addresses: addrs("10.0.0.9"), Ports: []corev1.EndpointPort{port("c", 3)}},
	)
	got := Desired(ep, MaxEndpointsPerSubset)
	if len(got) != 3 {
		t.Fatalf("got %d slices, want 3 (v4 a+b, v6 a+b, v4 c)", len(got))
	}
	r, n := ready(got[0])
	if got[0].AddressType != discoveryv1.AddressTypeIPv4 || len(r) != 2 || len(n) != 0 {
		t.Errorf("first slice %s ready %v notReady %v: a ready duplicate must win", got[0].AddressType, r, n)
	}
	if got[1].AddressType != discoveryv1.AddressTypeIPv6 || len(got[1].Endpoints) != 1 {
		t.Errorf("second slice %+v", got[1])
	}
	if len(got[2].Ports) != 1 || *got[2].Ports[0].Port != 3 {
		t.Errorf("third slice ports %+v", got[2].Ports)
	}
}

func TestDesiredCapsEachSubset(t *testing.T) {
	ep := endpoints(corev1.EndpointSubset{
		Addresses:         addrs("10.0.0.1", "10.0.0.2"),
		NotReadyAddresses: addrs("10.0.0.3"),
		Ports:             []corev1.EndpointPort{port("", 80)},
	})
	got := Desired(ep, 2)
	if len(got) != 1 {
		t.Fatalf("got %d slices", len(got))
	}
	if r, n := ready(got[0]); len(r) != 2 || len(n) != 0 {
		t.Errorf("ready %v notReady %v: ready addresses go first under the cap", r, n)
	}
	if got := Desired(endpoints(), MaxEndpointsPerSubset); len(got) != 0 {
		t.Errorf("empty Endpoints gave %d slices", len(got))
	}
}
