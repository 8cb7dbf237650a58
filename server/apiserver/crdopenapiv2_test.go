package apiserver

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"

	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	"google.golang.org/protobuf/proto"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

const protoV2 = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"

func getV2(t *testing.T, o *crdOpenAPI, accept, ifNoneMatch string) (*httptest.ResponseRecorder, bool) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/openapi/v2", nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if ifNoneMatch != "" {
		req.Header.Set("If-None-Match", ifNoneMatch)
	}
	rec := httptest.NewRecorder()
	return rec, o.serve(rec, req, builtinIndex)
}

// v2Doc is what the tests read of a Swagger 2.0 document.
type v2Doc struct {
	Definitions map[string]struct {
		Properties map[string]json.RawMessage `json:"properties"`
		GVK        []map[string]string        `json:"x-kubernetes-group-version-kind"`
	} `json:"definitions"`
	Paths map[string]json.RawMessage `json:"paths"`
}

func decodeV2(t *testing.T, rec *httptest.ResponseRecorder) v2Doc {
	t.Helper()
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("/openapi/v2: %d %s", rec.Code, rec.Header().Get("Content-Type"))
	}
	var doc v2Doc
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// widgetCRD is a namespaced CRD with status and scale at each version.
func widgetCRD(rv string, versions ...string) *apiextensionsv1.CustomResourceDefinition {
	crd := openAPICRD("widgets", "Widget", rv)
	crd.Generation = int64(len(versions))
	v := crd.Spec.Versions[0]
	v.Subresources = &apiextensionsv1.CustomResourceSubresources{
		Status: &apiextensionsv1.CustomResourceSubresourceStatus{},
		Scale:  &apiextensionsv1.CustomResourceSubresourceScale{SpecReplicasPath: ".spec.size", StatusReplicasPath: ".status.size"},
	}
	crd.Spec.Versions = nil
	for i, name := range versions {
		v.Name, v.Storage = name, i == 0
		crd.Spec.Versions = append(crd.Spec.Versions, v)
	}
	// A version not served is not documented.
	v.Name, v.Served, v.Storage = "v0", false, false
	crd.Spec.Versions = append(crd.Spec.Versions, v)
	return crd
}

// A renamed definition ("..._v2") means a definition the CRD builder
// shares with the built-in document (ObjectMeta, Status, Scale, ...) is
// not the same in kelp's model as in upstream's: upstream's documents come
// from one generator, and never have one.
var renamedDefinition = regexp.MustCompile(`_v[0-9]+$`)

// /openapi/v2 is the built-in document alone until a CRD is served; then,
// built on the first request, it holds the CRD's definitions (reversed
// group names) and paths, in JSON and protobuf, each form with its ETag,
// kept until a CRD changes; a new version is added, a deleted CRD goes,
// and with no CRD left the built-in handler answers alone again.
func TestCRDOpenAPIV2(t *testing.T) {
	o := newCRDOpenAPI()
	if _, ok := getV2(t, o, "", ""); ok {
		t.Fatal("with no CRDs the built-in /openapi/v2 answers alone")
	}
	crdChangedTo(t, o, "widgets.example.com", widgetCRD("10", "v1"))
	crdChangedTo(t, o, "gadgets.example.com", openAPICRD("gadgets", "Gadget", "11"))
	if o.keptV2() != nil {
		t.Fatal("a CRD event built the v2 document")
	}

	rec, ok := getV2(t, o, "", "")
	if !ok {
		t.Fatal("/openapi/v2 not served with the CRDs")
	}
	doc := decodeV2(t, rec)
	etag := rec.Header().Get("Etag")
	for _, name := range []string{"com.example.v1.Widget", "com.example.v1.WidgetList", "com.example.v1.Gadget", "com.example.v1.GadgetList",
		"io.k8s.api.core.v1.ConfigMap", "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"} {
		if _, ok := doc.Definitions[name]; !ok {
			t.Errorf("no definition %s", name)
		}
	}
	widget := doc.Definitions["com.example.v1.Widget"]
	if len(widget.GVK) != 1 || widget.GVK[0]["group"] != "example.com" || widget.GVK[0]["version"] != "v1" || widget.GVK[0]["kind"] != "Widget" {
		t.Errorf("Widget's x-kubernetes-group-version-kind %v", widget.GVK)
	}
	if !strings.Contains(string(widget.Properties["spec"]), "Widget's spec") {
		t.Errorf("Widget's spec property %s", widget.Properties["spec"])
	}
	for _, p := range []string{"/apis/example.com/v1/namespaces/{namespace}/widgets/{name}", "/apis/example.com/v1/namespaces/{namespace}/widgets/{name}/status",
		"/apis/example.com/v1/namespaces/{namespace}/widgets/{name}/scale", "/apis/example.com/v1/widgets", "/apis/example.com/v1/namespaces/{namespace}/gadgets", "/api/v1/namespaces/{namespace}/configmaps"} {
		if _, ok := doc.Paths[p]; !ok {
			t.Errorf("no path %s", p)
		}
	}
	for name := range doc.Definitions {
		if renamedDefinition.MatchString(name) || strings.HasPrefix(name, "com.example.v0.") {
			t.Errorf("definition %s", name)
		}
	}
	for p := range doc.Paths {
		if strings.Contains(p, "/example.com/v0/") {
			t.Errorf("a version not served has path %s", p)
		}
	}
	kept := o.keptV2()
	if kept == nil {
		t.Fatal("the document built is not kept")
	}

	// Protobuf, as client-go and kubectl ask for it.
	pb, _ := getV2(t, o, protoV2, "")
	if pb.Code != http.StatusOK || !strings.Contains(pb.Header().Get("Content-Type"), "protobuf") {
		t.Fatalf("protobuf: %d %s", pb.Code, pb.Header().Get("Content-Type"))
	}
	var pdoc openapi_v2.Document
	if err := proto.Unmarshal(pb.Body.Bytes(), &pdoc); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, d := range pdoc.GetDefinitions().GetAdditionalProperties() {
		found = found || d.GetName() == "com.example.v1.Widget"
	}
	if !found {
		t.Error("the protobuf form has no com.example.v1.Widget")
	}
	if pb.Header().Get("Etag") == etag || etag == "" {
		t.Errorf("JSON and protobuf ETags %q %q", etag, pb.Header().Get("Etag"))
	}
	if rec, _ := getV2(t, o, "", etag); rec.Code != http.StatusNotModified {
		t.Errorf("If-None-Match with the current ETag: %d", rec.Code)
	}
	if o.keptV2() != kept {
		t.Error("serving again rebuilt the document with no CRD changed")
	}
	if rec, ok := getV2(t, o, "text/html", ""); !ok || rec.Code != http.StatusNotAcceptable {
		t.Errorf("Accept text/html: %v %d", ok, rec.Code)
	}

	// A new version.
	crdChangedTo(t, o, "widgets.example.com", widgetCRD("12", "v1", "v2"))
	if o.keptV2() != nil {
		t.Fatal("a changed CRD kept the old document")
	}
	rec, _ = getV2(t, o, "", etag)
	if rec.Code != http.StatusOK {
		t.Fatalf("after a change, the old ETag: %d", rec.Code)
	}
	doc = decodeV2(t, rec)
	if _, ok := doc.Definitions["com.example.v2.Widget"]; !ok {
		t.Error("no com.example.v2.Widget after v2 was added")
	}
	if _, ok := doc.Paths["/apis/example.com/v2/namespaces/{namespace}/widgets/{name}/scale"]; !ok {
		t.Error("no v2 widgets path")
	}
	if _, ok := doc.Definitions["com.example.v1.Widget"]; !ok {
		t.Error("v1 went when v2 was added")
	}

	// A deleted CRD.
	o.crdChanged("widgets.example.com", nil, nil)
	doc = decodeV2(t, mustGetV2(t, o))
	for name := range doc.Definitions {
		if strings.Contains(name, "Widget") {
			t.Errorf("definition %s after widgets went", name)
		}
	}
	for p := range doc.Paths {
		if strings.Contains(p, "/widgets") {
			t.Errorf("path %s after widgets went", p)
		}
	}
	if _, ok := doc.Definitions["com.example.v1.Gadget"]; !ok {
		t.Error("gadgets went with widgets")
	}
	o.crdChanged("gadgets.example.com", nil, nil)
	if _, ok := getV2(t, o, "", ""); ok {
		t.Error("with no CRD left, /openapi/v2 is not the built-in one")
	}
}

func mustGetV2(t *testing.T, o *crdOpenAPI) *httptest.ResponseRecorder {
	t.Helper()
	rec, ok := getV2(t, o, "", "")
	if !ok {
		t.Fatal("/openapi/v2 not served with the CRDs")
	}
	return rec
}

// A CRD version without a schema is documented too, as a kind with no
// properties of its own, next to the others.
func TestCRDOpenAPIV2WithoutSchema(t *testing.T) {
	o := newCRDOpenAPI()
	crdChangedTo(t, o, "gadgets.example.com", openAPICRD("gadgets", "Gadget", "1"))
	noSchema := openAPICRD("widgets", "Widget", "2")
	noSchema.Spec.Versions[0].Schema = nil
	crdChangedTo(t, o, "widgets.example.com", noSchema)
	doc := decodeV2(t, mustGetV2(t, o))
	for _, name := range []string{"com.example.v1.Gadget", "com.example.v1.Widget"} {
		if _, ok := doc.Definitions[name]; !ok {
			t.Errorf("no definition %s", name)
		}
	}
	if _, ok := doc.Definitions["com.example.v1.Widget"].Properties["spec"]; ok {
		t.Error("a Widget without a schema has a spec property")
	}
}

// BenchmarkCRDOpenAPIV2Build is one build of /openapi/v2 after a CRD
// change, with ten CRDs served: the built-in document parsed, the CRDs'
// specs built and merged, JSON and protobuf written.
func BenchmarkCRDOpenAPIV2Build(b *testing.B) {
	o := newCRDOpenAPI()
	for i := range 10 {
		plural := "things" + strconv.Itoa(i)
		crdChangedTo(b, o, plural+".example.com", openAPICRD(plural, "Thing"+strconv.Itoa(i), "1"))
	}
	if _, err := builtinIndex.V2(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		crdChangedTo(b, o, "things0.example.com", openAPICRD("things0", "Thing0", strconv.Itoa(i+2)))
		doc, err := o.v2Document(context.Background(), builtinIndex)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(len(doc.JSON()))/(1<<20), "json-MiB")
	}
}
