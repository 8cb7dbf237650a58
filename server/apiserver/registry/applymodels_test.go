package registry

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/spec3"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// upstreamApplySchema is the apply models as upstream's CRD handler
// builds them, from each version's whole OpenAPI document: what
// applySchema must agree with.
func upstreamApplySchema(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) managedfields.TypeConverter {
	t.Helper()
	var specs []*spec3.OpenAPI
	for _, v := range crd.Spec.Versions {
		s, err := builder.BuildOpenAPIV3(crd, v.Name, builder.Options{})
		if err != nil {
			t.Fatal(err)
		}
		specs = append(specs, s)
	}
	merged, err := builder.MergeSpecsV3(specs...)
	if err != nil {
		t.Fatal(err)
	}
	tc, err := managedfields.NewTypeConverter(merged.Components.Schemas, crd.Spec.PreserveUnknownFields)
	if err != nil {
		t.Fatal(err)
	}
	return tc
}

func gadget(apiVersion string, spec map[string]interface{}) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": apiVersion, "kind": "Gadget",
		"metadata": map[string]interface{}{"name": "g", "namespace": "ns", "labels": map[string]interface{}{"a": "b"},
			"ownerReferences": []interface{}{map[string]interface{}{"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "u1"}}},
		"spec": spec}}
}

// The models agree with upstream's: the same fields, the same merges (a
// list-map merges by key, an embedded resource's metadata is ObjectMeta,
// a map of strings is granular), the same comparisons, for each version.
func TestApplyModelsAgreeWithUpstream(t *testing.T) {
	two := benchWriteCRD()
	v2 := *two.Spec.Versions[0].DeepCopy()
	v2.Name, v2.Storage = "v2", false
	two.Spec.Versions = append(two.Spec.Versions, v2)
	noSchema := benchWriteCRD()
	noSchema.Spec.Versions[0].Schema = nil
	noSchema.Spec.PreserveUnknownFields = true
	for name, crd := range map[string]*apiextensionsv1.CustomResourceDefinition{"one version": benchWriteCRD(), "two versions": two, "no schema": noSchema} {
		t.Run(name, func(t *testing.T) {
			ours, theirs := applySchema(crd), upstreamApplySchema(t, crd)
			if ours == nil {
				t.Fatal("no apply models")
			}
			for _, v := range crd.Spec.Versions {
				apiVersion := crd.Spec.Group + "/" + v.Name
				a := gadget(apiVersion, map[string]interface{}{"replicas": int64(2), "labels": map[string]interface{}{"x": "1"},
					"ports":    []interface{}{map[string]interface{}{"port": int64(80), "name": "http"}},
					"template": map[string]interface{}{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]interface{}{"name": "p", "labels": map[string]interface{}{"k": "v"}}, "spec": map[string]interface{}{"x": "y"}}})
				b := gadget(apiVersion, map[string]interface{}{"labels": map[string]interface{}{"y": "2"},
					"ports":    []interface{}{map[string]interface{}{"port": int64(443), "name": "https"}},
					"template": map[string]interface{}{"metadata": map[string]interface{}{"annotations": map[string]interface{}{"n": "m"}}}})
				typed := func(tc managedfields.TypeConverter, u *unstructured.Unstructured) *typed.TypedValue {
					tv, err := tc.ObjectToTyped(u)
					if err != nil {
						t.Fatalf("%s: %v", v.Name, err)
					}
					return tv
				}
				otvA, otvB := typed(ours, a), typed(ours, b)
				ttvA, ttvB := typed(theirs, a), typed(theirs, b)
				ofs, _ := otvA.ToFieldSet()
				tfs, _ := ttvA.ToFieldSet()
				if !ofs.Equals(tfs) {
					t.Errorf("%s: field sets differ:\nours   %s\ntheirs %s", v.Name, ofs, tfs)
				}
				om, err := otvA.Merge(otvB)
				if err != nil {
					t.Fatalf("%s: merging with ours: %v", v.Name, err)
				}
				tm, err := ttvA.Merge(ttvB)
				if err != nil {
					t.Fatalf("%s: merging with theirs: %v", v.Name, err)
				}
				if !value.Equals(om.AsValue(), tm.AsValue()) {
					t.Errorf("%s: merges differ:\nours   %v\ntheirs %v", v.Name, value.ToString(om.AsValue()), value.ToString(tm.AsValue()))
				}
				oc, err := otvA.Compare(otvB)
				if err != nil {
					t.Fatal(err)
				}
				tcmp, err := ttvA.Compare(ttvB)
				if err != nil {
					t.Fatal(err)
				}
				if oc.String() != tcmp.String() {
					t.Errorf("%s: comparisons differ:\nours   %s\ntheirs %s", v.Name, oc, tcmp)
				}
			}
		})
	}
}
