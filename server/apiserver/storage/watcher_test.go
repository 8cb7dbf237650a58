package storage

import (
	"context"
	goruntime "runtime"
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

// A store that keeps its cache encoded holds no decoded object, and
// serves the same reads and watches as one that does.
func TestCacheEncodedHoldsBytesAndServesTheSame(t *testing.T) {
	s, _ := newTestStore(t, func(c *Config) { c.CacheEncoded = true })
	ctx := context.Background()
	sel := fields.OneTermEqualSelector("spec.nodeName", "n1")
	pred := Predicate{Field: sel, Attrs: s.attrs}
	key := s.Key("ns", "a")
	created, err := s.Create(ctx, key, pod("a", "n1"), false)
	if err != nil {
		t.Fatal(err)
	}
	from := mustRV(t, created.(*corev1.Pod).ResourceVersion) - 1
	if _, err := s.Create(ctx, s.Key("ns", "b"), pod("b", "n2"), false); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Update(ctx, key, func(cur runtime.Object) (runtime.Object, error) {
		p := cur.(*corev1.Pod).DeepCopy()
		p.Spec.NodeName = "n2"
		return p, nil
	}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Delete(ctx, s.Key("ns", "b"), nil, false); err != nil {
		t.Fatal(err)
	}
	last := s.CurrentRV()
	for deadline := time.Now().Add(5 * time.Second); s.CurrentRV() == last && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		res, err := s.List(ctx, ListOptions{ResourceVersion: "0"})
		if err == nil && len(res.Items) == 1 {
			break
		}
	}
	c := s.cache
	c.mu.RLock()
	nObjects, nEncoded := len(c.objects), len(c.encoded)
	var decodedInWindow int
	for i := 0; i < c.count; i++ {
		if ev := c.window[(c.start+i)%len(c.window)]; ev.obj != nil || ev.prev != nil {
			decodedInWindow++
		}
	}
	c.mu.RUnlock()
	if nObjects != 0 || nEncoded != 1 || decodedInWindow != 0 {
		t.Fatalf("the cache holds %d decoded objects, %d encoded, and %d decoded in its window; want 0, 1, 0", nObjects, nEncoded, decodedInWindow)
	}

	// Reads decode: each a fresh object, current.
	one, ok1 := s.Cached(key)
	two, ok2 := s.Cached(key)
	if !ok1 || !ok2 || one == two || one.(*corev1.Pod).Spec.NodeName != "n2" {
		t.Fatalf("Cached gave %v %v (same object: %v)", one, two, one == two)
	}
	if _, ok := s.Cached(s.Key("ns", "b")); ok {
		t.Fatal("a deleted object is still cached")
	}
	res, err := s.List(ctx, ListOptions{ResourceVersion: "0", Predicate: Predicate{Field: fields.OneTermEqualSelector("spec.nodeName", "n2"), Attrs: s.attrs}})
	if err != nil || len(res.Items) != 1 || res.Items[0].(*corev1.Pod).Name != "a" {
		t.Fatalf("cache list by field: %v %+v", err, res)
	}

	// A watch from before the first create replays the window, with the
	// selector's transitions known from the stored previous values.
	w, err := s.Watch(ctx, ListOptions{ResourceVersion: strconv.Itoa(from), Predicate: pred})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	all, err := s.Watch(ctx, ListOptions{ResourceVersion: strconv.Itoa(from)})
	if err != nil {
		t.Fatal(err)
	}
	defer all.Stop()
	next := func(w watch.Interface, typ watch.EventType, name, node string) {
		t.Helper()
		select {
		case ev := <-w.ResultChan():
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type != typ || p.Name != name || p.Spec.NodeName != node {
				t.Fatalf("got %s %+v, want %s of %s on %q", ev.Type, ev.Object, typ, name, node)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no %s event", typ)
		}
	}
	next(w, watch.Added, "a", "n1")
	next(w, watch.Deleted, "a", "n2")
	next(all, watch.Added, "a", "n1")
	next(all, watch.Added, "b", "n2")
	next(all, watch.Modified, "a", "n2")
	next(all, watch.Deleted, "b", "n2")

	// Initial events of a new watch, and live events after them.
	fresh, err := s.Watch(ctx, ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Stop()
	next(fresh, watch.Added, "a", "n2")
	if _, err := s.Create(ctx, s.Key("ns", "c"), pod("c", "n1"), false); err != nil {
		t.Fatal(err)
	}
	next(fresh, watch.Added, "c", "n1")
	next(w, watch.Added, "c", "n1")
}

// A watch read with Next gets what a reader of ResultChan gets (initial
// events, the bookmark that ends them, then changes) without a goroutine
// of its own, and ends when stopped.
func TestWatchReadWithNextHasNoGoroutine(t *testing.T) {
	s, _ := newTestStore(t)
	ctx := context.Background()
	if _, err := s.Create(ctx, s.Key("ns", "a"), pod("a", "n1"), false); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, ok := s.Cached(s.Key("ns", "a")); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the cache never saw the pod")
		}
	}
	yes := true
	before := goruntime.NumGoroutine()
	var ws []Puller
	for range 50 {
		w, err := s.Watch(ctx, ListOptions{SendInitialEvents: &yes, AllowBookmarks: true})
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w.(Puller))
	}
	if n := goruntime.NumGoroutine() - before; n > 5 {
		t.Errorf("50 watches started %d goroutines", n)
	}
	w := ws[0]
	next := func(typ watch.EventType, name string) {
		t.Helper()
		nctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		ev, ok := w.Next(nctx)
		// A progress answer etcd gives meanwhile is a bookmark too.
		for ok && typ != watch.Bookmark && ev.Type == watch.Bookmark {
			ev, ok = w.Next(nctx)
		}
		if !ok || ev.Type != typ {
			t.Fatalf("got %v %s, want %s", ok, ev.Type, typ)
		}
		if name != "" && ev.Object.(*corev1.Pod).Name != name {
			t.Fatalf("got %s of %s, want %s", typ, ev.Object.(*corev1.Pod).Name, name)
		}
	}
	if !w.Pending() {
		t.Fatal("the initial event is not pending")
	}
	next(watch.Added, "a")
	next(watch.Bookmark, "")
	if _, err := s.Create(ctx, s.Key("ns", "b"), pod("b", "n1"), false); err != nil {
		t.Fatal(err)
	}
	next(watch.Added, "b")
	// A reader whose context ends gets false; a stopped watch ends.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, ok := w.Next(short); ok {
		t.Fatal("Next returned an event that never happened")
	}
	w.Stop()
	if _, ok := w.Next(ctx); ok {
		t.Fatal("a stopped watch gave an event")
	}
	for _, w := range ws[1:] {
		w.Stop()
	}
}
