// Package statefulset is kelp's StatefulSet controller, as upstream's
// pkg/controller/statefulset: pods <set>-<ordinal> with a stable identity
// (hostname, subdomain, pod-name and pod-index labels) and their own
// PersistentVolumeClaims from volumeClaimTemplates, created before the
// pod. OrderedReady creates pods in ordinal order, each once its
// predecessor is Running and Ready (and available for minReadySeconds),
// and removes them from the highest ordinal down, one at a time, halting
// on an unhealthy pod; Parallel does both at once. Template changes roll
// out from the highest ordinal down (RollingUpdate with partition and
// maxUnavailable) or when a pod is deleted (OnDelete); each template is a
// ControllerRevision, so kubectl's rollout status, history and undo work.
// persistentVolumeClaimRetentionPolicy is carried out through the claims'
// ownerReferences, which the garbage collector acts on. Informers on
// StatefulSets, Pods, PersistentVolumeClaims and ControllerRevisions feed
// one rate-limited queue of StatefulSet keys; expectations keep a stale
// cache from doubling creates or deletes.
package statefulset

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/kelp-project/kelp/server/controllers"
	"github.com/kelp-project/kelp/server/controllers/history"
)

// Event reasons, as upstream.
const (
	SuccessfulCreateReason = "SuccessfulCreate"
	FailedCreateReason     = "FailedCreate"
	SuccessfulDeleteReason = "SuccessfulDelete"
	FailedDeleteReason     = "FailedDelete"
	SuccessfulUpdateReason = "SuccessfulUpdate"
	FailedUpdateReason     = "FailedUpdate"
)

var controllerKind = apps.SchemeGroupVersion.WithKind("StatefulSet")

// Controller is the StatefulSet controller.
type Controller struct {
	client   kubernetes.Interface
	factory  informers.SharedInformerFactory
	recorder record.EventRecorder

	setLister appslisters.StatefulSetLister
	podLister corelisters.PodLister
	pvcLister corelisters.PersistentVolumeClaimLister
	history   history.Store
	synced    []cache.InformerSynced

	queue        workqueue.TypedRateLimitingInterface[string]
	expectations *controllers.Expectations
	pods         *controllers.PodOwners[*apps.StatefulSet]

	now func() time.Time
}

// New wires the controller to the factory's informers. Run starts the
// factory (idempotent) and waits for its caches.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, recorder record.EventRecorder) *Controller {
	setInf := factory.Apps().V1().StatefulSets()
	podInf := factory.Core().V1().Pods()
	pvcInf := factory.Core().V1().PersistentVolumeClaims()
	revInf := factory.Apps().V1().ControllerRevisions()
	c := &Controller{
		client:       client,
		factory:      factory,
		recorder:     recorder,
		setLister:    setInf.Lister(),
		podLister:    podInf.Lister(),
		pvcLister:    pvcInf.Lister(),
		history:      history.Store{Client: client, Lister: revInf.Lister()},
		synced:       []cache.InformerSynced{setInf.Informer().HasSynced, podInf.Informer().HasSynced, pvcInf.Informer().HasSynced, revInf.Informer().HasSynced},
		queue:        controllers.NewQueue("statefulset"),
		expectations: controllers.NewExpectations(nil),
		now:          time.Now,
	}
	c.pods = &controllers.PodOwners[*apps.StatefulSet]{
		Name:         "statefulset",
		Queue:        c.queue,
		Expectations: c.expectations,
		Get:          func(ns, name string) (*apps.StatefulSet, error) { return c.setLister.StatefulSets(ns).Get(name) },
		Resolve:      c.resolveControllerRef,
		List: func(ns string) ([]*apps.StatefulSet, error) {
			return c.setLister.StatefulSets(ns).List(labels.Everything())
		},
		Selector:        func(s *apps.StatefulSet) *metav1.LabelSelector { return s.Spec.Selector },
		MinReadySeconds: func(s *apps.StatefulSet) int32 { return s.Spec.MinReadySeconds },
		Deleting:        c.deletingPod,
	}
	_, _ = setInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { controllers.Enqueue(c.queue, obj) },
		UpdateFunc: func(_, cur interface{}) { controllers.Enqueue(c.queue, cur) },
		DeleteFunc: c.pods.DeleteOwner,
	})
	_, _ = podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.pods.AddPod,
		UpdateFunc: c.pods.UpdatePod,
		DeleteFunc: c.pods.DeletePod,
	})
	// A claim gone (its garbage collection under whenScaled=Delete) may be
	// what a pod's creation waits for.
	_, _ = pvcInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj interface{}) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if pvc, ok := obj.(*v1.PersistentVolumeClaim); ok {
				c.pods.EnqueueSelecting(pvc.Namespace, pvc.Labels)
			}
		},
	})
	// A revision deleted by hand is recreated at once.
	_, _ = revInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj interface{}) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if rev, ok := obj.(*apps.ControllerRevision); ok {
				if set := c.resolveControllerRef(rev.Namespace, metav1.GetControllerOf(rev)); set != nil {
					controllers.Enqueue(c.queue, set)
				}
			}
		},
	})
	return c
}

// Run starts the informers, waits for cache sync, and runs workers until
// ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.factory.Start(ctx.Done())
	loop := controllers.Loop{Name: "statefulset", Queue: c.queue, Synced: c.synced, Sync: c.sync}
	loop.Run(ctx, workers)
}

// ---- event handlers ----

// resolveControllerRef returns the cached StatefulSet ref points at, or
// nil if it is not one (kind, name and UID must match).
func (c *Controller) resolveControllerRef(ns string, ref *metav1.OwnerReference) *apps.StatefulSet {
	if ref == nil || ref.Kind != controllerKind.Kind || ref.APIVersion != controllerKind.GroupVersion().String() {
		return nil
	}
	set, err := c.setLister.StatefulSets(ns).Get(ref.Name)
	if err != nil || set.UID != ref.UID {
		return nil
	}
	return set
}

// deletingPod: a pod's first update with a deletion timestamp is its
// deletion; later ones (the kubelet reporting on its containers) are
// handled as any update.
func (c *Controller) deletingPod(old, cur *v1.Pod) bool {
	if old.DeletionTimestamp != nil {
		return false
	}
	c.pods.DeletePod(cur)
	return true
}

// ---- reconcile ----

func (c *Controller) sync(ctx context.Context, key string) error {
	set, sel, err := c.pods.Start(key)
	if set == nil {
		return err
	}
	if sel.Empty() {
		// Validation forbids it; should one exist, it adopts nothing.
		return nil
	}
	revs, err := c.history.Owned(ctx, set, controllerKind, sel)
	if err != nil {
		return fmt.Errorf("statefulset %s: revisions: %w", key, err)
	}
	// Read the expectations before the pods, as the Job and ReplicaSet
	// controllers do: a deletion observed between the two would otherwise
	// satisfy them while the listed pods still hold the deleted one, and
	// this sync would delete it again.
	act := c.expectations.Satisfied(key) && set.DeletionTimestamp == nil
	pods, err := c.claimPods(ctx, set, sel)
	if err != nil {
		return err
	}
	cur, upd, collisions, err := c.revisions(ctx, set, revs)
	if err != nil {
		return fmt.Errorf("statefulset %s: revisions: %w", key, err)
	}
	status, err := c.update(ctx, key, set, cur, upd, pods, act)
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	status.CollisionCount = &collisions
	if err := c.writeStatus(ctx, set, status, act); err != nil {
		errs = append(errs, err)
	}
	if err := c.pruneRevisions(ctx, set, revs, pods, cur, upd); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 && set.Spec.MinReadySeconds > 0 && status.AvailableReplicas != int32(replicasOf(set)) {
		c.queue.AddAfter(key, time.Duration(set.Spec.MinReadySeconds)*time.Second)
	}
	return utilerrors.NewAggregate(errs)
}

// claimPods returns the set's pods: those it controls that its selector
// still picks and whose name makes them its members, plus orphans of that
// kind, adopted; it releases owned pods that no longer qualify, even while
// the set is being deleted.
func (c *Controller) claimPods(ctx context.Context, set *apps.StatefulSet, sel labels.Selector) ([]*v1.Pod, error) {
	all, err := c.podLister.Pods(set.Namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	claim := &controllers.PodClaim{
		Client: c.client, Owner: set, Kind: controllerKind, Selector: sel,
		Match: func(pod *v1.Pod) bool { return isMember(set, pod) },
		CanAdopt: controllers.RecheckOwner(set, controllerKind.Kind, func() (metav1.Object, error) {
			return c.client.AppsV1().StatefulSets(set.Namespace).Get(ctx, set.Name, metav1.GetOptions{})
		}),
		ReleaseWhileDeleting: true,
	}
	return claim.Claim(ctx, all)
}

// ---- revisions ----

// revisions returns the set's current revision (status.currentRevision,
// what the pods below the partition run) and its update revision (its
// template now), creating or renumbering the latter as upstream: an
// unchanged template keeps the newest revision; a template equal to an
// older revision (an undo) renumbers that one as the newest; a new one is
// created, its name moving past hash collisions. collisions is the count
// to record in the status.
func (c *Controller) revisions(ctx context.Context, set *apps.StatefulSet, revs []*apps.ControllerRevision) (cur, upd *apps.ControllerRevision, collisions int32, err error) {
	history.Sort(revs)
	if set.Status.CollisionCount != nil {
		collisions = *set.Status.CollisionCount
	}
	patch, err := history.TemplatePatch(set)
	if err != nil {
		return nil, nil, collisions, err
	}
	next := history.Max(revs) + 1
	var equal *apps.ControllerRevision
	for _, r := range revs {
		if string(r.Data.Raw) == string(patch) {
			equal = r
		}
	}
	switch {
	case equal != nil && equal == revs[len(revs)-1]:
		upd = equal
	case equal != nil:
		if upd, err = c.history.Renumber(ctx, equal, next); err != nil {
			return nil, nil, collisions, err
		}
	default:
		rev := history.New(set, controllerKind, set.Spec.Template.Labels, patch, next)
		hash := func(n *int32) string { return history.HashData(patch, n) }
		var n *int32
		if upd, n, err = c.history.Create(ctx, set.Name, rev, hash, &collisions); err != nil {
			return nil, nil, collisions, err
		}
		collisions = *n
	}
	for _, r := range revs {
		if r.Name == set.Status.CurrentRevision {
			cur = r
		}
	}
	if cur == nil || cur.Name == upd.Name {
		cur = upd
	}
	return cur, upd, collisions, nil
}

// atRevision is set with rev's template (upstream's ApplyRevision): the
// pods of a revision are made from it.
func atRevision(set *apps.StatefulSet, rev *apps.ControllerRevision) (*apps.StatefulSet, error) {
	orig, err := json.Marshal(set)
	if err != nil {
		return nil, err
	}
	patched, err := strategicpatch.StrategicMergePatch(orig, rev.Data.Raw, &apps.StatefulSet{})
	if err != nil {
		return nil, err
	}
	out := &apps.StatefulSet{}
	if err := json.Unmarshal(patched, out); err != nil {
		return nil, err
	}
	return out, nil
}

// pruneRevisions keeps spec.revisionHistoryLimit revisions besides the
// live ones (the current and update revisions and any a pod runs),
// deleting the oldest first.
func (c *Controller) pruneRevisions(ctx context.Context, set *apps.StatefulSet, revs []*apps.ControllerRevision, pods []*v1.Pod, cur, upd *apps.ControllerRevision) error {
	limit := 10
	if set.Spec.RevisionHistoryLimit != nil {
		limit = int(*set.Spec.RevisionHistoryLimit)
	}
	live := map[string]bool{}
	if cur != nil {
		live[cur.Name] = true
	}
	if upd != nil {
		live[upd.Name] = true
	}
	for _, p := range pods {
		live[revisionOf(p)] = true
	}
	notLive := 0
	for _, r := range revs {
		if !live[r.Name] {
			notLive++
		}
	}
	if limit < 0 {
		return nil
	}
	return c.history.Prune(ctx, revs, notLive-limit, func(r *apps.ControllerRevision) bool { return live[r.Name] })
}

// ---- status ----

// countStatus counts pods into status: replicas (pods that exist), ready
// (Running and Ready), available (ready for minReadySeconds), and, of the
// pods not being deleted, those at the current and the update revision.
func countStatus(status *apps.StatefulSetStatus, set *apps.StatefulSet, pods []*v1.Pod, cur, upd *apps.ControllerRevision, now time.Time) {
	status.Replicas, status.ReadyReplicas, status.AvailableReplicas, status.CurrentReplicas, status.UpdatedReplicas = 0, 0, 0, 0, 0
	for _, p := range pods {
		if !isCreated(p) || ordinalOf(p) < 0 {
			continue
		}
		status.Replicas++
		if isRunningAndReady(p) {
			status.ReadyReplicas++
			if isAvailable(p, set.Spec.MinReadySeconds, now) {
				status.AvailableReplicas++
			}
		}
		if !isTerminating(p) {
			if revisionOf(p) == cur.Name {
				status.CurrentReplicas++
			}
			if revisionOf(p) == upd.Name {
				status.UpdatedReplicas++
			}
		}
	}
}

// writeStatus completes a finished rolling update (every replica Ready
// at the update revision: it becomes the current one) and writes status
// through /status when it changed, once more against a fresh copy on
// conflict. observe marks the generation as acted on.
func (c *Controller) writeStatus(ctx context.Context, set *apps.StatefulSet, status apps.StatefulSetStatus, observe bool) error {
	n := int32(replicasOf(set))
	if set.Spec.UpdateStrategy.Type == apps.RollingUpdateStatefulSetStrategyType &&
		status.UpdatedReplicas == n && status.ReadyReplicas == n && status.Replicas == n {
		status.CurrentReplicas = status.UpdatedReplicas
		status.CurrentRevision = status.UpdateRevision
	}
	status.ObservedGeneration = set.Status.ObservedGeneration
	if observe {
		status.ObservedGeneration = set.Generation
	}
	status.Conditions = set.Status.Conditions
	if apiequality.Semantic.DeepEqual(set.Status, status) {
		return nil
	}
	cur := set.DeepCopy()
	for attempt := 0; ; attempt++ {
		cur.Status = status
		_, err := c.client.AppsV1().StatefulSets(cur.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		if err == nil || attempt == 1 || !apierrors.IsConflict(err) {
			return err
		}
		if cur, err = c.client.AppsV1().StatefulSets(set.Namespace).Get(ctx, set.Name, metav1.GetOptions{}); err != nil {
			return err
		}
		if cur.UID != set.UID {
			return nil
		}
		status.Conditions = cur.Status.Conditions
	}
}

// sortByOrdinal orders pods by ordinal, descending when desc.
func sortByOrdinal(pods []*v1.Pod, desc bool) {
	sort.SliceStable(pods, func(i, j int) bool {
		if desc {
			return ordinalOf(pods[i]) > ordinalOf(pods[j])
		}
		return ordinalOf(pods[i]) < ordinalOf(pods[j])
	})
}
