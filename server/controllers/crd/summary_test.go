package crd

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The controllers' CRD copies keep what they read (names, versions,
// conditions, finalizers) and drop the schemas and managedFields, most of
// a CRD's size.
func TestSummaryKeepsWhatTheControllersRead(t *testing.T) {
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "things.example.com", Finalizers: []string{cleanupFinalizer},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "example.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "things", Kind: "Thing"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}}}}},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{AcceptedNames: apiextensionsv1.CustomResourceDefinitionNames{Plural: "things"}},
	}
	out, err := summary(crd)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*apiextensionsv1.CustomResourceDefinition)
	if got.ManagedFields != nil || got.Spec.Versions[0].Schema != nil {
		t.Errorf("summary kept managedFields %v or schema %v", got.ManagedFields, got.Spec.Versions[0].Schema)
	}
	if got.Spec.Group != "example.com" || got.Spec.Versions[0].Name != "v1" || !got.Spec.Versions[0].Storage ||
		got.Status.AcceptedNames.Plural != "things" || len(got.Finalizers) != 1 {
		t.Errorf("summary lost what the controllers read: %+v", got)
	}
	if tomb, err := summary("tombstone"); err != nil || tomb != "tombstone" {
		t.Errorf("a non-CRD should pass through: %v %v", tomb, err)
	}
}
