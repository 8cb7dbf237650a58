package garbagecollector

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

func partial(name string, uid types.UID) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: uid}}
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
	if err := s.Replace([]interface{}{partial("a", "uid-a"), partial("b", "uid-b")}, "10"); err != nil {
		t.Fatal(err)
	}
	if !s.synced.Load() || g.nodes["uid-a"] == nil || g.nodes["uid-b"] == nil {
		t.Fatalf("after the list: synced %v, nodes %v", s.synced.Load(), g.nodes)
	}
	_ = s.Add(partial("c", "uid-c"))
	_ = s.Delete(partial("a", "uid-a"))
	if g.nodes["uid-a"] != nil || g.nodes["uid-c"] == nil {
		t.Fatalf("after a watch's add and delete: %v", g.nodes)
	}
	// b went while the watch was down.
	_ = s.Replace([]interface{}{partial("c", "uid-c")}, "20")
	if g.nodes["uid-b"] != nil || g.nodes["uid-c"] == nil {
		t.Errorf("after the relist: %v", g.nodes)
	}
	if seen := g.seenThrough(gvr); len(seen) != 1 {
		t.Errorf("the graph holds %d objects seen through %s, want 1", len(seen), gvr)
	}
}
