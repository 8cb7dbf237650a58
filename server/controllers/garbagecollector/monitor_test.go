package garbagecollector

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
)

func partial(name string, uid types.UID) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: uid}}
}

func at(m *metav1.PartialObjectMetadata, rv string) *metav1.PartialObjectMetadata {
	m.ResourceVersion = rv
	return m
}

// A relist tells the graph of what went while the watch was down, and
// the monitor is synced once it has listed.
func TestMonitorStoreRelistForgetsWhatWent(t *testing.T) {
	g := newGraph(func(types.UID) {}, func(types.UID) {})
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	s := &monitorStore{gvr: gvr, gvk: gvr.GroupVersion().WithKind("ConfigMap"), graph: g}
	if s.synced.Load() {
		t.Fatal("synced before listing")
	}
	s.replace([]metav1.PartialObjectMetadata{*partial("a", "uid-a"), *partial("b", "uid-b")})
	if !s.synced.Load() || g.nodes["uid-a"] == nil || g.nodes["uid-b"] == nil {
		t.Fatalf("after the list: synced %v, nodes %v", s.synced.Load(), g.nodes)
	}
	s.observe(partial("c", "uid-c"))
	s.forget(partial("a", "uid-a"))
	if g.nodes["uid-a"] != nil || g.nodes["uid-c"] == nil {
		t.Fatalf("after a watch's add and delete: %v", g.nodes)
	}
	// b went while the watch was down.
	s.replace([]metav1.PartialObjectMetadata{*partial("c", "uid-c")})
	if g.nodes["uid-b"] != nil || g.nodes["uid-c"] == nil {
		t.Errorf("after the relist: %v", g.nodes)
	}
	if seen := g.seenThrough(gvr); len(seen) != 1 {
		t.Errorf("the graph holds %d objects seen through %s, want 1", len(seen), gvr)
	}
}

// scriptedLister answers each list with the next function of a script.
type scriptedLister struct {
	mu     sync.Mutex
	script []func(metav1.ListOptions) (*metav1.PartialObjectMetadataList, error)
	calls  []metav1.ListOptions
}

func (l *scriptedLister) List(_ context.Context, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, opts)
	if len(l.script) == 0 {
		return nil, fmt.Errorf("unscripted list %+v", opts)
	}
	f := l.script[0]
	l.script = l.script[1:]
	return f(opts)
}

func (l *scriptedLister) listed() []metav1.ListOptions {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]metav1.ListOptions(nil), l.calls...)
}

func page(rv, cont string, items ...*metav1.PartialObjectMetadata) func(metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	return func(metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
		l := &metav1.PartialObjectMetadataList{ListMeta: metav1.ListMeta{ResourceVersion: rv, Continue: cont}}
		for _, m := range items {
			l.Items = append(l.Items, *m)
		}
		return l, nil
	}
}

func failList(err error) func(metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	return func(metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) { return nil, err }
}

// watchCall is one watch the loop opened; the test answers it with a
// watcher to drive or an error.
type watchCall struct {
	opts  metav1.ListOptions
	reply chan watchReply
}

type watchReply struct {
	w   watch.Interface
	err error
}

type scriptedWatches struct{ calls chan watchCall }

func (s *scriptedWatches) Watch(ctx context.Context, _ schema.GroupVersionResource, opts metav1.ListOptions, each eventFunc) error {
	c := watchCall{opts: opts, reply: make(chan watchReply, 1)}
	select {
	case s.calls <- c:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case r := <-c.reply:
		if r.err != nil {
			return r.err
		}
		return readChannel(ctx, r.w, each)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// next waits for the loop's next watch and checks where it starts.
func (s *scriptedWatches) next(t *testing.T, wantRV string) watchCall {
	t.Helper()
	select {
	case c := <-s.calls:
		if c.opts.ResourceVersion != wantRV {
			t.Fatalf("watch from resourceVersion %q, want %q", c.opts.ResourceVersion, wantRV)
		}
		return c
	case <-time.After(10 * time.Second):
		t.Fatalf("no watch from resourceVersion %q", wantRV)
	}
	return watchCall{}
}

func (c watchCall) open() *watch.FakeWatcher {
	w := watch.NewFake()
	c.reply <- watchReply{w: w}
	return w
}

func (c watchCall) fail(err error) { c.reply <- watchReply{err: err} }

var expired = apierrors.NewResourceExpired("too old resource version: 1 (15)")

// The loop lists in pages, watches from the list's resourceVersion with
// bookmarks, advances past bookmarks, resumes after a watch that ends,
// retries after failures, relists on 410 and forgets what went meanwhile,
// and stops with its context.
func TestMonitorLoopListsWatchesAndRelists(t *testing.T) {
	g := newGraph(func(types.UID) {}, func(types.UID) {})
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	store := &monitorStore{gvr: gvr, gvk: gvr.GroupVersion().WithKind("ConfigMap"), graph: g}
	lister := &scriptedLister{script: []func(metav1.ListOptions) (*metav1.PartialObjectMetadataList, error){
		failList(apierrors.NewServiceUnavailable("starting")),
		page("10", "page-2", partial("a", "uid-a")),
		page("10", "", partial("b", "uid-b")),
		// After the 410: a and b went while nobody watched.
		page("20", "", partial("c", "uid-c")),
		// After the second 410, on opening the watch.
		page("30", "", partial("c", "uid-c")),
	}}
	watches := &scriptedWatches{calls: make(chan watchCall)}
	loop := &monitorLoop{gvr: gvr, lister: lister, watches: watches, store: store,
		backoff: wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 1 << 30}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { loop.run(ctx); close(done) }()
	has := func(uid types.UID) bool { _, ok := g.get(uid); return ok }

	// The first list failed and was retried; the second went in two pages.
	c := watches.next(t, "10")
	if !store.synced.Load() || !has("uid-a") || !has("uid-b") {
		t.Fatalf("after the list: synced %v, a %v, b %v", store.synced.Load(), has("uid-a"), has("uid-b"))
	}
	calls := lister.listed()
	if len(calls) != 3 || calls[1].Limit != listPageSize || calls[1].Continue != "" || calls[2].Continue != "page-2" {
		t.Fatalf("lists %+v, want a failed one then two pages of %d", calls, listPageSize)
	}
	if !c.opts.AllowWatchBookmarks || c.opts.TimeoutSeconds == nil ||
		*c.opts.TimeoutSeconds < int64(minWatchTimeout.Seconds()) || *c.opts.TimeoutSeconds > 2*int64(minWatchTimeout.Seconds()) {
		t.Fatalf("watch options %+v: want bookmarks and a timeout between %v and twice that", c.opts, minWatchTimeout)
	}
	w := c.open()
	w.Add(at(partial("d", "uid-d"), "11"))
	w.Action(watch.Bookmark, &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "15"}})
	w.Stop()

	// The watch ended normally: resumed from the bookmark's version, at once.
	c = watches.next(t, "15")
	if !has("uid-d") {
		t.Fatal("the watch's added object is not in the graph")
	}
	c.fail(apierrors.NewInternalError(errors.New("boom")))
	// Retried from the same version after the failure.
	w = watches.next(t, "15").open()
	w.Delete(at(partial("d", "uid-d"), "16"))
	w.Error(&expired.ErrStatus)

	// 410: listed again, from which a and b are missing.
	c = watches.next(t, "20")
	if has("uid-a") || has("uid-b") || has("uid-d") || !has("uid-c") {
		t.Fatalf("after the relist: a %v, b %v, d %v, c %v; want only c", has("uid-a"), has("uid-b"), has("uid-d"), has("uid-c"))
	}
	// 410 on opening the watch: listed again too.
	c.fail(expired)
	c = watches.next(t, "30")
	if n := len(lister.listed()); n != 5 {
		t.Fatalf("%d lists, want 5", n)
	}
	w = c.open()
	w.Modify(at(partial("c", "uid-c"), "31"))

	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the loop did not stop with its context")
	}
}

// An error event other than 410 and an unreadable event make the loop
// list again (after the backoff) rather than resume: it cannot know what
// it missed.
func TestMonitorLoopRelistsAfterWatchErrorEvent(t *testing.T) {
	g := newGraph(func(types.UID) {}, func(types.UID) {})
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	store := &monitorStore{gvr: gvr, gvk: gvr.GroupVersion().WithKind("ConfigMap"), graph: g}
	lister := &scriptedLister{script: []func(metav1.ListOptions) (*metav1.PartialObjectMetadataList, error){
		page("10", ""), page("20", ""), page("30", ""),
	}}
	watches := &scriptedWatches{calls: make(chan watchCall)}
	loop := &monitorLoop{gvr: gvr, lister: lister, watches: watches, store: store,
		backoff: wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 1 << 30}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { loop.run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	w := watches.next(t, "10").open()
	w.Error(&apierrors.NewInternalError(errors.New("storage")).ErrStatus)
	w = watches.next(t, "20").open()
	w.Add(&metav1.Status{Status: metav1.StatusSuccess}) // not metadata
	watches.next(t, "30")
}

// A continue token that expires between pages makes the loop list in one
// piece; a watch that ends at once without an event, and a 410 on the
// watch of a fresh list, are retried only after the backoff.
func TestMonitorLoopExpiredContinueAndBackoff(t *testing.T) {
	g := newGraph(func(types.UID) {}, func(types.UID) {})
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	store := &monitorStore{gvr: gvr, gvk: gvr.GroupVersion().WithKind("ConfigMap"), graph: g}
	lister := &scriptedLister{script: []func(metav1.ListOptions) (*metav1.PartialObjectMetadataList, error){
		page("10", "page-2", partial("a", "uid-a")),
		failList(expired),
		page("12", "", partial("a", "uid-a"), partial("b", "uid-b")),
		page("20", ""),
	}}
	watches := &scriptedWatches{calls: make(chan watchCall)}
	const step = 200 * time.Millisecond
	loop := &monitorLoop{gvr: gvr, lister: lister, watches: watches, store: store,
		backoff: wait.Backoff{Duration: step, Factor: 1, Steps: 1 << 30}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { loop.run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	c := watches.next(t, "12")
	if calls := lister.listed(); len(calls) != 3 || calls[2].Limit != 0 || calls[2].Continue != "" {
		t.Fatalf("lists %+v: want the third unpaged after the expired continue", calls)
	}
	if _, ok := g.get("uid-b"); !ok {
		t.Fatal("b from the unpaged list is not in the graph")
	}
	c.fail(expired)
	failed := time.Now()
	c = watches.next(t, "20")
	if d := time.Since(failed); d < step*3/4 {
		t.Fatalf("relisted %v after a 410 on a fresh list's version, want the backoff of %v", d, step)
	}
	c.open().Stop()
	closed := time.Now()
	watches.next(t, "20")
	if d := time.Since(closed); d < step*3/4 {
		t.Fatalf("a watch that ended at once was reopened after %v, want the backoff of %v", d, step)
	}
}

// The default backoff starts under a second and never waits more than
// 30 s, jitter included.
func TestDefaultMonitorBackoffCapped(t *testing.T) {
	b := defaultMonitorBackoff
	if d := b.Step(); d < 800*time.Millisecond || d > 1200*time.Millisecond {
		t.Fatalf("first step %v, want 0.8-1.2 s", d)
	}
	for i := range 100 {
		if d := b.Step(); d > 30*time.Second {
			t.Fatalf("step %d waits %v, more than 30 s", i+2, d)
		}
	}
	if d := b.Step(); d < 20*time.Second {
		t.Fatalf("capped step %v, want at least 20 s", d)
	}
}
