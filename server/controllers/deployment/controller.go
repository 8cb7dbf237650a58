// Package deployment is kelp's Deployment controller. It is a plain
// client-go API client: it watches Deployments, ReplicaSets and Pods through
// shared informers, and for each Deployment key it creates, scales, adopts
// and cleans up ReplicaSets (RollingUpdate or Recreate) and writes the
// Deployment status that `kubectl rollout status` reads.
package deployment

import (
	"context"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/kelp-project/kelp/server/controllers"
)

var controllerKind = apps.SchemeGroupVersion.WithKind("Deployment")

// Controller reconciles Deployments into ReplicaSets.
type Controller struct {
	client   kubernetes.Interface
	recorder record.EventRecorder

	dLister   appslisters.DeploymentLister
	rsLister  appslisters.ReplicaSetLister
	podLister corelisters.PodLister
	synced    []cache.InformerSynced

	queue workqueue.TypedRateLimitingInterface[string]

	// now is the clock used for conditions and deadlines (tests replace it).
	now func() time.Time
}

// New builds a Deployment controller using informers from factory. The
// caller starts the factory; Run waits for the caches to sync.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, recorder record.EventRecorder) *Controller {
	dInf := factory.Apps().V1().Deployments()
	rsInf := factory.Apps().V1().ReplicaSets()
	podInf := factory.Core().V1().Pods()
	c := &Controller{
		client:    client,
		recorder:  recorder,
		dLister:   dInf.Lister(),
		rsLister:  rsInf.Lister(),
		podLister: podInf.Lister(),
		synced:    []cache.InformerSynced{dInf.Informer().HasSynced, rsInf.Informer().HasSynced, podInf.Informer().HasSynced},
		queue:     controllers.NewQueue("deployment"),
		now:       time.Now,
	}
	dInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, n interface{}) { c.enqueue(n) },
		DeleteFunc: c.enqueue,
	})
	rsInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) { c.replicaSetChanged(nil, obj) },
		UpdateFunc: func(o, n interface{}) {
			if o.(*apps.ReplicaSet).ResourceVersion != "" && o.(*apps.ReplicaSet).ResourceVersion == n.(*apps.ReplicaSet).ResourceVersion {
				return
			}
			c.replicaSetChanged(o, n)
		},
		DeleteFunc: func(obj interface{}) { c.replicaSetChanged(nil, obj) },
	})
	podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: c.podDeleted,
	})
	return c
}

// Run waits for the informer caches, then runs workers until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	loop := controllers.Loop{Name: "deployment", Queue: c.queue, Synced: c.synced, Sync: c.syncDeployment}
	loop.Run(ctx, workers)
}

func (c *Controller) enqueue(obj interface{}) { controllers.Enqueue(c.queue, obj) }

func (c *Controller) enqueueAfter(d *apps.Deployment, after time.Duration) {
	key, err := cache.MetaNamespaceKeyFunc(d)
	if err != nil {
		return
	}
	c.queue.AddAfter(key, after)
}

// resolveOwner returns the Deployment a controller reference points to.
func (c *Controller) resolveOwner(ns string, ref *metav1.OwnerReference) *apps.Deployment {
	if ref == nil || ref.Kind != controllerKind.Kind || ref.APIVersion != controllerKind.GroupVersion().String() {
		return nil
	}
	d, err := c.dLister.Deployments(ns).Get(ref.Name)
	if err != nil || d.UID != ref.UID {
		return nil
	}
	return d
}

func asReplicaSet(obj interface{}) *apps.ReplicaSet {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	rs, _ := obj.(*apps.ReplicaSet)
	return rs
}

// replicaSetChanged enqueues the owning Deployment (old and new owner on an
// ownership change), or every matching Deployment for an orphan.
func (c *Controller) replicaSetChanged(oldObj, obj interface{}) {
	rs := asReplicaSet(obj)
	if rs == nil {
		return
	}
	if old := asReplicaSet(oldObj); old != nil {
		if d := c.resolveOwner(old.Namespace, metav1.GetControllerOf(old)); d != nil {
			c.enqueue(d)
		}
	}
	if ref := metav1.GetControllerOf(rs); ref != nil {
		if d := c.resolveOwner(rs.Namespace, ref); d != nil {
			c.enqueue(d)
		}
		return
	}
	for _, d := range c.deploymentsMatching(rs) {
		c.enqueue(d)
	}
}

func (c *Controller) deploymentsMatching(rs *apps.ReplicaSet) []*apps.Deployment {
	ds, err := c.dLister.Deployments(rs.Namespace).List(labels.Everything())
	if err != nil {
		return nil
	}
	return controllers.Selecting(ds, func(d *apps.Deployment) *metav1.LabelSelector { return d.Spec.Selector }, rs.Labels)
}

// podDeleted wakes a Recreate deployment waiting for its old pods to go.
func (c *Controller) podDeleted(obj interface{}) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != "ReplicaSet" {
		return
	}
	rs, err := c.rsLister.ReplicaSets(pod.Namespace).Get(ref.Name)
	if err != nil || rs.UID != ref.UID {
		return
	}
	if d := c.resolveOwner(rs.Namespace, metav1.GetControllerOf(rs)); d != nil && !isRollingUpdate(d) {
		c.enqueue(d)
	}
}

// syncDeployment reconciles one Deployment key.
func (c *Controller) syncDeployment(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	cached, err := c.dLister.Deployments(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	d := cached.DeepCopy()

	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if d.Spec.Selector == nil || err != nil || sel.Empty() {
		c.recorder.Eventf(d, v1.EventTypeWarning, "SelectingAll", "This deployment is selecting all pods. A non-empty selector is required.")
		if d.Status.ObservedGeneration < d.Generation {
			d.Status.ObservedGeneration = d.Generation
			_, err = c.client.AppsV1().Deployments(ns).UpdateStatus(ctx, d, metav1.UpdateOptions{})
		}
		return err
	}

	rsList, err := c.claimReplicaSets(ctx, d, sel)
	if err != nil {
		return err
	}

	if d.DeletionTimestamp != nil {
		return c.syncStatusOnly(ctx, d, rsList)
	}

	if d, err = c.checkPausedConditions(ctx, d); err != nil {
		return err
	}
	if d.Spec.Paused {
		return c.sync(ctx, d, rsList)
	}

	scaling, err := c.isScalingEvent(ctx, d, rsList)
	if err != nil {
		return err
	}
	if scaling {
		return c.sync(ctx, d, rsList)
	}

	if isRollingUpdate(d) {
		return c.rolloutRolling(ctx, d, rsList)
	}
	return c.rolloutRecreate(ctx, d, rsList, sel)
}

// claimReplicaSets returns (private copies of) the ReplicaSets d controls, adopting matching
// orphans and releasing owned ones that no longer match.
func (c *Controller) claimReplicaSets(ctx context.Context, d *apps.Deployment, sel labels.Selector) ([]*apps.ReplicaSet, error) {
	all, err := c.rsLister.ReplicaSets(d.Namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	var out []*apps.ReplicaSet
	var canAdopt *bool
	for _, rs := range all {
		ref := metav1.GetControllerOf(rs)
		matches := sel.Matches(labels.Set(rs.Labels))
		if ref != nil {
			if ref.UID != d.UID {
				continue
			}
			if matches {
				// Copies: later steps update them in place.
				out = append(out, rs.DeepCopy())
				continue
			}
			if d.DeletionTimestamp != nil {
				continue
			}
			if err := c.release(ctx, d, rs); err != nil && !apierrors.IsNotFound(err) {
				return nil, err
			}
			continue
		}
		if !matches || d.DeletionTimestamp != nil || rs.DeletionTimestamp != nil {
			continue
		}
		if canAdopt == nil {
			// Check against the live object that d still exists with this UID.
			fresh, err := c.client.AppsV1().Deployments(d.Namespace).Get(ctx, d.Name, metav1.GetOptions{})
			ok := err == nil && fresh.UID == d.UID && fresh.DeletionTimestamp == nil
			canAdopt = &ok
		}
		if !*canAdopt {
			continue
		}
		rsCopy := rs.DeepCopy()
		rsCopy.OwnerReferences = append(rsCopy.OwnerReferences, *metav1.NewControllerRef(d, controllerKind))
		adopted, err := c.client.AppsV1().ReplicaSets(rs.Namespace).Update(ctx, rsCopy, metav1.UpdateOptions{})
		if err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, err
		}
		out = append(out, adopted)
	}
	return out, nil
}

func (c *Controller) release(ctx context.Context, d *apps.Deployment, rs *apps.ReplicaSet) error {
	rsCopy := rs.DeepCopy()
	var refs []metav1.OwnerReference
	for _, r := range rsCopy.OwnerReferences {
		if r.UID != d.UID {
			refs = append(refs, r)
		}
	}
	rsCopy.OwnerReferences = refs
	_, err := c.client.AppsV1().ReplicaSets(rs.Namespace).Update(ctx, rsCopy, metav1.UpdateOptions{})
	return err
}

// checkPausedConditions records DeploymentPaused / DeploymentResumed.
func (c *Controller) checkPausedConditions(ctx context.Context, d *apps.Deployment) (*apps.Deployment, error) {
	if !hasProgressDeadline(d) {
		return d, nil
	}
	cond := getCondition(&d.Status, apps.DeploymentProgressing)
	if cond != nil && cond.Reason == TimedOutReason {
		return d, nil
	}
	pausedExists := cond != nil && cond.Reason == PausedDeployReason
	now := metav1.NewTime(c.now())
	switch {
	case d.Spec.Paused && !pausedExists:
		setCondition(&d.Status, newCondition(apps.DeploymentProgressing, v1.ConditionUnknown, PausedDeployReason, "Deployment is paused", now))
	case !d.Spec.Paused && pausedExists:
		setCondition(&d.Status, newCondition(apps.DeploymentProgressing, v1.ConditionUnknown, ResumedDeployReason, "Deployment is resumed", now))
	default:
		return d, nil
	}
	updated, err := c.client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{})
	if err != nil {
		return nil, err
	}
	return updated, nil
}
