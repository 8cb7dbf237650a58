// Package apply gives the API server server-side apply and managedFields
// tracking for the built-in typed objects (the k8s.io/api types registered in
// k8s.io/client-go/kubernetes/scheme.Scheme).
//
// It wraps apimachinery's field manager (managedfields.NewDefaultFieldManager)
// the way kube-apiserver's generic registry does, with kelp's pieces plugged
// in: client-go's schema-backed type converter, kelp's defaulter, and a
// per-GVK table of upstream "reset fields" (the fields a strategy resets, so
// that the main resource never owns status and /status never owns spec).
//
// The API server calls it from its write path:
//
//   - create / update / non-apply patch: Update(gvk, sub, live, obj, manager)
//     on the final object, after kelp's defaults (upstream's decoder has
//     already defaulted the object when its field manager runs, so defaulted
//     fields are attributed to the writer) and before validation. Update never
//     fails the request.
//   - PATCH with Content-Type application/apply-patch+yaml:
//     Apply(gvk, sub, live, body, fieldManager, force); live is the stored
//     object, or an empty object carrying the URL's name/namespace when
//     nothing is stored (main resource only: upstream answers 404 for an
//     apply to the /status of a missing object). The result then goes
//     through the usual create/update path (prepare, admission,
//     validation, storage); it must NOT be passed to Update again (that
//     would add an Update entry for the applier).
//   - /scale writes: Update with the parent's GVK and subresource "scale"
//     gives the entry upstream's scale handler produces (parent apiVersion,
//     subresource "scale", f:spec.f:replicas). pods/binding and eviction
//     are not tracked upstream: do not call Update for them.
//
// Invariants:
//   - The objects handed in are never mutated, except obj in Update (whose
//     managedFields are rewritten in place; Update returns it). live may be a
//     shared cached object.
//   - Callers need not care about TypeMeta: objects with or without it are
//     accepted (with it, the field manager does not copy them), Apply's
//     result always has it set to gvk, Update returns obj as given.
//   - A Manager is safe for concurrent use; field managers are built once per
//     (GVK, subresource) and shared, as upstream shares one per endpoint.
package apply

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured/unstructuredscheme"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
)

// Manager records managedFields and performs server-side apply for the
// typed objects of scheme.Scheme. It caches one FieldManager per
// (GVK, subresource) and is safe for concurrent use.
type Manager struct {
	defaulter runtime.ObjectDefaulter
	// Custom, if set, returns the schema of a custom resource's kind (nil
	// when it has none usable): the API server's CRDs.
	Custom func(gvk schema.GroupVersionKind) managedfields.TypeConverter
	// managers maps fmKey to cached. Entries are immutable once stored;
	// a lost race only wastes one cheap construction.
	managers sync.Map
}

type fmKey struct {
	gvk         schema.GroupVersionKind
	subresource string
}

// New returns a Manager. defaulter fills in defaults in place (the API
// server passes defaults.Apply); it runs on every object produced by
// Apply, as upstream's field manager runs the scheme defaulter on the
// merged object. It must be idempotent. nil means no defaulting.
func New(defaulter func(runtime.Object)) *Manager {
	if defaulter == nil {
		defaulter = func(runtime.Object) {}
	}
	return &Manager{defaulter: defaulterFunc(defaulter)}
}

// defaulterFunc adapts a plain function to runtime.ObjectDefaulter.
type defaulterFunc func(runtime.Object)

func (f defaulterFunc) Default(obj runtime.Object) { f(obj) }

// errUnsupported marks kinds that client-go's apply schema does not
// describe: the create-only, never-stored kinds (TokenReview, the
// *SubjectAccessReviews, SelfSubjectReview, TokenRequest, Binding,
// autoscaling Scale, RangeAllocation). Update leaves their objects alone;
// Apply refuses them.
var errUnsupported = errors.New("kind has no apply schema")

// cached is a fmKey's entry: a field manager or errUnsupported.
type cached struct {
	fm  *managedfields.FieldManager
	err error
	// custom is the schema a custom kind's field manager was made with:
	// a CRD's change makes a new one, which replaces the entry.
	custom managedfields.TypeConverter
}

// fieldManager returns the shared field manager for gvk and subresource,
// building it (and, on first use, the type converter) if needed.
func (m *Manager) fieldManager(gvk schema.GroupVersionKind, subresource string) (*managedfields.FieldManager, error) {
	custom := !scheme.Scheme.Recognizes(gvk)
	key := fmKey{gvk: gvk, subresource: subresource}
	var schema managedfields.TypeConverter
	if custom && m.Custom != nil {
		schema = m.Custom(gvk)
	}
	if c, ok := m.managers.Load(key); ok && c.(cached).custom == schema {
		return c.(cached).fm, c.(cached).err
	}
	if custom {
		// A custom resource: its CRD's schema when it has one (list-map
		// keys and map types as declared), else fields deduced from the
		// objects themselves (maps merge, lists are atomic), as upstream.
		tc := schema
		if tc == nil {
			tc = managedfields.NewDeducedTypeConverter()
		}
		fm, err := managedfields.NewDefaultFieldManager(tc, unstructuredConvertor{},
			m.defaulter, unstructuredscheme.NewUnstructuredCreator(), gvk, gvk.GroupVersion(), subresource, nil)
		m.managers.Store(key, cached{fm: fm, err: err, custom: schema})
		return fm, err
	}
	empty, err := newEmpty(gvk)
	if err != nil {
		return nil, err // not registered: not cached, callers are buggy
	}
	c := cached{}
	if _, err := typeConverter().ObjectToTyped(empty); err != nil {
		c.err = fmt.Errorf("%v: %w", gvk, errUnsupported)
	} else {
		// hub == the kind's own version: kelp stores and serves the
		// versioned k8s.io/api types directly, with no internal version.
		c.fm, c.err = managedfields.NewDefaultFieldManager(
			typeConverter(), convertor{scheme.Scheme}, m.defaulter, scheme.Scheme,
			gvk, gvk.GroupVersion(), subresource, resetFields(gvk, subresource))
	}
	actual, _ := m.managers.LoadOrStore(key, c)
	return actual.(cached).fm, actual.(cached).err
}

// newEmpty returns a zero object of gvk with its TypeMeta set (so the
// convertor's no-copy path applies to it).
func newEmpty(gvk schema.GroupVersionKind) (runtime.Object, error) {
	if !scheme.Scheme.Recognizes(gvk) {
		u := &unstructured.Unstructured{Object: map[string]interface{}{}}
		u.SetGroupVersionKind(gvk)
		return u, nil
	}
	obj, err := scheme.Scheme.New(gvk)
	if err != nil {
		return nil, err
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return obj, nil
}

// Update records that manager changed live into obj (live is nil on
// create) and returns obj with its managedFields updated (obj itself,
// modified in place).
//
// It never fails: as upstream's UpdateNoErrors, when the managedFields
// cannot be computed (unknown kind, object not valid against the schema,
// undecodable managedFields...) the error is logged (klog, at most once a
// second) and obj keeps live's managedFields.
//
// Upstream semantics carried over from apimachinery:
//   - on create every set field, defaults included, is owned by manager;
//   - managedFields sent in obj replace live's (clients may edit them), an
//     empty list ([] or [{}]) resets them; for subresources they are ignored;
//   - an existing object without managedFields is not tracked by Update
//     (tracking starts with its first apply).
//
// manager is the request's fieldManager, or ManagerName(User-Agent) when
// that is empty; "" is recorded as "unknown".
func (m *Manager) Update(gvk schema.GroupVersionKind, subresource string, live, obj runtime.Object, manager string) runtime.Object {
	if obj == nil {
		return obj
	}
	fm, err := m.fieldManager(gvk, subresource)
	if err != nil {
		return obj
	}
	if live == nil {
		// Upstream's create handler passes a fresh empty object as live.
		if live, err = newEmpty(gvk); err != nil {
			return obj
		}
	}
	return fm.UpdateNoErrors(live, obj, manager)
}

// Apply applies an apply configuration (the YAML or JSON body of an
// application/apply-patch+yaml PATCH) to live for manager and returns the
// merged, defaulted typed object with managedFields updated.
//
// live is the stored object, or, when nothing is stored yet, an empty
// typed object with the URL's name (and namespace) set: an object without
// a UID is treated as a create, as upstream does. The caller stores the
// result (creating or updating). live is not modified.
//
// Errors are *apierrors.StatusError:
//   - 422 Invalid (PatchOptions.meta.k8s.io) when manager is empty or not a
//     valid field manager name, as upstream's ValidatePatchOptions;
//   - 400 BadRequest when the body is not YAML/JSON ("error decoding YAML"),
//     its apiVersion/kind is not gvk, it sets metadata.managedFields, it
//     does not match the schema (unknown field, wrong type, duplicate list
//     key), or its name/namespace differ from live's (the URL's);
//   - 409 Conflict (reason Conflict, one FieldManagerConflict cause per
//     field) when it changes fields owned by other managers and force is
//     false; force=true takes them over instead;
//   - 409 Conflict when creating and the body sets metadata.uid;
//   - 500 for anything else (corrupt managedFields on live, a live object
//     that does not match the schema), with upstream's message.
func (m *Manager) Apply(gvk schema.GroupVersionKind, subresource string, live runtime.Object, patch []byte, manager string, force bool) (runtime.Object, error) {
	if errs := validateManager(manager); len(errs) > 0 {
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "PatchOptions"}, "", errs)
	}
	patchObj := &unstructured.Unstructured{Object: map[string]interface{}{}}
	if err := yaml.Unmarshal(patch, &patchObj.Object); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding YAML: %v", err))
	}
	if patchObj.Object == nil { // body "null"
		patchObj.Object = map[string]interface{}{}
	}
	fm, err := m.fieldManager(gvk, subresource)
	if errors.Is(err, errUnsupported) {
		resource, _ := meta.UnsafeGuessKindToResource(gvk)
		return nil, apierrors.NewMethodNotSupported(resource.GroupResource(), "apply")
	} else if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	if live == nil {
		if live, err = newEmpty(gvk); err != nil {
			return nil, apierrors.NewInternalError(err)
		}
	}
	liveMeta, err := meta.Accessor(live)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}

	out, err := fm.Apply(live, patchObj, manager, force)
	if err != nil {
		return nil, applyError(gvk, patchObj, err)
	}
	// The merged object comes back with TypeMeta set, but a no-op apply
	// returns a copy of live, which may lack it.
	out.GetObjectKind().SetGroupVersionKind(gvk)

	outMeta, err := meta.Accessor(out)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	if err := checkNameAndNamespace(gvk, liveMeta, patchObj, outMeta); err != nil {
		return nil, err
	}
	return out, nil
}

// validateManager mirrors upstream's ValidatePatchOptions for apply: the
// fieldManager query parameter is required (kubectl defaults it to
// "kubectl"; controllers must set it) and must be a valid manager name.
func validateManager(manager string) field.ErrorList {
	path := field.NewPath("fieldManager")
	var errs field.ErrorList
	if manager == "" {
		errs = append(errs, field.Required(path, "is required for apply patch"))
	}
	return append(errs, metav1validation.ValidateFieldManager(manager, path)...)
}

// applyError turns a field-manager error into a StatusError. The field
// manager already returns StatusErrors for conflicts (409) and for a wrong
// apiVersion/kind or a patch that sets managedFields (400); other errors
// are plain. Upstream serves those as 500 with the error text and no
// reason, including a patch that does not match the schema; kelp answers
// 400 for the latter since it is the client's input that is wrong (the
// 500 is a known upstream bug, kubernetes/kubernetes#122480, fix proposed
// in #139255 with the same message).
func applyError(gvk schema.GroupVersionKind, patchObj *unstructured.Unstructured, err error) error {
	if _, ok := err.(apierrors.APIStatus); ok {
		return err
	}
	// Only on the failure path: is it the patch that the schema rejects?
	if _, perr := typeConverter().ObjectToTyped(patchObj); perr != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusInternalServerError,
		Reason:  metav1.StatusReasonUnknown,
		Message: err.Error(),
	}}
}

// checkNameAndNamespace reproduces the checks upstream's patch handler runs
// on the applied object (applyPatch + checkName), with live's name and
// namespace standing for the URL's. It may clear out's namespace and, on
// create, its system fields.
func checkNameAndNamespace(gvk schema.GroupVersionKind, liveMeta metav1.Object, patchObj *unstructured.Unstructured, out metav1.Object) error {
	creating := liveMeta.GetUID() == ""
	if creating && out.GetUID() != "" {
		resource, _ := meta.UnsafeGuessKindToResource(gvk)
		return apierrors.NewConflict(resource.GroupResource(), liveMeta.GetName(),
			fmt.Errorf("uid mismatch: the provided object specified uid %s, and no existing object was found", out.GetUID()))
	}
	if creating {
		// rest.WipeObjectMetaSystemFields: the create path fills these.
		out.SetCreationTimestamp(metav1.Time{})
		out.SetUID("")
		out.SetDeletionTimestamp(nil)
		out.SetDeletionGracePeriodSeconds(nil)
		out.SetSelfLink("")
	}

	// Namespace: live's is the request's ("" for cluster-scoped kinds,
	// whose objects never carry one).
	switch ns := out.GetNamespace(); {
	case ns == liveMeta.GetNamespace():
	case liveMeta.GetNamespace() == "":
		out.SetNamespace("")
	default:
		return apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}

	// Name: upstream merges into a nameless empty object on create, so an
	// apply configuration without metadata.name cannot create; on update
	// the stored name fills it in.
	want := liveMeta.GetName()
	if want == "" {
		return nil // caller gave no name to check against
	}
	got := out.GetName()
	if creating {
		got = patchObj.GetName()
	}
	if got != want {
		return apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", got, want))
	}
	return nil
}

// ManagerName derives the default field manager from a User-Agent as
// upstream does when the request has no fieldManager: the part before the
// first "/", without unprintable characters, cut to the 128-byte limit of
// a field manager name. "kubectl/v1.31.0 (linux/amd64) kubernetes/abc"
// gives "kubectl"; kubectl's client-side apply sends
// "kubectl-client-side-apply/...". An empty result is recorded as
// "unknown" by the field manager.
func ManagerName(userAgent string) string {
	prefix, _, _ := strings.Cut(userAgent, "/")
	var buf bytes.Buffer
	for _, r := range prefix {
		if !unicode.IsPrint(r) {
			continue
		}
		if buf.Len()+utf8.RuneLen(r) > metav1validation.FieldManagerMaxLength {
			break
		}
		buf.WriteRune(r)
	}
	return buf.String()
}
