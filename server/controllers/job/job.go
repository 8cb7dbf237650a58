// Package job is kelp's Job controller, as upstream's: it runs a Job's
// pods to completions (or, without completions, until one succeeds), at
// most parallelism at a time, replaces failed pods after an exponential
// backoff until backoffLimit (or, Indexed, per index until
// backoffLimitPerIndex), honours activeDeadlineSeconds, suspend,
// Indexed completion and podFailurePolicy, and writes the Job's status and
// conditions.
//
// Every pod it creates carries the finalizer batch.kubernetes.io/job-tracking.
// A finished pod is counted in three steps, each safe to repeat after a
// crash: its UID goes to status.uncountedTerminatedPods (written first),
// then its finalizer is removed, then the UID moves from the uncounted
// list into succeeded/failed. A pod whose finalizer is gone is never
// counted again, and a pod cannot vanish before it is counted, so no
// finished pod is counted twice or lost, even if it is deleted.
package job

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"time"

	batch "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/kubectl/pkg/util/podutils"

	"github.com/kelp-project/kelp/server/controllers"
)

const (
	// MaxUncountedPods caps status.uncountedTerminatedPods, as upstream,
	// so the status stays small and one big Job does not starve others.
	MaxUncountedPods = 500
	// MaxPodCreateDeletePerSync caps one sync's pod creations or deletions.
	MaxPodCreateDeletePerSync = 500
	// DefaultSyncBatchPeriod is how long pod events for one Job are
	// gathered into one sync. Upstream waits a second (syncJobBatchPeriod),
	// which bounds status writes on big clusters but also puts a second
	// between each wave of pods: a Job of ten waves could not finish in
	// under ten. kelp's API is local and a sync costs well under a
	// millisecond, so it gathers for 100 ms; a burst of pod events still
	// becomes one sync.
	DefaultSyncBatchPeriod = 100 * time.Millisecond

	completionIndexEnv = "JOB_COMPLETION_INDEX"
	controllerName     = "kubernetes.io/job-controller" // spec.managedBy of Jobs this controller runs
)

var controllerKind = batch.SchemeGroupVersion.WithKind("Job")

// Controller is the Job controller.
type Controller struct {
	client   kubernetes.Interface
	factory  informers.SharedInformerFactory
	recorder record.EventRecorder

	jobLister batchlisters.JobLister
	podLister corelisters.PodLister
	synced    []cache.InformerSynced

	queue       workqueue.TypedRateLimitingInterface[string]
	orphanQueue workqueue.TypedRateLimitingInterface[string]

	expectations *controllers.Expectations
	finalizers   *finalizerExpectations
	backoff      *backoffStore

	// finished holds the UIDs of Jobs this controller has just marked
	// finished: until the informer shows it, a cached copy would look
	// unfinished and be acted on again.
	finished sync.Map
	// written is the resourceVersion of the last status this controller
	// wrote per Job key: a cached Job older than that is stale and would
	// undo counting, so sync waits for the watch to catch up.
	written sync.Map

	// PodFailureBackoff is the first delay before a failed pod is replaced,
	// doubling per failure up to MaxBackoff; tests shrink them.
	PodFailureBackoff time.Duration
	MaxBackoff        time.Duration
	// SyncBatchPeriod gathers a Job's pod events into one sync.
	SyncBatchPeriod time.Duration

	now func() time.Time
}

// New wires the controller to the factory's Job and Pod informers.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, recorder record.EventRecorder) *Controller {
	jobInf := factory.Batch().V1().Jobs()
	podInf := factory.Core().V1().Pods()
	c := &Controller{
		client: client, factory: factory, recorder: recorder,
		jobLister: jobInf.Lister(), podLister: podInf.Lister(),
		synced:            []cache.InformerSynced{jobInf.Informer().HasSynced, podInf.Informer().HasSynced},
		queue:             controllers.NewQueue("job"),
		orphanQueue:       controllers.NewQueue("job_orphan_pod"),
		finalizers:        newFinalizerExpectations(),
		backoff:           newBackoffStore(),
		PodFailureBackoff: DefaultPodFailureBackoff,
		MaxBackoff:        MaxPodFailureBackoff,
		SyncBatchPeriod:   DefaultSyncBatchPeriod,
		now:               time.Now,
	}
	c.expectations = controllers.NewExpectations(func() time.Time { return c.now() })
	_, _ = jobInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { c.enqueue(obj, 0) },
		UpdateFunc: c.updateJob,
		DeleteFunc: c.deleteJob,
	})
	_, _ = podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.addPod,
		UpdateFunc: c.updatePod,
		DeleteFunc: func(obj interface{}) { c.deletePod(obj, true) },
	})
	return c
}

// Run starts the informers and runs workers (plus one for orphaned pods'
// finalizers) until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.factory.Start(ctx.Done())
	orphans := controllers.Loop{Name: "job-orphan-pods", Queue: c.orphanQueue, Synced: c.synced, Sync: c.syncOrphanPod}
	go orphans.Run(ctx, 1)
	loop := controllers.Loop{Name: "job", Queue: c.queue, Synced: c.synced, Sync: c.sync}
	loop.Run(ctx, workers)
}

// ---- event handlers ----

func (c *Controller) enqueue(obj interface{}, delay time.Duration) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	if delay <= 0 {
		c.queue.Add(key)
		return
	}
	c.queue.AddAfter(key, delay)
}

func (c *Controller) updateJob(old, cur interface{}) {
	oldJob, curJob := old.(*batch.Job), cur.(*batch.Job)
	if isFinished(curJob) {
		// Pods still holding the finalizer (one that missed removal) go
		// through the orphan path: sync no longer looks at finished Jobs.
		c.enqueueOrphansOf(curJob)
		return
	}
	if curJob.Generation == oldJob.Generation {
		c.enqueue(curJob, c.SyncBatchPeriod) // a status write: no hurry
	} else {
		c.enqueue(curJob, 0)
	}
	if curJob.Status.StartTime != nil && curJob.Spec.ActiveDeadlineSeconds != nil &&
		(oldJob.Spec.ActiveDeadlineSeconds == nil || *oldJob.Spec.ActiveDeadlineSeconds != *curJob.Spec.ActiveDeadlineSeconds) {
		left := time.Duration(*curJob.Spec.ActiveDeadlineSeconds)*time.Second - c.now().Sub(curJob.Status.StartTime.Time)
		c.enqueue(curJob, left)
	}
}

func (c *Controller) deleteJob(obj interface{}) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	job, ok := obj.(*batch.Job)
	if !ok {
		return
	}
	c.finished.Delete(job.UID)
	c.enqueueOrphansOf(job)
	c.enqueue(job, 0)
}

// enqueueOrphansOf queues the finalizer removal of every pod of job that
// still carries one.
func (c *Controller) enqueueOrphansOf(job *batch.Job) {
	sel, err := metav1.LabelSelectorAsSelector(job.Spec.Selector)
	if err != nil {
		return
	}
	pods, err := c.podLister.Pods(job.Namespace).List(sel)
	if err != nil {
		return
	}
	for _, p := range pods {
		if hasTrackingFinalizer(p) {
			c.enqueueOrphan(p)
		}
	}
}

func (c *Controller) enqueueOrphan(p *v1.Pod) {
	if key, err := cache.MetaNamespaceKeyFunc(p); err == nil {
		c.orphanQueue.Add(key)
	}
}

// resolveControllerRef returns the cached Job ref points at, if it is one.
func (c *Controller) resolveControllerRef(ns string, ref *metav1.OwnerReference) *batch.Job {
	if ref.Kind != controllerKind.Kind || ref.APIVersion != controllerKind.GroupVersion().String() {
		return nil
	}
	job, err := c.jobLister.Jobs(ns).Get(ref.Name)
	if err != nil || job.UID != ref.UID {
		return nil
	}
	return job
}

func (c *Controller) jobsSelecting(pod *v1.Pod) []*batch.Job {
	all, err := c.jobLister.Jobs(pod.Namespace).List(labels.Everything())
	if err != nil {
		return nil
	}
	return controllers.Selecting(all, func(j *batch.Job) *metav1.LabelSelector { return j.Spec.Selector }, pod.Labels)
}

func (c *Controller) addPod(obj interface{}) {
	pod := obj.(*v1.Pod)
	if pod.DeletionTimestamp != nil {
		c.deletePod(pod, false)
		return
	}
	if ref := metav1.GetControllerOf(pod); ref != nil {
		job := c.resolveControllerRef(pod.Namespace, ref)
		if job == nil {
			if hasTrackingFinalizer(pod) {
				c.enqueueOrphan(pod)
			}
			return
		}
		key, _ := cache.MetaNamespaceKeyFunc(job)
		c.expectations.CreationsObserved(key, 1)
		c.enqueue(job, c.SyncBatchPeriod)
		return
	}
	if hasTrackingFinalizer(pod) {
		c.enqueueOrphan(pod)
	}
	for _, job := range c.jobsSelecting(pod) {
		c.enqueue(job, c.SyncBatchPeriod)
	}
}

func (c *Controller) updatePod(old, cur interface{}) {
	oldPod, curPod := old.(*v1.Pod), cur.(*v1.Pod)
	if curPod.ResourceVersion == oldPod.ResourceVersion {
		return
	}
	if curPod.DeletionTimestamp != nil {
		c.deletePod(curPod, false)
		return
	}
	removed := !hasTrackingFinalizer(curPod)
	curRef, oldRef := metav1.GetControllerOf(curPod), metav1.GetControllerOf(oldPod)
	for _, ref := range []*metav1.OwnerReference{oldRef, curRef} {
		if ref == nil {
			continue
		}
		if job := c.resolveControllerRef(curPod.Namespace, ref); job != nil {
			if removed {
				key, _ := cache.MetaNamespaceKeyFunc(job)
				c.finalizers.observed(key, curPod.UID)
			}
			c.enqueue(job, c.SyncBatchPeriod)
		} else if ref == curRef && !removed {
			c.enqueueOrphan(curPod)
		}
	}
	if curRef == nil {
		if !removed {
			c.enqueueOrphan(curPod)
		}
		for _, job := range c.jobsSelecting(curPod) {
			c.enqueue(job, c.SyncBatchPeriod)
		}
	}
}

// deletePod handles a pod going away: final is its removal from the
// store, otherwise its deletion has only begun.
func (c *Controller) deletePod(obj interface{}, final bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	ref := metav1.GetControllerOf(pod)
	var job *batch.Job
	if ref != nil {
		job = c.resolveControllerRef(pod.Namespace, ref)
	}
	if job == nil || isFinished(job) {
		// No sync will look at this pod's finalizer any more.
		if hasTrackingFinalizer(pod) && !final {
			c.enqueueOrphan(pod)
		}
		return
	}
	key, _ := cache.MetaNamespaceKeyFunc(job)
	podKey, _ := cache.MetaNamespaceKeyFunc(pod)
	c.expectations.DeletionObserved(key, podKey)
	if final || !hasTrackingFinalizer(pod) {
		c.finalizers.observed(key, pod.UID)
	}
	c.enqueue(job, c.SyncBatchPeriod)
}

// syncOrphanPod removes the tracking finalizer of a pod no unfinished Job
// controls: nobody would ever count it, and it could never go away.
func (c *Controller) syncOrphanPod(ctx context.Context, key string) error {
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
	if ref := metav1.GetControllerOf(pod); ref != nil {
		if ref.Kind != controllerKind.Kind || ref.APIVersion != controllerKind.GroupVersion().String() {
			return nil // someone else's pod and finalizer
		}
		if job := c.resolveControllerRef(ns, ref); job != nil && (!isFinished(job) || managedElsewhere(job)) {
			return nil
		}
	}
	return c.removeFinalizer(ctx, pod)
}

// ---- helpers on objects ----

func hasTrackingFinalizer(p *v1.Pod) bool {
	for _, f := range p.Finalizers {
		if f == batch.JobTrackingFinalizer {
			return true
		}
	}
	return false
}

// FinishedCondition is the Job's true Complete or Failed condition, nil
// while it runs. The CronJob and TTL-after-finished controllers read a
// Job's end through it too.
func FinishedCondition(job *batch.Job) *batch.JobCondition {
	for i, c := range job.Status.Conditions {
		if (c.Type == batch.JobComplete || c.Type == batch.JobFailed) && c.Status == v1.ConditionTrue {
			return &job.Status.Conditions[i]
		}
	}
	return nil
}

func isFinished(job *batch.Job) bool { return FinishedCondition(job) != nil }

func managedElsewhere(job *batch.Job) bool {
	return job.Spec.ManagedBy != nil && *job.Spec.ManagedBy != controllerName
}

func suspended(job *batch.Job) bool { return job.Spec.Suspend != nil && *job.Spec.Suspend }

// onlyReplaceFailed: podReplacementPolicy Failed, a terminating pod is not
// replaced (nor counted failed) until it reaches phase Failed.
func onlyReplaceFailed(job *batch.Job) bool {
	return job.Spec.PodReplacementPolicy != nil && *job.Spec.PodReplacementPolicy == batch.Failed
}

func isActive(p *v1.Pod) bool {
	return p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed && p.DeletionTimestamp == nil
}

func isTerminating(p *v1.Pod) bool {
	return p.DeletionTimestamp != nil && p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed
}

// isFailed: phase Failed, or being deleted before it succeeded (an
// orphaned or evicted pod may never reach a phase), unless the Job waits
// for terminal pods.
func isFailed(p *v1.Pod, job *batch.Job) bool {
	if p.Status.Phase == v1.PodFailed {
		return true
	}
	return !onlyReplaceFailed(job) && p.DeletionTimestamp != nil && p.Status.Phase != v1.PodSucceeded
}

func findCondition(list []batch.JobCondition, t batch.JobConditionType) *batch.JobCondition {
	for i := range list {
		if list[i].Type == t {
			return &list[i]
		}
	}
	return nil
}

func newCondition(t batch.JobConditionType, status v1.ConditionStatus, reason, message string, now time.Time) batch.JobCondition {
	ts := metav1.NewTime(now)
	return batch.JobCondition{Type: t, Status: status, Reason: reason, Message: message, LastProbeTime: ts, LastTransitionTime: ts}
}

// setCondition adds or updates a condition; a False one is never added
// where none existed (nothing to say). It reports a change.
func setCondition(list []batch.JobCondition, t batch.JobConditionType, status v1.ConditionStatus, reason, message string, now time.Time) ([]batch.JobCondition, bool) {
	if c := findCondition(list, t); c != nil {
		if c.Status == status && c.Reason == reason && c.Message == message {
			return list, false
		}
		*c = newCondition(t, status, reason, message, now)
		return list, true
	}
	if status == v1.ConditionFalse {
		return list, false
	}
	return append(list, newCondition(t, status, reason, message, now)), true
}

func (c *Controller) removeFinalizer(ctx context.Context, pod *v1.Pod) error {
	if !hasTrackingFinalizer(pod) {
		return nil
	}
	patch, _ := json.Marshal(map[string]interface{}{"metadata": map[string]interface{}{
		"$deleteFromPrimitiveList/finalizers": []string{batch.JobTrackingFinalizer},
	}})
	_, err := c.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func countReady(pods []*v1.Pod) int32 {
	var n int32
	for _, p := range pods {
		if podutils.IsPodReady(p) {
			n++
		}
	}
	return n
}

func resourceVersion(obj metav1.Object) (uint64, bool) {
	v, err := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
	return v, err == nil
}

// recordWritten remembers the resourceVersion of a status just written.
func (c *Controller) recordWritten(key string, job *batch.Job) {
	if rv, ok := resourceVersion(job); ok {
		c.written.Store(key, rv)
	}
}

// stale reports whether the cached job predates our last status write.
func (c *Controller) stale(key string, job *batch.Job) bool {
	w, ok := c.written.Load(key)
	if !ok {
		return false
	}
	rv, ok := resourceVersion(job)
	return ok && rv < w.(uint64)
}
