package registry

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestServicePrepareForUpdateCarriesAllocatedValues(t *testing.T) {
	s := served(t, "", "services").Strategy
	single := corev1.IPFamilyPolicySingleStack
	stored := func(typ corev1.ServiceType) *corev1.Service {
		return &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
			Spec: corev1.ServiceSpec{
				Type: typ, ClusterIP: "10.43.0.20", ClusterIPs: []string{"10.43.0.20"},
				IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}, IPFamilyPolicy: &single,
				Ports: []corev1.ServicePort{{Name: "http", Port: 80, NodePort: 30080}, {Name: "https", Port: 443, NodePort: 30443}},
			},
		}
	}
	for _, tc := range []struct {
		name string
		old  *corev1.Service
		obj  corev1.ServiceSpec
		want corev1.ServiceSpec
	}{
		{
			name: "omitted values are carried over",
			old:  stored(corev1.ServiceTypeNodePort),
			obj:  corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{Name: "http", Port: 80}, {Name: "https", Port: 443}}},
			want: stored(corev1.ServiceTypeNodePort).Spec,
		},
		{
			name: "ports matched by name, not position",
			old:  stored(corev1.ServiceTypeNodePort),
			obj:  corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{Name: "https", Port: 8443}, {Name: "metrics", Port: 9090}}},
			want: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: "10.43.0.20", ClusterIPs: []string{"10.43.0.20"},
				IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}, IPFamilyPolicy: &single,
				Ports: []corev1.ServicePort{{Name: "https", Port: 8443, NodePort: 30443}, {Name: "metrics", Port: 9090}}},
		},
		{
			name: "values the client sets are kept",
			old:  stored(corev1.ServiceTypeNodePort),
			obj: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: "10.43.0.21", ClusterIPs: []string{"10.43.0.21"},
				Ports: []corev1.ServicePort{{Name: "http", Port: 80, NodePort: 30081}, {Name: "https", Port: 443, NodePort: 30080}}},
			want: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: "10.43.0.21", ClusterIPs: []string{"10.43.0.21"},
				IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}, IPFamilyPolicy: &single,
				Ports: []corev1.ServicePort{{Name: "http", Port: 80, NodePort: 30081}, {Name: "https", Port: 443, NodePort: 30080}}},
		},
		{
			name: "a node port the new spec uses elsewhere is not handed out twice",
			old:  stored(corev1.ServiceTypeNodePort),
			obj: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{
				{Name: "http", Port: 80}, {Name: "https", Port: 443, NodePort: 30080}}},
			want: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: "10.43.0.20", ClusterIPs: []string{"10.43.0.20"},
				IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}, IPFamilyPolicy: &single,
				Ports: []corev1.ServicePort{{Name: "http", Port: 80}, {Name: "https", Port: 443, NodePort: 30080}}},
		},
		{
			name: "NodePort to ClusterIP drops the node ports",
			old:  stored(corev1.ServiceTypeNodePort),
			obj:  corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
			want: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.43.0.20", ClusterIPs: []string{"10.43.0.20"},
				IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}, IPFamilyPolicy: &single,
				Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
		},
		{
			name: "to ExternalName carries no cluster IP",
			old:  stored(corev1.ServiceTypeClusterIP),
			obj:  corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com"},
			want: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com"},
		},
		{
			name: "headless stays headless",
			old: &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: corev1.ClusterIPNone,
				ClusterIPs: []string{corev1.ClusterIPNone}}},
			obj:  corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: corev1.ClusterIPNone},
			want: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: corev1.ClusterIPNone},
		},
		{
			name: "health check node port of a Local LoadBalancer",
			old: func() *corev1.Service {
				s := stored(corev1.ServiceTypeLoadBalancer)
				s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
				s.Spec.HealthCheckNodePort = 31000
				return s
			}(),
			obj: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
				Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
			want: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
				ClusterIP: "10.43.0.20", ClusterIPs: []string{"10.43.0.20"}, IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}, IPFamilyPolicy: &single,
				Ports: []corev1.ServicePort{{Name: "http", Port: 80, NodePort: 30080}}, HealthCheckNodePort: 31000},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			oldCopy := tc.old.DeepCopy()
			obj := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}, Spec: *tc.obj.DeepCopy()}
			s.PrepareForUpdate(obj, tc.old)
			if !equality.Semantic.DeepEqual(obj.Spec, tc.want) {
				t.Errorf("spec\n got %+v\nwant %+v", obj.Spec, tc.want)
			}
			if !equality.Semantic.DeepEqual(tc.old, oldCopy) {
				t.Error("PrepareForUpdate modified the stored object")
			}
			// The carried-over slices are the new object's own.
			if len(obj.Spec.ClusterIPs) > 0 && len(tc.old.Spec.ClusterIPs) > 0 && &obj.Spec.ClusterIPs[0] == &tc.old.Spec.ClusterIPs[0] {
				t.Error("clusterIPs shares its backing array with the stored object")
			}
		})
	}
}

func TestServiceAllocations(t *testing.T) {
	svc := func(ns, name string, spec corev1.ServiceSpec) runtime.Object {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
	}
	got := ServiceAllocations([]runtime.Object{
		svc("default", "kubernetes", corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.43.0.1", Ports: []corev1.ServicePort{{Port: 443}}}),
		svc("web", "front", corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIP: "10.43.7.7",
			Ports:               []corev1.ServicePort{{Name: "http", Port: 80, NodePort: 30080}, {Name: "https", Port: 443, NodePort: 30443}},
			HealthCheckNodePort: 31000}),
		svc("web", "headless", corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Port: 80}}}),
		svc("web", "alias", corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com"}),
		// Same name in another namespace is another owner.
		svc("other", "front", corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: "10.43.7.8", Ports: []corev1.ServicePort{{Port: 80, NodePort: 30081}}}),
	})
	want := map[string][]string{
		"default/kubernetes": {"10.43.0.1"},
		"web/front":          {"10.43.7.7", "30080", "30443", "31000"},
		"other/front":        {"10.43.7.8", "30081"},
	}
	if len(got) != len(want) {
		t.Errorf("owners = %v, want %v", got, want)
	}
	for owner, vals := range want {
		if !slices.Equal(got[owner], vals) {
			t.Errorf("%s holds %v, want %v", owner, got[owner], vals)
		}
	}
	if len(ServiceAllocations(nil)) != 0 {
		t.Error("no services, yet allocations")
	}
}
