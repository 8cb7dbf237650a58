package openapi

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	"google.golang.org/protobuf/proto"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	kubectlopenapi "k8s.io/kubectl/pkg/util/openapi"
	"k8s.io/kubectl/pkg/validation"
)

func newTestHandlerV2(t testing.TB, rs []Resource) *Handler {
	t.Helper()
	h := New(rs)
	h.WaitV2()
	if h.v2.err != nil {
		t.Fatal(h.v2.err)
	}
	return h
}

// TestV2IsLazy: serving /openapi/v3 does not build /openapi/v2, and the
// first request for it does.
func TestV2IsLazy(t *testing.T) {
	h := newTestHandler(t, testResources())
	if rec := get(t, h, "/openapi/v3/api/v1", ""); rec.Code != 200 {
		t.Fatalf("v3: %d", rec.Code)
	}
	select {
	case <-h.v2.ready:
		t.Fatal("v2 built without a request for it")
	default:
	}
	if rec := get(t, h, "/openapi/v2", ""); rec.Code != 200 || !bytes.Equal(rec.Body.Bytes(), h.v2.json.data) {
		t.Fatalf("v2: %d", rec.Code)
	}
}

func TestV2Serving(t *testing.T) {
	h := newTestHandlerV2(t, testResources())
	jsonDoc, pbDoc := h.v2.json, h.v2.proto
	if jsonDoc.hash == pbDoc.hash {
		t.Error("JSON and protobuf share an ETag")
	}
	for _, tc := range []struct {
		accept string
		want   *document
		ctype  string
	}{
		{"", &jsonDoc, "application/json"},
		{"*/*", &jsonDoc, "application/json"},
		{"application/*", &jsonDoc, "application/json"},
		{"application/json", &jsonDoc, "application/json"},
		// What client-go's DiscoveryClient.OpenAPISchema sends.
		{mimeV2ProtobufDeprecated, &pbDoc, mimeV2Protobuf},
		{mimeV2Protobuf, &pbDoc, mimeV2Protobuf},
		{"application/json;q=0.5, " + mimeV2ProtobufDeprecated, &pbDoc, mimeV2Protobuf},
		{mimeV2ProtobufDeprecated + ";q=0.5, application/json", &jsonDoc, "application/json"},
		{"application/*;q=0.9, " + mimeV2Protobuf, &pbDoc, mimeV2Protobuf},
		{"*/*, " + mimeV2Protobuf, &pbDoc, mimeV2Protobuf}, // the more specific first
		{"text/html, application/json;q=0.1", &jsonDoc, "application/json"},
		{"text/html", nil, ""},
		{"application/json;q=0", nil, ""},
		{"application/com.github.proto-openapi.spec.v3@v1.0+protobuf", nil, ""},
	} {
		rec := get(t, h, "/openapi/v2", tc.accept)
		if tc.want == nil {
			if rec.Code != http.StatusNotAcceptable {
				t.Errorf("Accept %q: %d, want 406", tc.accept, rec.Code)
			}
			continue
		}
		if rec.Code != 200 || rec.Header().Get("Content-Type") != tc.ctype || !bytes.Equal(rec.Body.Bytes(), tc.want.data) {
			t.Errorf("Accept %q: %d %q, want %q", tc.accept, rec.Code, rec.Header().Get("Content-Type"), tc.ctype)
		}
		if got := rec.Header().Get("Etag"); got != strconv.Quote(tc.want.hash) {
			t.Errorf("Accept %q: Etag %s", tc.accept, got)
		}
		if rec.Header().Get("Vary") != "Accept" {
			t.Errorf("Accept %q: Vary %q", tc.accept, rec.Header().Get("Vary"))
		}
	}

	var doc openapi_v2.Document
	if err := proto.Unmarshal(pbDoc.data, &doc); err != nil || doc.GetSwagger() != "2.0" {
		t.Fatalf("protobuf: %v, swagger %q", err, doc.GetSwagger())
	}

	// ETag revalidation, per form.
	req := httptest.NewRequest(http.MethodGet, "/openapi/v2", nil)
	req.Header.Set("Accept", mimeV2ProtobufDeprecated)
	req.Header.Set("If-None-Match", strconv.Quote(pbDoc.hash))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusNotModified {
		t.Errorf("If-None-Match: %d", rec.Code)
	}
	req.Header.Set("If-None-Match", strconv.Quote(jsonDoc.hash))
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 200 {
		t.Errorf("If-None-Match with the JSON ETag, for protobuf: %d", rec.Code)
	}

	req = httptest.NewRequest(http.MethodPost, "/openapi/v2", nil)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", rec.Code)
	}
}

// walkV2Schema calls f on s and every schema below it.
func walkV2Schema(s map[string]any, f func(map[string]any)) {
	f(s)
	if props, ok := s["properties"].(map[string]any); ok {
		for _, p := range props {
			walkV2Schema(p.(map[string]any), f)
		}
	}
	for _, k := range []string{"items", "additionalProperties"} {
		if sub, ok := s[k].(map[string]any); ok {
			walkV2Schema(sub, f)
		}
	}
}

func TestV2Document(t *testing.T) {
	h := newTestHandlerV2(t, testResources())
	doc := decode(t, h.v2.json.data)
	if doc["swagger"] != "2.0" {
		t.Errorf("swagger: %v", doc["swagger"])
	}
	defs := dig(t, doc, "definitions").(map[string]any)
	params := dig(t, doc, "parameters").(map[string]any)

	if got := dig(t, defs, "io.k8s.api.apps.v1.Deployment", "x-kubernetes-group-version-kind"); !reflect.DeepEqual(got, []any{map[string]any{"group": "apps", "version": "v1", "kind": "Deployment"}}) {
		t.Errorf("Deployment GVK: %v", got)
	}
	// A $ref with siblings is a $ref with siblings, as upstream's v2.
	if got := dig(t, defs, "io.k8s.api.apps.v1.DeploymentSpec", "properties", "strategy"); !reflect.DeepEqual(got, map[string]any{
		"$ref":                        "#/definitions/io.k8s.api.apps.v1.DeploymentStrategy",
		"description":                 "The deployment strategy to use to replace existing pods with new ones.",
		"x-kubernetes-patch-strategy": "retainKeys",
	}) {
		t.Errorf("strategy: %v", got)
	}
	containers := dig(t, defs, "io.k8s.api.core.v1.PodSpec", "properties", "containers")
	for k, want := range map[string]any{
		"x-kubernetes-patch-merge-key": "name",
		"x-kubernetes-patch-strategy":  "merge",
		"x-kubernetes-list-type":       "map",
		"x-kubernetes-list-map-keys":   []any{"name"},
		"type":                         "array",
		"items":                        map[string]any{"$ref": "#/definitions/io.k8s.api.core.v1.Container"},
	} {
		if got := dig(t, containers, k); !reflect.DeepEqual(got, want) {
			t.Errorf("containers %s: %v, want %v", k, got, want)
		}
	}
	for name, want := range map[string]map[string]any{
		"io.k8s.apimachinery.pkg.util.intstr.IntOrString": {"type": "string", "format": "int-or-string"},
		"io.k8s.apimachinery.pkg.api.resource.Quantity":   {"type": "string"},
		"io.k8s.apimachinery.pkg.apis.meta.v1.Time":       {"type": "string", "format": "date-time"},
	} {
		for k, v := range want {
			if got := dig(t, defs, name, k); !reflect.DeepEqual(got, v) {
				t.Errorf("%s %s: %v, want %v", name, k, got, v)
			}
		}
	}
	// No v3-only constructs, and no defaults (upstream prunes them).
	for name, d := range defs {
		walkV2Schema(d.(map[string]any), func(s map[string]any) {
			for _, k := range []string{"allOf", "oneOf", "anyOf", "default", "nullable"} {
				if _, ok := s[k]; ok {
					t.Errorf("%s: schema with %s: %v", name, k, s)
				}
			}
		})
	}
	// Every $ref resolves.
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if r, ok := v["$ref"].(string); ok {
				switch {
				case strings.HasPrefix(r, v2RefPrefix):
					if defs[strings.TrimPrefix(r, v2RefPrefix)] == nil {
						t.Errorf("dangling %s", r)
					}
				case strings.HasPrefix(r, v2ParamPrefix):
					if params[strings.TrimPrefix(r, v2ParamPrefix)] == nil {
						t.Errorf("dangling %s", r)
					}
				default:
					t.Errorf("$ref %s", r)
				}
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(doc)

	// The operations kubectl's v2 field validation check reads.
	paths := dig(t, doc, "paths")
	item := "/apis/apps/v1/namespaces/{namespace}/deployments/{name}"
	patch := dig(t, paths, item, "patch")
	if got := dig(t, patch, "x-kubernetes-group-version-kind"); !reflect.DeepEqual(got, map[string]any{"group": "apps", "version": "v1", "kind": "Deployment"}) {
		t.Errorf("patch GVK: %v", got)
	}
	resolve := func(p any) map[string]any {
		m := p.(map[string]any)
		if r, ok := m["$ref"].(string); ok {
			return params[strings.TrimPrefix(r, v2ParamPrefix)].(map[string]any)
		}
		return m
	}
	ps := dig(t, patch, "parameters").([]any)
	if body := resolve(ps[0]); body["in"] != "body" || body["required"] != true || !reflect.DeepEqual(body["schema"], map[string]any{"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.Patch"}) {
		t.Errorf("patch body: %v", body)
	}
	var inline []string
	for _, p := range ps {
		if _, ok := p.(map[string]any)["$ref"]; !ok {
			inline = append(inline, p.(map[string]any)["name"].(string))
		}
	}
	// Kept on the operation, as upstream, for older kubectl.
	if !reflect.DeepEqual(inline, []string{"dryRun", "fieldValidation"}) {
		t.Errorf("inline patch parameters: %v", inline)
	}
	if got := dig(t, patch, "consumes"); !reflect.DeepEqual(got, []any{"application/apply-patch+yaml", "application/json-patch+json", "application/merge-patch+json", "application/strategic-merge-patch+json"}) {
		t.Errorf("patch consumes: %v", got)
	}
	if got := dig(t, patch, "responses", "200", "schema"); !reflect.DeepEqual(got, map[string]any{"$ref": "#/definitions/io.k8s.api.apps.v1.Deployment"}) {
		t.Errorf("patch 200: %v", got)
	}
	create := dig(t, paths, "/apis/apps/v1/namespaces/{namespace}/deployments", "post")
	if body := dig(t, create, "parameters").([]any)[0].(map[string]any); body["in"] != "body" || !reflect.DeepEqual(body["schema"], map[string]any{"$ref": "#/definitions/io.k8s.api.apps.v1.Deployment"}) {
		t.Errorf("create body: %v", body)
	}
	if got := dig(t, paths, item, "parameters").([]any)[0]; !reflect.DeepEqual(got, map[string]any{"description": "name of the Deployment", "in": "path", "name": "name", "required": true, "type": "string", "uniqueItems": true}) {
		t.Errorf("name parameter: %v", got)
	}
	list := dig(t, paths, "/apis/apps/v1/deployments", "get")
	if got := dig(t, list, "produces"); !reflect.DeepEqual(got, []any{"application/json", "application/json;stream=watch", "application/vnd.kubernetes.protobuf", "application/vnd.kubernetes.protobuf;stream=watch", "application/yaml"}) {
		t.Errorf("list produces: %v", got)
	}
	if got := dig(t, paths, "/api/v1/namespaces/{namespace}/pods/{name}/binding", "post", "x-kubernetes-group-version-kind"); !reflect.DeepEqual(got, map[string]any{"group": "", "version": "v1", "kind": "Binding"}) {
		t.Errorf("binding GVK: %v", got)
	}
	if got := dig(t, paths, "/apis/apps/v1/", "get", "operationId"); got != "getAppsV1APIResources" {
		t.Errorf("apps/v1 resources: %v", got)
	}
}

// TestV2ClientGoAndKubectl: client-go's DiscoveryClient.OpenAPISchema
// fetches and decodes the protobuf form, kubectl's OpenAPI model parses
// every definition of it (what client-side validation and explain do
// first), every kind is found by its GVK, and cli-runtime's v2 field
// validation check (kubectl's fallback when /openapi/v3 fails) finds
// fieldValidation on every kind's PATCH.
func TestV2ClientGoAndKubectl(t *testing.T) {
	rs := allResources()
	h := New(rs)
	cfg := clientFor(t, h)
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := dc.OpenAPISchema()
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.GetDefinitions().GetAdditionalProperties()) == 0 || len(doc.GetPaths().GetPath()) == 0 {
		t.Fatal("empty document")
	}
	// When this test runs first in its process, this includes parsing the
	// list-type schema (~100 ms, once per process, shared with v3).
	t.Logf("first /openapi/v2 request: built in %v; JSON %d KiB, protobuf %d KiB",
		h.v2.duration.Round(time.Millisecond), len(h.v2.json.data)/1024, len(h.v2.proto.data)/1024)
	models, err := kubectlopenapi.NewOpenAPIData(doc)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	v := resource.NewQueryParamVerifier(dyn, kubectlopenapi.NewOpenAPIGetter(dc), resource.QueryParamFieldValidation)
	for _, r := range rs {
		gvk := k8sschema.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind}
		if models.LookupResource(gvk) == nil {
			t.Errorf("no definition for %v", gvk)
		}
		if lk := gvk.GroupVersion().WithKind(derefType(r.ListType).Name()); models.LookupResource(lk) == nil {
			t.Errorf("no definition for %v", lk)
		}
		if err := v.HasSupport(gvk); err != nil {
			t.Errorf("%v: %v", gvk, err)
		}
	}
	if err := v.HasSupport(k8sschema.GroupVersionKind{Version: "v1", Kind: "List"}); !resource.IsParamUnsupportedError(err) {
		t.Errorf("v1/List: %v", err)
	}
}

type resourcesGetter struct{ kubectlopenapi.Resources }

func (g resourcesGetter) OpenAPISchema() (kubectlopenapi.Resources, error) { return g.Resources, nil }

// TestV2SchemaValidation runs kubectl's client-side schema validation
// directly on objects of every shape that needs care: int-or-string,
// quantities, times, maps, raw extensions.
func TestV2SchemaValidation(t *testing.T) {
	h := newTestHandlerV2(t, allResources())
	var doc openapi_v2.Document
	if err := proto.Unmarshal(h.v2.proto.data, &doc); err != nil {
		t.Fatal(err)
	}
	res, err := kubectlopenapi.NewOpenAPIData(&doc)
	if err != nil {
		t.Fatal(err)
	}
	v := validation.NewSchemaValidation(resourcesGetter{res})
	valid := []string{
		`{"apiVersion":"v1","kind":"List","items":[
			{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","creationTimestamp":null,"labels":{"x":"y"}},"data":{"k":"v"},"binaryData":{"b":"AAE="}},
			{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d","creationTimestamp":"2024-01-01T00:00:00Z"},"spec":{"selector":{"matchLabels":{"a":"b"}},
				"strategy":{"rollingUpdate":{"maxSurge":"25%","maxUnavailable":1}},
				"template":{"spec":{"containers":[{"name":"c","image":"i","resources":{"limits":{"cpu":"500m","memory":1024}},"ports":[{"containerPort":80}],
					"livenessProbe":{"httpGet":{"port":"http","path":"/"}}}]}}}},
			{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j"},"spec":{"template":{"spec":{"containers":[{"name":"c","image":"i"}],"restartPolicy":"Never"}}}},
			{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"},"spec":{"ports":[{"port":80,"targetPort":8080}]}}
		]}`,
		`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"r"},"rules":[{"apiGroups":[""],"resources":["pods"],"verbs":["get"]}]}`,
		// +optional fields without omitempty (requiredOverrides).
		`{"apiVersion":"v1","kind":"Event","metadata":{"name":"e"},"involvedObject":{"kind":"Pod"},"firstTimestamp":"2024-01-01T00:00:00Z"}`,
		`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"r"}}`,
		`{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy","metadata":{"name":"n"},"spec":{}}`,
	}
	for _, obj := range valid {
		if err := v.ValidateBytes([]byte(obj)); err != nil {
			t.Errorf("%s: %v", obj, err)
		}
	}
	for obj, want := range map[string]string{
		`{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"dataa":{}}]}`:                          `unknown field "dataa" in io.k8s.api.core.v1.ConfigMap`,
		`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"replicas":"two","selector":{},"template":{}}}`:                     `invalid type for io.k8s.api.apps.v1.DeploymentSpec.replicas: got "string", expected "integer"`,
		`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"selector":{},"template":{"spec":{"containers":[{"image":"i"}]}}}}`: `missing required field "name" in io.k8s.api.core.v1.Container`,
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":["x"]},"spec":{"containers":[]}}`:                                               `invalid type for io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta.labels: got "array", expected "map"`,
	} {
		err := v.ValidateBytes([]byte(obj))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", obj, err, want)
		}
	}
}

// TestV2Deterministic: the same input gives the same bytes in both forms,
// so ETags survive restarts.
func TestV2Deterministic(t *testing.T) {
	a, b := New(allResources()), New(allResources())
	a.WaitV2()
	b.WaitV2()
	if a.v2.err != nil || b.v2.err != nil {
		t.Fatal(a.v2.err, b.v2.err)
	}
	if a.v2.json.hash != b.v2.json.hash || a.v2.proto.hash != b.v2.proto.hash {
		t.Error("v2 document differs between builds")
	}
}

// TestV2AllBuiltins reports the cost of the v2 document for the whole
// built-in API: time to build (JSON, then protobuf) and sizes.
func TestV2AllBuiltins(t *testing.T) {
	loadListTypes() // parsed once per process, shared with v3; measured there
	var m0, m1, m2 runtime.MemStats
	runtime.ReadMemStats(&m0)
	start := time.Now()
	data, err := buildV2Document(allResources())
	if err != nil {
		t.Fatal(err)
	}
	mid := time.Now()
	runtime.ReadMemStats(&m1)
	pb, err := toProtoBinary(data)
	if err != nil {
		t.Fatal(err)
	}
	end := time.Now()
	runtime.ReadMemStats(&m2)
	t.Logf("v2: JSON %d KiB in %v (%d MiB allocated), protobuf %d KiB in %v more (%d MiB allocated); kept: %d KiB",
		len(data)/1024, mid.Sub(start).Round(time.Millisecond), (m1.TotalAlloc-m0.TotalAlloc)>>20,
		len(pb)/1024, end.Sub(mid).Round(time.Millisecond), (m2.TotalAlloc-m1.TotalAlloc)>>20, (len(data)+len(pb))/1024)
}

func BenchmarkBuildV2JSON(b *testing.B) {
	rs := allResources()
	loadListTypes()
	b.ResetTimer()
	for range b.N {
		if _, err := buildV2Document(rs); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkV2Protobuf(b *testing.B) {
	loadListTypes()
	data, err := buildV2Document(allResources())
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if _, err := toProtoBinary(data); err != nil {
			b.Fatal(err)
		}
	}
}
