package printers

import (
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestAdmissionPolicyCells(t *testing.T) {
	vap := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: objMeta("p"),
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{Validations: make([]admissionregistrationv1.Validation, 2)}}
	assertCells(t, cellsOf(t, vap), []interface{}{"p", int64(2), "<unset>", "5m"})
	vap.Spec.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}
	assertCells(t, cellsOf(t, vap), []interface{}{"p", int64(2), "v1/ConfigMap", "5m"})

	mp := &admissionregistrationv1.MutatingAdmissionPolicy{ObjectMeta: objMeta("m"),
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{Mutations: make([]admissionregistrationv1.Mutation, 1)}}
	assertCells(t, cellsOf(t, mp), []interface{}{"m", int64(1), "<unset>", "5m"})

	for _, tc := range []struct {
		ref  *admissionregistrationv1.ParamRef
		want string
	}{
		{nil, "<unset>"},
		{&admissionregistrationv1.ParamRef{Name: "limits", Namespace: "ns"}, "ns/limits"},
		{&admissionregistrationv1.ParamRef{Name: "limits"}, "*/limits"},
		{&admissionregistrationv1.ParamRef{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}}, (&metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}).String()},
	} {
		vb := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: objMeta("b"),
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "p", ParamRef: tc.ref}}
		assertCells(t, cellsOf(t, vb), []interface{}{"b", "p", tc.want, "5m"})
		mb := &admissionregistrationv1.MutatingAdmissionPolicyBinding{ObjectMeta: objMeta("b"),
			Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: "m", ParamRef: tc.ref}}
		assertCells(t, cellsOf(t, mb), []interface{}{"b", "m", tc.want, "5m"})
	}
}
