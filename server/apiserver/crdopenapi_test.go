package apiserver

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kelp-project/kelp/server/apiserver/openapi"
	"github.com/kelp-project/kelp/server/apiserver/registry"
)

func openAPICRD(plural, kind, rv string) *apiextensionsv1.CustomResourceDefinition {
	names := apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Singular: strings.ToLower(kind), Kind: kind, ListKind: kind + "List"}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + ".example.com", UID: types.UID("uid-" + plural), ResourceVersion: rv},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com", Names: names, Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", Description: kind + "'s spec", Properties: map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: "integer"}}},
					}}}}},
		},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{AcceptedNames: names},
	}
}

// builtinIndex stands for openapi.Handler: a fixed /openapi/v3 index, and
// the real /openapi/v2 document of the built-in kinds.
var builtinIndex = testBuiltin{index: []byte(`{"paths":{"api/v1":{"serverRelativeURL":"/openapi/v3/api/v1?hash=ABC"}}}`)}

// testBuiltin is the built-in documents with index as the /openapi/v3
// index, or the real one if index is nil.
type testBuiltin struct{ index []byte }

func (b testBuiltin) Index(ctx context.Context) ([]byte, error) {
	if b.index != nil {
		return b.index, nil
	}
	return builtinDocs().Index(ctx)
}

// builtinDocs is the openapi.Handler of every built-in kind, made once.
var builtinDocs = sync.OnceValue(func() *openapi.Handler {
	var specs []openapi.Resource
	for _, r := range registry.All(registry.Options{}) {
		specs = append(specs, openapiResource(r))
	}
	return openapi.New(specs)
})

func (testBuiltin) V2(ctx context.Context) (*openapi.V2Document, error) { return builtinDocs().V2(ctx) }

func getOpenAPI(t *testing.T, o *crdOpenAPI, path string) (*httptest.ResponseRecorder, bool) {
	t.Helper()
	rec := httptest.NewRecorder()
	ok := o.serve(rec, httptest.NewRequest(http.MethodGet, path, nil), builtinIndex)
	return rec, ok
}

func indexURLs(t *testing.T, o *crdOpenAPI) map[string]string {
	t.Helper()
	rec, ok := getOpenAPI(t, o, "/openapi/v3")
	if !ok || rec.Code != http.StatusOK {
		t.Fatalf("/openapi/v3: served %v, %d %s", ok, rec.Code, rec.Body)
	}
	var index struct {
		Paths map[string]map[string]string `json:"paths"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &index); err != nil {
		t.Fatal(err)
	}
	urls := map[string]string{}
	for k, v := range index.Paths {
		urls[k] = v["serverRelativeURL"]
	}
	return urls
}

// The index lists a CRD group-version with a hash before any document is
// built; the document, built on request, merges its CRDs; a changed CRD
// changes the hash (the old one redirects to the new); with no CRD left
// the group-version is gone, from the index and as a document.
func TestCRDOpenAPIBuiltOnRequest(t *testing.T) {
	o := newCRDOpenAPI()
	if _, ok := getOpenAPI(t, o, "/openapi/v3"); ok {
		t.Fatal("with no CRDs the built-in index answers alone")
	}
	crdChangedTo(t, o, "widgets.example.com", openAPICRD("widgets", "Widget", "10"))
	crdChangedTo(t, o, "gadgets.example.com", openAPICRD("gadgets", "Gadget", "11"))
	urls := indexURLs(t, o)
	first := urls["apis/example.com/v1"]
	if urls["api/v1"] == "" || !strings.HasPrefix(first, "/openapi/v3/apis/example.com/v1?hash=") {
		t.Fatalf("index %v", urls)
	}
	if len(o.gvs["apis/example.com/v1"].data) != 0 {
		t.Fatal("the index built a document")
	}
	rec, ok := getOpenAPI(t, o, first)
	if !ok || rec.Code != http.StatusOK {
		t.Fatalf("document: %v %d %s", ok, rec.Code, rec.Body)
	}
	for _, want := range []string{"/apis/example.com/v1/namespaces/{namespace}/widgets", "/apis/example.com/v1/namespaces/{namespace}/gadgets", "Widget's spec", "Gadget's spec"} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("the document lacks %q", want)
		}
	}
	if rec.Header().Get("Cache-Control") != "public, immutable" {
		t.Errorf("a hashed URL is immutable; Cache-Control %q", rec.Header().Get("Cache-Control"))
	}

	crdChangedTo(t, o, "gadgets.example.com", openAPICRD("gadgets", "Gadget", "12"))
	second := indexURLs(t, o)["apis/example.com/v1"]
	if second == first {
		t.Fatal("a changed CRD kept its group-version's hash")
	}
	if rec, _ := getOpenAPI(t, o, first); rec.Code != http.StatusMovedPermanently || rec.Header().Get("Location") != second {
		t.Errorf("the old hash: %d to %q, want 301 to %q", rec.Code, rec.Header().Get("Location"), second)
	}

	o.crdChanged("widgets.example.com", nil, nil)
	rec, _ = getOpenAPI(t, o, indexURLs(t, o)["apis/example.com/v1"])
	if strings.Contains(rec.Body.String(), "/widgets") || !strings.Contains(rec.Body.String(), "/gadgets") {
		t.Errorf("after widgets went, the document still has them or lost gadgets")
	}
	o.crdChanged("gadgets.example.com", nil, nil)
	if _, ok := getOpenAPI(t, o, "/openapi/v3"); ok {
		t.Error("with no CRD left the index is not the built-in one")
	}
	if _, ok := getOpenAPI(t, o, "/openapi/v3/apis/example.com/v1"); ok {
		t.Error("a group-version with no CRD left is served")
	}
}

// A client that cached the index while no CRD existed revalidates it with
// the built-in index's ETag and time; once a CRD is served the answer is
// the combined index, whole, not the built-in 304 (kubectl explain then
// found no group-version for a new CRD). HEAD gets the combined ETag.
func TestCRDOpenAPIIndexRevalidatedAfterFirstCRD(t *testing.T) {
	builtin := testBuiltin{}
	rec := httptest.NewRecorder()
	builtinDocs().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/openapi/v3", nil))
	etag, modified := rec.Header().Get("Etag"), rec.Header().Get("Last-Modified")
	if rec.Code != http.StatusOK || etag == "" || modified == "" {
		t.Fatalf("built-in index: %d, Etag %q, Last-Modified %q", rec.Code, etag, modified)
	}

	o := newCRDOpenAPI()
	crdChangedTo(t, o, "widgets.example.com", openAPICRD("widgets", "Widget", "10"))
	req := httptest.NewRequest(http.MethodGet, "/openapi/v3", nil)
	req.Header.Set("If-None-Match", etag)
	req.Header.Set("If-Modified-Since", modified)
	rec = httptest.NewRecorder()
	if !o.serve(rec, req, builtin) || rec.Code != http.StatusOK {
		t.Fatalf("revalidating the built-in index: %d, want the combined index", rec.Code)
	}
	if !strings.Contains(rec.Body.String(), `"apis/example.com/v1"`) || !strings.Contains(rec.Body.String(), `"api/v1"`) {
		t.Fatalf("combined index lacks the CRD's or the built-in group-versions: %.300s", rec.Body)
	}
	combined := rec.Header().Get("Etag")
	if combined == etag {
		t.Fatal("the combined index has the built-in one's ETag")
	}

	req = httptest.NewRequest(http.MethodGet, "/openapi/v3", nil)
	req.Header.Set("If-None-Match", combined)
	rec = httptest.NewRecorder()
	if !o.serve(rec, req, builtin) || rec.Code != http.StatusNotModified {
		t.Errorf("revalidating the combined index: %d, want 304", rec.Code)
	}
	rec = httptest.NewRecorder()
	if !o.serve(rec, httptest.NewRequest(http.MethodHead, "/openapi/v3", nil), builtin) || rec.Header().Get("Etag") != combined {
		t.Errorf("HEAD: Etag %q, want the combined %q", rec.Header().Get("Etag"), combined)
	}
}

// Built documents are kept within the budget, the least recently read
// dropped first, and built again when asked for.
func TestCRDOpenAPIKeepsWithinItsBudget(t *testing.T) {
	o := newCRDOpenAPI()
	for _, g := range []string{"a", "b", "c"} {
		crd := openAPICRD("things", "Thing", "1")
		crd.Name, crd.Spec.Group = "things."+g+".example.com", g+".example.com"
		crdChangedTo(t, o, crd.Name, crd)
	}
	rec, _ := getOpenAPI(t, o, "/openapi/v3/apis/a.example.com/v1")
	o.budget = rec.Body.Len() * 2 // room for two
	for _, g := range []string{"b", "a", "c"} {
		if rec, ok := getOpenAPI(t, o, "/openapi/v3/apis/"+g+".example.com/v1"); !ok || rec.Code != http.StatusOK {
			t.Fatalf("%s: %d", g, rec.Code)
		}
	}
	kept := map[string]bool{}
	for key, d := range o.gvs {
		kept[key] = d.data != nil
	}
	if kept["apis/b.example.com/v1"] || !kept["apis/a.example.com/v1"] || !kept["apis/c.example.com/v1"] || o.bytes > o.budget {
		t.Errorf("kept %v, %d bytes of %d: want a and c, the most recently read", kept, o.bytes, o.budget)
	}
	if rec, _ := getOpenAPI(t, o, "/openapi/v3/apis/b.example.com/v1"); !strings.Contains(rec.Body.String(), "/apis/b.example.com/v1/") {
		t.Error("a dropped document was not built again")
	}
}

// crdChangedTo tells o that crd is served now, with its bytes, as
// crdServing does.
func crdChangedTo(t testing.TB, o *crdOpenAPI, name string, crd *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	encoded, err := crd.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	o.crdChanged(name, crd, encoded)
}
