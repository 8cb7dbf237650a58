package garbagecollector

import (
	"context"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
)

// monitor watches one resource's metadata into the graph. It is a bare
// reflector whose store is the graph itself, not an informer: the
// collector reads objects only from the graph, so an informer's cache,
// delta queue and handler goroutines (six goroutines and some 20 KiB per
// resource) held a second copy of every object's metadata for nothing,
// and a cluster with 100 CRDs had 100 of them.
type monitor struct {
	store  *monitorStore
	cancel context.CancelFunc
}

// monitorStore is the reflector's store: what it lists and watches goes
// to the graph. A relist tells the graph what went while the watch was
// down: what the graph last saw through this resource and the list lacks.
type monitorStore struct {
	gvr    schema.GroupVersionResource
	gvk    schema.GroupVersionKind
	graph  *graph
	synced atomic.Bool // listed once
}

func newMonitor(ctx context.Context, client metadata.Interface, g *graph, gvr schema.GroupVersionResource, gvk schema.GroupVersionKind) (*monitor, func()) {
	store := &monitorStore{gvr: gvr, gvk: gvk, graph: g}
	res := client.Resource(gvr)
	// As metadatainformer's: the client says whether it streams a watch's
	// initial list (the API server does; a fake client does not).
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return res.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return res.Watch(ctx, opts)
		},
	}, client)
	r := cache.NewReflectorWithOptions(lw, &metav1.PartialObjectMetadata{}, store, cache.ReflectorOptions{Name: "garbage collector " + gvr.String()})
	mctx, cancel := context.WithCancel(ctx)
	return &monitor{store: store, cancel: cancel}, func() { r.RunWithContext(mctx) }
}

func (s *monitorStore) Add(obj interface{}) error {
	if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
		s.graph.observe(s.gvr, s.gvk, m)
	}
	return nil
}

func (s *monitorStore) Update(obj interface{}) error { return s.Add(obj) }

func (s *monitorStore) Delete(obj interface{}) error {
	if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
		s.graph.forget(m)
	}
	return nil
}

// Replace observes a full list: what it holds, and the end of what was
// seen before and is no longer there.
func (s *monitorStore) Replace(list []interface{}, _ string) error {
	listed := make(map[types.UID]struct{}, len(list))
	for _, obj := range list {
		if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
			listed[m.UID] = struct{}{}
			s.graph.observe(s.gvr, s.gvk, m)
		}
	}
	for _, uid := range s.graph.seenThrough(s.gvr) {
		if _, ok := listed[uid]; !ok {
			s.graph.forget(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{UID: uid}})
		}
	}
	s.synced.Store(true)
	return nil
}

func (s *monitorStore) Resync() error { return nil }
