package apiserver

import (
	"net/http"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kelp-project/kelp/server/apiserver/registry"
)

// TestServedTableSwap serves and unserves a custom resource while readers
// look resources up and fetch discovery: every reader sees either the
// table before or the table after, and a group left empty leaves
// discovery.
func TestServedTableSwap(t *testing.T) {
	s := discoveryServer()
	gvr := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	widgets := &registry.Resource{GVR: gvr, Kind: "Widget", Singular: "widget", Namespaced: true, Custom: &registry.Custom{CRD: "widgets.example.com"}}
	builtins := len(s.live().resources)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				t0 := s.live()
				_, ok := t0.resources[gvr]
				if n := len(t0.resources); (ok && n != builtins+1) || (!ok && n != builtins) {
					t.Errorf("a table with %d resources, widgets %v", n, ok)
					return
				}
				if w := getDiscovery(s, "/apis", map[string]string{"Accept": clientGoAccept}); w.Code != http.StatusOK {
					t.Errorf("discovery: %d", w.Code)
					return
				}
			}
		}()
	}
	for i := 0; i < 50; i++ {
		if err := s.changeTable(func(t *servedTable) error { t.serve(&served{Resource: widgets}); return nil }); err != nil {
			t.Fatal(err)
		}
		if err := s.changeTable(func(t *servedTable) error { t.unserve(gvr); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()

	final := s.live()
	if _, ok := final.byGroup["example.com/v1"]; ok {
		t.Error("example.com/v1 still has a resource list")
	}
	for _, gv := range final.groupVersions {
		if gv.Group == "example.com" {
			t.Error("example.com still in the group-versions")
		}
	}
	if len(final.resources) != builtins {
		t.Errorf("%d resources after the last unserve, want %d", len(final.resources), builtins)
	}
}

// TestCustomVersionsSorted: custom group-versions follow the built-in
// ones, each group's versions in kube-aware order.
func TestCustomVersionsSorted(t *testing.T) {
	tbl := newServedTable()
	tbl.serve(&served{Resource: &registry.Resource{GVR: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}}})
	for _, v := range []string{"v1beta1", "v1", "v2alpha1", "v2"} {
		tbl.serve(&served{Resource: &registry.Resource{GVR: schema.GroupVersionResource{Group: "example.com", Version: v, Resource: "widgets"}, Custom: &registry.Custom{}}})
	}
	sortCustomVersions(tbl)
	var got []string
	for _, gv := range tbl.groupVersions {
		got = append(got, gv.String())
	}
	// Betas before alphas, whatever their major version (upstream
	// sorts v10, v2, v1, v11beta2, v10beta3, v3beta1, v12alpha1).
	want := []string{"apps/v1", "example.com/v2", "example.com/v1", "example.com/v1beta1", "example.com/v2alpha1"}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}
