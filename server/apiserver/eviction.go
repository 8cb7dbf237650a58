package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	policyv1beta1 "k8s.io/api/policy/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	pdbhelper "k8s.io/component-helpers/apps/poddisruptionbudget"
	"k8s.io/kubectl/pkg/util/podutils"

	"github.com/kelp-project/kelp/server/apiserver/admission"
	"github.com/kelp-project/kelp/server/apiserver/auth"
	"github.com/kelp-project/kelp/server/apiserver/storage"
)

var (
	pdbsGVR     = policyv1.SchemeGroupVersion.WithResource("poddisruptionbudgets")
	evictionGVK = policyv1.SchemeGroupVersion.WithKind("Eviction")
)

// maxDisruptedPods is upstream's MaxDisruptedPodSize: past it, evictions
// the disruption controller has not yet seen are too many to approve more.
const maxDisruptedPods = 2000

// evictionRetry is upstream's EvictionsRetry, for deletes of pods whose
// budget may be ignored that lose a race with another writer.
var evictionRetry = wait.Backoff{Steps: 20, Duration: 500 * time.Millisecond, Factor: 1.0, Jitter: 0.1}

// evict answers pods/eviction as upstream's EvictionREST: a delete of the
// pod that its PodDisruptionBudget must allow, taking one disruption from
// the budget's status before the pod goes.
func (s *Server) evict(w http.ResponseWriter, r *http.Request, info requestInfo, sv *served) {
	dry, err := dryRun(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ev, err := decodeEviction(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	st, err := s.evictPod(r.Context(), sv, info.Namespace, info.Name, ev, dry)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	code := http.StatusCreated
	if st.Code != 0 {
		code = int(st.Code)
	}
	st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	s.writeObject(w, r, code, st)
}

// decodeEviction reads a policy/v1 Eviction, or a policy/v1beta1 one (the
// same fields), as upstream accepts both; a body that is neither gets the
// v1 decoding's 400.
func decodeEviction(w http.ResponseWriter, r *http.Request) (*policyv1.Eviction, error) {
	data, err := readBody(r)
	if err != nil {
		return nil, err
	}
	ev := &policyv1.Eviction{}
	err = decodeInto(w, r, data, mediaType(r), evictionGVK, ev)
	if err == nil {
		return ev, nil
	}
	old := &policyv1beta1.Eviction{}
	if decodeInto(w, r, data, mediaType(r), policyv1beta1.SchemeGroupVersion.WithKind("Eviction"), old) != nil {
		return nil, err
	}
	return &policyv1.Eviction{TypeMeta: metav1.TypeMeta{Kind: "Eviction", APIVersion: "policy/v1"},
		ObjectMeta: old.ObjectMeta, DeleteOptions: old.DeleteOptions}, nil
}

func (s *Server) evictPod(ctx context.Context, sv *served, namespace, name string, ev *policyv1.Eviction, dry bool) (*metav1.Status, error) {
	opts, err := checkEviction(name, ev, dry)
	if err != nil {
		return nil, err
	}
	dry = len(opts.DryRun) > 0
	attrs := &admission.Attributes{Operation: "CREATE", Resource: sv.GVR, Subresource: "eviction", Namespace: namespace,
		Name: name, Object: ev, User: auth.UserFrom(ctx), DryRun: dry}
	if err := s.admission.Admit(ctx, attrs); err != nil {
		return nil, err
	}
	if err := s.admission.Validate(ctx, attrs); err != nil {
		return nil, err
	}
	key := sv.store.Key(namespace, name)

	// A pod that is not running (finished, pending or already going) has
	// no disruption left to cause: it is deleted without asking a budget.
	// A client's own resourceVersion precondition is never retried.
	var pod *corev1.Pod
	deleted := false
	shouldRetry := apierrors.IsConflict
	if !resourceVersionIsUnset(opts) {
		shouldRetry = func(error) bool { return false }
	}
	err = retry.OnError(evictionRetry, shouldRetry, func() error {
		obj, err := sv.store.Get(ctx, key)
		if err != nil {
			return err
		}
		pod = obj.(*corev1.Pod)
		if !canIgnorePDB(pod) {
			return nil
		}
		o := opts
		if shouldEnforceResourceVersion(pod) && resourceVersionIsUnset(opts) {
			o = opts.DeepCopy()
			setPreconditionsResourceVersion(o, pod.ResourceVersion)
		}
		if err := s.deleteEvicted(ctx, sv, namespace, name, o); err != nil {
			return err
		}
		deleted = true
		return nil
	})
	if err != nil {
		return nil, err
	}
	if deleted {
		return &metav1.Status{Status: metav1.StatusSuccess}, nil
	}

	pdbs, err := s.podBudgets(ctx, pod)
	if err != nil {
		return nil, err
	}
	if len(pdbs) > 1 {
		return &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusInternalServerError,
			Message: "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."}, nil
	}
	// An unready pod that may go without taking a disruption is pinned to
	// the resourceVersion judged, so it cannot have turned Ready since.
	pinVersion := false
	if len(pdbs) == 1 {
		pdb := pdbs[0]
		pinVersion = unhealthyMayGo(pod, pdb)
		if !pinVersion {
			if err := s.takeDisruption(ctx, pdb, pod.Name, dry); err != nil {
				return nil, err
			}
		}
	}
	o := opts
	if pinVersion {
		o = opts.DeepCopy()
		setPreconditionsResourceVersion(o, pod.ResourceVersion)
	}
	if err := s.deleteEvicted(ctx, sv, namespace, name, o); err != nil {
		if apierrors.IsConflict(err) && pinVersion && resourceVersionIsUnset(opts) {
			return nil, budgetBusy(pdbs[0].Name)
		}
		return nil, err
	}
	return &metav1.Status{Status: metav1.StatusSuccess}, nil
}

// checkEviction is what upstream refuses before reading anything: another
// name than the URL's (400), the unsafe-delete option (422), bad dryRun
// values (400). It returns the delete options the eviction carries.
func checkEviction(name string, ev *policyv1.Eviction, dry bool) (*metav1.DeleteOptions, error) {
	if ev.Name != name {
		return nil, apierrors.NewBadRequest("name in URL does not match name in Eviction object")
	}
	if o := ev.DeleteOptions; o != nil && o.IgnoreStoreReadErrorWithClusterBreakingPotential != nil && *o.IgnoreStoreReadErrorWithClusterBreakingPotential {
		return nil, apierrors.NewInvalid(evictionGVK.GroupKind(), name, field.ErrorList{field.Invalid(
			field.NewPath("deleteOptions").Child("ignoreStoreReadErrorWithClusterBreakingPotential"), true,
			"can not be set for pod eviction, try after removing the option")})
	}
	return evictionDeleteOptions(ev, dry)
}

// unhealthyMayGo: an unready pod counts for nobody's health, so it is
// deleted without taking a disruption when its budget's policy says so
// (AlwaysAllow), or while the application is healthy anyway
// (IfHealthyBudget, the default).
func unhealthyMayGo(pod *corev1.Pod, pdb *policyv1.PodDisruptionBudget) bool {
	if podutils.IsPodReady(pod) {
		return false
	}
	if p := pdb.Spec.UnhealthyPodEvictionPolicy; p != nil && *p == policyv1.AlwaysAllow {
		return true
	}
	return pdb.Status.CurrentHealthy >= pdb.Status.DesiredHealthy && pdb.Status.DesiredHealthy > 0
}

// evictionDeleteOptions merges the request's dryRun into the Eviction's
// DeleteOptions, as upstream's propagateDryRun; the two may not disagree.
func evictionDeleteOptions(ev *policyv1.Eviction, dry bool) (*metav1.DeleteOptions, error) {
	var query []string
	if dry {
		query = []string{metav1.DryRunAll}
	}
	if ev.DeleteOptions == nil {
		return &metav1.DeleteOptions{DryRun: query}, nil
	}
	opts := ev.DeleteOptions.DeepCopy()
	for _, v := range opts.DryRun {
		if v != metav1.DryRunAll {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("Invalid dryRun: %q, only \"All\" is supported", v))
		}
	}
	switch {
	case len(opts.DryRun) == 0:
		opts.DryRun = query
	case len(query) > 0 && !reflect.DeepEqual(query, opts.DryRun):
		return nil, apierrors.NewBadRequest(fmt.Sprintf("Non-matching dry-run options in request and content: %v and %v", query, opts.DryRun))
	}
	if g := opts.GracePeriodSeconds; g != nil && *g < 0 {
		zero := int64(0)
		opts.GracePeriodSeconds = &zero
	}
	return opts, nil
}

// podBudgets lists, from etcd (a stale cache could approve a disruption
// already spent), the budgets in the pod's namespace whose selector
// matches it. An invalid selector matches nothing.
func (s *Server) podBudgets(ctx context.Context, pod *corev1.Pod) ([]*policyv1.PodDisruptionBudget, error) {
	sv, ok := s.live().resources[pdbsGVR]
	if !ok {
		return nil, fmt.Errorf("poddisruptionbudgets are not served")
	}
	res, err := sv.store.List(ctx, storage.ListOptions{Namespace: pod.Namespace})
	if err != nil {
		return nil, err
	}
	var out []*policyv1.PodDisruptionBudget
	for _, obj := range res.Items {
		pdb, ok := obj.(*policyv1.PodDisruptionBudget)
		if !ok || pdb.Namespace != pod.Namespace {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		out = append(out, pdb)
	}
	return out, nil
}

// takeDisruption is upstream's checkAndDecrement as one compare-and-swap
// on the budget's status: the check runs again on the latest budget
// whenever another eviction got in first, so two evictions can never
// spend the same disruption. The pod goes into disruptedPods so the
// controller does not count it healthy until it is gone (or the entry
// expires).
func (s *Server) takeDisruption(ctx context.Context, pdb *policyv1.PodDisruptionBudget, podName string, dry bool) error {
	if dry {
		return checkAndDecrement(pdb.DeepCopy(), podName, time.Now(), true)
	}
	sv := s.live().resources[pdbsGVR]
	_, _, err := sv.store.Update(ctx, sv.store.Key(pdb.Namespace, pdb.Name), func(cur runtime.Object) (runtime.Object, error) {
		next := cur.(*policyv1.PodDisruptionBudget)
		if err := checkAndDecrement(next, podName, time.Now(), false); err != nil {
			return nil, err
		}
		return next, nil
	}, false)
	if apierrors.IsNotFound(err) {
		// The budget went away since it was listed: it protects nothing.
		return nil
	}
	return err
}

// checkAndDecrement decides whether pdb allows one more disruption and, if
// so, takes it (recording podName at now unless dry). Its refusals are
// upstream's, word for word: kubectl drain retries on the 429s.
func checkAndDecrement(pdb *policyv1.PodDisruptionBudget, podName string, now time.Time, dry bool) error {
	if pdb.Status.ObservedGeneration < pdb.Generation {
		return budgetBusy(pdb.Name)
	}
	if pdb.Status.DisruptionsAllowed < 0 {
		return budgetForbidden(pdb.Name, "pdb disruptions allowed is negative",
			"The disruption budget %s does not allow evicting pods currently: pdb disruptions allowed is negative")
	}
	if len(pdb.Status.DisruptedPods) > maxDisruptedPods {
		return budgetForbidden(pdb.Name, "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
			"The disruption budget %s does not allow evicting pods currently: too many pending evictions not confirmed by PDB controller")
	}
	if pdb.Status.DisruptionsAllowed == 0 {
		err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
		cond := meta.FindStatusCondition(pdb.Status.Conditions, policyv1.DisruptionAllowedCondition)
		var msg string
		switch {
		case cond != nil && cond.Status == metav1.ConditionFalse && cond.Message != "" && cond.Reason == policyv1.SyncFailedReason:
			msg = fmt.Sprintf("The disruption budget %s does not allow evicting pods currently because it failed sync: %s", pdb.Name, cond.Message)
		case pdb.Status.CurrentHealthy <= pdb.Status.DesiredHealthy:
			msg = fmt.Sprintf("The disruption budget %s needs %d healthy pods and has %d currently", pdb.Name, pdb.Status.DesiredHealthy, pdb.Status.CurrentHealthy)
		case cond != nil && cond.Status == metav1.ConditionFalse && cond.Message != "":
			msg = fmt.Sprintf("The disruption budget %s does not allow evicting pods currently (%s): %s", pdb.Name, cond.Reason, cond.Message)
		default:
			msg = fmt.Sprintf("The disruption budget %s does not allow evicting pods currently", pdb.Name)
		}
		err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: policyv1.DisruptionBudgetCause, Message: msg})
		return err
	}
	pdb.Status.DisruptionsAllowed--
	if pdb.Status.DisruptionsAllowed == 0 {
		pdbhelper.UpdateDisruptionAllowedCondition(pdb)
	}
	if dry {
		return nil
	}
	if pdb.Status.DisruptedPods == nil {
		pdb.Status.DisruptedPods = map[string]metav1.Time{}
	}
	pdb.Status.DisruptedPods[podName] = metav1.Time{Time: now}
	return nil
}

// budgetBusy is upstream's 429 for a budget its controller has not yet
// caught up with (or a race the pod lost): retry in 10 s.
func budgetBusy(name string) error {
	err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: policyv1.DisruptionBudgetCause,
		Message: fmt.Sprintf("The disruption budget %s is still being processed by the server.", name)})
	return err
}

func budgetForbidden(name, reason, causeFormat string) error {
	err := apierrors.NewForbidden(policyv1.Resource("poddisruptionbudget"), name, errors.New(reason))
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: policyv1.DisruptionBudgetCause,
		Message: fmt.Sprintf(causeFormat, name)})
	return err
}

// deleteEvicted marks the pod with upstream's DisruptionTarget condition
// (so its controller and the kubelet know why it goes), then deletes it
// with the Eviction's options. The condition write bumps the pod's
// resourceVersion, so a resourceVersion precondition moves with it.
func (s *Server) deleteEvicted(ctx context.Context, sv *served, namespace, name string, opts *metav1.DeleteOptions) error {
	if len(opts.DryRun) == 0 {
		out, _, err := sv.store.Update(ctx, sv.store.Key(namespace, name), func(cur runtime.Object) (runtime.Object, error) {
			pod := cur.(*corev1.Pod)
			if p := opts.Preconditions; p != nil {
				if p.UID != nil && *p.UID != "" && *p.UID != pod.UID {
					return nil, apierrors.NewConflict(sv.GroupResource(), name, fmt.Errorf("the UID in the precondition (%s) does not match the UID in record (%s). The object might have been deleted and then recreated", *p.UID, pod.UID))
				}
				if p.ResourceVersion != nil && *p.ResourceVersion != "" && *p.ResourceVersion != pod.ResourceVersion {
					return nil, apierrors.NewConflict(sv.GroupResource(), name, fmt.Errorf("the ResourceVersion in the precondition (%s) does not match the ResourceVersion in record (%s). The object might have been modified", *p.ResourceVersion, pod.ResourceVersion))
				}
			}
			setDisruptionTarget(pod, metav1.Now())
			return pod, nil
		}, false)
		if err != nil {
			return err
		}
		if !resourceVersionIsUnset(opts) {
			opts = opts.DeepCopy()
			setPreconditionsResourceVersion(opts, out.(*corev1.Pod).ResourceVersion)
		}
	}
	_, _, err := s.deleteObject(ctx, sv, namespace, name, opts)
	return err
}

// setDisruptionTarget sets the DisruptionTarget condition as upstream's
// UpdatePodCondition does: the transition time moves only with the status.
func setDisruptionTarget(pod *corev1.Pod, now metav1.Time) {
	c := corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting", LastTransitionTime: now}
	for i, old := range pod.Status.Conditions {
		if old.Type == c.Type {
			if old.Status == c.Status {
				c.LastTransitionTime = old.LastTransitionTime
			}
			pod.Status.Conditions[i] = c
			return
		}
	}
	pod.Status.Conditions = append(pod.Status.Conditions, c)
}

// canIgnorePDB: a finished, pending or already terminating pod disrupts
// nothing more by going.
func canIgnorePDB(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed ||
		pod.Status.Phase == corev1.PodPending || pod.DeletionTimestamp != nil
}

// shouldEnforceResourceVersion: a pending pod could turn Ready (and count
// for its budget) between the read and the delete; a finished or
// terminating one cannot.
func shouldEnforceResourceVersion(pod *corev1.Pod) bool {
	return pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed && pod.DeletionTimestamp == nil
}

func resourceVersionIsUnset(o *metav1.DeleteOptions) bool {
	return o.Preconditions == nil || o.Preconditions.ResourceVersion == nil
}

func setPreconditionsResourceVersion(o *metav1.DeleteOptions, rv string) {
	if o.Preconditions == nil {
		o.Preconditions = &metav1.Preconditions{}
	}
	o.Preconditions.ResourceVersion = &rv
}
