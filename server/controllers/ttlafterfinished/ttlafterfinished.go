// Package ttlafterfinished is upstream's TTL-after-finished controller: a
// Job with spec.ttlSecondsAfterFinished is deleted that many seconds after
// it finished (its Complete or Failed condition), with foreground
// propagation as upstream, so the garbage collector removes its pods
// before the Job itself goes.
package ttlafterfinished

import (
	"context"
	"fmt"
	"time"

	batch "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/kelp-project/kelp/server/controllers"
	jobcontroller "github.com/kelp-project/kelp/server/controllers/job"
)

// Controller deletes finished Jobs whose TTL has run out.
type Controller struct {
	client  kubernetes.Interface
	factory informers.SharedInformerFactory
	// recorder carries upstream's event source; upstream's loop records
	// no events today, and neither does this one.
	recorder record.EventRecorder
	lister   batchlisters.JobLister
	synced   cache.InformerSynced
	queue    workqueue.TypedRateLimitingInterface[string]
	now      func() time.Time
}

// New wires the controller to the factory's Job informer.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, recorder record.EventRecorder) *Controller {
	inf := factory.Batch().V1().Jobs()
	c := &Controller{client: client, factory: factory, recorder: recorder, lister: inf.Lister(),
		synced: inf.Informer().HasSynced, queue: controllers.NewQueue("ttl_jobs_to_delete"), now: time.Now}
	_, _ = inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, cur interface{}) { c.enqueue(cur) },
	})
	return c
}

// Run starts the informers and runs workers until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.factory.Start(ctx.Done())
	loop := controllers.Loop{Name: "ttlafterfinished", Queue: c.queue, Synced: []cache.InformerSynced{c.synced}, Sync: c.sync}
	loop.Run(ctx, workers)
}

func (c *Controller) enqueue(obj interface{}) {
	job, ok := obj.(*batch.Job)
	if !ok || job.DeletionTimestamp != nil || !needsCleanup(job) {
		return
	}
	key, err := cache.MetaNamespaceKeyFunc(job)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	c.queue.Add(key)
}

func needsCleanup(job *batch.Job) bool {
	return job.Spec.TTLSecondsAfterFinished != nil && finishedAt(job) != nil
}

// finishedAt is the transition time of the Job's true Complete or Failed
// condition; nil while it runs.
func finishedAt(job *batch.Job) *time.Time {
	c := jobcontroller.FinishedCondition(job)
	if c == nil {
		return nil
	}
	return &c.LastTransitionTime.Time
}

// timeLeft is how long until job expires; an error if it finished without
// a time.
func (c *Controller) timeLeft(job *batch.Job) (time.Duration, error) {
	at := finishedAt(job)
	if at == nil || at.IsZero() {
		return 0, fmt.Errorf("unable to find the time when the Job %s/%s finished", job.Namespace, job.Name)
	}
	return at.Add(time.Duration(*job.Spec.TTLSecondsAfterFinished) * time.Second).Sub(c.now()), nil
}

// expired reports whether job is due for deletion; if not (and it will be
// one day) its key comes back when it is.
func (c *Controller) expired(key string, job *batch.Job) (bool, error) {
	if job.DeletionTimestamp != nil || !needsCleanup(job) {
		return false, nil
	}
	left, err := c.timeLeft(job)
	if err != nil {
		return false, err
	}
	if left > 0 {
		c.queue.AddAfter(key, left)
		return false, nil
	}
	return true, nil
}

func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	job, err := c.lister.Jobs(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if ok, err := c.expired(key, job); !ok || err != nil {
		return err
	}
	// The cache may be stale: the TTL may have been changed or the Job
	// recreated. Decide again on a live read before deleting.
	fresh, err := c.client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if ok, err := c.expired(key, fresh); !ok || err != nil {
		return err
	}
	policy := metav1.DeletePropagationForeground
	err = c.client.BatchV1().Jobs(ns).Delete(ctx, name, metav1.DeleteOptions{
		PropagationPolicy: &policy,
		Preconditions:     &metav1.Preconditions{UID: &fresh.UID},
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
