// Package replicaset is kelp's ReplicaSet controller: keep N pods matching
// a ReplicaSet's selector. It is a plain client-go API client: shared
// informers on ReplicaSets and Pods feed a rate-limited queue of
// namespace/name keys, and sync compares the desired count with the
// observed pods and takes one step (adopt/release, create or delete, write
// status). Expectations stop a burst of stale watch events from causing
// duplicate creates or deletes. The same controller keeps the pods of
// ReplicationControllers, which it sees as ReplicaSets through a Kind
// (server/controllers/replication), as upstream does.
package replicaset

import (
	"context"
	"fmt"
	"k8s.io/kubectl/pkg/util/podutils"
	"sync"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/kelp-project/kelp/server/controllers"
)

const (
	// BurstReplicas caps the creates or deletes done in one sync.
	BurstReplicas = 500
	// slowStartInitialBatchSize is the first create batch; batches double.
	slowStartInitialBatchSize = 1

	// Event reasons (as upstream).
	SuccessfulCreateReason = "SuccessfulCreate"
	FailedCreateReason     = "FailedCreate"
	SuccessfulDeleteReason = "SuccessfulDelete"
	FailedDeleteReason     = "FailedDelete"
)

// Controller is the ReplicaSet controller.
type Controller struct {
	client   kubernetes.Interface
	factory  informers.SharedInformerFactory
	recorder record.EventRecorder

	kind      *Kind
	podLister corelisters.PodLister
	rsSynced  cache.InformerSynced
	podSynced cache.InformerSynced

	queue        workqueue.TypedRateLimitingInterface[string]
	expectations *controllers.Expectations
	pods         *controllers.PodOwners[*apps.ReplicaSet]

	now func() time.Time
}

// New wires the controller to the factory's ReplicaSet and Pod informers.
// Run starts the factory (idempotent) and waits for its caches.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, recorder record.EventRecorder) *Controller {
	return NewForKind(client, factory, recorder, ReplicaSets(client, factory))
}

// NewForKind wires the controller to the kind's informer and the
// factory's Pod informer.
func NewForKind(client kubernetes.Interface, factory informers.SharedInformerFactory, recorder record.EventRecorder, kind *Kind) *Controller {
	podInf := factory.Core().V1().Pods()
	c := &Controller{
		client:       client,
		factory:      factory,
		recorder:     recorder,
		kind:         kind,
		podLister:    podInf.Lister(),
		rsSynced:     kind.Informer.HasSynced,
		podSynced:    podInf.Informer().HasSynced,
		queue:        controllers.NewQueue(kind.Name),
		expectations: controllers.NewExpectations(nil),
		now:          time.Now,
	}
	c.pods = &controllers.PodOwners[*apps.ReplicaSet]{
		Name:            kind.Name,
		Queue:           c.queue,
		Expectations:    c.expectations,
		Get:             kind.Get,
		Resolve:         c.resolveControllerRef,
		List:            kind.List,
		Selector:        func(rs *apps.ReplicaSet) *metav1.LabelSelector { return rs.Spec.Selector },
		MinReadySeconds: func(rs *apps.ReplicaSet) int32 { return rs.Spec.MinReadySeconds },
		Deleting:        c.deletingPod,
	}
	_, _ = kind.Informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { c.enqueueRS(obj) },
		UpdateFunc: func(_, cur interface{}) { c.enqueueRS(cur) },
		DeleteFunc: func(obj interface{}) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if rs, ok := kind.Convert(obj); ok {
				c.pods.DeleteOwner(rs)
			}
		},
	})
	_, _ = podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.pods.AddPod,
		UpdateFunc: c.pods.UpdatePod,
		DeleteFunc: c.pods.DeletePod,
	})
	return c
}

// Run starts the informers, waits for cache sync, and runs workers until
// ctx is done. It returns once the workers have stopped.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.factory.Start(ctx.Done())
	loop := controllers.Loop{Name: c.kind.Name, Queue: c.queue, Synced: []cache.InformerSynced{c.rsSynced, c.podSynced}, Sync: c.sync}
	loop.Run(ctx, workers)
}

// ---- event handlers ----

func (c *Controller) enqueueRS(obj interface{}) {
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	c.queue.Add(key)
}

// resolveControllerRef returns the cached ReplicaSet a controller ref points
// at, or nil if it is not one of ours (kind, name and UID must match).
func (c *Controller) resolveControllerRef(ns string, ref *metav1.OwnerReference) *apps.ReplicaSet {
	if ref.Kind != c.kind.GVK.Kind {
		return nil
	}
	rs, err := c.kind.Get(ns, ref.Name)
	if err != nil || rs.UID != ref.UID {
		return nil
	}
	return rs
}

// deletingPod handles an update to a pod being deleted: its deletion and,
// if its labels changed with it, that of the pod as it was (upstream's
// rule), so that an owner its old ControllerRef named sees it too.
func (c *Controller) deletingPod(old, cur *v1.Pod) bool {
	c.pods.DeletePod(cur)
	if !apiequality.Semantic.DeepEqual(cur.Labels, old.Labels) {
		c.pods.DeletePod(old)
	}
	return true
}

// ---- reconcile ----

func (c *Controller) sync(ctx context.Context, key string) error {
	rs, selector, err := c.pods.Start(key)
	if rs == nil || rs.Spec.Selector == nil {
		return err
	}
	needsSync := c.expectations.Satisfied(key)

	all, err := c.podLister.Pods(rs.Namespace).List(labels.Everything())
	if err != nil {
		return err
	}
	var active []*v1.Pod
	var terminating int32
	for _, p := range all {
		if isPodActive(p) {
			active = append(active, p)
		} else if isPodTerminating(p) {
			if ref := metav1.GetControllerOf(p); ref != nil && ref.UID == rs.UID {
				terminating++
			}
		}
	}
	owned, err := c.claimPods(ctx, rs, selector, active)
	if err != nil {
		return err
	}

	var manageErr error
	if needsSync && rs.DeletionTimestamp == nil {
		manageErr = c.manageReplicas(ctx, owned, rs, key)
	}

	newStatus := c.calculateStatus(rs, owned, terminating, manageErr)
	updated, err := c.updateStatus(ctx, rs, newStatus)
	if err != nil {
		return err
	}
	if manageErr == nil && updated.Spec.MinReadySeconds > 0 &&
		updated.Status.ReadyReplicas == replicasOf(updated) &&
		updated.Status.AvailableReplicas != replicasOf(updated) {
		c.queue.AddAfter(key, time.Duration(updated.Spec.MinReadySeconds)*time.Second)
	}
	return manageErr
}

func replicasOf(rs *apps.ReplicaSet) int32 {
	if rs.Spec.Replicas == nil {
		return 1
	}
	return *rs.Spec.Replicas
}

// claimPods adopts matching orphans and releases owned pods that no longer
// match, and returns the active pods this ReplicaSet controls.
func (c *Controller) claimPods(ctx context.Context, rs *apps.ReplicaSet, sel labels.Selector, pods []*v1.Pod) ([]*v1.Pod, error) {
	claim := &controllers.PodClaim{
		Client: c.client, Owner: rs, Kind: c.kind.GVK, Selector: sel,
		CanAdopt: controllers.RecheckOwner(rs, c.kind.GVK.Kind, func() (metav1.Object, error) {
			return c.kind.GetLive(ctx, rs.Namespace, rs.Name)
		}),
	}
	return claim.Claim(ctx, pods)
}

// manageReplicas creates or deletes pods to bring len(pods) to the desired
// count, at most BurstReplicas per sync.
func (c *Controller) manageReplicas(ctx context.Context, pods []*v1.Pod, rs *apps.ReplicaSet, key string) error {
	diff := len(pods) - int(replicasOf(rs))
	switch {
	case diff < 0:
		diff = -diff
		if diff > BurstReplicas {
			diff = BurstReplicas
		}
		// Record before acting: the informer may see a new pod before
		// Create even returns.
		c.expectations.Expect(key, diff, nil)
		successes, err := slowStartBatch(diff, slowStartInitialBatchSize, func() error {
			return c.createPod(ctx, rs)
		})
		// Pods never created will never be observed.
		for i := 0; i < diff-successes; i++ {
			c.expectations.CreationsObserved(key, 1)
		}
		return err
	case diff > 0:
		if diff > BurstReplicas {
			diff = BurstReplicas
		}
		victims := podsToDelete(pods, diff)
		keys := make([]string, 0, len(victims))
		for _, p := range victims {
			k, _ := cache.MetaNamespaceKeyFunc(p)
			keys = append(keys, k)
		}
		c.expectations.Expect(key, 0, keys)
		errCh := make(chan error, len(victims))
		var wg sync.WaitGroup
		for i, p := range victims {
			wg.Add(1)
			go func(p *v1.Pod, podKey string) {
				defer wg.Done()
				if err := c.deletePodAPI(ctx, rs, p); err != nil {
					// This deletion will not be observed.
					c.expectations.DeletionObserved(key, podKey)
					if !apierrors.IsNotFound(err) {
						errCh <- err
					}
				}
			}(p, keys[i])
		}
		wg.Wait()
		close(errCh)
		for err := range errCh {
			return err // first error is enough; the rest are in events
		}
	}
	return nil
}

// slowStartBatch calls fn count times in batches of 1, 2, 4, ... and stops
// after the first batch with an error, so a failing create (quota, bad
// template) costs one call instead of hundreds. Returns the successes.
func slowStartBatch(count, initial int, fn func() error) (int, error) {
	remaining := count
	successes := 0
	for batch := min(remaining, initial); batch > 0; batch = min(2*batch, remaining) {
		errCh := make(chan error, batch)
		var wg sync.WaitGroup
		wg.Add(batch)
		for i := 0; i < batch; i++ {
			go func() {
				defer wg.Done()
				if err := fn(); err != nil {
					errCh <- err
				}
			}()
		}
		wg.Wait()
		successes += batch - len(errCh)
		if len(errCh) > 0 {
			return successes, <-errCh
		}
		remaining -= batch
	}
	return successes, nil
}

func (c *Controller) podFromTemplate(rs *apps.ReplicaSet) *v1.Pod {
	t := &rs.Spec.Template
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:    rs.Namespace,
			GenerateName: rs.Name + "-",
			Labels:       map[string]string{},
			Annotations:  map[string]string{},
			OwnerReferences: []metav1.OwnerReference{
				*metav1.NewControllerRef(rs, c.kind.GVK),
			},
		},
		Spec: *t.Spec.DeepCopy(),
	}
	for k, v := range t.Labels {
		pod.Labels[k] = v
	}
	for k, v := range t.Annotations {
		pod.Annotations[k] = v
	}
	if len(t.Finalizers) > 0 {
		pod.Finalizers = append([]string(nil), t.Finalizers...)
	}
	return pod
}

func (c *Controller) createPod(ctx context.Context, rs *apps.ReplicaSet) error {
	pod := c.podFromTemplate(rs)
	if len(pod.Labels) == 0 {
		return fmt.Errorf("unable to create pods, no labels")
	}
	created, err := c.client.CoreV1().Pods(rs.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		if apierrors.HasStatusCause(err, v1.NamespaceTerminatingCause) {
			// Namespace is going away: nothing to report; the pod will
			// never be observed, and the caller counts this as success, so
			// lower the expectation here.
			key, _ := cache.MetaNamespaceKeyFunc(rs)
			c.expectations.CreationsObserved(key, 1)
			return nil
		}
		c.recorder.Eventf(c.kind.EventObject(rs), v1.EventTypeWarning, FailedCreateReason, "Error creating: %v", err)
		return err
	}
	c.recorder.Eventf(c.kind.EventObject(rs), v1.EventTypeNormal, SuccessfulCreateReason, "Created pod: %v", created.Name)
	return nil
}

func (c *Controller) deletePodAPI(ctx context.Context, rs *apps.ReplicaSet, pod *v1.Pod) error {
	err := c.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return err
		}
		c.recorder.Eventf(c.kind.EventObject(rs), v1.EventTypeWarning, FailedDeleteReason, "Error deleting: %v", err)
		return fmt.Errorf("unable to delete pods: %w", err)
	}
	c.recorder.Eventf(c.kind.EventObject(rs), v1.EventTypeNormal, SuccessfulDeleteReason, "Deleted pod: %v", pod.Name)
	return nil
}

// ---- status ----

func (c *Controller) calculateStatus(rs *apps.ReplicaSet, pods []*v1.Pod, terminating int32, manageErr error) apps.ReplicaSetStatus {
	st := *rs.Status.DeepCopy()
	templateSel := labels.SelectorFromSet(rs.Spec.Template.Labels)
	now := c.now()
	var fully, ready, available int32
	for _, p := range pods {
		if templateSel.Matches(labels.Set(p.Labels)) {
			fully++
		}
		if podutils.IsPodReady(p) {
			ready++
			if podutils.IsPodAvailable(p, rs.Spec.MinReadySeconds, metav1.NewTime(now)) {
				available++
			}
		}
	}
	st.Replicas = int32(len(pods))
	st.FullyLabeledReplicas = fully
	st.ReadyReplicas = ready
	st.AvailableReplicas = available
	st.TerminatingReplicas = &terminating
	st.ObservedGeneration = rs.Generation

	idx := -1
	for i := range st.Conditions {
		if st.Conditions[i].Type == apps.ReplicaSetReplicaFailure {
			idx = i
		}
	}
	if manageErr != nil && idx < 0 {
		reason := FailedCreateReason
		if len(pods)-int(replicasOf(rs)) > 0 {
			reason = FailedDeleteReason
		}
		st.Conditions = append(st.Conditions, apps.ReplicaSetCondition{
			Type:               apps.ReplicaSetReplicaFailure,
			Status:             v1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(now),
			Reason:             reason,
			Message:            manageErr.Error(),
		})
	} else if manageErr == nil && idx >= 0 {
		st.Conditions = append(st.Conditions[:idx:idx], st.Conditions[idx+1:]...)
		if len(st.Conditions) == 0 {
			st.Conditions = nil
		}
	}
	return st
}

// updateStatus writes status through the status subresource only when it
// changed, retrying once against a fresh copy on conflict.
func (c *Controller) updateStatus(ctx context.Context, rs *apps.ReplicaSet, st apps.ReplicaSetStatus) (*apps.ReplicaSet, error) {
	if c.kind.Unstored != nil {
		c.kind.Unstored(&st)
	}
	if apiequality.Semantic.DeepEqual(rs.Status, st) {
		return rs, nil
	}
	cur := rs.DeepCopy()
	var lastErr error
	for attempt := 0; attempt < 2; attempt++ {
		cur.Status = st
		cur.Status.ObservedGeneration = cur.Generation
		updated, err := c.kind.UpdateStatus(ctx, cur)
		if err == nil {
			return updated, nil
		}
		lastErr = err
		fresh, gerr := c.kind.GetLive(ctx, cur.Namespace, cur.Name)
		if gerr != nil {
			return nil, err
		}
		cur = fresh
	}
	return nil, lastErr
}
