package storage

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kelp-project/kelp/embedded/etcd"
)

// Stores on one feed each get the changes under their own prefix, once;
// a store that joins later starts from its list, and one that stops
// ends its watches while the others go on.
func TestFeedGivesEachStoreItsChanges(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e, err := etcd.Start(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	feed := NewFeed(ctx, e.Client, "/registry/")
	open := func(ctx context.Context, prefix string) *Store {
		t.Helper()
		s, err := New(ctx, Config{Client: e.Client, Resource: schema.GroupResource{Resource: "pods"}, Prefix: prefix, Feed: feed,
			Kind: corev1.SchemeGroupVersion.WithKind("Pod"), NewFunc: func() runtime.Object { return &corev1.Pod{} }})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// One prefix a prefix of the other's keys' parents, as a group's
	// resources are: "/registry/a/" does not hold "/registry/ab/x".
	a, ab := open(ctx, "/registry/a/"), open(ctx, "/registry/ab/")
	wa, err := a.Watch(ctx, ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	defer wa.Stop()
	next := func(w watch.Interface, typ watch.EventType, name string) {
		t.Helper()
		select {
		case ev, ok := <-w.ResultChan():
			if !ok || ev.Type != typ || ev.Object.(*corev1.Pod).Name != name {
				t.Fatalf("got %v %s %v, want %s %s", ok, ev.Type, ev.Object, typ, name)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no %s of %s", typ, name)
		}
	}
	if _, err := ab.Create(ctx, ab.Key("ns", "x"), pod("x", ""), false); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Create(ctx, a.Key("ns", "y"), pod("y", ""), false); err != nil {
		t.Fatal(err)
	}
	next(wa, watch.Added, "y") // not x

	// A store joining now lists what is there and gets what follows.
	lateCtx, stopLate := context.WithCancel(ctx)
	late := open(lateCtx, "/registry/ab/")
	wl, err := late.Watch(ctx, ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	next(wl, watch.Added, "x")
	if _, err := ab.Create(ctx, ab.Key("ns", "z"), pod("z", ""), false); err != nil {
		t.Fatal(err)
	}
	next(wl, watch.Added, "z")
	// Stopping it ends its watch; the others are still fed.
	stopLate()
	select {
	case _, ok := <-wl.ResultChan():
		for ok {
			_, ok = <-wl.ResultChan()
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a stopped store's watch did not end")
	}
	if _, err := a.Create(ctx, a.Key("ns", "w"), pod("w", ""), false); err != nil {
		t.Fatal(err)
	}
	next(wa, watch.Added, "w")
	select {
	case ev := <-wa.ResultChan():
		t.Fatalf("an extra event: %s %v", ev.Type, ev.Object)
	case <-time.After(200 * time.Millisecond):
	}
	feed.mu.Lock()
	n := len(feed.caches["/registry/ab/"])
	feed.mu.Unlock()
	if n != 1 {
		t.Errorf("the feed holds %d caches of /registry/ab/, want 1 after one stopped", n)
	}
}
