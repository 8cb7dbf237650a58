// Package registry declares every resource the API server serves, one file
// per kind or API group: its names for discovery, its Go types, where it
// is stored, which fields can be selected, and its Strategy (defaulting,
// validation, create/update preparation, hooks). resources.go lists them;
// adding a kind is an entry there and the kind's file. The generic rules
// for spec, status and generation are at the end of this file.
package registry

import (
	"context"

	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kelp-project/kelp/server/apiserver/auth"
)

// Resource is one served resource: its names, scope, Go types, storage
// and selectable fields, and its Strategy.
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
	Scale *Scale
	// Subresources are the kind's own subresources beyond status and scale.
	Subresources []Subresource
	// Verbs overrides the default verb set (e.g. create-only reviews).
	Verbs []string
	// StoragePrefix overrides /registry/<resource>/.
	StoragePrefix string
	// CacheEncoded: the watch cache keeps this kind's objects as stored
	// bytes (storage.Config.CacheEncoded).
	CacheEncoded bool
	// KeepStatusOnCreate: status written on create is stored (nodes and
	// events-like kinds); otherwise status starts empty, as upstream.
	KeepStatusOnCreate bool
	// StoredAs names the resource whose storage this one shares, with
	// ToStorage and FromStorage converting between the two kinds.
	StoredAs    *schema.GroupVersionResource
	ToStorage   func(runtime.Object) runtime.Object
	FromStorage func(runtime.Object) runtime.Object
	// Review marks a create-only resource that is answered, never stored
	// (SelfSubjectAccessReview, SelfSubjectReview).
	Review bool
	// Table, when set, renders the kind's Table instead of a printer of
	// server/apiserver/printers (a CRD's additionalPrinterColumns).
	Table func(obj runtime.Object) (*metav1.Table, error)
	// Custom is set on resources served from a CRD.
	Custom *Custom
	// NoController, when set, is the warning a create of this kind gets
	// (a Warning header, which kubectl prints): kelp serves the kind but
	// nothing acts on it yet, and a user must not wait for pods or
	// volumes that will never come.
	NoController string

	Strategy
}

// Strategy is a kind's rules, as upstream's pkg/registry/<group>/<kind>/
// strategy.go. The generic write path calls them and names no kind:
//
//	create: generic metadata, ResetStatus unless KeepStatusOnCreate,
//	        Default, PrepareForCreate, mutating admission, Validate,
//	        validating admission, Allocator.Allocate, storage.
//	update: carried-over metadata, the spec/status split, PrepareForUpdate,
//	        Default, generation, mutating admission, ValidateUpdate (or
//	        ValidateStatusUpdate through /status), validating admission,
//	        Allocator.Allocate, BeforeStore, storage, then
//	        Allocator.ReleaseReplaced.
//	delete: validating admission, MarkDeleted or the generic marking with
//	        GracePeriod, storage; Allocator.Release once the key is gone.
//
// Default, Validate, ValidateUpdate and ValidateStatusUpdate are required
// (a test walks the registry); the rest are optional.
type Strategy struct {
	// Default fills upstream's defaults (server/apiserver/defaults);
	// NoDefaults for kinds upstream has no defaulter for.
	Default func(obj runtime.Object)
	// Validate checks a new object, ValidateUpdate a write to the main
	// endpoint, ValidateStatusUpdate a write to /status
	// (server/apiserver/validation).
	Validate             func(obj runtime.Object) field.ErrorList
	ValidateUpdate       func(obj, old runtime.Object) field.ErrorList
	ValidateStatusUpdate func(obj, old runtime.Object) field.ErrorList
	// PrepareForCreate sets what the server owns on a new object (a pod's
	// phase, a namespace's finalizer), after defaulting.
	PrepareForCreate func(obj runtime.Object)
	// PrepareForUpdate runs on writes to the main endpoint, before
	// defaulting: fields that endpoint may not change are taken from old,
	// values the server allocated are carried over when a client omits
	// them.
	PrepareForUpdate func(obj, old runtime.Object)
	// PrepareForStatusUpdate runs on writes to /status, once the spec is
	// taken from old (a CSR keeps its approval conditions).
	PrepareForStatusUpdate func(obj, old runtime.Object)
	// CreatedBy records the requesting user on a new object, after
	// PrepareForCreate (a CSR's spec.username, uid, groups, extra).
	CreatedBy func(obj runtime.Object, u *auth.User)
	// BeforeStore makes server-owned changes after validation.
	BeforeStore func(obj runtime.Object)
	// Allocator claims and releases values outside the object (Service
	// IPs and node ports).
	Allocator Allocator
	// GracePeriod is how long a deleted object lingers for its owner to
	// confirm (a pod's kubelet); nil means it goes at once.
	GracePeriod func(obj runtime.Object, opts *metav1.DeleteOptions) int64
	// MarkDeleted replaces the generic deletion marking (finalizers,
	// propagation, grace): a namespace waits for its spec.finalizers.
	MarkDeleted func(obj runtime.Object)
	// Bind assigns the object to a node (pods/binding).
	Bind func(obj runtime.Object, b *corev1.Binding) (runtime.Object, error)
	// GenericTable: upstream prints this kind with the generic table (Name,
	// Created At). Every other kind has a printer in server/apiserver/printers.
	GenericTable bool
}

// NoDefaults is the Default of kinds upstream does not default.
func NoDefaults(runtime.Object) {}

// Allocator claims what an object needs beyond its own key, and gives it
// back. Allocate returns a func that releases what this call claimed, for
// when the write fails afterwards. Release frees what a deleted object
// held; ReleaseReplaced, once an update is stored, what the replaced
// object held that the stored one no longer does (a Service turned
// ExternalName gives its cluster IP back).
type Allocator interface {
	Allocate(ctx context.Context, obj, old runtime.Object, dryRun bool) (release func(), err error)
	Release(ctx context.Context, obj runtime.Object, dryRun bool)
	ReleaseReplaced(ctx context.Context, obj, old runtime.Object, dryRun bool)
}

// Scale presents a workload's replica count as an autoscaling/v1 Scale.
type Scale struct {
	Replicas    func(obj runtime.Object) (spec, status int32, selector *metav1.LabelSelector)
	SetReplicas func(obj runtime.Object, n int32)
}

// SubresourceKind is how the API server serves a kind's subresource.
type SubresourceKind int

const (
	// SpecSubresource is an update that may change the spec and never the
	// status (namespaces/finalize).
	SpecSubresource SubresourceKind = iota + 1
	// BindingSubresource is a create of a core/v1 Binding (pods/binding),
	// applied by Strategy.Bind.
	BindingSubresource
	// KubeletSubresource is answered by the kubelet of the object's node
	// (pods/log, exec, attach, portforward).
	KubeletSubresource
	// TokenSubresource is a create of an authentication.k8s.io/v1
	// TokenRequest that mints a token for the object
	// (serviceaccounts/token); nothing is stored.
	TokenSubresource
	// EvictionSubresource is a create of a policy/v1 Eviction
	// (pods/eviction): a delete of the object that the disruption budgets
	// covering it must allow.
	EvictionSubresource
	// PodProxySubresource is proxied by the API server to the pod's IP
	// (pods/proxy); the path after /proxy is the path there.
	PodProxySubresource
	// ServiceProxySubresource is proxied by the API server to one of the
	// service's ready endpoints (services/proxy), as PodProxySubresource.
	ServiceProxySubresource
	// StatusLikeSubresource reads as the object and is written as /status
	// is, with the subresource's own Prepare and ValidateUpdate
	// (certificatesigningrequests/approval: only the conditions change).
	StatusLikeSubresource
	// SpecLikeSubresource reads as the object and is written as the main
	// endpoint is (status kept, generation bumped on a spec change), with
	// the subresource's own Prepare and ValidateUpdate instead of the
	// kind's (pods/resize: only the containers' resources change).
	SpecLikeSubresource
)

// Subresource is one subresource of a kind, as discovery lists it.
type Subresource struct {
	Name  string
	Verbs []string
	// GVK is the kind the subresource takes and returns; an empty Group
	// and Version mean the parent's.
	GVK  schema.GroupVersionKind
	Kind SubresourceKind
	// Prepare and ValidateUpdate are a StatusLikeSubresource's
	// PrepareForStatusUpdate and ValidateStatusUpdate, or a
	// SpecLikeSubresource's PrepareForUpdate and ValidateUpdate.
	Prepare        func(obj, old runtime.Object)
	ValidateUpdate func(obj, old runtime.Object) field.ErrorList
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

// structField reads a top-level struct field (Spec, Status) by reflection; the
// generic rules below apply to every kind that has one.
func structField(obj runtime.Object, name string) (reflect.Value, bool) {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return reflect.Value{}, false
	}
	f := v.Elem().FieldByName(name)
	return f, f.IsValid()
}

// HasSpec reports whether the kind has a spec, which decides whether it
// tracks metadata.generation. Custom objects always do, as upstream.
func HasSpec(obj runtime.Object) bool {
	if _, ok := obj.(*unstructured.Unstructured); ok {
		return true
	}
	_, ok := structField(obj, "Spec")
	return ok
}

// SpecChanged compares everything a generation counts: spec, and for
// kinds without one nothing. For a custom object it is everything but
// metadata (upstream's custom resource strategy; with a /status
// subresource the status was carried over before this is asked).
func SpecChanged(obj, old runtime.Object) bool {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		o, ok := old.(*unstructured.Unstructured)
		return !ok || !equality.Semantic.DeepEqual(withoutKeys(u.Object, "metadata"), withoutKeys(o.Object, "metadata"))
	}
	a, ok := structField(obj, "Spec")
	b, _ := structField(old, "Spec")
	return ok && !equality.Semantic.DeepEqual(a.Interface(), b.Interface())
}

// CopyStatus sets obj's status to old's: writes to the main endpoint do not
// change status when a /status subresource exists.
func CopyStatus(obj, old runtime.Object) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		if o, ok := old.(*unstructured.Unstructured); ok {
			if st, ok := o.Object["status"]; ok {
				u.Object["status"] = runtime.DeepCopyJSONValue(st)
			} else {
				delete(u.Object, "status")
			}
		}
		return
	}
	copyField(obj, old, "Status")
}

// CopySpec sets obj's spec to old's: writes to /status do not change spec.
// A custom object has no one spec field: everything but metadata and
// status is old's, as upstream's status strategy.
func CopySpec(obj, old runtime.Object) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		if o, ok := old.(*unstructured.Unstructured); ok {
			for k := range u.Object {
				if k != "metadata" && k != "status" {
					delete(u.Object, k)
				}
			}
			for k, v := range o.Object {
				if k != "metadata" && k != "status" {
					u.Object[k] = runtime.DeepCopyJSONValue(v)
				}
			}
		}
		return
	}
	copyField(obj, old, "Spec")
}

// withoutKeys is a shallow copy of m without the named keys.
func withoutKeys(m map[string]interface{}, keys ...string) map[string]interface{} {
	out := make(map[string]interface{}, len(m))
	for k, v := range m {
		out[k] = v
	}
	for _, k := range keys {
		delete(out, k)
	}
	return out
}

// ResetStatus empties status, as upstream does on create for most kinds.
func ResetStatus(obj runtime.Object) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		delete(u.Object, "status")
		return
	}
	if f, ok := structField(obj, "Status"); ok {
		f.Set(reflect.Zero(f.Type()))
	}
}

func copyField(obj, old runtime.Object, name string) {
	a, ok := structField(obj, name)
	b, ok2 := structField(old, name)
	if ok && ok2 {
		a.Set(b)
	}
}
