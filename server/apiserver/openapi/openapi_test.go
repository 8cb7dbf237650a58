package openapi

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/openapi"
	"k8s.io/client-go/openapi/cached"
	"k8s.io/client-go/openapi3"
	"k8s.io/client-go/rest"
	explainv2 "k8s.io/kubectl/pkg/explain/v2"
)

var allVerbs = []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}

var statusSub = Subresource{Name: "status"}

// testResources: Pods, Deployments with status and scale, ConfigMaps.
func testResources() []Resource {
	return []Resource{
		{Version: "v1", Kind: "Pod", Plural: "pods", Namespaced: true, Verbs: allVerbs,
			Type: reflect.TypeOf(corev1.Pod{}), ListType: reflect.TypeOf(corev1.PodList{}),
			Subresources: []Subresource{statusSub, {Name: "binding", Type: reflect.TypeOf(corev1.Binding{}), Version: "v1", Kind: "Binding"}}},
		{Version: "v1", Kind: "ConfigMap", Plural: "configmaps", Namespaced: true, Verbs: allVerbs,
			Type: reflect.TypeOf(corev1.ConfigMap{}), ListType: reflect.TypeOf(corev1.ConfigMapList{})},
		{Group: "apps", Version: "v1", Kind: "Deployment", Plural: "deployments", Namespaced: true, Verbs: allVerbs,
			Type: reflect.TypeOf(appsv1.Deployment{}), ListType: reflect.TypeOf(appsv1.DeploymentList{}),
			Subresources: []Subresource{statusSub, {Name: "scale", Type: reflect.TypeOf(autoscalingv1.Scale{}), Group: "autoscaling", Version: "v1", Kind: "Scale"}}},
	}
}

func newTestHandler(t testing.TB, rs []Resource) *Handler {
	t.Helper()
	h := New(rs)
	h.Wait()
	if h.err != nil {
		t.Fatal(h.err)
	}
	return h
}

func get(t *testing.T, h http.Handler, target, accept string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, target, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func decode(t *testing.T, data []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("invalid JSON: %v", err)
	}
	return m
}

// dig follows keys through nested maps.
func dig(t *testing.T, v any, keys ...string) any {
	t.Helper()
	for i, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("at %q: not an object", strings.Join(keys[:i], "."))
		}
		if v, ok = m[k]; !ok {
			t.Fatalf("missing %q", strings.Join(keys[:i+1], "."))
		}
	}
	return v
}

func TestIndexListsGroupVersionsWithHashes(t *testing.T) {
	h := newTestHandler(t, testResources())
	rec := get(t, h, "/openapi/v3", "")
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("index: %d %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	paths := dig(t, decode(t, rec.Body.Bytes()), "paths").(map[string]any)
	if len(paths) != 2 {
		t.Fatalf("want api/v1 and apis/apps/v1, got %v", paths)
	}
	for key, doc := range map[string]document{"api/v1": h.docs["api/v1"], "apis/apps/v1": h.docs["apis/apps/v1"]} {
		u := dig(t, paths, key, "serverRelativeURL").(string)
		if want := "/openapi/v3/" + key + "?hash=" + doc.hash; u != want {
			t.Errorf("%s: %q, want %q", key, u, want)
		}
		if len(doc.hash) != 128 || strings.ToUpper(doc.hash) != doc.hash {
			t.Errorf("%s: hash %q is not upper-case hex SHA-512", key, doc.hash)
		}
		// The hashed URL serves the document, cacheable forever.
		rec := get(t, h, u, "application/json")
		if rec.Code != 200 || !bytes.Equal(rec.Body.Bytes(), doc.data) {
			t.Fatalf("%s: %d", u, rec.Code)
		}
		if rec.Header().Get("Cache-Control") != "public, immutable" {
			t.Errorf("%s: Cache-Control %q", u, rec.Header().Get("Cache-Control"))
		}
	}
}

func TestServing(t *testing.T) {
	h := newTestHandler(t, testResources())
	if rec := get(t, h, "/openapi/v3/apis/batch/v1", ""); rec.Code != 404 {
		t.Errorf("unknown group-version: %d", rec.Code)
	}
	for _, p := range []string{"/openapi/v2/", "/openapi/v2/x", "/openapi/v3x", "/openapi"} {
		if rec := get(t, h, p, ""); rec.Code != 404 {
			t.Errorf("%s: %d", p, rec.Code)
		}
	}
	if rec := get(t, h, "/openapi/v3/api/v1?hash=STALE", ""); rec.Code != 301 ||
		rec.Header().Get("Location") != serverRelativeURL("api/v1", h.docs["api/v1"].hash) {
		t.Errorf("stale hash: %d %q", rec.Code, rec.Header().Get("Location"))
	}
	if rec := get(t, h, "/openapi/v3/api/v1", "application/com.github.proto-openapi.spec.v3@v1.0+protobuf"); rec.Code != 406 {
		t.Errorf("protobuf only: %d", rec.Code)
	}
	if rec := get(t, h, "/openapi/v3/api/v1", "application/com.github.proto-openapi.spec.v3@v1.0+protobuf, application/json;q=0.9"); rec.Code != 200 {
		t.Errorf("protobuf, then JSON: %d", rec.Code)
	}
	// ETag revalidation.
	req := httptest.NewRequest(http.MethodGet, "/openapi/v3/api/v1", nil)
	req.Header.Set("If-None-Match", `"`+h.docs["api/v1"].hash+`"`)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusNotModified {
		t.Errorf("If-None-Match: %d", rec.Code)
	}
}

func TestDeploymentSchema(t *testing.T) {
	h := newTestHandler(t, testResources())
	doc := decode(t, h.docs["apis/apps/v1"].data)
	schemas := dig(t, doc, "components", "schemas")

	dep := dig(t, schemas, "io.k8s.api.apps.v1.Deployment")
	if got := dig(t, dep, "x-kubernetes-group-version-kind"); !reflect.DeepEqual(got, []any{map[string]any{"group": "apps", "version": "v1", "kind": "Deployment"}}) {
		t.Errorf("Deployment GVK: %v", got)
	}
	if got := dig(t, dep, "description"); got != (appsv1.Deployment{}).SwaggerDoc()[""] {
		t.Errorf("Deployment description: %v", got)
	}
	// Refs with siblings are wrapped in allOf, as upstream.
	if got := dig(t, dep, "properties", "spec", "allOf"); !reflect.DeepEqual(got, []any{map[string]any{"$ref": "#/components/schemas/io.k8s.api.apps.v1.DeploymentSpec"}}) {
		t.Errorf("spec: %v", got)
	}
	strategy := dig(t, schemas, "io.k8s.api.apps.v1.DeploymentSpec", "properties", "strategy")
	if got := dig(t, strategy, "description"); got != (appsv1.DeploymentSpec{}).SwaggerDoc()["strategy"] || got == "" {
		t.Errorf("strategy description: %v", got)
	}
	if got := dig(t, strategy, "x-kubernetes-patch-strategy"); got != "retainKeys" {
		t.Errorf("strategy patch strategy: %v", got)
	}

	containers := dig(t, schemas, "io.k8s.api.core.v1.PodSpec", "properties", "containers")
	for k, want := range map[string]any{
		"x-kubernetes-patch-merge-key": "name",
		"x-kubernetes-patch-strategy":  "merge",
		"x-kubernetes-list-type":       "map",
		"x-kubernetes-list-map-keys":   []any{"name"},
		"type":                         "array",
	} {
		if got := dig(t, containers, k); !reflect.DeepEqual(got, want) {
			t.Errorf("containers %s: %v, want %v", k, got, want)
		}
	}
	if got := dig(t, schemas, "io.k8s.api.core.v1.PodSpec", "required"); !reflect.DeepEqual(got, []any{"containers"}) {
		t.Errorf("PodSpec required: %v", got)
	}
	if got := dig(t, schemas, "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector", "x-kubernetes-map-type"); got != "atomic" {
		t.Errorf("LabelSelector map type: %v", got)
	}

	// Special types, as upstream's v3 documents have them.
	for name, want := range map[string]map[string]any{
		"io.k8s.apimachinery.pkg.apis.meta.v1.Time":       {"type": "string", "format": "date-time"},
		"io.k8s.apimachinery.pkg.util.intstr.IntOrString": {"format": "int-or-string", "x-kubernetes-int-or-string": true, "oneOf": []any{map[string]any{"type": "integer"}, map[string]any{"type": "string"}}},
	} {
		for k, v := range want {
			if got := dig(t, schemas, name, k); !reflect.DeepEqual(got, v) {
				t.Errorf("%s %s: %v, want %v", name, k, got, v)
			}
		}
	}
	core := dig(t, decode(t, h.docs["api/v1"].data), "components", "schemas")
	for name, want := range map[string]map[string]any{
		"io.k8s.apimachinery.pkg.api.resource.Quantity": {"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "number"}}},
		"io.k8s.apimachinery.pkg.runtime.RawExtension":  {"type": "object"},
		"io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1": {"type": "object"},
	} {
		for k, v := range want {
			if got := dig(t, core, name, k); !reflect.DeepEqual(got, v) {
				t.Errorf("%s %s: %v, want %v", name, k, got, v)
			}
		}
	}
	if got := dig(t, core, "io.k8s.api.core.v1.ConfigMap", "properties", "binaryData", "additionalProperties"); !reflect.DeepEqual(got, map[string]any{"type": "string", "format": "byte"}) {
		t.Errorf("binaryData values: %v", got)
	}
	if got := dig(t, core, "io.k8s.api.core.v1.ConfigMap", "properties", "data", "additionalProperties"); !reflect.DeepEqual(got, map[string]any{"type": "string", "default": ""}) {
		t.Errorf("data values: %v", got)
	}
	// TypeMeta is inlined into the kinds.
	if got := dig(t, core, "io.k8s.api.core.v1.ConfigMap", "properties", "apiVersion", "type"); got != "string" {
		t.Errorf("apiVersion: %v", got)
	}
	// Resource limits: map of bare Quantity refs (no siblings, so no allOf).
	if got := dig(t, core, "io.k8s.api.core.v1.ResourceRequirements", "properties", "limits", "additionalProperties"); !reflect.DeepEqual(got, map[string]any{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.api.resource.Quantity"}) {
		t.Errorf("limits values: %v", got)
	}

	// Documents are self-contained: every $ref resolves within.
	for key, d := range h.docs {
		m := decode(t, d.data)
		sch := dig(t, m, "components", "schemas").(map[string]any)
		var walk func(any)
		walk = func(v any) {
			switch v := v.(type) {
			case map[string]any:
				if r, ok := v["$ref"].(string); ok {
					if _, ok := sch[strings.TrimPrefix(r, refPrefix)]; !ok {
						t.Errorf("%s: dangling %s", key, r)
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
		walk(m)
	}
}

func TestDeploymentPaths(t *testing.T) {
	h := newTestHandler(t, testResources())
	paths := dig(t, decode(t, h.docs["apis/apps/v1"].data), "paths")
	item := "/apis/apps/v1/namespaces/{namespace}/deployments/{name}"
	patch := dig(t, paths, item, "patch")
	if got := dig(t, patch, "x-kubernetes-group-version-kind"); !reflect.DeepEqual(got, map[string]any{"group": "apps", "version": "v1", "kind": "Deployment"}) {
		t.Errorf("patch GVK: %v", got)
	}
	if got := dig(t, patch, "x-kubernetes-action"); got != "patch" {
		t.Errorf("patch action: %v", got)
	}
	params := map[string]bool{}
	for _, p := range dig(t, patch, "parameters").([]any) {
		params[p.(map[string]any)["name"].(string)+"/"+p.(map[string]any)["in"].(string)] = true
	}
	for _, want := range []string{"fieldValidation/query", "dryRun/query", "fieldManager/query", "force/query"} {
		if !params[want] {
			t.Errorf("patch lacks parameter %s", want)
		}
	}
	body := dig(t, patch, "requestBody", "content").(map[string]any)
	for _, ct := range []string{"application/json-patch+json", "application/merge-patch+json", "application/strategic-merge-patch+json", "application/apply-patch+yaml"} {
		if body[ct] == nil {
			t.Errorf("patch lacks body type %s", ct)
		}
	}
	for p, actions := range map[string]map[string]string{
		"/apis/apps/v1/namespaces/{namespace}/deployments": {"get": "list", "post": "post", "delete": "deletecollection"},
		item:                        {"get": "get", "put": "put", "patch": "patch", "delete": "delete"},
		"/apis/apps/v1/deployments": {"get": "list"},
		"/apis/apps/v1/watch/namespaces/{namespace}/deployments/{name}": {"get": "watch"},
		item + "/status": {"get": "get", "put": "put", "patch": "patch"},
		item + "/scale":  {"get": "get", "put": "put", "patch": "patch"},
	} {
		for method, action := range actions {
			if got := dig(t, paths, p, method, "x-kubernetes-action"); got != action {
				t.Errorf("%s %s: action %v, want %s", method, p, got, action)
			}
		}
	}
	if got := dig(t, paths, item+"/scale", "put", "x-kubernetes-group-version-kind"); !reflect.DeepEqual(got, map[string]any{"group": "autoscaling", "version": "v1", "kind": "Scale"}) {
		t.Errorf("scale GVK: %v", got)
	}
	core := dig(t, decode(t, h.docs["api/v1"].data), "paths")
	if got := dig(t, core, "/api/v1/namespaces/{namespace}/pods/{name}/binding", "post", "x-kubernetes-group-version-kind"); !reflect.DeepEqual(got, map[string]any{"group": "", "version": "v1", "kind": "Binding"}) {
		t.Errorf("binding GVK: %v", got)
	}
}

// clientFor serves h the way the API server does and returns a client
// config for it, so that the tests below go through client-go's own
// discovery and OpenAPI clients, as kubectl does.
func clientFor(t *testing.T, h *Handler) *rest.Config {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/openapi/v3", h)
	mux.Handle("/openapi/v3/", h)
	mux.Handle("/openapi/v2", h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &rest.Config{Host: srv.URL}
}

func openAPIClient(t *testing.T, cfg *rest.Config) openapi.Client {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return dc.OpenAPIV3()
}

// TestClientGoParses: the documents decode as spec3.OpenAPI through
// client-go's openapi3.Root, which is what kubectl apply and validation use.
func TestClientGoParses(t *testing.T) {
	h := newTestHandler(t, testResources())
	root := openapi3.NewRoot(openAPIClient(t, clientFor(t, h)))
	gvs, err := root.GroupVersions()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gvs, []k8sschema.GroupVersion{{Group: "apps", Version: "v1"}, {Version: "v1"}}) {
		t.Errorf("group-versions: %v", gvs)
	}
	for _, gv := range gvs {
		spec, err := root.GVSpec(gv)
		if err != nil {
			t.Fatalf("%v: %v", gv, err)
		}
		if spec.Paths == nil || len(spec.Paths.Paths) == 0 || spec.Components == nil || len(spec.Components.Schemas) == 0 {
			t.Fatalf("%v: empty document", gv)
		}
	}
	spec, _ := root.GVSpec(k8sschema.GroupVersion{Group: "apps", Version: "v1"})
	s := spec.Components.Schemas["io.k8s.api.apps.v1.DeploymentSpec"].Properties["strategy"]
	if s.Description == "" || len(s.AllOf) != 1 || s.AllOf[0].Ref.String() != refPrefix+"io.k8s.api.apps.v1.DeploymentStrategy" {
		t.Errorf("strategy as parsed by client-go: %+v", s)
	}
}

// TestKubectlExplain runs kubectl explain's OpenAPI v3 renderer (what
// `kubectl explain deployment.spec.strategy` calls after resolving the
// resource with discovery) against the served documents.
func TestKubectlExplain(t *testing.T) {
	h := newTestHandler(t, testResources())
	client := openAPIClient(t, clientFor(t, h))

	var out bytes.Buffer
	gvr := k8sschema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	if err := explainv2.PrintModelDescription([]string{"spec", "strategy"}, &out, client, gvr, false, 0, "plaintext"); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	wantDesc := strings.Fields(appsv1.DeploymentSpec{}.SwaggerDoc()["strategy"])
	for _, want := range []string{
		"GROUP:      apps", "KIND:       Deployment", "VERSION:    v1",
		"FIELD: strategy <DeploymentStrategy>",
		"rollingUpdate\t<RollingUpdateDeployment>",
		"type\t<string>",
		strings.Join(wantDesc[:4], " "),
		strings.Fields(appsv1.DeploymentStrategy{}.SwaggerDoc()["type"])[0],
	} {
		if !strings.Contains(got, want) {
			t.Errorf("explain output lacks %q:\n%s", want, got)
		}
	}
	t.Logf("kubectl explain deployment.spec.strategy:\n%s", got)

	// Special types print as upstream does.
	out.Reset()
	if err := explainv2.PrintModelDescription([]string{"spec", "strategy", "rollingUpdate"}, &out, client, gvr, false, 0, "plaintext"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "maxSurge\t<IntOrString>") {
		t.Errorf("maxSurge:\n%s", out.String())
	}

	// Whole-tree walk of the core group, cycles and all.
	out.Reset()
	pods := k8sschema.GroupVersionResource{Version: "v1", Resource: "pods"}
	if err := explainv2.PrintModelDescription(nil, &out, client, pods, true, 0, "plaintext"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"KIND:       Pod", "containers\t<[]Container> -required-", "limits\t<map[string]Quantity>", "creationTimestamp\t<string>"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("explain pods --recursive lacks %q", want)
		}
	}

	// A field that does not exist is an error, as upstream.
	out.Reset()
	if err := explainv2.PrintModelDescription([]string{"spec", "nope"}, &out, client, gvr, false, 0, "plaintext"); err == nil {
		t.Errorf("explain deployment.spec.nope: no error")
	}
}

// TestFieldValidationSupported runs the check behind kubectl's default
// --validate=strict (cli-runtime's queryParamVerifierV3, as kubectl's
// factory builds it): nil means kubectl relies on server-side field
// validation and never needs /openapi/v2.
func TestFieldValidationSupported(t *testing.T) {
	h := newTestHandler(t, testResources())
	cfg := clientFor(t, h)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	v := resource.NewQueryParamVerifierV3(dyn, cached.NewClient(openAPIClient(t, cfg)), resource.QueryParamFieldValidation)
	for _, gvk := range []k8sschema.GroupVersionKind{
		{Group: "apps", Version: "v1", Kind: "Deployment"},
		{Version: "v1", Kind: "Pod"},
		{Version: "v1", Kind: "ConfigMap"},
	} {
		// Repeated: the verifier takes the first PATCH of the GVK in map
		// order, so status's PATCH must qualify as well as the main one.
		for range 20 {
			if err := v.HasSupport(gvk); err != nil {
				t.Fatalf("%v: %v", gvk, err)
			}
		}
	}
}

// TestStrategicMergePatchFromDocument does what client-side kubectl apply
// does with the document: find the component with the GVK, and compute a
// three-way strategic merge patch from its patch metadata. Containers must
// be merged by name.
func TestStrategicMergePatchFromDocument(t *testing.T) {
	h := newTestHandler(t, testResources())
	root := openapi3.NewRoot(openAPIClient(t, clientFor(t, h)))
	spec, err := root.GVSpec(k8sschema.GroupVersion{Group: "apps", Version: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	var lookup strategicpatch.LookupPatchMeta
	for _, c := range spec.Components.Schemas {
		var list []map[string]string
		if c.Extensions.GetObject("x-kubernetes-group-version-kind", &list) == nil && len(list) == 1 && list[0]["kind"] == "Deployment" {
			lookup = strategicpatch.PatchMetaFromOpenAPIV3{Schema: c, SchemaList: spec.Components.Schemas}
		}
	}
	if lookup == nil {
		t.Fatal("no component for apps/v1 Deployment")
	}
	dep := func(images ...string) []byte {
		var cs []string
		for i, img := range images {
			cs = append(cs, `{"name":"c`+string(rune('0'+i))+`","image":"`+img+`"}`)
		}
		return []byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"template":{"spec":{"containers":[` + strings.Join(cs, ",") + `]}}}}`)
	}
	patch, err := strategicpatch.CreateThreeWayMergePatch(dep("a", "b"), dep("a", "b2"), dep("a", "b"), lookup, false)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(patch), `"$setElementOrder/containers":[{"name":"c0"},{"name":"c1"}]`) ||
		!strings.Contains(string(patch), `{"image":"b2","name":"c1"}`) {
		t.Errorf("patch does not merge containers by name: %s", patch)
	}
}

// allResources is the built-in API kelp serves: core, apps, batch,
// coordination, discovery, events, policy, rbac, networking, storage.
func allResources() []Resource {
	r := func(group, version, kind, plural string, namespaced bool, obj, list any, subs ...Subresource) Resource {
		return Resource{Group: group, Version: version, Kind: kind, Plural: plural, Namespaced: namespaced, Verbs: allVerbs,
			Type: reflect.TypeOf(obj), ListType: reflect.TypeOf(list), Subresources: subs}
	}
	scale := Subresource{Name: "scale", Type: reflect.TypeOf(autoscalingv1.Scale{}), Group: "autoscaling", Version: "v1", Kind: "Scale"}
	return []Resource{
		r("", "v1", "Pod", "pods", true, corev1.Pod{}, corev1.PodList{}, statusSub,
			Subresource{Name: "binding", Type: reflect.TypeOf(corev1.Binding{}), Version: "v1", Kind: "Binding"},
			Subresource{Name: "eviction", Type: reflect.TypeOf(policyv1.Eviction{}), Group: "policy", Version: "v1", Kind: "Eviction"},
			Subresource{Name: "ephemeralcontainers"}, Subresource{Name: "log", Type: reflect.TypeOf("")}),
		r("", "v1", "Service", "services", true, corev1.Service{}, corev1.ServiceList{}, statusSub),
		r("", "v1", "ConfigMap", "configmaps", true, corev1.ConfigMap{}, corev1.ConfigMapList{}),
		r("", "v1", "Secret", "secrets", true, corev1.Secret{}, corev1.SecretList{}),
		r("", "v1", "Namespace", "namespaces", false, corev1.Namespace{}, corev1.NamespaceList{}, statusSub),
		r("", "v1", "Node", "nodes", false, corev1.Node{}, corev1.NodeList{}, statusSub),
		r("", "v1", "Endpoints", "endpoints", true, corev1.Endpoints{}, corev1.EndpointsList{}),
		r("", "v1", "Event", "events", true, corev1.Event{}, corev1.EventList{}),
		r("", "v1", "ServiceAccount", "serviceaccounts", true, corev1.ServiceAccount{}, corev1.ServiceAccountList{}),
		r("", "v1", "PersistentVolume", "persistentvolumes", false, corev1.PersistentVolume{}, corev1.PersistentVolumeList{}, statusSub),
		r("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", true, corev1.PersistentVolumeClaim{}, corev1.PersistentVolumeClaimList{}, statusSub),
		r("", "v1", "ReplicationController", "replicationcontrollers", true, corev1.ReplicationController{}, corev1.ReplicationControllerList{}, statusSub, scale),
		r("", "v1", "ResourceQuota", "resourcequotas", true, corev1.ResourceQuota{}, corev1.ResourceQuotaList{}, statusSub),
		r("", "v1", "LimitRange", "limitranges", true, corev1.LimitRange{}, corev1.LimitRangeList{}),
		r("", "v1", "PodTemplate", "podtemplates", true, corev1.PodTemplate{}, corev1.PodTemplateList{}),
		r("apps", "v1", "Deployment", "deployments", true, appsv1.Deployment{}, appsv1.DeploymentList{}, statusSub, scale),
		r("apps", "v1", "StatefulSet", "statefulsets", true, appsv1.StatefulSet{}, appsv1.StatefulSetList{}, statusSub, scale),
		r("apps", "v1", "DaemonSet", "daemonsets", true, appsv1.DaemonSet{}, appsv1.DaemonSetList{}, statusSub),
		r("apps", "v1", "ReplicaSet", "replicasets", true, appsv1.ReplicaSet{}, appsv1.ReplicaSetList{}, statusSub, scale),
		r("apps", "v1", "ControllerRevision", "controllerrevisions", true, appsv1.ControllerRevision{}, appsv1.ControllerRevisionList{}),
		r("batch", "v1", "Job", "jobs", true, batchv1.Job{}, batchv1.JobList{}, statusSub),
		r("batch", "v1", "CronJob", "cronjobs", true, batchv1.CronJob{}, batchv1.CronJobList{}, statusSub),
		r("coordination.k8s.io", "v1", "Lease", "leases", true, coordinationv1.Lease{}, coordinationv1.LeaseList{}),
		r("discovery.k8s.io", "v1", "EndpointSlice", "endpointslices", true, discoveryv1.EndpointSlice{}, discoveryv1.EndpointSliceList{}),
		r("events.k8s.io", "v1", "Event", "events", true, eventsv1.Event{}, eventsv1.EventList{}),
		r("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", true, policyv1.PodDisruptionBudget{}, policyv1.PodDisruptionBudgetList{}, statusSub),
		r("rbac.authorization.k8s.io", "v1", "Role", "roles", true, rbacv1.Role{}, rbacv1.RoleList{}),
		r("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", true, rbacv1.RoleBinding{}, rbacv1.RoleBindingList{}),
		r("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", false, rbacv1.ClusterRole{}, rbacv1.ClusterRoleList{}),
		r("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", false, rbacv1.ClusterRoleBinding{}, rbacv1.ClusterRoleBindingList{}),
		r("networking.k8s.io", "v1", "Ingress", "ingresses", true, networkingv1.Ingress{}, networkingv1.IngressList{}, statusSub),
		r("networking.k8s.io", "v1", "IngressClass", "ingressclasses", false, networkingv1.IngressClass{}, networkingv1.IngressClassList{}),
		r("networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies", true, networkingv1.NetworkPolicy{}, networkingv1.NetworkPolicyList{}),
		r("storage.k8s.io", "v1", "StorageClass", "storageclasses", false, storagev1.StorageClass{}, storagev1.StorageClassList{}),
		r("storage.k8s.io", "v1", "CSIDriver", "csidrivers", false, storagev1.CSIDriver{}, storagev1.CSIDriverList{}),
		r("storage.k8s.io", "v1", "CSINode", "csinodes", false, storagev1.CSINode{}, storagev1.CSINodeList{}),
		r("storage.k8s.io", "v1", "VolumeAttachment", "volumeattachments", false, storagev1.VolumeAttachment{}, storagev1.VolumeAttachmentList{}, statusSub),
		r("storage.k8s.io", "v1", "CSIStorageCapacity", "csistoragecapacities", true, storagev1.CSIStorageCapacity{}, storagev1.CSIStorageCapacityList{}),
	}
}

// TestAllBuiltins builds the whole built-in API, checks every GVK passes
// kubectl's field validation check, and reports how long generation takes.
func TestAllBuiltins(t *testing.T) {
	start := time.Now()
	h := New(allResources())
	h.Wait()
	if h.err != nil {
		t.Fatal(h.err)
	}
	total := 0
	for _, d := range h.docs {
		total += len(d.data)
	}
	t.Logf("%d documents, %d KiB, built in %v (New to ready: %v)", len(h.docs), total/1024, h.duration, time.Since(start))

	cfg := clientFor(t, h)
	dyn, _ := dynamic.NewForConfig(cfg)
	v := resource.NewQueryParamVerifierV3(dyn, cached.NewClient(openAPIClient(t, cfg)), resource.QueryParamFieldValidation)
	for _, r := range allResources() {
		gvk := k8sschema.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind}
		if err := v.HasSupport(gvk); err != nil {
			t.Errorf("%v: %v", gvk, err)
		}
	}
	client := openAPIClient(t, cfg)
	for _, r := range allResources() {
		gvr := k8sschema.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Plural}
		if err := explainv2.PrintModelDescription([]string{"metadata", "name"}, io.Discard, client, gvr, false, 0, "plaintext"); err != nil {
			t.Errorf("explain %v: %v", gvr, err)
		}
	}
}

// BenchmarkBuild measures document generation for the whole built-in API
// once the list-type schema is loaded (it is parsed once per process).
func BenchmarkBuild(b *testing.B) {
	rs := allResources()
	loadListTypes()
	b.ResetTimer()
	for range b.N {
		buildDocuments(rs)
	}
}

// TestPatchMetaMatchesGoStructs: for realistic edits, the strategic merge
// patch computed from the document is the one computed from the Go types
// themselves (what kubectl falls back to for built-in kinds), so client-side
// apply behaves the same whichever source it uses.
func TestPatchMetaMatchesGoStructs(t *testing.T) {
	h := newTestHandler(t, testResources())
	root := openapi3.NewRoot(openAPIClient(t, clientFor(t, h)))
	for _, tc := range []struct {
		gv      k8sschema.GroupVersion
		model   string
		obj     any
		orig    string
		mod     string
		current string
	}{
		{
			gv: k8sschema.GroupVersion{Group: "apps", Version: "v1"}, model: "io.k8s.api.apps.v1.Deployment", obj: appsv1.Deployment{},
			orig: `{"metadata":{"name":"d","labels":{"a":"1"},"finalizers":["x"]},"spec":{"strategy":{"type":"RollingUpdate","rollingUpdate":{"maxSurge":1}},
				"template":{"spec":{"containers":[{"name":"a","image":"i","ports":[{"containerPort":80,"protocol":"TCP"}],"env":[{"name":"E","value":"1"}],
				"resources":{"limits":{"cpu":"1"}}}],"volumes":[{"name":"v","emptyDir":{}}],"tolerations":[{"key":"k"}]}}}}`,
			mod: `{"metadata":{"name":"d","labels":{"b":"2"},"finalizers":["y"]},"spec":{"strategy":{"type":"Recreate"},
				"template":{"spec":{"containers":[{"name":"a","image":"i2","ports":[{"containerPort":8080,"protocol":"TCP"}],"env":[{"name":"F","value":"2"}],
				"resources":{"limits":{"memory":"1Gi"}}},{"name":"b","image":"j"}],"volumes":[{"name":"v","configMap":{"name":"c"}}],"tolerations":[{"key":"l"}]}}}}`,
			current: `{"metadata":{"name":"d","labels":{"a":"1","z":"9"},"finalizers":["x","k"]},"spec":{"replicas":3,"strategy":{"type":"RollingUpdate","rollingUpdate":{"maxSurge":1}},
				"template":{"spec":{"containers":[{"name":"a","image":"i","ports":[{"containerPort":80,"protocol":"TCP"}],"env":[{"name":"E","value":"1"}],
				"resources":{"limits":{"cpu":"1"}}}],"volumes":[{"name":"v","emptyDir":{}}],"tolerations":[{"key":"k"}]}}}}`,
		},
		{
			gv: k8sschema.GroupVersion{Version: "v1"}, model: "io.k8s.api.core.v1.Pod", obj: corev1.Pod{},
			orig:    `{"metadata":{"name":"p","ownerReferences":[{"uid":"1","name":"a","kind":"K","apiVersion":"v1"}]},"spec":{"containers":[{"name":"a","image":"i","volumeMounts":[{"name":"v","mountPath":"/a"}]}]}}`,
			mod:     `{"metadata":{"name":"p","ownerReferences":[{"uid":"2","name":"b","kind":"K","apiVersion":"v1"}]},"spec":{"containers":[{"name":"a","image":"i","volumeMounts":[{"name":"v","mountPath":"/b"}]}]}}`,
			current: `{"metadata":{"name":"p","ownerReferences":[{"uid":"1","name":"a","kind":"K","apiVersion":"v1"}]},"spec":{"containers":[{"name":"a","image":"i","volumeMounts":[{"name":"v","mountPath":"/a"}]}]}}`,
		},
	} {
		spec, err := root.GVSpec(tc.gv)
		if err != nil {
			t.Fatal(err)
		}
		fromDoc := strategicpatch.PatchMetaFromOpenAPIV3{Schema: spec.Components.Schemas[tc.model], SchemaList: spec.Components.Schemas}
		fromGo, err := strategicpatch.NewPatchMetaFromStruct(tc.obj)
		if err != nil {
			t.Fatal(err)
		}
		want, err := strategicpatch.CreateThreeWayMergePatch([]byte(tc.orig), []byte(tc.mod), []byte(tc.current), fromGo, false)
		if err != nil {
			t.Fatal(err)
		}
		got, err := strategicpatch.CreateThreeWayMergePatch([]byte(tc.orig), []byte(tc.mod), []byte(tc.current), fromDoc, false)
		if err != nil {
			t.Fatalf("%s: %v", tc.model, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s:\nfrom document: %s\nfrom Go types: %s", tc.model, got, want)
		}
		t.Logf("%s: %s", tc.model, got)
	}
}

// TestDeterministic: the same input gives the same bytes, so hashes (and
// clients' caches) survive restarts.
func TestDeterministic(t *testing.T) {
	a, ai := buildDocuments(allResources())
	b, bi := buildDocuments(allResources())
	if ai.hash != bi.hash {
		t.Fatal("index differs between builds")
	}
	for k := range a {
		if a[k].hash != b[k].hash {
			t.Errorf("%s differs between builds", k)
		}
	}
}
