package registry

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestAllResources(t *testing.T) {
	all := All(Options{})
	if len(all) == 0 {
		t.Fatal("empty registry")
	}
	seen := map[schema.GroupVersionResource]int{}
	for i, r := range all {
		if j, dup := seen[r.GVR]; dup {
			t.Errorf("%s listed twice, at %d and %d", r.GVR, j, i)
		}
		seen[r.GVR] = i
		if r.Kind == "" || r.Singular == "" || r.New == nil || r.NewList == nil {
			t.Errorf("%s: incomplete names or constructors", r.GVR)
		}
		if got := r.New().GetObjectKind().GroupVersionKind(); !got.Empty() && got != r.GVK() {
			t.Errorf("%s: New returns a %v", r.GVR, got)
		}
	}
	for i, r := range all {
		if r.StoredAs == nil {
			if r.ToStorage != nil || r.FromStorage != nil {
				t.Errorf("%s: conversions without StoredAs", r.GVR)
			}
			continue
		}
		j, ok := seen[*r.StoredAs]
		switch {
		case !ok:
			t.Errorf("%s is stored as %s, which is not served", r.GVR, r.StoredAs)
		case j >= i:
			t.Errorf("%s (at %d) is stored as %s, which comes after it (at %d)", r.GVR, i, r.StoredAs, j)
		case all[j].StoredAs != nil:
			t.Errorf("%s is stored as %s, itself stored as %s", r.GVR, r.StoredAs, all[j].StoredAs)
		}
		if r.ToStorage == nil || r.FromStorage == nil {
			t.Errorf("%s: StoredAs without both conversions", r.GVR)
			continue
		}
		if ok {
			// The conversions produce the two kinds.
			stored := r.ToStorage(r.New())
			if got, want := stored.GetObjectKind().GroupVersionKind(), all[j].GVK(); got != want {
				t.Errorf("%s: ToStorage gives %v, want %v", r.GVR, got, want)
			}
			if got := r.FromStorage(all[j].New()).GetObjectKind().GroupVersionKind(); got != r.GVK() {
				t.Errorf("%s: FromStorage gives %v, want %v", r.GVR, got, r.GVK())
			}
		}
	}
	// The ones the API server relies on by name.
	for _, gvr := range []schema.GroupVersionResource{
		{Version: "v1", Resource: "namespaces"}, {Version: "v1", Resource: "pods"}, {Version: "v1", Resource: "services"},
		{Version: "v1", Resource: "events"}, {Group: "events.k8s.io", Version: "v1", Resource: "events"},
	} {
		if _, ok := seen[gvr]; !ok {
			t.Errorf("%s not served", gvr)
		}
	}
}
