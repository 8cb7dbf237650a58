package storage

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kelp-project/kelp/embedded/etcd"
)

func newTestStore(t *testing.T, configure ...func(*Config)) (*Store, *etcd.Etcd) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	e, err := etcd.Start(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	attrs := func(obj runtime.Object) (labels.Set, fields.Set, error) {
		p := obj.(*corev1.Pod)
		return p.Labels, fields.Set{"metadata.name": p.Name, "spec.nodeName": p.Spec.NodeName}, nil
	}
	cfg := Config{Client: e.Client, Resource: schema.GroupResource{Resource: "pods"}, Prefix: "/registry/pods/",
		Kind: corev1.SchemeGroupVersion.WithKind("Pod"), NewFunc: func() runtime.Object { return &corev1.Pod{} }, Attrs: attrs, CacheWindow: 8}
	for _, f := range configure {
		f(&cfg)
	}
	s, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); e.Close() })
	return s, e
}

func pod(name, node string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Spec: corev1.PodSpec{NodeName: node}}
}

func TestCreateGetUpdateConflict(t *testing.T) {
	s, _ := newTestStore(t)
	ctx := context.Background()
	key := s.Key("ns", "a")
	out, err := s.Create(ctx, key, pod("a", ""), false)
	if err != nil {
		t.Fatal(err)
	}
	rv := out.(*corev1.Pod).ResourceVersion
	if rv == "" || rv == "0" {
		t.Fatalf("resourceVersion %q", rv)
	}
	if _, err := s.Create(ctx, key, pod("a", ""), false); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("second create: %v", err)
	}
	got, err := s.Get(ctx, key)
	if err != nil || got.(*corev1.Pod).ResourceVersion != rv {
		t.Fatalf("get: %v rv %s want %s", err, got.(*corev1.Pod).ResourceVersion, rv)
	}
	// The update function sees the current state on every attempt and
	// the write is a compare-and-swap on the mod revision.
	attempts := 0
	upd, _, err := s.Update(ctx, key, func(cur runtime.Object) (runtime.Object, error) {
		attempts++
		if attempts == 1 {
			// Another writer gets in between the read and the swap.
			if _, _, err := s.Update(ctx, key, func(c runtime.Object) (runtime.Object, error) {
				p := c.(*corev1.Pod)
				p.Labels = map[string]string{"other": "writer"}
				return p, nil
			}, false); err != nil {
				t.Fatal(err)
			}
		}
		p := cur.(*corev1.Pod)
		p.Spec.NodeName = "n1"
		return p, nil
	}, false)
	if err != nil || attempts != 2 {
		t.Fatalf("update: %v after %d attempts", err, attempts)
	}
	if p := upd.(*corev1.Pod); p.Labels["other"] != "writer" || p.Spec.NodeName != "n1" {
		t.Fatalf("retry lost a write: %+v", p.ObjectMeta)
	}
	// A no-op write keeps the resourceVersion.
	same, _, err := s.Update(ctx, key, func(cur runtime.Object) (runtime.Object, error) { return cur, nil }, false)
	if err != nil || same.(*corev1.Pod).ResourceVersion != upd.(*corev1.Pod).ResourceVersion {
		t.Fatalf("no-op update changed the resourceVersion: %v", err)
	}
	if _, err := s.Get(ctx, s.Key("ns", "missing")); !apierrors.IsNotFound(err) {
		t.Fatalf("missing: %v", err)
	}
}

func TestWatchCacheSelectorsAndExpiry(t *testing.T) {
	s, _ := newTestStore(t)
	ctx := context.Background()
	sel := fields.OneTermEqualSelector("spec.nodeName", "n1")
	w, err := s.Watch(ctx, ListOptions{ResourceVersion: "", Predicate: Predicate{Field: sel, Attrs: s.attrs}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	key := s.Key("ns", "p")
	if _, err := s.Create(ctx, key, pod("p", ""), false); err != nil {
		t.Fatal(err)
	}
	move := func(node string) {
		if _, _, err := s.Update(ctx, key, func(cur runtime.Object) (runtime.Object, error) {
			p := cur.(*corev1.Pod)
			p.Spec.NodeName = node
			return p, nil
		}, false); err != nil {
			t.Fatal(err)
		}
	}
	move("n1") // enters the selector: ADDED
	move("n2") // leaves it: DELETED
	var got []watch.EventType
	for len(got) < 2 {
		select {
		case ev := <-w.ResultChan():
			got = append(got, ev.Type)
		case <-time.After(5 * time.Second):
			t.Fatalf("events %v", got)
		}
	}
	if got[0] != watch.Added || got[1] != watch.Deleted {
		t.Fatalf("selector transitions gave %v, want ADDED, DELETED", got)
	}
	// The window holds 8 events; a watch from before it is 410.
	first := s.CurrentRV()
	for i := 0; i < 12; i++ {
		move(fmt.Sprintf("x%d", i))
	}
	_, err = s.Watch(ctx, ListOptions{ResourceVersion: fmt.Sprint(first)})
	if !apierrors.IsResourceExpired(err) {
		t.Fatalf("watch from outside the window: %v", err)
	}
	// A resourceVersion=0 list comes from the cache and is current.
	res, err := s.List(ctx, ListOptions{ResourceVersion: "0"})
	if err != nil || len(res.Items) != 1 || res.ResourceVersion < first {
		t.Fatalf("cache list: %v %+v", err, res)
	}
}

func TestListContinueToken(t *testing.T) {
	s, _ := newTestStore(t)
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		if _, err := s.Create(ctx, s.Key("ns", fmt.Sprintf("p%d", i)), pod(fmt.Sprintf("p%d", i), ""), false); err != nil {
			t.Fatal(err)
		}
	}
	res, err := s.List(ctx, ListOptions{Namespace: "ns", Limit: 2})
	if err != nil || len(res.Items) != 2 || res.Continue == "" || res.RemainingItemCount == nil || *res.RemainingItemCount != 3 {
		t.Fatalf("page 1: %v %+v", err, res)
	}
	res2, err := s.List(ctx, ListOptions{Namespace: "ns", Limit: 2, Continue: res.Continue})
	if err != nil || len(res2.Items) != 2 || res2.ResourceVersion != res.ResourceVersion {
		t.Fatalf("page 2: %v %+v", err, res2)
	}
	if _, err := s.List(ctx, ListOptions{Namespace: "ns", Limit: 2, Continue: "not-a-token"}); !apierrors.IsBadRequest(err) {
		t.Fatalf("bad token: %v", err)
	}
}

// A continue token whose revision is compacted away is upstream's 410
// carrying an inconsistent continuation: the rest of the list from the
// same key on, read at the latest revision, later pages at that one.
func TestListContinueCompacted(t *testing.T) {
	s, e := newTestStore(t)
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		if _, err := s.Create(ctx, s.Key("ns", fmt.Sprintf("p%d", i)), pod(fmt.Sprintf("p%d", i), ""), false); err != nil {
			t.Fatal(err)
		}
	}
	first, err := s.List(ctx, ListOptions{Namespace: "ns", Limit: 2})
	if err != nil || len(first.Items) != 2 {
		t.Fatalf("page 1: %v %+v", err, first)
	}
	// A write after the first page, then compaction past its revision.
	if _, err := s.Create(ctx, s.Key("ns", "p5"), pod("p5", ""), false); err != nil {
		t.Fatal(err)
	}
	head, err := e.Client.Get(ctx, "compact_rev_key", clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	c := &Compactor{Client: e.Client}
	if err := c.Compact(ctx, head.Header.Revision); err != nil {
		t.Fatal(err)
	}
	_, err = s.List(ctx, ListOptions{Namespace: "ns", Limit: 2, Continue: first.Continue})
	if !apierrors.IsResourceExpired(err) {
		t.Fatalf("compacted continue: want 410, got %v", err)
	}
	inconsistent := err.(apierrors.APIStatus).Status().ListMeta.Continue
	if inconsistent == "" {
		t.Fatalf("410 without an inconsistent continue token: %v", err)
	}
	var names []string
	opts := ListOptions{Namespace: "ns", Limit: 2, Continue: inconsistent}
	var rv int64
	for page := 0; ; page++ {
		res, err := s.List(ctx, opts)
		if err != nil {
			t.Fatalf("page %d: %v", page, err)
		}
		if page == 0 {
			if res.ResourceVersion == first.ResourceVersion {
				t.Fatalf("inconsistent page read at the compacted revision %d", res.ResourceVersion)
			}
			rv = res.ResourceVersion
		} else if res.ResourceVersion != rv {
			t.Fatalf("page %d at revision %d, want %d", page, res.ResourceVersion, rv)
		}
		for _, o := range res.Items {
			names = append(names, o.(*corev1.Pod).Name)
		}
		if res.Continue == "" {
			break
		}
		opts.Continue = res.Continue
	}
	if got := strings.Join(names, ","); got != "p2,p3,p4,p5" {
		t.Fatalf("inconsistent continuation listed %s, want p2,p3,p4,p5", got)
	}
}
