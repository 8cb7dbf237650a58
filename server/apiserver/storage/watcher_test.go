package storage

import (
	"context"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

func queueWatcher() *cacheWatcher {
	return &cacheWatcher{wake: make(chan struct{}, 1), out: make(chan watch.Event), done: make(chan struct{}),
		newFunc: func() runtime.Object { return &corev1.Pod{} }, cache: &watchCache{watchers: map[*cacheWatcher]struct{}{}}}
}

// A watcher queues up to watcherBuffer events its client has not read;
// one more ends it, and its client still reads every queued event, in
// order, before the end. A drained queue is let go.
func TestWatcherQueueEndsPastItsBound(t *testing.T) {
	w := queueWatcher()
	for i := range watcherBuffer {
		if !w.send(cacheEvent{typ: watch.Added, key: "/p", obj: pod(strconv.Itoa(i), ""), rv: int64(i + 1)}) {
			t.Fatalf("event %d of %d refused", i+1, watcherBuffer)
		}
	}
	if w.send(cacheEvent{typ: watch.Added, key: "/p", obj: pod("a", ""), rv: watcherBuffer + 1}) {
		t.Fatal("an event past the bound was queued")
	}
	go w.run(context.Background())
	n := 0
	for ev := range w.out {
		if name := ev.Object.(*corev1.Pod).Name; ev.Type != watch.Added || name != strconv.Itoa(n) {
			t.Fatalf("event %d: %s %s", n, ev.Type, name)
		}
		n++
	}
	if n != watcherBuffer {
		t.Errorf("read %d events before the end, want %d", n, watcherBuffer)
	}
	if w.queue != nil {
		t.Errorf("the drained queue holds %d slots", cap(w.queue))
	}
}

// Events sent while the client reads arrive, and Stop ends the watch.
func TestWatcherDeliversWhileRunning(t *testing.T) {
	w := queueWatcher()
	go w.run(context.Background())
	for i := range 3 {
		w.send(cacheEvent{typ: watch.Added, key: "/p", obj: pod("a", ""), rv: int64(i + 1)})
		select {
		case ev := <-w.out:
			if ev.Type != watch.Added {
				t.Fatalf("event %d: %s", i, ev.Type)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("event %d not delivered", i)
		}
	}
	w.Stop()
	select {
	case _, ok := <-w.out:
		if ok {
			t.Fatal("an event after Stop")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the watch did not end on Stop")
	}
}

// An event's previous object is the one the cache held, not a second
// decoding of it.
func TestWindowSharesThePreviousObject(t *testing.T) {
	s, _ := newTestStore(t)
	ctx := context.Background()
	key := s.Key("ns", "a")
	if _, err := s.Create(ctx, key, pod("a", ""), false); err != nil {
		t.Fatal(err)
	}
	c := s.cache
	waitRV := func(rv int64) {
		deadline := time.Now().Add(5 * time.Second)
		for {
			c.mu.RLock()
			at := c.rv
			c.mu.RUnlock()
			if at >= rv || time.Now().After(deadline) {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	created, err := s.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	rv, _ := ParseRV(created.(*corev1.Pod).ResourceVersion)
	waitRV(rv)
	c.mu.RLock()
	held := c.objects[key]
	c.mu.RUnlock()
	updated, _, err := s.Update(ctx, key, func(cur runtime.Object) (runtime.Object, error) {
		p := cur.(*corev1.Pod).DeepCopy()
		p.Spec.NodeName = "n1"
		return p, nil
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	rv, _ = ParseRV(updated.(*corev1.Pod).ResourceVersion)
	waitRV(rv)
	c.mu.RLock()
	last := c.window[(c.start+c.count-1)%len(c.window)]
	c.mu.RUnlock()
	if last.typ != watch.Modified || last.prev != held {
		t.Errorf("the update's event: %s, previous object shared with the cache's: %v", last.typ, last.prev == held)
	}
}
