package apiserver

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/discovery"

	"github.com/kelp-project/kelp/server/apiserver/registry"
)

// clientGoAccept is what client-go's discovery client sends to /api and
// /apis.
const clientGoAccept = discovery.AcceptV2 + "," + discovery.AcceptV1

// discoveryServer serves the whole registry's discovery, without storage.
func discoveryServer() *Server {
	s := &Server{}
	t := newServedTable()
	for _, r := range registry.All(registry.Options{}) {
		t.serve(&served{Resource: r})
	}
	s.tbl.Store(t)
	return s
}

func getDiscovery(s *Server, path string, header map[string]string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, path, nil)
	for k, v := range header {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	s.serveNonResource(w, r, requestInfo{})
	return w
}

// aggregated fetches and decodes an aggregated document as client-go
// does, failing unless the server answered in the aggregated form.
func aggregated(t *testing.T, s *Server, path string) (apidiscoveryv2.APIGroupDiscoveryList, *httptest.ResponseRecorder) {
	t.Helper()
	w := getDiscovery(s, path, map[string]string{"Accept": clientGoAccept})
	if w.Code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, w.Code, w.Body)
	}
	if ok, err := discovery.ContentTypeIsGVK(w.Header().Get("Content-Type"), aggregatedGVK); !ok || err != nil {
		t.Fatalf("GET %s: Content-Type %q is not the aggregated one (%v)", path, w.Header().Get("Content-Type"), err)
	}
	var list apidiscoveryv2.APIGroupDiscoveryList
	if err := json.Unmarshal(w.Body.Bytes(), &list); err != nil {
		t.Fatal(err)
	}
	if list.Kind != "APIGroupDiscoveryList" || list.APIVersion != "apidiscovery.k8s.io/v2" {
		t.Errorf("GET %s: kind %q apiVersion %q", path, list.Kind, list.APIVersion)
	}
	return list, w
}

// legacy reads discovery the pre-aggregation way: /api, /apis, then every
// group-version's resource list.
func legacy(t *testing.T, s *Server) ([]metav1.APIGroup, map[string][]metav1.APIResource) {
	t.Helper()
	decode := func(path string, into any) {
		w := getDiscovery(s, path, map[string]string{"Accept": "application/json"})
		if w.Code != http.StatusOK || strings.Contains(w.Header().Get("Content-Type"), "apidiscovery") {
			t.Fatalf("GET %s: %d %q %s", path, w.Code, w.Header().Get("Content-Type"), w.Body)
		}
		if err := json.Unmarshal(w.Body.Bytes(), into); err != nil {
			t.Fatal(err)
		}
	}
	var versions metav1.APIVersions
	decode("/api", &versions)
	core := metav1.APIGroup{}
	for _, v := range versions.Versions {
		gvd := metav1.GroupVersionForDiscovery{GroupVersion: v, Version: v}
		core.Versions = append(core.Versions, gvd)
	}
	core.PreferredVersion = core.Versions[0]
	var list metav1.APIGroupList
	decode("/apis", &list)
	groups := append([]metav1.APIGroup{core}, list.Groups...)
	resources := map[string][]metav1.APIResource{}
	for _, g := range groups {
		for _, v := range g.Versions {
			path := "/apis/" + v.GroupVersion
			if g.Name == "" {
				path = "/api/" + v.GroupVersion
			}
			var rl metav1.APIResourceList
			decode(path, &rl)
			resources[v.GroupVersion] = rl.APIResources
		}
	}
	for i := range groups {
		groups[i].TypeMeta = metav1.TypeMeta{}
	}
	return groups, resources
}

// split turns /api's and /apis' aggregated documents into legacy groups
// and resource lists with client-go's own conversion.
func split(t *testing.T, s *Server) ([]metav1.APIGroup, map[string][]metav1.APIResource) {
	t.Helper()
	core, _ := aggregated(t, s, "/api")
	named, _ := aggregated(t, s, "/apis")
	var groups []metav1.APIGroup
	resources := map[string][]metav1.APIResource{}
	for _, doc := range []apidiscoveryv2.APIGroupDiscoveryList{core, named} {
		gl, byGV, failed := discovery.SplitGroupsAndResources(doc)
		if len(failed) > 0 {
			t.Fatalf("failed group-versions: %v", failed)
		}
		groups = append(groups, gl.Groups...)
		for gv, rl := range byGV {
			for i := range rl.APIResources {
				// client-go gives a subresource its parent's singular
				// name; the legacy lists leave it empty, as upstream's do.
				if strings.Contains(rl.APIResources[i].Name, "/") {
					rl.APIResources[i].SingularName = ""
				}
			}
			resources[gv.String()] = rl.APIResources
		}
	}
	return groups, resources
}

// TestAggregatedDiscoveryMatchesLegacy: what client-go makes of the
// aggregated documents is what the legacy endpoints list, group for group
// in the same order, resource for resource with subresources, verbs,
// short names and categories.
func TestAggregatedDiscoveryMatchesLegacy(t *testing.T) {
	s := discoveryServer()
	wantGroups, wantResources := legacy(t, s)
	gotGroups, gotResources := split(t, s)
	if !reflect.DeepEqual(gotGroups, wantGroups) {
		t.Errorf("groups:\naggregated %+v\nlegacy     %+v", gotGroups, wantGroups)
	}
	if len(gotResources) != len(wantResources) {
		t.Errorf("%d group-versions aggregated, %d legacy", len(gotResources), len(wantResources))
	}
	for gv, want := range wantResources {
		if got := gotResources[gv]; !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\naggregated %+v\nlegacy     %+v", gv, got, want)
		}
	}
	// The facts kubectl relies on, spelled out.
	find := func(gv, name string) metav1.APIResource {
		for _, r := range gotResources[gv] {
			if r.Name == name {
				return r
			}
		}
		t.Fatalf("%s %s not in aggregated discovery", gv, name)
		return metav1.APIResource{}
	}
	if d := find("apps/v1", "deployments"); d.Kind != "Deployment" || !d.Namespaced || !reflect.DeepEqual(d.ShortNames, []string{"deploy"}) || !reflect.DeepEqual(d.Categories, []string{"all"}) {
		t.Errorf("deployments: %+v", d)
	}
	if sc := find("apps/v1", "deployments/scale"); sc.Group != "autoscaling" || sc.Version != "v1" || sc.Kind != "Scale" {
		t.Errorf("deployments/scale: %+v", sc)
	}
	if ex := find("v1", "pods/exec"); ex.Kind != "PodExecOptions" || !reflect.DeepEqual(ex.Verbs, metav1.Verbs{"create", "get"}) {
		t.Errorf("pods/exec: %+v", ex)
	}
	if ns := find("v1", "namespaces"); ns.Namespaced {
		t.Errorf("namespaces: %+v", ns)
	}
}

// TestAggregatedDiscoveryNegotiation: the aggregated form only when the
// first acceptable Accept entry asks for v2; protobuf when asked, the same
// document as JSON.
func TestAggregatedDiscoveryNegotiation(t *testing.T) {
	s := discoveryServer()
	for _, tc := range []struct {
		accept, wantType string
	}{
		{clientGoAccept, "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"},
		{discovery.AcceptV2NoPeer + "," + clientGoAccept, "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"},
		{"application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json", "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"},
		{"application/yaml;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList", "application/yaml;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"},
		// v2beta1 was removed in 1.35: the legacy document.
		{"application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json", "application/json"},
		{"application/json,application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList", "application/json"},
		{"*/*", "application/json"},
		{"", "application/json"},
		{"application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList;profile=other,application/json", "application/json"},
	} {
		for _, path := range []string{"/api", "/apis"} {
			w := getDiscovery(s, path, map[string]string{"Accept": tc.accept})
			if w.Code != http.StatusOK || w.Header().Get("Content-Type") != tc.wantType {
				t.Errorf("GET %s Accept %q: %d %q, want %q", path, tc.accept, w.Code, w.Header().Get("Content-Type"), tc.wantType)
			}
		}
	}

	sch := runtime.NewScheme()
	if err := apidiscoveryv2.AddToScheme(sch); err != nil {
		t.Fatal(err)
	}
	pb := protobuf.NewSerializer(sch, sch)
	for _, path := range []string{"/api", "/apis"} {
		want, _ := aggregated(t, s, path)
		w := getDiscovery(s, path, map[string]string{"Accept": "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"})
		obj, gvk, err := pb.Decode(w.Body.Bytes(), nil, nil)
		if err != nil {
			t.Fatalf("GET %s protobuf: %v", path, err)
		}
		if *gvk != aggregatedGVK {
			t.Errorf("GET %s protobuf: kind %v", path, gvk)
		}
		got := obj.(*apidiscoveryv2.APIGroupDiscoveryList)
		got.TypeMeta = want.TypeMeta
		if !reflect.DeepEqual(*got, want) {
			t.Errorf("GET %s: protobuf and JSON documents differ:\n%+v\n%+v", path, got, want)
		}
	}
}

// TestAggregatedDiscoveryETag: a matching If-None-Match is a 304 without a
// body; a change to the served table changes the document and its ETag
// while readers keep reading.
func TestAggregatedDiscoveryETag(t *testing.T) {
	s := discoveryServer()
	_, first := aggregated(t, s, "/apis")
	etag := first.Header().Get("ETag")
	if len(etag) < 3 || etag[0] != '"' || first.Header().Get("Vary") != "Accept" {
		t.Fatalf("ETag %q Vary %q", etag, first.Header().Get("Vary"))
	}
	_, core := aggregated(t, s, "/api")
	if core.Header().Get("ETag") == etag {
		t.Error("/api and /apis share an ETag")
	}
	for _, inm := range []string{etag, "W/" + etag, `"other", ` + etag, "*"} {
		w := getDiscovery(s, "/apis", map[string]string{"Accept": clientGoAccept, "If-None-Match": inm})
		if w.Code != http.StatusNotModified || w.Body.Len() != 0 || w.Header().Get("ETag") != etag {
			t.Errorf("If-None-Match %s: %d, %d bytes, ETag %q", inm, w.Code, w.Body.Len(), w.Header().Get("ETag"))
		}
	}
	if w := getDiscovery(s, "/apis", map[string]string{"Accept": clientGoAccept, "If-None-Match": `"other"`}); w.Code != http.StatusOK {
		t.Errorf("a stale If-None-Match: %d", w.Code)
	}
	// The legacy document carries no ETag, as upstream's.
	if w := getDiscovery(s, "/apis", map[string]string{"If-None-Match": etag}); w.Code != http.StatusOK || w.Header().Get("ETag") != "" {
		t.Errorf("legacy /apis with If-None-Match: %d, ETag %q", w.Code, w.Header().Get("ETag"))
	}

	// A resource served at run time, as a CustomResourceDefinition will
	// be, while clients read.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				w := getDiscovery(s, "/apis", map[string]string{"Accept": clientGoAccept})
				if w.Code != http.StatusOK {
					t.Errorf("concurrent read: %d", w.Code)
					return
				}
			}
		}()
	}
	widgets := &registry.Resource{GVR: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"},
		Kind: "Widget", Singular: "widget", ShortNames: []string{"wd"}, Categories: []string{"all"}, Namespaced: true, Status: true}
	if err := s.changeTable(func(t *servedTable) error { t.serve(&served{Resource: widgets}); return nil }); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()

	w := getDiscovery(s, "/apis", map[string]string{"Accept": clientGoAccept, "If-None-Match": etag})
	if w.Code != http.StatusOK || w.Header().Get("ETag") == etag {
		t.Fatalf("after a change, the old ETag: %d, ETag %q", w.Code, w.Header().Get("ETag"))
	}
	_, resources := split(t, s)
	want := []metav1.APIResource{
		{Name: "widgets", SingularName: "widget", Namespaced: true, Kind: "Widget", Verbs: registry.DefaultVerbs, ShortNames: []string{"wd"}, Categories: []string{"all"}},
		{Name: "widgets/status", Namespaced: true, Kind: "Widget", Verbs: metav1.Verbs{"get", "patch", "update"}},
	}
	if got := resources["example.com/v1"]; !reflect.DeepEqual(got, want) {
		t.Errorf("example.com/v1:\n%+v\nwant %+v", got, want)
	}
	if _, core2 := aggregated(t, s, "/api"); core2.Header().Get("ETag") != core.Header().Get("ETag") {
		t.Error("/api's ETag changed with another group")
	}
}
