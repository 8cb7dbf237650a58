package validation

import (
	"testing"

	"k8s.io/utils/ptr"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestServiceCreate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(s *corev1.Service)
		wants  []want
	}{
		{"seed service is valid", func(s *corev1.Service) {}, nil},
		{"name must be a DNS-1035 label", func(s *corev1.Service) { s.Name = "1lab" },
			[]want{{field.ErrorTypeInvalid, "metadata.name", "DNS-1035 label"}}},
		{"ports required", func(s *corev1.Service) { s.Spec.Ports = nil },
			[]want{{field.ErrorTypeRequired, "spec.ports", ""}}},
		{"headless needs no ports", func(s *corev1.Service) {
			s.Spec.Ports, s.Spec.ClusterIP, s.Spec.ClusterIPs = nil, "None", []string{"None"}
		}, nil},
		{"port range", func(s *corev1.Service) { s.Spec.Ports[0].Port = 0 },
			[]want{{field.ErrorTypeInvalid, "spec.ports[0].port", "between 1 and 65535"}}},
		{"protocol", func(s *corev1.Service) { s.Spec.Ports[0].Protocol = "ICMP" },
			[]want{{field.ErrorTypeNotSupported, "spec.ports[0].protocol", ""}}},
		{"names required with several ports", func(s *corev1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "b", Port: 81, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(81)})
		}, []want{{field.ErrorTypeRequired, "spec.ports[0].name", ""}}},
		{"unique port names", func(s *corev1.Service) {
			s.Spec.Ports[0].Name = "http"
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "http", Port: 81, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(81)})
		}, []want{{field.ErrorTypeDuplicate, "spec.ports[1].name", ""}}},
		{"duplicate port/protocol", func(s *corev1.Service) {
			s.Spec.Ports[0].Name = "a"
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "b", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(81)})
		}, []want{{field.ErrorTypeDuplicate, "spec.ports[1]", ""}}},
		{"targetPort name", func(s *corev1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromString("not_valid") },
			[]want{{field.ErrorTypeInvalid, "spec.ports[0].targetPort", ""}}},
		{"type", func(s *corev1.Service) { s.Spec.Type = "Magic" },
			[]want{{field.ErrorTypeNotSupported, "spec.type", ""}}},
		{"nodePort on ClusterIP", func(s *corev1.Service) { s.Spec.Ports[0].NodePort = 30080 },
			[]want{{field.ErrorTypeForbidden, "spec.ports[0].nodePort", "may not be used when `type` is 'ClusterIP'"}}},
		{"clusterIP must be an IP", func(s *corev1.Service) { s.Spec.ClusterIP, s.Spec.ClusterIPs = "10.0.0.300", []string{"10.0.0.300"} },
			[]want{{field.ErrorTypeInvalid, "spec.clusterIPs[0]", ""}}},
		{"clusterIP and clusterIPs agree", func(s *corev1.Service) { s.Spec.ClusterIP, s.Spec.ClusterIPs = "10.0.0.10", []string{"10.0.0.11"} },
			[]want{{field.ErrorTypeInvalid, "spec.clusterIPs", "first value must match `clusterIP`"}}},
		{"sessionAffinity", func(s *corev1.Service) { s.Spec.SessionAffinity = "Cookie" },
			[]want{{field.ErrorTypeNotSupported, "spec.sessionAffinity", ""}}},
		{"externalTrafficPolicy only for external services", func(s *corev1.Service) { s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal },
			[]want{{field.ErrorTypeInvalid, "spec.externalTrafficPolicy", "externally-accessible"}}},
		{"selector labels", func(s *corev1.Service) { s.Spec.Selector["app"] = "not valid" },
			[]want{{field.ErrorTypeInvalid, "spec.selector", ""}}},
		{"externalIPs", func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"127.0.0.1"} },
			[]want{{field.ErrorTypeInvalid, "spec.externalIPs[0]", "loopback"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := defaulted(seedService())
			tc.mutate(s)
			expectErrors(t, Validate(s), tc.wants)
		})
	}

	t.Run("valid NodePort and LoadBalancer", func(t *testing.T) {
		for _, typ := range []corev1.ServiceType{corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer} {
			s := seedService()
			s.Spec.Type = typ
			s.Spec.Ports[0].NodePort = 30080
			expectErrors(t, Validate(defaulted(s)), nil)
		}
	})
	t.Run("NodePort cannot be headless", func(t *testing.T) {
		s := seedService()
		s.Spec.Type, s.Spec.ClusterIP = corev1.ServiceTypeNodePort, "None"
		expectErrors(t, Validate(defaulted(s)), []want{{field.ErrorTypeInvalid, "spec.clusterIPs[0]", "may not be set to 'None' for NodePort services"}})
	})
	t.Run("ExternalName", func(t *testing.T) {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "ext"}, Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeExternalName, ExternalName: "db.example.com."}}
		expectErrors(t, Validate(defaulted(s)), nil)
		s.Spec.ExternalName = ""
		expectErrors(t, Validate(s), []want{{field.ErrorTypeRequired, "spec.externalName", ""}})
	})
}

func TestServiceUpdate(t *testing.T) {
	old := stored(defaulted(seedService()))
	old.Spec.ClusterIP, old.Spec.ClusterIPs = "10.96.0.20", []string{"10.96.0.20"}

	ok := old.DeepCopy()
	ok.Spec.Ports[0].TargetPort = intstr.FromInt32(9000)
	expectErrors(t, ValidateUpdate(ok, old), nil)

	moved := old.DeepCopy()
	moved.Spec.ClusterIP, moved.Spec.ClusterIPs = "10.96.0.21", []string{"10.96.0.21"}
	expectErrors(t, ValidateUpdate(moved, old), []want{{field.ErrorTypeInvalid, "spec.clusterIP", "field is immutable"}})

	// Becoming ExternalName drops the cluster IP legitimately.
	ext := old.DeepCopy()
	ext.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com", SessionAffinity: corev1.ServiceAffinityNone}
	expectErrors(t, ValidateUpdate(ext, old), nil)

	lb := old.DeepCopy()
	lb.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "not-an-ip"}}
	expectErrors(t, ValidateStatusUpdate(lb, old), []want{{field.ErrorTypeInvalid, "status.loadBalancer.ingress[0].ip", ""}})
}

func TestEndpoints(t *testing.T) {
	ep := defaulted(&corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: "container-lab"},
		Subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{{IP: "10.244.0.5"}},
			Ports:     []corev1.EndpointPort{{Port: 8000}},
		}},
	})
	expectErrors(t, Validate(ep), nil)

	bad := ep.DeepCopy()
	bad.Subsets[0].Addresses[0].IP = "0.0.0.0"
	bad.Subsets = append(bad.Subsets, corev1.EndpointSubset{})
	expectErrors(t, Validate(bad), []want{
		{field.ErrorTypeInvalid, "subsets[0].addresses[0].ip", "unspecified"},
		{field.ErrorTypeRequired, "subsets[1]", "must specify `addresses` or `notReadyAddresses`"},
	})
}

func TestEndpointSlice(t *testing.T) {
	es := defaulted(&discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "container-lab-abcde"},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.244.0.5"}}},
		Ports:       []discoveryv1.EndpointPort{{Port: ptr.To(int32(8000))}},
	})
	expectErrors(t, Validate(es), nil)

	bad := es.DeepCopy()
	bad.AddressType = "IPv5"
	bad.Endpoints = append(bad.Endpoints, discoveryv1.Endpoint{})
	expectErrors(t, Validate(bad), []want{
		{field.ErrorTypeNotSupported, "addressType", ""},
		{field.ErrorTypeRequired, "endpoints[1].addresses", ""},
	})

	v6 := es.DeepCopy()
	v6.Endpoints[0].Addresses = []string{"fd00::1"}
	expectErrors(t, Validate(v6), []want{{field.ErrorTypeInvalid, "endpoints[0].addresses[0]", "must be an IPv4 address"}})

	old := stored(es.DeepCopy())
	changed := old.DeepCopy()
	changed.AddressType = discoveryv1.AddressTypeIPv6
	changed.Endpoints[0].Addresses = []string{"fd00::1"}
	expectErrors(t, ValidateUpdate(changed, old), []want{{field.ErrorTypeInvalid, "addressType", "field is immutable"}})
}
