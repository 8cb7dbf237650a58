// Package registry declares every resource the API server serves: its
// names for discovery, its Go types, where it is stored, which fields can
// be selected, and the upstream rules for spec, status and generation.
package registry

import (
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Resource is one served resource.
type Resource struct {
	GVR        schema.GroupVersionResource
	Kind       string
	Singular   string
	ShortNames []string
	Categories []string
	Namespaced bool
	New        func() runtime.Object
	NewList    func() runtime.Object
	// Fields returns the resource's selectable fields beyond metadata.name
	// and metadata.namespace.
	Fields func(obj runtime.Object) fields.Set
	// Status: the resource has a /status subresource; its main endpoint
	// ignores status changes and /status ignores spec changes.
	Status bool
	// Scale: the resource has a /scale subresource (autoscaling/v1 Scale).
	Scale bool
	// Verbs overrides the default verb set (e.g. create-only reviews).
	Verbs []string
	// StoragePrefix overrides /registry/<resource>/.
	StoragePrefix string
	// KeepStatusOnCreate: status written on create is stored (nodes and
	// events-like kinds); otherwise status starts empty, as upstream.
	KeepStatusOnCreate bool
	// PrepareForCreate runs after the generic metadata is filled in.
	PrepareForCreate func(obj runtime.Object)
	// StoredAs names the resource whose storage this one shares, with
	// ToStorage and FromStorage converting between the two kinds.
	StoredAs    *schema.GroupVersionResource
	ToStorage   func(runtime.Object) runtime.Object
	FromStorage func(runtime.Object) runtime.Object
	// Review marks a create-only resource that is answered, never stored
	// (SelfSubjectAccessReview, SelfSubjectReview).
	Review bool
}

// GroupResource names the resource for errors.
func (r *Resource) GroupResource() schema.GroupResource { return r.GVR.GroupResource() }

// GVK is the kind served at this resource's version.
func (r *Resource) GVK() schema.GroupVersionKind { return r.GVR.GroupVersion().WithKind(r.Kind) }

// Prefix is the etcd key prefix.
func (r *Resource) Prefix() string {
	if r.StoragePrefix != "" {
		return r.StoragePrefix
	}
	return "/registry/" + r.GVR.Resource + "/"
}

// DefaultVerbs is what every stored resource supports.
var DefaultVerbs = []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}

// AllVerbs is the verb set, for discovery.
func (r *Resource) AllVerbs() []string {
	if r.Verbs != nil {
		return r.Verbs
	}
	return DefaultVerbs
}

// Attrs returns labels and selectable fields, for storage predicates.
func (r *Resource) Attrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	acc, err := meta.Accessor(obj)
	if err != nil {
		return nil, nil, err
	}
	fs := fields.Set{"metadata.name": acc.GetName()}
	if r.Namespaced {
		fs["metadata.namespace"] = acc.GetNamespace()
	}
	if r.Fields != nil {
		for k, v := range r.Fields(obj) {
			fs[k] = v
		}
	}
	return labels.Set(acc.GetLabels()), fs, nil
}

// CheckFieldSelector rejects selectors on fields this resource does not
// index, with upstream's message.
func (r *Resource) CheckFieldSelector(sel fields.Selector) error {
	if sel == nil || sel.Empty() {
		return nil
	}
	_, known, _ := r.Attrs(r.New())
	for _, req := range sel.Requirements() {
		if _, ok := known[req.Field]; !ok {
			return fmt.Errorf("field label not supported: %s", req.Field)
		}
	}
	return nil
}

// field reads a top-level struct field (Spec, Status) by reflection; the
// generic rules below apply to every kind that has one.
func field(obj runtime.Object, name string) (reflect.Value, bool) {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return reflect.Value{}, false
	}
	f := v.Elem().FieldByName(name)
	return f, f.IsValid()
}

// HasSpec reports whether the kind has a spec, which decides whether it
// tracks metadata.generation.
func HasSpec(obj runtime.Object) bool {
	_, ok := field(obj, "Spec")
	return ok
}

// SpecChanged compares everything a generation counts: spec, and for
// kinds without one nothing.
func SpecChanged(obj, old runtime.Object) bool {
	a, ok := field(obj, "Spec")
	b, _ := field(old, "Spec")
	return ok && !equality.Semantic.DeepEqual(a.Interface(), b.Interface())
}

// CopyStatus sets obj's status to old's: writes to the main endpoint do not
// change status when a /status subresource exists.
func CopyStatus(obj, old runtime.Object) {
	copyField(obj, old, "Status")
}

// CopySpec sets obj's spec to old's: writes to /status do not change spec.
func CopySpec(obj, old runtime.Object) {
	copyField(obj, old, "Spec")
}

// ResetStatus empties status, as upstream does on create for most kinds.
func ResetStatus(obj runtime.Object) {
	if f, ok := field(obj, "Status"); ok {
		f.Set(reflect.Zero(f.Type()))
	}
}

func copyField(obj, old runtime.Object, name string) {
	a, ok := field(obj, name)
	b, ok2 := field(old, name)
	if ok && ok2 {
		a.Set(b)
	}
}
