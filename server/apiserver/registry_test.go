package apiserver

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kelp-project/kelp/server/apiserver/openapi"
	"github.com/kelp-project/kelp/server/apiserver/printers"
	"github.com/kelp-project/kelp/server/apiserver/registry"
)

// TestEveryServedKindIsComplete walks the registry: every stored kind has
// its defaulting, its three validation rules, a printer (or upstream's
// generic table, declared), OpenAPI paths and a discovery entry with its
// subresources. A kind added without one of them fails here.
func TestEveryServedKindIsComplete(t *testing.T) {
	all := registry.All(registry.Options{})
	var specs []openapi.Resource
	for _, r := range all {
		specs = append(specs, openapiResource(r))
	}
	docs := openapi.New(specs)
	for _, r := range all {
		t.Run(r.GVR.String(), func(t *testing.T) {
			sv := &served{Resource: r}
			entries := discoveryEntries(sv)
			if entries[0].Name != r.GVR.Resource || entries[0].Kind != r.Kind || len(entries[0].Verbs) == 0 {
				t.Fatalf("discovery entry %+v", entries[0])
			}
			for _, sub := range subresourcesOf(sv) {
				if !slices.ContainsFunc(entries, func(e metav1.APIResource) bool { return e.Name == r.GVR.Resource+"/"+sub.name }) {
					t.Errorf("subresource %s missing from discovery", sub.name)
				}
			}
			paths := openAPIPaths(t, docs, r.GVR.GroupVersion().String())
			want := "/" + r.GVR.Resource
			if !slices.ContainsFunc(paths, func(p string) bool { return strings.HasSuffix(p, want) }) {
				t.Errorf("no OpenAPI path ending in %s among %d", want, len(paths))
			}
			if r.Review {
				return // answered, never stored: no write path
			}
			if r.Default == nil || r.Validate == nil || r.ValidateUpdate == nil || r.ValidateStatusUpdate == nil {
				t.Fatalf("incomplete strategy: default %v, validate %v, update %v, status %v",
					r.Default != nil, r.Validate != nil, r.ValidateUpdate != nil, r.ValidateStatusUpdate != nil)
			}
			switch has := printers.Has(r.New()); {
			case !has && !r.GenericTable:
				t.Error("no printer, and not declared GenericTable")
			case has && r.GenericTable:
				t.Error("declared GenericTable but has a printer")
			}
			// The strategy runs on the kind's own empty object without
			// panicking, and an empty object is never valid (it has no name).
			obj := r.New()
			r.Default(obj)
			if r.PrepareForCreate != nil {
				r.PrepareForCreate(obj)
			}
			if errs := r.Validate(obj); len(errs) == 0 {
				t.Error("an object without a name passed validation")
			}
			_ = r.ValidateUpdate(obj, r.New())
			_ = r.ValidateStatusUpdate(obj, r.New())
			// A kind compared with another kind is an internal error, not a panic.
			other := all[0].New()
			if r.Kind == all[0].Kind {
				other = all[1].New()
			}
			if errs := r.ValidateUpdate(obj, other); len(errs) == 0 {
				t.Error("update validation compared two kinds without an error")
			}
		})
	}
}

func openAPIPaths(t *testing.T, docs http.Handler, gv string) []string {
	t.Helper()
	path := "/openapi/v3/apis/" + gv
	if !strings.Contains(gv, "/") {
		path = "/openapi/v3/api/" + gv
	}
	rec := httptest.NewRecorder()
	docs.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body.String())
	}
	var doc struct {
		Paths map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	var out []string
	for p := range doc.Paths {
		out = append(out, p)
	}
	return out
}
