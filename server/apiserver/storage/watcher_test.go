package storage

import (
	"context"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
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

// The window keeps decoded only the current object: an event whose
// object a later one superseded, every event's previous object and a
// deleted object's last state are its stored bytes. A watch from before
// them still gets every event decoded, and a field selector still sees
// an object leave it (from the previous object) as DELETED.
func TestWindowKeepsSupersededObjectsAsBytes(t *testing.T) {
	s, _ := newTestStore(t)
	ctx := context.Background()
	key := s.Key("ns", "a")
	created, err := s.Create(ctx, key, pod("a", "n1"), false)
	if err != nil {
		t.Fatal(err)
	}
	from := created.(*corev1.Pod).ResourceVersion
	if _, _, err := s.Update(ctx, key, func(cur runtime.Object) (runtime.Object, error) {
		p := cur.(*corev1.Pod).DeepCopy()
		p.Spec.NodeName = "n2"
		return p, nil
	}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Delete(ctx, key, nil, false); err != nil {
		t.Fatal(err)
	}
	c := s.cache
	var kept []cacheEvent
	for deadline := time.Now().Add(5 * time.Second); len(kept) < 3 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		c.mu.RLock()
		kept = kept[:0]
		for i := 0; i < c.count; i++ {
			kept = append(kept, c.window[(c.start+i)%len(c.window)])
		}
		c.mu.RUnlock()
	}
	if len(kept) != 3 {
		t.Fatalf("the window holds %d events, want 3", len(kept))
	}
	for i, ev := range kept {
		if ev.obj != nil || ev.prev != nil {
			t.Errorf("window event %d (%s) holds a decoded object after it was superseded", i, ev.typ)
		}
	}
	if kept[0].raw == nil || kept[1].raw == nil || kept[1].prevRaw == nil || kept[2].prevRaw == nil {
		t.Errorf("the window lost stored values: %+v", kept)
	}

	// A watch of node n1's pods from before the create: ADDED, then
	// DELETED as the pod moves to n2 (known from the previous object).
	sel, err := fields.ParseSelector("spec.nodeName=n1")
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.Watch(ctx, ListOptions{ResourceVersion: strconv.Itoa(mustRV(t, from) - 1), Predicate: Predicate{Field: sel, Attrs: s.attrs}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	all, err := s.Watch(ctx, ListOptions{ResourceVersion: strconv.Itoa(mustRV(t, from) - 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer all.Stop()
	want := func(w watch.Interface, typ watch.EventType, node string, rv int64) {
		t.Helper()
		select {
		case ev := <-w.ResultChan():
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type != typ || p.Spec.NodeName != node || (rv != 0 && p.ResourceVersion != strconv.FormatInt(rv, 10)) {
				t.Fatalf("got %s %+v, want %s of the pod on %q", ev.Type, ev.Object, typ, node)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no %s event", typ)
		}
	}
	want(w, watch.Added, "n1", 0)
	want(w, watch.Deleted, "n2", 0)
	want(all, watch.Added, "n1", 0)
	want(all, watch.Modified, "n2", 0)
	want(all, watch.Deleted, "n2", kept[2].rv)
}

func mustRV(t *testing.T, rv string) int {
	t.Helper()
	n, err := strconv.Atoi(rv)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
