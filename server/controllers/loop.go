package controllers

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// NewQueue is the rate-limited key queue every loop uses: per-key
// exponential backoff plus an overall token bucket, as upstream.
func NewQueue(name string) workqueue.TypedRateLimitingInterface[string] {
	return workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: name})
}

// Enqueue adds the key of obj, an object or a deletion's tombstone, to q.
// A key that cannot be made (not an object) is reported and dropped.
func Enqueue(q workqueue.TypedInterface[string], obj interface{}) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	q.Add(key)
}

// Delayed is an error a sync returns when it is not failing but wants to
// look again later (a namespace whose content is still going away).
type Delayed interface {
	error
	RequeueDelay() time.Duration
}

// Loop is the worker side of a level-triggered controller: keys come from
// Queue, and Sync compares desired with observed state for one key. A
// failed key is retried with backoff; a key whose sync succeeded is
// forgotten. Duplicate keys collapse in the queue, so Sync always sees the
// latest state.
type Loop struct {
	Name   string
	Queue  workqueue.TypedRateLimitingInterface[string]
	Synced []cache.InformerSynced
	Sync   func(ctx context.Context, key string) error
}

// Run waits for the caches, runs workers until ctx ends, then shuts the
// queue down and returns once every worker has stopped.
func (l *Loop) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	if !cache.WaitForNamedCacheSync(l.Name, ctx.Done(), l.Synced...) {
		l.Queue.ShutDown()
		return
	}
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wait.UntilWithContext(ctx, func(ctx context.Context) {
				for l.next(ctx) {
				}
			}, time.Second)
		}()
	}
	<-ctx.Done()
	l.Queue.ShutDown()
	wg.Wait()
}

func (l *Loop) next(ctx context.Context) bool {
	key, quit := l.Queue.Get()
	if quit {
		return false
	}
	defer l.Queue.Done(key)
	err := l.Sync(ctx, key)
	var delayed Delayed
	switch {
	case err == nil:
		l.Queue.Forget(key)
	case errors.As(err, &delayed):
		l.Queue.Forget(key)
		l.Queue.AddAfter(key, delayed.RequeueDelay())
	default:
		logrus.WithError(err).Debugf("%s: sync %q failed, retrying", l.Name, key)
		l.Queue.AddRateLimited(key)
	}
	return true
}
