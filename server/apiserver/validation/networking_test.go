package validation

import (
	"testing"

	"k8s.io/utils/ptr"

	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestNetworkPolicy(t *testing.T) {
	np := defaulted(&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "db"}, Spec: networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
		Ingress: []networkingv1.NetworkPolicyIngressRule{{
			From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}},
			Ports: []networkingv1.NetworkPolicyPort{{Port: ptr.To(intstr.FromInt32(5432))}},
		}},
	}})
	expectErrors(t, Validate(np), nil)

	bad := np.DeepCopy()
	bad.Spec.Ingress[0].Ports[0].Port = ptr.To(intstr.FromInt32(70000))
	bad.Spec.Ingress[0].From = append(bad.Spec.Ingress[0].From, networkingv1.NetworkPolicyPeer{},
		networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/16", Except: []string{"192.168.0.0/24"}}})
	bad.Spec.PolicyTypes = []networkingv1.PolicyType{"Sideways"}
	expectErrors(t, Validate(bad), []want{
		{field.ErrorTypeInvalid, "spec.ingress[0].ports[0].port", ""},
		{field.ErrorTypeRequired, "spec.ingress[0].from[1]", "must specify a peer"},
		{field.ErrorTypeInvalid, "spec.ingress[0].from[2].ipBlock.except[0]", "must be a strict subset of `cidr`"},
		{field.ErrorTypeNotSupported, "spec.policyTypes[0]", ""},
	})
}

func TestIngress(t *testing.T) {
	prefix := networkingv1.PathTypePrefix
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: networkingv1.IngressSpec{
		Rules: []networkingv1.IngressRule{{Host: "lab.example.com", IngressRuleValue: networkingv1.IngressRuleValue{
			HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
				Path: "/", PathType: &prefix,
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
					Name: "container-lab", Port: networkingv1.ServiceBackendPort{Number: 80}}},
			}}},
		}}},
	}}
	expectErrors(t, Validate(ing), nil)

	bad := ing.DeepCopy()
	bad.Spec.Rules[0].Host = "10.0.0.1"
	bad.Spec.Rules[0].HTTP.Paths[0].PathType = nil
	bad.Spec.Rules = append(bad.Spec.Rules, networkingv1.IngressRule{IngressRuleValue: networkingv1.IngressRuleValue{
		HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
			Path: "relative", PathType: &prefix, Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "svc"}},
		}}}}})
	expectErrors(t, Validate(bad), []want{
		{field.ErrorTypeInvalid, "spec.rules[0].host", "must be a DNS name, not an IP address"},
		{field.ErrorTypeRequired, "spec.rules[0].http.paths[0].pathType", "pathType must be specified"},
		{field.ErrorTypeInvalid, "spec.rules[1].http.paths[0].path", "must be an absolute path"},
		{field.ErrorTypeRequired, "spec.rules[1].http.paths[0].backend", "port name or number is required"},
	})

	empty := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "e"}}
	expectErrors(t, Validate(empty), []want{{field.ErrorTypeInvalid, "spec", "either `defaultBackend` or `rules` must be specified"}})

	ic := defaulted(&networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "nginx"}, Spec: networkingv1.IngressClassSpec{Controller: "k8s.io/ingress-nginx"}})
	expectErrors(t, Validate(ic), nil)
	old := stored(ic.DeepCopy())
	moved := old.DeepCopy()
	moved.Spec.Controller = "example.com/other"
	expectErrors(t, ValidateUpdate(moved, old), []want{{field.ErrorTypeInvalid, "spec.controller", "field is immutable"}})
}

func TestPodDisruptionBudget(t *testing.T) {
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "lab"}, Spec: policyv1.PodDisruptionBudgetSpec{
		MinAvailable: ptr.To(intstr.FromInt32(2)),
		Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "container-lab"}},
	}}
	expectErrors(t, Validate(pdb), nil)
	both := pdb.DeepCopy()
	both.Spec.MaxUnavailable = ptr.To(intstr.FromString("200%"))
	expectErrors(t, Validate(both), []want{
		{field.ErrorTypeInvalid, "spec", "minAvailable and maxUnavailable cannot be both set"},
		{field.ErrorTypeInvalid, "spec.maxUnavailable", "must not be greater than 100%"},
	})
	old := stored(pdb.DeepCopy())
	status := old.DeepCopy()
	status.Status.DisruptionsAllowed = -1
	expectErrors(t, ValidateStatusUpdate(status, old), []want{{field.ErrorTypeInvalid, "status.disruptionsAllowed", ""}})
}

func TestIPAddress(t *testing.T) {
	ip := &networkingv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "10.43.0.1"},
		Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{Resource: "services", Namespace: "default", Name: "kubernetes"}}}
	expectErrors(t, Validate(ip), nil)
	v6 := ip.DeepCopy()
	v6.Name = "fe80::42:1dff:fe84:f9e2"
	v6.Spec.ParentRef = &networkingv1.ParentReference{Group: "mygroup", Resource: "myresources", Namespace: "foo", Name: "bar"}
	expectErrors(t, Validate(v6), nil)

	for name, detail := range map[string]string{
		"10.043.0.1":   "must not have leading 0s",
		"fe80::0:1":    `must be in canonical form ("fe80::1")`,
		"10.43.0.0/16": "must be a valid IP address",
		"kubernetes":   "must be a valid IP address",
	} {
		bad := ip.DeepCopy()
		bad.Name = name
		expectErrors(t, Validate(bad), []want{{field.ErrorTypeInvalid, "metadata.name", detail}})
	}
	noRef := ip.DeepCopy()
	noRef.Spec.ParentRef = nil
	expectErrors(t, Validate(noRef), []want{{field.ErrorTypeRequired, "spec.parentRef", ""}})
	badRef := ip.DeepCopy()
	badRef.Spec.ParentRef = &networkingv1.ParentReference{Group: "Not_A_Group", Namespace: "a/b", Name: ".."}
	expectErrors(t, Validate(badRef), []want{
		{field.ErrorTypeInvalid, "spec.parentRef.group", ""},
		{field.ErrorTypeRequired, "spec.parentRef.resource", ""},
		{field.ErrorTypeInvalid, "spec.parentRef.name", "may not be '..'"},
		{field.ErrorTypeInvalid, "spec.parentRef.namespace", "may not contain '/'"},
	})

	// Labels and annotations may change; the parentRef may not.
	upd := ip.DeepCopy()
	upd.ResourceVersion = "2"
	upd.Annotations = map[string]string{"updated": "true"}
	expectErrors(t, ValidateUpdate(upd, ip), nil)
	upd.Spec.ParentRef = &networkingv1.ParentReference{Resource: "services", Namespace: "default", Name: "other"}
	expectErrors(t, ValidateUpdate(upd, ip), []want{{field.ErrorTypeInvalid, "spec.parentRef", "field is immutable"}})
}

func TestServiceCIDR(t *testing.T) {
	sc := &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes"},
		Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.43.0.0/16"}}}
	expectErrors(t, Validate(sc), nil)
	dual := sc.DeepCopy()
	dual.Spec.CIDRs = append(dual.Spec.CIDRs, "fd00:43::/112")
	expectErrors(t, Validate(dual), nil)

	for _, tc := range []struct {
		cidrs []string
		want  want
	}{
		{nil, want{field.ErrorTypeRequired, "spec.cidrs", "at least one CIDR required"}},
		{[]string{"10.0.0.0/16", "fd00::/64", "10.1.0.0/16"}, want{field.ErrorTypeInvalid, "spec.cidrs", "may only hold up to 2 values"}},
		{[]string{"10.0.0.0/16", "10.1.0.0/16"}, want{field.ErrorTypeInvalid, "spec.cidrs", "may specify no more than one IP for each IP family"}},
		{[]string{"10.0.0.1/16"}, want{field.ErrorTypeInvalid, "spec.cidrs[0]", "must not have bits set beyond the prefix length"}},
		{[]string{"fd00:0::/64"}, want{field.ErrorTypeInvalid, "spec.cidrs[0]", `must be in canonical form ("fd00::/64")`}},
		{[]string{"10.0.0.0"}, want{field.ErrorTypeInvalid, "spec.cidrs[0]", ""}},
	} {
		bad := sc.DeepCopy()
		bad.Spec.CIDRs = tc.cidrs
		expectErrors(t, Validate(bad), []want{tc.want})
	}
	bad := sc.DeepCopy()
	bad.Name = "Not_A_Name"
	expectErrors(t, Validate(bad), []want{{field.ErrorTypeInvalid, "metadata.name", ""}})

	// The CIDRs are immutable, but a single-stack range may turn dual-stack.
	upd := dual.DeepCopy()
	upd.ResourceVersion = "2"
	expectErrors(t, ValidateUpdate(upd, sc), nil)
	upd.Spec.CIDRs = []string{"10.44.0.0/16"}
	expectErrors(t, ValidateUpdate(upd, sc), []want{{field.ErrorTypeInvalid, "spec.cidrs[0]", "field is immutable"}})
	upd.Spec.CIDRs = []string{"10.44.0.0/16", "fd00:43::/112"}
	expectErrors(t, ValidateUpdate(upd, sc), []want{{field.ErrorTypeInvalid, "spec.cidrs[0]", "field is immutable"}})
	upd.Spec.CIDRs = []string{"10.43.0.0/16", "10.44.0.0/16"}
	expectErrors(t, ValidateUpdate(upd, sc), []want{{field.ErrorTypeInvalid, "spec.cidrs", "may specify no more than one IP for each IP family"}})
	expectErrors(t, ValidateUpdate(sc, dual), []want{{field.ErrorTypeInvalid, "spec.cidrs", "field is immutable"}})
}
