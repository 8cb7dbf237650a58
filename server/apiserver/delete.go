package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/kelp-project/kelp/server/apiserver/admission"
	"github.com/kelp-project/kelp/server/apiserver/auth"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	sigsjson "sigs.k8s.io/json"
)

// deleteOptions reads DeleteOptions from the body (if any) and the query.
func deleteOptions(w http.ResponseWriter, r *http.Request) (*metav1.DeleteOptions, error) {
	opts := &metav1.DeleteOptions{}
	data, err := readBody(r)
	if err != nil {
		return nil, err
	}
	if len(data) > 0 {
		mt := mediaType(r)
		// DeleteOptions is registered in every group version; clients
		// send whichever they like, so the body is read as plain JSON.
		var err error
		if mt == mediaProtobuf {
			gvk := metav1.SchemeGroupVersion.WithKind("DeleteOptions")
			gvk.Group = ""
			_, _, err = protoSerializer.Decode(data, &gvk, opts)
		} else {
			err = sigsjson.UnmarshalCaseSensitivePreserveInts(data, opts)
		}
		if err != nil {
			return nil, apierrors.NewBadRequest("invalid DeleteOptions: " + err.Error())
		}
	}
	q := r.URL.Query()
	if v := q.Get("gracePeriodSeconds"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, apierrors.NewBadRequest("gracePeriodSeconds must be an integer")
		}
		opts.GracePeriodSeconds = &n
	}
	if v := q.Get("propagationPolicy"); v != "" {
		p := metav1.DeletionPropagation(v)
		opts.PropagationPolicy = &p
	}
	if v := q.Get("orphanDependents"); v != "" {
		b := isTrue(v)
		opts.OrphanDependents = &b
	}
	if _, ok := q["dryRun"]; ok {
		dry, err := dryRun(r)
		if err != nil {
			return nil, err
		}
		if dry {
			opts.DryRun = []string{metav1.DryRunAll}
		}
	}
	for _, v := range opts.DryRun {
		if v != metav1.DryRunAll {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("Invalid dryRun: %q, only \"All\" is supported", v))
		}
	}
	if p := opts.PropagationPolicy; p != nil {
		switch *p {
		case metav1.DeletePropagationBackground, metav1.DeletePropagationForeground, metav1.DeletePropagationOrphan:
		default:
			return nil, apierrors.NewBadRequest(fmt.Sprintf("propagationPolicy: Unsupported value: %q", *p))
		}
		if opts.OrphanDependents != nil {
			return nil, apierrors.NewBadRequest("orphanDependents and propagationPolicy cannot both be set")
		}
	}
	if g := opts.GracePeriodSeconds; g != nil && *g < 0 {
		zero := int64(0)
		opts.GracePeriodSeconds = &zero
	}
	return opts, nil
}

func (s *Server) delete(w http.ResponseWriter, r *http.Request, info requestInfo, sv *served) {
	opts, err := deleteOptions(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out, deleted, err := s.deleteObject(r.Context(), sv, info.Namespace, info.Name, opts)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// As upstream: 202 only when the object stays and the client asked for
	// its dependents to be deleted the old way (orphanDependents=false);
	// graceful and finalizer-held deletions otherwise answer 200 with the
	// object as it now is.
	code := http.StatusOK
	if !deleted && opts.OrphanDependents != nil && !*opts.OrphanDependents {
		code = http.StatusAccepted
	}
	s.writeResult(w, r, code, out, sv)
}

// deleteObject deletes one object the way upstream does. Finalizers and a
// pod's grace period turn the delete into an update that sets
// deletionTimestamp; the key goes away when the last finalizer is removed
// (or the kubelet confirms with grace 0). The propagation policy becomes
// the orphan or foregroundDeletion finalizer for the garbage collector.
func (s *Server) deleteObject(ctx context.Context, sv *served, namespace, name string, opts *metav1.DeleteOptions) (runtime.Object, bool, error) {
	dry := len(opts.DryRun) > 0
	out, deleted, err := sv.store.Update(ctx, sv.store.Key(namespace, name), func(cur runtime.Object) (runtime.Object, error) {
		acc, _ := meta.Accessor(cur)
		if err := checkPreconditions(sv.GroupResource(), name, acc, opts.Preconditions); err != nil {
			return nil, err
		}
		attrs := &admission.Attributes{Operation: "DELETE", Resource: sv.GVR, Namespace: namespace, Name: name, OldObject: cur, User: auth.UserFrom(ctx), DryRun: dry}
		// Both phases, as upstream's delete (mutating webhooks may refuse
		// a delete; the built-in mutating plugins pass it by).
		if err := s.admission.Admit(ctx, attrs); err != nil {
			return nil, err
		}
		if err := s.admission.Validate(ctx, attrs); err != nil {
			return nil, err
		}
		return markDeleted(sv, cur, opts), nil
	}, dry)
	if err != nil {
		return nil, false, err
	}
	if deleted {
		released(ctx, sv, out, dry)
	}
	return out, deleted, nil
}

func checkPreconditions(gr schema.GroupResource, name string, acc metav1.Object, p *metav1.Preconditions) error {
	if p == nil {
		return nil
	}
	if p.UID != nil && *p.UID != acc.GetUID() {
		return apierrors.NewConflict(gr, name, fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", *p.UID, acc.GetUID()))
	}
	if p.ResourceVersion != nil && *p.ResourceVersion != acc.GetResourceVersion() {
		return apierrors.NewConflict(gr, name, fmt.Errorf("Precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", *p.ResourceVersion, acc.GetResourceVersion()))
	}
	return nil
}

// markDeleted returns the object as it should be after this delete call.
// The store removes the key when the result has deletionTimestamp set,
// grace 0 and no finalizers.
func markDeleted(sv *served, cur runtime.Object, opts *metav1.DeleteOptions) runtime.Object {
	obj := cur.DeepCopyObject()
	if sv.MarkDeleted != nil {
		sv.MarkDeleted(obj)
		return obj
	}
	acc, _ := meta.Accessor(obj)
	now := metav1.Now()

	finalizers := acc.GetFinalizers()
	policy := propagation(opts)
	switch policy {
	case metav1.DeletePropagationOrphan:
		finalizers = addFinalizer(finalizers, metav1.FinalizerOrphanDependents)
		finalizers = removeFinalizer(finalizers, metav1.FinalizerDeleteDependents)
	case metav1.DeletePropagationForeground:
		finalizers = addFinalizer(finalizers, metav1.FinalizerDeleteDependents)
		finalizers = removeFinalizer(finalizers, metav1.FinalizerOrphanDependents)
	case metav1.DeletePropagationBackground:
		if acc.GetDeletionTimestamp() == nil {
			finalizers = removeFinalizer(finalizers, metav1.FinalizerOrphanDependents)
		}
	}
	acc.SetFinalizers(finalizers)

	grace := int64(0)
	if sv.GracePeriod != nil {
		grace = sv.GracePeriod(obj, opts)
	}
	if old := acc.GetDeletionGracePeriodSeconds(); acc.GetDeletionTimestamp() != nil && old != nil && *old < grace {
		// A second delete may shorten the grace period, never extend it.
		grace = *old
	}
	if acc.GetDeletionTimestamp() == nil || grace < ptrValue(acc.GetDeletionGracePeriodSeconds()) {
		ts := metav1.NewTime(now.Add(time.Duration(grace) * time.Second))
		acc.SetDeletionTimestamp(&ts)
		if acc.GetGeneration() > 0 {
			acc.SetGeneration(acc.GetGeneration() + 1)
		}
	}
	acc.SetDeletionGracePeriodSeconds(&grace)
	return obj
}

func ptrValue(p *int64) int64 {
	if p == nil {
		return 1<<62 - 1
	}
	return *p
}

// propagation resolves the policy: explicit, then orphanDependents, then
// the object's existing finalizers, then Background.
func propagation(opts *metav1.DeleteOptions) metav1.DeletionPropagation {
	if opts.PropagationPolicy != nil {
		return *opts.PropagationPolicy
	}
	if opts.OrphanDependents != nil {
		if *opts.OrphanDependents {
			return metav1.DeletePropagationOrphan
		}
		return metav1.DeletePropagationBackground
	}
	return ""
}

func addFinalizer(fs []string, f string) []string {
	if slices.Contains(fs, f) {
		return fs
	}
	return append(fs, f)
}

func removeFinalizer(fs []string, f string) []string {
	return slices.DeleteFunc(slices.Clone(fs), func(s string) bool { return s == f })
}

func (s *Server) deleteCollection(w http.ResponseWriter, r *http.Request, info requestInfo, sv *served) {
	opts, err := deleteOptions(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	lo, err := listOptions(r, requestInfo{Namespace: info.Namespace, Verb: "list"}, sv)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	lo.ResourceVersion, lo.Limit, lo.Continue = "", 0, ""
	res, err := sv.store.List(r.Context(), lo)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var items []runtime.Object
	for _, item := range res.Items {
		acc, _ := meta.Accessor(item)
		out, _, err := s.deleteObject(r.Context(), sv, acc.GetNamespace(), acc.GetName(), opts)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		items = append(items, out)
	}
	list := sv.NewList()
	_ = meta.SetList(list, items)
	list.GetObjectKind().SetGroupVersionKind(sv.GVR.GroupVersion().WithKind(sv.Kind + "List"))
	s.writeResult(w, r, http.StatusOK, list, sv)
}
