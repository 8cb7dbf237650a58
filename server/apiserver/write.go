package apiserver

import (
	"context"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kelp-project/kelp/server/apiserver/admission"
	"github.com/kelp-project/kelp/server/apiserver/auth"
	"github.com/kelp-project/kelp/server/apiserver/registry"
)

// dryRun reads the dryRun query parameter: only "All" exists.
func dryRun(r *http.Request) (bool, error) {
	vals := r.URL.Query()["dryRun"]
	for _, v := range vals {
		if v != "All" {
			return false, apierrors.NewBadRequest(fmt.Sprintf("Invalid dryRun: %q, only \"All\" is supported", v))
		}
	}
	return len(vals) > 0, nil
}

func (s *Server) create(w http.ResponseWriter, r *http.Request, info requestInfo, sv *served) {
	dry, err := dryRun(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	manager, err := fieldManagerOf(r, false)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	obj := sv.New()
	if err := decodeBody(w, r, sv.GVK(), obj); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := unknownCustomFields(w, r, sv, obj); err != nil {
		s.writeError(w, r, err)
		return
	}
	out, err := s.createObject(withWriteOptions(r.Context(), writeOptions{manager: manager}), sv, info.Namespace, obj, dry)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeCreated(w, r, out, sv)
}

// writeCreated answers a create, by POST or by an apply's PATCH. A kind
// nothing acts on yet says so in a Warning.
func (s *Server) writeCreated(w http.ResponseWriter, r *http.Request, out runtime.Object, sv *served) {
	if sv.NoController != "" {
		addWarning(w, sv.NoController)
	}
	s.writeResult(w, r, http.StatusCreated, out, sv)
}

// createObject is the write path of a new object: system metadata,
// defaults, mutating admission, validation, validating admission, storage.
// The HTTP handler and the server's own bootstrap both use it.
func (s *Server) createObject(ctx context.Context, sv *served, namespace string, obj runtime.Object, dry bool) (runtime.Object, error) {
	acc, err := meta.Accessor(obj)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if sv.Namespaced {
		if acc.GetNamespace() == "" {
			acc.SetNamespace(namespace)
		} else if acc.GetNamespace() != namespace {
			return nil, apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
		}
	} else {
		acc.SetNamespace("")
	}
	if acc.GetName() == "" && acc.GetGenerateName() != "" {
		acc.SetName(acc.GetGenerateName() + rand.String(5))
	}
	acc.SetUID(uuid.NewUUID())
	acc.SetCreationTimestamp(metav1.Now())
	acc.SetDeletionTimestamp(nil)
	acc.SetDeletionGracePeriodSeconds(nil)
	acc.SetResourceVersion("")
	acc.SetSelfLink("")
	acc.SetGeneration(0)
	if registry.HasSpec(obj) {
		acc.SetGeneration(1)
	}
	if sv.Status && !sv.KeepStatusOnCreate {
		registry.ResetStatus(obj)
	}
	sv.Default(obj)
	if sv.PrepareForCreate != nil {
		sv.PrepareForCreate(obj)
	}
	if sv.CreatedBy != nil {
		sv.CreatedBy(obj, auth.UserFrom(ctx))
	}
	if wo := writeOptionsFrom(ctx); wo.manager != "" && !wo.applied {
		obj = s.fields.Update(sv.GVK(), "", nil, obj, wo.manager)
	}
	attrs := &admission.Attributes{Operation: "CREATE", Resource: sv.GVR, Namespace: acc.GetNamespace(), Name: acc.GetName(),
		Object: obj, User: auth.UserFrom(ctx), DryRun: dry}
	if err := s.admission.Admit(ctx, attrs); err != nil {
		return nil, err
	}
	if errs := sv.Validate(obj); len(errs) > 0 {
		return nil, apierrors.NewInvalid(sv.GVK().GroupKind(), acc.GetName(), errs)
	}
	if err := s.admission.Validate(ctx, attrs); err != nil {
		return nil, err
	}
	release, err := allocate(ctx, sv, obj, nil, dry)
	if err != nil {
		return nil, err
	}
	out, err := sv.store.Create(ctx, sv.store.Key(acc.GetNamespace(), acc.GetName()), obj, dry)
	if err != nil {
		release()
		return nil, err
	}
	return out, nil
}

func (s *Server) update(w http.ResponseWriter, r *http.Request, info requestInfo, sv *served, subresource string) {
	dry, err := dryRun(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	manager, err := fieldManagerOf(r, false)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	obj := sv.New()
	if err := decodeBody(w, r, sv.GVK(), obj); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := unknownCustomFields(w, r, sv, obj); err != nil {
		s.writeError(w, r, err)
		return
	}
	acc, _ := meta.Accessor(obj)
	if acc.GetName() != info.Name {
		s.writeError(w, r, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", acc.GetName(), info.Name)))
		return
	}
	ctx := withWriteOptions(r.Context(), writeOptions{manager: manager})
	out, err := s.updateObject(ctx, sv, info, subresource, func(runtime.Object) (runtime.Object, error) {
		return obj.DeepCopyObject(), nil
	}, dry)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeResult(w, r, http.StatusOK, out, sv)
}

// updateObject is the write path of a change: next computes the user's
// intended object from the current one (a PUT body, or a patch applied to
// it); system metadata is carried over, then defaults, admission and
// validation run, and storage does a compare-and-swap. A resourceVersion
// in the intended object is a precondition: a stale one is 409 Conflict.
func (s *Server) updateObject(ctx context.Context, sv *served, info requestInfo, subresource string, next func(current runtime.Object) (runtime.Object, error), dry bool) (runtime.Object, error) {
	key := sv.store.Key(info.Namespace, info.Name)
	var releases []func()
	var replaced runtime.Object // the object the stored write replaced
	out, deleted, err := sv.store.Update(ctx, key, func(cur runtime.Object) (runtime.Object, error) {
		replaced = cur
		obj, err := next(cur)
		if err != nil {
			return nil, err
		}
		path := writePathOf(sv, subresource)
		if err := s.prepareUpdate(sv, info, subresource, path, obj, cur); err != nil {
			return nil, err
		}
		if wo := writeOptionsFrom(ctx); wo.manager != "" && !wo.applied && path != bindingPath {
			obj = s.fields.Update(sv.GVK(), subresource, cur, obj, wo.manager)
		}
		acc, _ := meta.Accessor(obj)
		attrs := &admission.Attributes{Operation: "UPDATE", Resource: sv.GVR, Subresource: subresource, Namespace: info.Namespace,
			Name: info.Name, Object: obj, OldObject: cur, User: auth.UserFrom(ctx), DryRun: dry}
		if err := s.admission.Admit(ctx, attrs); err != nil {
			return nil, err
		}
		var errs field.ErrorList
		switch path {
		case statusPath:
			_, validate := sv.statusRules(subresource)
			errs = validate(obj, cur)
		case bindingPath:
			// The Binding was validated, and the strategy's Bind made the
			// one spec change it allows.
		case specLikePath:
			sub, _ := sv.subresource(subresource)
			errs = sub.ValidateUpdate(obj, cur)
		default:
			errs = sv.ValidateUpdate(obj, cur)
		}
		if len(errs) > 0 {
			return nil, apierrors.NewInvalid(sv.GVK().GroupKind(), acc.GetName(), errs)
		}
		if err := s.admission.Validate(ctx, attrs); err != nil {
			return nil, err
		}
		release, err := allocate(ctx, sv, obj, cur, dry)
		if err != nil {
			return nil, err
		}
		releases = append(releases, release)
		if sv.BeforeStore != nil {
			sv.BeforeStore(obj)
		}
		return obj, nil
	}, dry)
	if err != nil {
		for _, rel := range releases {
			rel()
		}
		return nil, err
	}
	switch {
	case deleted:
		released(ctx, sv, out, dry)
	case sv.Allocator != nil:
		sv.Allocator.ReleaseReplaced(ctx, out, replaced, dry)
	}
	return out, nil
}

// writePath is which part of an object a write may change.
type writePath int

const (
	mainPath     writePath = iota // the main endpoint and /scale: spec and metadata
	statusPath                    // /status: status only
	specPath                      // a SpecSubresource (namespaces/finalize): spec, never status
	bindingPath                   // a BindingSubresource: what the strategy's Bind sets
	specLikePath                  // a SpecLikeSubresource (pods/resize): what its Prepare keeps, never status
)

// statusRules are how a write through /status, or through a
// StatusLikeSubresource, is prepared and validated.
func (sv *served) statusRules(subresource string) (prepare func(obj, old runtime.Object), validate func(obj, old runtime.Object) field.ErrorList) {
	if sub, ok := sv.subresource(subresource); ok && sub.Kind == registry.StatusLikeSubresource {
		return sub.Prepare, sub.ValidateUpdate
	}
	return sv.PrepareForStatusUpdate, sv.ValidateStatusUpdate
}

func writePathOf(sv *served, subresource string) writePath {
	if subresource == "status" {
		return statusPath
	}
	if sub, ok := sv.subresource(subresource); ok {
		switch sub.Kind {
		case registry.StatusLikeSubresource:
			return statusPath
		case registry.SpecSubresource:
			return specPath
		case registry.BindingSubresource:
			return bindingPath
		case registry.SpecLikeSubresource:
			return specLikePath
		}
	}
	return mainPath
}

// prepareUpdate carries system metadata over from the stored object and
// applies the spec/status split and generation rules.
func (s *Server) prepareUpdate(sv *served, info requestInfo, subresource string, path writePath, obj, cur runtime.Object) error {
	acc, err := meta.Accessor(obj)
	if err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	old, _ := meta.Accessor(cur)
	if rv := acc.GetResourceVersion(); rv != "" && rv != old.GetResourceVersion() {
		return apierrors.NewConflict(sv.GroupResource(), info.Name, fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
	}
	if sv.Namespaced {
		if acc.GetNamespace() == "" {
			acc.SetNamespace(info.Namespace)
		} else if acc.GetNamespace() != info.Namespace {
			return apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
		}
	} else {
		acc.SetNamespace("")
	}
	if acc.GetUID() == "" {
		acc.SetUID(old.GetUID())
	}
	acc.SetCreationTimestamp(old.GetCreationTimestamp())
	acc.SetDeletionTimestamp(old.GetDeletionTimestamp())
	acc.SetDeletionGracePeriodSeconds(old.GetDeletionGracePeriodSeconds())
	acc.SetResourceVersion(old.GetResourceVersion())
	acc.SetSelfLink("")
	switch path {
	case statusPath:
		registry.CopySpec(obj, cur)
		if prepare, _ := sv.statusRules(subresource); prepare != nil {
			prepare(obj, cur)
		}
	case bindingPath:
		// The strategy's Bind changed what a binding may change.
	case specPath:
		registry.CopyStatus(obj, cur)
	case specLikePath:
		registry.CopyStatus(obj, cur)
		sub, _ := sv.subresource(subresource)
		sub.Prepare(obj, cur)
	default:
		if sv.Status {
			registry.CopyStatus(obj, cur)
		}
		if sv.PrepareForUpdate != nil {
			sv.PrepareForUpdate(obj, cur)
		}
	}
	sv.Default(obj)
	acc.SetGeneration(old.GetGeneration())
	// A binding sets spec.nodeName without making a new generation, as
	// upstream's pods/binding: the generation counts the user's changes
	// (a kubelet reports observedGeneration against it).
	if path != statusPath && path != bindingPath && registry.SpecChanged(obj, cur) {
		acc.SetGeneration(old.GetGeneration() + 1)
	}
	return nil
}

// allocate claims what the object needs beyond its key (a Service's IPs
// and ports); the returned func gives back what this call claimed.
func allocate(ctx context.Context, sv *served, obj, old runtime.Object, dry bool) (func(), error) {
	if sv.Allocator == nil {
		return func() {}, nil
	}
	return sv.Allocator.Allocate(ctx, obj, old, dry)
}

// released frees what a deleted object held.
func released(ctx context.Context, sv *served, obj runtime.Object, dry bool) {
	if sv.Allocator != nil {
		sv.Allocator.Release(ctx, obj, dry)
	}
}
