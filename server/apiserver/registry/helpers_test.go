package registry

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// resource returns the served resource with the given group and plural
// name from the registry, as the API server builds it.
func served(t *testing.T, group, plural string) *Resource {
	t.Helper()
	for _, r := range All(Options{}) {
		if r.GVR.Group == group && r.GVR.Resource == plural {
			return r
		}
	}
	t.Fatalf("resource %v not in the registry", schema.GroupResource{Group: group, Resource: plural})
	return nil
}

func i64(v int64) *int64 { return &v }
func i32(v int32) *int32 { return &v }
