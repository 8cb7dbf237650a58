package registry

import (
	"sync/atomic"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/utils/ptr"
)

// The write path is built on first use, kept while used, let go after
// the idle time and built again on the next use.
func TestCustomWriterBuildsOnUseAndLetsGoWhenIdle(t *testing.T) {
	var builds atomic.Int32
	w := newCustomWriter(func() *customWrite {
		builds.Add(1)
		return &customWrite{typeConverter: managedfields.NewDeducedTypeConverter()}
	})
	w.idle = 200 * time.Millisecond
	if w.built() || builds.Load() != 0 {
		t.Fatal("built before any write")
	}
	first := w.get()
	// Used every 50 ms for twice the idle time: kept.
	for range 8 {
		time.Sleep(50 * time.Millisecond)
		if w.get() != first {
			t.Fatal("rebuilt while in use")
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for w.built() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if w.built() {
		t.Fatal("still held after the idle time")
	}
	if w.get() == first || builds.Load() != 2 {
		t.Errorf("after being let go: %d builds, want 2", builds.Load())
	}
}

// The field managers hold one type converter per served kind, whichever
// build of the write path answers it.
func TestWriterTypeConverterIsStable(t *testing.T) {
	w := newCustomWriter(func() *customWrite { return &customWrite{typeConverter: managedfields.NewDeducedTypeConverter()} })
	var a, b managedfields.TypeConverter = writerTypeConverter{w}, writerTypeConverter{w}
	if a != b {
		t.Error("two converters of one writer differ")
	}
}

// benchWriteCRD is a CRD as operators ship them: a typed spec with a
// list-map, bounds, a default, two CEL rules, status and scale.
func benchWriteCRD() *apiextensionsv1.CustomResourceDefinition {
	names := apiextensionsv1.CustomResourceDefinitionNames{Plural: "gadgets", Singular: "gadget", Kind: "Gadget", ListKind: "GadgetList"}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "gadgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com", Names: names, Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{},
					Scale: &apiextensionsv1.CustomResourceSubresourceScale{SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas"}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object",
							Properties: map[string]apiextensionsv1.JSONSchemaProps{
								"replicas": {Type: "integer", Minimum: ptr.To[float64](0), Default: &apiextensionsv1.JSON{Raw: []byte("1")}},
								"labels":   {Type: "object", AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Schema: &apiextensionsv1.JSONSchemaProps{Type: "string"}}},
								"ports": {Type: "array", XListType: ptr.To("map"), XListMapKeys: []string{"port"},
									Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{
										Type: "object", Required: []string{"port"},
										Properties: map[string]apiextensionsv1.JSONSchemaProps{"name": {Type: "string"}, "port": {Type: "integer"}},
									}}},
								"template": {Type: "object", XEmbeddedResource: true, XPreserveUnknownFields: ptr.To(true)},
							},
							XValidations: apiextensionsv1.ValidationRules{
								{Rule: "self.replicas <= 50", Message: "at most 50"},
								{Rule: "!has(self.ports) || self.ports.all(p, p.port != 22)", Message: "port 22 is reserved"},
							},
						},
						"status": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"replicas": {Type: "integer"}}},
					},
				}},
			}},
		},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{AcceptedNames: names},
	}
}

// BenchmarkCustomWriteBuild is what the first write of a kind, or the
// first after its write path was let go, pays.
func BenchmarkCustomWriteBuild(b *testing.B) {
	rs, err := CustomResources(benchWriteCRD())
	if err != nil {
		b.Fatal(err)
	}
	obj := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "example.com/v1", "kind": "Gadget",
		"metadata": map[string]interface{}{"name": "g", "namespace": "ns"}, "spec": map[string]interface{}{"replicas": int64(2)}}}
	b.ReportAllocs()
	for b.Loop() {
		w := rs[0].Custom.TypeConverter.(writerTypeConverter).w
		w.mu.Lock()
		w.letGoLocked()
		w.mu.Unlock()
		if errs := rs[0].Validate(obj); len(errs) != 0 {
			b.Fatal(errs)
		}
		if _, err := rs[0].Custom.TypeConverter.ObjectToTyped(obj); err != nil {
			b.Fatal(err)
		}
	}
}

// A value held with hold serves until it goes unused; then the next use
// builds one.
func TestWhileUsedHoldServesUntilIdle(t *testing.T) {
	var builds, drops atomic.Int32
	w := &whileUsed[int]{idle: 100 * time.Millisecond, build: func() int { builds.Add(1); return 2 },
		dropped: func() { drops.Add(1) }}
	w.hold(1)
	if w.get() != 1 || builds.Load() != 0 {
		t.Fatal("the held value was not served")
	}
	deadline := time.Now().Add(5 * time.Second)
	for w.built() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if w.built() || drops.Load() != 1 {
		t.Fatalf("held after the idle time (%d drops)", drops.Load())
	}
	if w.get() != 2 || builds.Load() != 1 {
		t.Errorf("after being let go: %d builds", builds.Load())
	}
}

// A custom kind's structural schema, let go while unused, is built again
// from the CRD's bytes: decoding still prunes and defaults.
func TestCustomSchemaBuiltAgainAfterIdle(t *testing.T) {
	defer func(d time.Duration) { customWriteIdle = d }(customWriteIdle)
	customWriteIdle = 50 * time.Millisecond
	rs, err := CustomResources(benchWriteCRD())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if i == 1 {
			time.Sleep(300 * time.Millisecond) // let go
		}
		obj := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "example.com/v1", "kind": "Gadget",
			"metadata": map[string]interface{}{"name": "g", "namespace": "ns"},
			"spec":     map[string]interface{}{"bogus": true}}}
		rs[0].Default(obj)
		if n, _, _ := unstructured.NestedInt64(obj.Object, "spec", "replicas"); n != 1 {
			t.Errorf("decode %d: replicas %d, want the default 1", i, n)
		}
		if _, found, _ := unstructured.NestedFieldNoCopy(obj.Object, "spec", "bogus"); found {
			t.Errorf("decode %d: an unknown field was not pruned", i)
		}
	}
}
