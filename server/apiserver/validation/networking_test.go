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
