package defaults

import (
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// upstream's v1 defaults: the policy fails closed; its matchConstraints
// (and a binding's matchResources) match equivalent versions, every
// namespace and object, and each rule any scope.
func TestAdmissionPolicyDefaults(t *testing.T) {
	rules := func() *admissionregistrationv1.MatchResources {
		return &admissionregistrationv1.MatchResources{
			ResourceRules:        []admissionregistrationv1.NamedRuleWithOperations{{}},
			ExcludeResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{}},
		}
	}
	check := func(name string, fp *admissionregistrationv1.FailurePolicyType, m *admissionregistrationv1.MatchResources, wantFP bool) {
		t.Helper()
		if wantFP && (fp == nil || *fp != admissionregistrationv1.Fail) {
			t.Errorf("%s: failurePolicy %v", name, fp)
		}
		if m.MatchPolicy == nil || *m.MatchPolicy != admissionregistrationv1.Equivalent || m.NamespaceSelector == nil || m.ObjectSelector == nil ||
			m.ResourceRules[0].Scope == nil || *m.ResourceRules[0].Scope != admissionregistrationv1.AllScopes || m.ExcludeResourceRules[0].Scope == nil {
			t.Errorf("%s: match resources not defaulted: %+v", name, m)
		}
	}
	vap := &admissionregistrationv1.ValidatingAdmissionPolicy{Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{MatchConstraints: rules()}}
	ValidatingAdmissionPolicy(vap)
	check("ValidatingAdmissionPolicy", vap.Spec.FailurePolicy, vap.Spec.MatchConstraints, true)
	mp := &admissionregistrationv1.MutatingAdmissionPolicy{Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{MatchConstraints: rules()}}
	MutatingAdmissionPolicy(mp)
	check("MutatingAdmissionPolicy", mp.Spec.FailurePolicy, mp.Spec.MatchConstraints, true)
	vb := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{MatchResources: rules()}}
	ValidatingAdmissionPolicyBinding(vb)
	check("ValidatingAdmissionPolicyBinding", nil, vb.Spec.MatchResources, false)
	mb := &admissionregistrationv1.MutatingAdmissionPolicyBinding{Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{MatchResources: rules()}}
	MutatingAdmissionPolicyBinding(mb)
	check("MutatingAdmissionPolicyBinding", nil, mb.Spec.MatchResources, false)
	// a binding without matchResources keeps none (it matches what its
	// policy does)
	empty := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	ValidatingAdmissionPolicyBinding(empty)
	if empty.Spec.MatchResources != nil {
		t.Errorf("matchResources invented: %+v", empty.Spec.MatchResources)
	}
}
