package integration

import (
	"context"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// discoveryLog records what a discovery client asked and what came back.
type discoveryLog struct {
	mu         sync.Mutex
	aggregated map[string]bool // path -> answered in the aggregated form
	paths      []string
}

type loggingTransport struct {
	log  *discoveryLog
	next http.RoundTripper
}

func (t loggingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	if err != nil {
		return resp, err
	}
	agg, _ := discovery.ContentTypeIsGVK(resp.Header.Get("Content-Type"),
		schema.GroupVersionKind{Group: "apidiscovery.k8s.io", Version: "v2", Kind: "APIGroupDiscoveryList"})
	t.log.mu.Lock()
	defer t.log.mu.Unlock()
	t.log.paths = append(t.log.paths, r.URL.Path)
	t.log.aggregated[r.URL.Path] = agg && strings.Contains(r.Header.Get("Accept"), "v=v2")
	return resp, nil
}

// discoverAll reads every group and resource through client-go's
// discovery client, legacy or aggregated, and logs its requests.
func discoverAll(t *testing.T, cfg *rest.Config, legacy bool) ([]*metav1.APIGroup, map[string][]metav1.APIResource, *discoveryLog) {
	t.Helper()
	log := &discoveryLog{aggregated: map[string]bool{}}
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return loggingTransport{log: log, next: rt} })
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dc.UseLegacyDiscovery = legacy
	groups, lists, err := dc.ServerGroupsAndResources()
	if err != nil {
		t.Fatalf("discovery (legacy %v): %v", legacy, err)
	}
	byGV := map[string][]metav1.APIResource{}
	for _, l := range lists {
		rs := l.APIResources
		for i := range rs {
			// The aggregated form gives a subresource its parent's
			// singular name (client-go's conversion), the legacy one
			// none; that difference is client-go's, not the server's.
			if strings.Contains(rs[i].Name, "/") {
				rs[i].SingularName = ""
			}
		}
		byGV[l.GroupVersion] = rs
	}
	return groups, byGV, log
}

// klogLine is a line of kubectl's -v log.
var klogLine = regexp.MustCompile(`^[IWEF]\d{4} `)

// TestAggregatedDiscovery: client-go's discovery client takes the
// aggregated documents (two requests, no per-group-version lists) and
// finds in them exactly what the legacy endpoints list; kubectl
// api-resources does the same, and kubectl's commands that rely on
// categories and subresources work through it; a matching If-None-Match
// is a 304.
func TestAggregatedDiscovery(t *testing.T) {
	s := startServer(t)

	legacyGroups, legacyRes, legacyLog := discoverAll(t, s.config, true)
	aggGroups, aggRes, aggLog := discoverAll(t, s.config, false)

	if !aggLog.aggregated["/api"] || !aggLog.aggregated["/apis"] {
		t.Fatalf("client-go did not get aggregated discovery: %v", aggLog.aggregated)
	}
	if len(aggLog.paths) != 2 {
		t.Errorf("aggregated discovery took %d requests, want 2 (/api, /apis): %v", len(aggLog.paths), aggLog.paths)
	}
	if len(legacyLog.paths) <= 2 || legacyLog.aggregated["/apis"] {
		t.Errorf("the legacy client's requests: %v", legacyLog.paths)
	}
	// The legacy documents carry TypeMeta and the core group's addresses,
	// which client-go's conversion of the aggregated ones has no place for.
	for _, gs := range [][]*metav1.APIGroup{aggGroups, legacyGroups} {
		for _, g := range gs {
			g.TypeMeta, g.ServerAddressByClientCIDRs = metav1.TypeMeta{}, nil
		}
	}
	if !reflect.DeepEqual(aggGroups, legacyGroups) {
		t.Errorf("groups differ:\naggregated %+v\nlegacy     %+v", aggGroups, legacyGroups)
	}
	if len(aggRes) != len(legacyRes) || len(aggRes) < 10 {
		t.Errorf("%d group-versions aggregated, %d legacy", len(aggRes), len(legacyRes))
	}
	for gv, want := range legacyRes {
		if got := aggRes[gv]; !reflect.DeepEqual(got, want) {
			t.Errorf("%s differs:\naggregated %+v\nlegacy     %+v", gv, got, want)
		}
	}

	// kubectl api-resources, on a fresh cache: the same resources, from
	// /api and /apis alone.
	out, err := s.kubectl("api-resources", "-o", "name", "-v=6")
	if err != nil {
		t.Fatalf("api-resources: %v\n%s", err, out)
	}
	var names []string
	for _, line := range strings.Split(out, "\n") {
		switch {
		case klogLine.MatchString(line):
			if strings.Contains(line, `url="`) && (strings.Contains(line, "/apis/") || strings.Contains(line, "/api/")) {
				t.Errorf("kubectl fetched a group-version list: %s", line)
			}
		case strings.TrimSpace(line) != "":
			names = append(names, strings.TrimSpace(line))
		}
	}
	var want []string
	var wantAll []string
	for _, g := range legacyGroups {
		for _, r := range legacyRes[g.PreferredVersion.GroupVersion] {
			if strings.Contains(r.Name, "/") {
				continue
			}
			name := r.Name
			if g.Name != "" {
				name += "." + g.Name
			}
			want = append(want, name)
			if slices.Contains(r.Categories, "all") {
				wantAll = append(wantAll, name)
			}
		}
	}
	sort.Strings(names)
	sort.Strings(want)
	if !reflect.DeepEqual(names, want) {
		t.Errorf("kubectl api-resources:\n%v\nlegacy discovery:\n%v", names, want)
	}
	got := strings.Fields(s.mustKubectl("api-resources", "--categories=all", "-o", "name"))
	sort.Strings(got)
	sort.Strings(wantAll)
	if len(wantAll) < 5 || !reflect.DeepEqual(got, wantAll) {
		t.Errorf("category all: kubectl %v, legacy %v", got, wantAll)
	}
	if out := s.mustKubectl("api-resources", "-o", "wide", "--api-group=apps"); !strings.Contains(out, "deploy") || !strings.Contains(out, "all") {
		t.Errorf("api-resources -o wide lacks short names or categories:\n%s", out)
	}

	// Categories and subresources at work: get all, scale through
	// deployments/scale.
	s.mustKubectl("apply", "-f", "testdata/deployment.yaml")
	out = s.mustKubectl("get", "all")
	for _, w := range []string{"service/kubernetes", "deployment.apps/container-lab"} {
		if !strings.Contains(out, w) {
			t.Errorf("get all lacks %s:\n%s", w, out)
		}
	}
	s.mustKubectl("scale", "deployment/container-lab", "--replicas=5")
	if out := s.mustKubectl("get", "deployment", "container-lab", "-o", "jsonpath={.spec.replicas}"); out != "5" {
		t.Errorf("replicas after kubectl scale: %q", out)
	}

	// The ETag: a matching If-None-Match is a 304 without a body.
	hc, err := rest.HTTPClientFor(s.config)
	if err != nil {
		t.Fatal(err)
	}
	get := func(path, inm string) *http.Response {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, s.config.Host+path, nil)
		req.Header.Set("Accept", discovery.AcceptV2+","+discovery.AcceptV1)
		if inm != "" {
			req.Header.Set("If-None-Match", inm)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for _, path := range []string{"/api", "/apis"} {
		first := get(path, "")
		etag := first.Header.Get("ETag")
		if first.StatusCode != http.StatusOK || etag == "" {
			t.Fatalf("GET %s: %d, ETag %q", path, first.StatusCode, etag)
		}
		if again := get(path, etag); again.StatusCode != http.StatusNotModified || again.ContentLength > 0 {
			t.Errorf("GET %s If-None-Match %s: %d, %d bytes", path, etag, again.StatusCode, again.ContentLength)
		}
		if other := get(path, `"stale"`); other.StatusCode != http.StatusOK {
			t.Errorf("GET %s with a stale ETag: %d", path, other.StatusCode)
		}
	}
}
