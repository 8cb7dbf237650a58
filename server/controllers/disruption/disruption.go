// Package disruption is kelp's PodDisruptionBudget controller, as
// upstream's pkg/controller/disruption: for each budget it counts the
// Ready pods its selector picks, works out how many must stay (minAvailable,
// or the pods' controllers' scale less maxUnavailable) and writes how many
// disruptions the eviction subresource may approve. disruptedPods is the
// handshake with pods/eviction: an evicted pod stays out of the healthy
// count until it is gone, or until DeletionTimeout says its delete never
// happened.
package disruption

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	pdbhelper "k8s.io/component-helpers/apps/poddisruptionbudget"
	"k8s.io/kubectl/pkg/util/podutils"

	"github.com/kelp-project/kelp/server/controllers"
)

// DeletionTimeout is upstream's: how long an evicted pod may take to get
// its deletionTimestamp before the budget counts it healthy again.
const DeletionTimeout = 2 * time.Minute

// StaleDisruptionTimeout is upstream's: a pod marked DisruptionTarget (by
// pods/eviction, just before its delete) that is still not terminating
// this long after was never deleted, and the mark is withdrawn.
const StaleDisruptionTimeout = 2 * time.Minute

// Controller is the disruption controller.
type Controller struct {
	client   kubernetes.Interface
	factory  informers.SharedInformerFactory
	recorder record.EventRecorder

	pdbLister policylisters.PodDisruptionBudgetLister
	podLister corelisters.PodLister
	rsLister  appslisters.ReplicaSetLister
	dLister   appslisters.DeploymentLister
	ssLister  appslisters.StatefulSetLister
	rcLister  corelisters.ReplicationControllerLister
	synced    []cache.InformerSynced

	queue workqueue.TypedRateLimitingInterface[string]
	// stale holds pods whose DisruptionTarget condition may be stale.
	stale workqueue.TypedRateLimitingInterface[string]
	now   func() time.Time
}

// New wires the controller to the factory's budget, pod and workload
// informers. Workloads are only read for their scale, so, as upstream,
// a change of scale is seen with the next pod or budget event.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, recorder record.EventRecorder) *Controller {
	pdbInf := factory.Policy().V1().PodDisruptionBudgets()
	podInf := factory.Core().V1().Pods()
	rsInf := factory.Apps().V1().ReplicaSets()
	dInf := factory.Apps().V1().Deployments()
	ssInf := factory.Apps().V1().StatefulSets()
	rcInf := factory.Core().V1().ReplicationControllers()
	c := &Controller{
		client: client, factory: factory, recorder: recorder,
		pdbLister: pdbInf.Lister(), podLister: podInf.Lister(),
		rsLister: rsInf.Lister(), dLister: dInf.Lister(), ssLister: ssInf.Lister(), rcLister: rcInf.Lister(),
		synced: []cache.InformerSynced{pdbInf.Informer().HasSynced, podInf.Informer().HasSynced,
			rsInf.Informer().HasSynced, dInf.Informer().HasSynced, ssInf.Informer().HasSynced, rcInf.Informer().HasSynced},
		queue: controllers.NewQueue("disruption"),
		stale: controllers.NewQueue("disruption_recheck_stale_pod"),
		now:   time.Now,
	}
	_, _ = pdbInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, cur interface{}) { c.enqueue(cur) },
		DeleteFunc: c.enqueue,
	})
	_, _ = podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.podChanged,
		UpdateFunc: func(_, cur interface{}) { c.podChanged(cur) },
		DeleteFunc: c.podChanged,
	})
	return c
}

// Run starts the informers and the workers until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.factory.Start(ctx.Done())
	stale := controllers.Loop{Name: "disruption-stale-pods", Queue: c.stale, Synced: c.synced, Sync: c.syncStalePod}
	go stale.Run(ctx, 1)
	loop := controllers.Loop{Name: "disruption", Queue: c.queue, Synced: c.synced, Sync: c.sync}
	loop.Run(ctx, workers)
}

func (c *Controller) enqueue(obj interface{}) { controllers.Enqueue(c.queue, obj) }

// podChanged enqueues the budgets whose selector picks the pod.
func (c *Controller) podChanged(obj interface{}) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if stale, after := c.staleDisruption(pod); stale {
		if key, err := cache.MetaNamespaceKeyFunc(pod); err == nil {
			c.stale.AddAfter(key, after)
		}
	}
	pdbs, err := c.pdbLister.PodDisruptionBudgets(pod.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	for _, pdb := range pdbs {
		if sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err == nil && sel.Matches(labels.Set(pod.Labels)) {
			c.enqueue(pdb)
		}
	}
}

// recheck is a Delayed result: something expires later (a disruptedPods
// entry, a DisruptionTarget mark).
type recheck time.Duration

func (r recheck) Error() string               { return "to be looked at again later" }
func (r recheck) RequeueDelay() time.Duration { return time.Duration(r) }

func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pdb, err := c.pdbLister.PodDisruptionBudgets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	delay, err := c.trySync(ctx, pdb)
	if apierrors.IsConflict(err) {
		return err
	}
	if err != nil {
		// Fail closed: a budget whose status cannot be worked out allows
		// no disruption, so pods/eviction refuses rather than guesses.
		if ferr := c.failSafe(ctx, pdb, err); ferr != nil {
			return ferr
		}
		return err
	}
	if delay > 0 {
		return recheck(delay)
	}
	return nil
}

func (c *Controller) trySync(ctx context.Context, pdb *policy.PodDisruptionBudget) (time.Duration, error) {
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil {
		c.recorder.Eventf(pdb, corev1.EventTypeWarning, "NoPods", "Failed to get pods: %v", err)
		return 0, err
	}
	pods, err := c.podLister.Pods(pdb.Namespace).List(sel)
	if err != nil {
		return 0, err
	}
	if len(pods) == 0 {
		c.recorder.Eventf(pdb, corev1.EventTypeNormal, "NoPods", "No matching pods found")
	}
	now := c.now()
	st, recheckAt, unmanaged, err := Compute(pdb, pods, c.scaleOf, now)
	if err != nil {
		c.recorder.Eventf(pdb, corev1.EventTypeWarning, "CalculateExpectedPodCountFailed", "Failed to calculate the number of expected pods: %v", err)
		return 0, err
	}
	if len(unmanaged) > 0 {
		c.recorder.Eventf(pdb, corev1.EventTypeWarning, "UnmanagedPods", "Pods selected by this PodDisruptionBudget (selector: %v) were found "+
			"to be unmanaged. As a result, the status of the PDB cannot be calculated correctly, which may result in undefined behavior. "+
			"To account for these pods please set \".spec.minAvailable\" field of the PDB to an integer value.", pdb.Spec.Selector)
	}
	if !statusUpToDate(pdb, st) {
		next := pdb.DeepCopy()
		next.Status = st
		if _, err := c.client.PolicyV1().PodDisruptionBudgets(pdb.Namespace).UpdateStatus(ctx, next, metav1.UpdateOptions{}); err != nil {
			return 0, err
		}
	}
	if recheckAt.IsZero() {
		return 0, nil
	}
	return max(recheckAt.Sub(now), time.Millisecond), nil
}

func (c *Controller) failSafe(ctx context.Context, pdb *policy.PodDisruptionBudget, cause error) error {
	next := pdb.DeepCopy()
	next.Status.DisruptionsAllowed = 0
	apimeta.SetStatusCondition(&next.Status.Conditions, metav1.Condition{
		Type: policy.DisruptionAllowedCondition, Status: metav1.ConditionFalse, Reason: policy.SyncFailedReason,
		Message: cause.Error(), ObservedGeneration: next.Status.ObservedGeneration,
	})
	_, err := c.client.PolicyV1().PodDisruptionBudgets(pdb.Namespace).UpdateStatus(ctx, next, metav1.UpdateOptions{})
	return err
}

// statusUpToDate: nothing to write, as upstream compares before updating.
func statusUpToDate(pdb *policy.PodDisruptionBudget, st policy.PodDisruptionBudgetStatus) bool {
	s := pdb.Status
	return s.CurrentHealthy == st.CurrentHealthy && s.DesiredHealthy == st.DesiredHealthy &&
		s.ExpectedPods == st.ExpectedPods && s.DisruptionsAllowed == st.DisruptionsAllowed &&
		apiequality.Semantic.DeepEqual(s.DisruptedPods, st.DisruptedPods) &&
		s.ObservedGeneration == pdb.Generation && pdbhelper.ConditionsAreUpToDate(pdb)
}

// ScaleFunc resolves a pod's controller to the workload that counts for a
// budget and its desired replica count; found is false when ref names no
// workload the controller knows.
type ScaleFunc func(namespace string, ref *metav1.OwnerReference) (uid types.UID, scale int32, found bool)

// Compute is the budget's next status from its pods at now: the healthy
// count leaves out terminating pods and those pods/eviction approved less
// than DeletionTimeout ago; desiredHealthy and expectedPods follow
// minAvailable (an integer counts the selected pods, a percentage the
// controllers' scale) or maxUnavailable (the scale). recheckAt is when the
// earliest disruptedPods entry expires (zero if none); unmanaged names the
// pods without a controller, which a percentage cannot account for.
func Compute(pdb *policy.PodDisruptionBudget, pods []*corev1.Pod, scaleOf ScaleFunc, now time.Time) (st policy.PodDisruptionBudgetStatus, recheckAt time.Time, unmanaged []string, err error) {
	var expected, desired int32
	switch {
	case pdb.Spec.MaxUnavailable != nil:
		if expected, unmanaged, err = expectedScale(pods, scaleOf); err != nil {
			return st, recheckAt, unmanaged, err
		}
		n, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MaxUnavailable, int(expected), true)
		if err != nil {
			return st, recheckAt, unmanaged, err
		}
		desired = max(expected-int32(n), 0)
	case pdb.Spec.MinAvailable != nil && pdb.Spec.MinAvailable.Type == intstr.Int:
		desired = pdb.Spec.MinAvailable.IntVal
		expected = int32(len(pods))
	case pdb.Spec.MinAvailable != nil:
		if expected, unmanaged, err = expectedScale(pods, scaleOf); err != nil {
			return st, recheckAt, unmanaged, err
		}
		n, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MinAvailable, int(expected), true)
		if err != nil {
			return st, recheckAt, unmanaged, err
		}
		desired = int32(n)
	}

	disrupted := map[string]metav1.Time{}
	for _, pod := range pods {
		t, ok := pdb.Status.DisruptedPods[pod.Name]
		if !ok || pod.DeletionTimestamp != nil {
			continue // gone on its way, or never evicted
		}
		expiry := t.Add(DeletionTimeout)
		if expiry.Before(now) {
			continue // its delete never came: count it again
		}
		disrupted[pod.Name] = t
		if recheckAt.IsZero() || expiry.Before(recheckAt) {
			recheckAt = expiry
		}
	}
	var healthy int32
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil {
			continue
		}
		if _, ok := disrupted[pod.Name]; ok {
			continue
		}
		if podutils.IsPodReady(pod) {
			healthy++
		}
	}
	// No disruption while the budget expects no pods: its first pods may
	// appear before this controller has looked again.
	allowed := healthy - desired
	if expected <= 0 || allowed < 0 {
		allowed = 0
	}
	st = policy.PodDisruptionBudgetStatus{
		CurrentHealthy: healthy, DesiredHealthy: desired, ExpectedPods: expected, DisruptionsAllowed: allowed,
		DisruptedPods: disrupted, ObservedGeneration: pdb.Generation, Conditions: pdb.Status.Conditions,
	}
	st.Conditions = append([]metav1.Condition(nil), st.Conditions...)
	wrapped := &policy.PodDisruptionBudget{Status: st}
	pdbhelper.UpdateDisruptionAllowedCondition(wrapped)
	return wrapped.Status, recheckAt, unmanaged, nil
}

// expectedScale sums the scale of the pods' controllers, each once. A pod
// with a controller nobody knows is an error, as upstream: the budget's
// denominator would be wrong.
func expectedScale(pods []*corev1.Pod, scaleOf ScaleFunc) (int32, []string, error) {
	scales := map[types.UID]int32{}
	seen := map[types.UID]bool{}
	var unmanaged []string
	for _, pod := range pods {
		ref := metav1.GetControllerOf(pod)
		if ref == nil {
			unmanaged = append(unmanaged, pod.Name)
			continue
		}
		if seen[ref.UID] {
			continue
		}
		seen[ref.UID] = true
		uid, scale, found := scaleOf(pod.Namespace, ref)
		if !found {
			return 0, unmanaged, fmt.Errorf("found no controllers for pod %q", pod.Name)
		}
		scales[uid] = scale
	}
	var total int32
	for _, n := range scales {
		total += n
	}
	return total, unmanaged, nil
}

// scaleOf resolves a pod's controller as upstream's finders: a
// ReplicaSet a Deployment owns counts as that Deployment; a ReplicaSet or
// StatefulSet or ReplicationController of its own counts as itself.
// Custom scale subresources are not served by kelp.
func (c *Controller) scaleOf(ns string, ref *metav1.OwnerReference) (types.UID, int32, bool) {
	group := func(apiVersion string) string {
		gv, err := schema.ParseGroupVersion(apiVersion)
		if err != nil {
			return "?"
		}
		return gv.Group
	}
	switch {
	case ref.Kind == "ReplicaSet" && (group(ref.APIVersion) == "apps" || group(ref.APIVersion) == "extensions"):
		rs, err := c.rsLister.ReplicaSets(ns).Get(ref.Name)
		if err != nil || rs.UID != ref.UID {
			return "", 0, false
		}
		if owner := metav1.GetControllerOf(rs); owner != nil && owner.Kind == "Deployment" {
			d, err := c.dLister.Deployments(ns).Get(owner.Name)
			if err != nil || d.UID != owner.UID {
				return "", 0, false
			}
			return d.UID, replicas(d.Spec.Replicas), true
		}
		return rs.UID, replicas(rs.Spec.Replicas), true
	case ref.Kind == "StatefulSet" && group(ref.APIVersion) == "apps":
		ss, err := c.ssLister.StatefulSets(ns).Get(ref.Name)
		if err != nil || ss.UID != ref.UID {
			return "", 0, false
		}
		return ss.UID, replicas(ss.Spec.Replicas), true
	case ref.Kind == "ReplicationController" && group(ref.APIVersion) == "":
		rc, err := c.rcLister.ReplicationControllers(ns).Get(ref.Name)
		if err != nil || rc.UID != ref.UID {
			return "", 0, false
		}
		return rc.UID, replicas(rc.Spec.Replicas), true
	}
	return "", 0, false
}

func replicas(n *int32) int32 {
	if n == nil {
		return 1
	}
	return *n
}

// staleDisruption reports whether pod carries a DisruptionTarget mark it
// may have to lose, and how long until that is so. The kubelet's own mark
// and a finished pod's are never stale.
func (c *Controller) staleDisruption(pod *corev1.Pod) (bool, time.Duration) {
	if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false, 0
	}
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.DisruptionTarget {
			if cond.Status != corev1.ConditionTrue || cond.Reason == corev1.PodReasonTerminationByKubelet {
				return false, 0
			}
			return true, max(StaleDisruptionTimeout-c.now().Sub(cond.LastTransitionTime.Time), 0)
		}
	}
	return false, 0
}

// syncStalePod sets a stale DisruptionTarget condition to False, as
// upstream's syncStalePodDisruption: the eviction that set it never
// deleted the pod, so its controller must not treat it as going.
func (c *Controller) syncStalePod(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pod, err := c.podLister.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	stale, after := c.staleDisruption(pod)
	if !stale {
		return nil
	}
	if after > 0 {
		return recheck(after)
	}
	next := pod.DeepCopy()
	for i, cond := range next.Status.Conditions {
		if cond.Type == corev1.DisruptionTarget {
			next.Status.Conditions[i] = corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionFalse,
				LastTransitionTime: metav1.NewTime(c.now())}
		}
	}
	_, err = c.client.CoreV1().Pods(ns).UpdateStatus(ctx, next, metav1.UpdateOptions{})
	return err
}
