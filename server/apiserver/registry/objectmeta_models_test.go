package registry

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"regexp"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

var update = flag.Bool("update", false, "rewrite objectmeta_models.json from upstream's OpenAPI builder")

// The embedded metadata models are what upstream's builder gives a CRD's
// document for ObjectMeta and the definitions it refers to, so a
// dependency upgrade that changes them fails here (go test -args -update
// rewrites the file).
func TestObjectMetaModelsAreUpstreams(t *testing.T) {
	names := apiextensionsv1.CustomResourceDefinitionNames{Plural: "placeholders", Singular: "placeholder", Kind: "Placeholder", ListKind: "PlaceholderList"}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "placeholders.models.kelp.internal"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "models.kelp.internal", Names: names, Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true}}},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{AcceptedNames: names},
	}
	doc, err := builder.BuildOpenAPIV3(crd, "v1", builder.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := referredFrom(t, doc.Components.Schemas, strings.TrimPrefix(objectMetaRef, "#/components/schemas/"))
	js, err := json.MarshalIndent(want, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	js = append(js, '\n')
	if *update {
		if err := os.WriteFile("objectmeta_models.json", js, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Log("objectmeta_models.json rewritten; it is embedded at the next build")
		return
	}
	if !bytes.Equal(js, objectMetaModels) {
		t.Fatal("objectmeta_models.json is not what upstream's builder gives; rewrite it with go test . -run TestObjectMetaModelsAreUpstreams -args -update")
	}
	got, err := metaModels()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) || len(got) < 5 {
		t.Fatalf("the models are %d definitions, upstream's %d", len(got), len(want))
	}
}

// schemaRef matches a reference to another model in a model's JSON.
var schemaRef = regexp.MustCompile(`"\$ref":"#/components/schemas/([^"]+)"`)

// referredFrom is the models root refers to, itself included, and what
// they refer to in turn.
func referredFrom(t *testing.T, all map[string]*spec.Schema, root string) map[string]*spec.Schema {
	kept := map[string]*spec.Schema{}
	for next := []string{root}; len(next) > 0; {
		name := next[len(next)-1]
		next = next[:len(next)-1]
		if _, done := kept[name]; done {
			continue
		}
		s := all[name]
		if s == nil {
			t.Fatalf("model %s refers to a missing model", name)
		}
		kept[name] = s
		js, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range schemaRef.FindAllSubmatch(js, -1) {
			next = append(next, string(m[1]))
		}
	}
	return kept
}
