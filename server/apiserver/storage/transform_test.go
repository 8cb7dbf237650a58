package storage

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

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

// xorTransformer stands in for encryption: "x<gen>:" then the bytes XORed
// with gen and the key's length (so the key matters). Generations in
// readable decrypt; write is the one written. Values without the prefix
// are plaintext, read as stale, as upstream's identity fallback does.
type xorTransformer struct {
	mu       sync.Mutex
	write    byte
	readable map[byte]bool
}

func (x *xorTransformer) TransformToStorage(_ context.Context, data []byte, key string) ([]byte, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := []byte(fmt.Sprintf("x%d:", x.write))
	for _, b := range data {
		out = append(out, b^x.write^byte(len(key)))
	}
	return out, nil
}

func (x *xorTransformer) TransformFromStorage(_ context.Context, data []byte, key string) ([]byte, bool, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !bytes.HasPrefix(data, []byte("x")) {
		return data, true, nil
	}
	var gen byte
	if _, err := fmt.Sscanf(string(data[:3]), "x%d:", &gen); err != nil || !x.readable[gen] {
		return nil, false, fmt.Errorf("no key for generation %q", data[:3])
	}
	out := make([]byte, 0, len(data)-3)
	for _, b := range data[3:] {
		out = append(out, b^gen^byte(len(key)))
	}
	return out, gen != x.write, nil
}

func (x *xorTransformer) set(write byte, readable ...byte) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.write, x.readable = write, map[byte]bool{}
	for _, r := range readable {
		x.readable[r] = true
	}
}

func newSecretStore(t *testing.T, e *etcd.Etcd, tr Transformer) *Store {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s, err := New(ctx, Config{Client: e.Client, Resource: schema.GroupResource{Resource: "secrets"}, Prefix: "/registry/secrets/",
		Kind: corev1.SchemeGroupVersion.WithKind("Secret"), NewFunc: func() runtime.Object { return &corev1.Secret{} },
		Attrs: defaultTestAttrs, Transformer: tr})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func defaultTestAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	return obj.(*corev1.Secret).Labels, fields.Set{"metadata.name": obj.(*corev1.Secret).Name}, nil
}

func secret(name, value string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Data: map[string][]byte{"v": []byte(value)}}
}

func rawValue(t *testing.T, e *etcd.Etcd, key string) []byte {
	t.Helper()
	resp, err := e.Client.Get(context.Background(), key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("raw get %s: %v %v", key, err, resp)
	}
	return resp.Kvs[0].Value
}

func TestTransformerEveryReadPath(t *testing.T) {
	ctx := context.Background()
	e, err := etcd.Start(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	tr := &xorTransformer{}
	tr.set(1, 1)
	s := newSecretStore(t, e, tr)
	w, err := s.Watch(ctx, ListOptions{ResourceVersion: "", SendInitialEvents: nil})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	key := s.Key("ns", "a")
	if _, err := s.Create(ctx, key, secret("a", "hunter2-distinct"), false); err != nil {
		t.Fatal(err)
	}
	if raw := rawValue(t, e, key); bytes.Contains(raw, []byte("hunter2-distinct")) || !bytes.HasPrefix(raw, []byte("x1:")) {
		t.Fatalf("etcd holds %q", raw)
	}
	check := func(where string, obj runtime.Object) {
		t.Helper()
		if got := string(obj.(*corev1.Secret).Data["v"]); got != "hunter2-distinct" {
			t.Errorf("%s: %q", where, got)
		}
	}
	got, err := s.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	check("get", got)
	list, err := s.List(ctx, ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("list: %v %v", err, list)
	}
	check("etcd list", list.Items[0])
	select {
	case ev := <-w.ResultChan():
		if ev.Type != watch.Added {
			t.Fatalf("event %v", ev.Type)
		}
		check("watch event", ev.Object)
	case <-time.After(5 * time.Second):
		t.Fatal("no watch event")
	}
	cached, err := s.List(ctx, ListOptions{ResourceVersion: "0"})
	if err != nil || len(cached.Items) != 1 {
		t.Fatalf("cached list: %v %v", err, cached)
	}
	check("cached list", cached.Items[0])
	// A new store's watch cache starts from a list of encrypted values.
	check("relisted cache", mustCached(t, newSecretStore(t, e, tr), key))

	// A no-op update under the current key writes nothing.
	rev := rawRev(t, e, key)
	if _, _, err := s.Update(ctx, key, func(cur runtime.Object) (runtime.Object, error) { return cur, nil }, false); err != nil {
		t.Fatal(err)
	}
	if rawRev(t, e, key) != rev {
		t.Error("a no-op update under the current key rewrote the value")
	}
	// A real update goes through the transformer too.
	if _, _, err := s.Update(ctx, key, func(cur runtime.Object) (runtime.Object, error) {
		cur.(*corev1.Secret).Data["v"] = []byte("second-distinct")
		return cur, nil
	}, false); err != nil {
		t.Fatal(err)
	}
	if raw := rawValue(t, e, key); bytes.Contains(raw, []byte("second-distinct")) {
		t.Fatalf("update stored %q", raw)
	}
}

func mustCached(t *testing.T, s *Store, key string) runtime.Object {
	t.Helper()
	obj, ok := s.Cached(key)
	if !ok {
		t.Fatalf("%s not in the watch cache", key)
	}
	return obj
}

func rawRev(t *testing.T, e *etcd.Etcd, key string) int64 {
	resp, err := e.Client.Get(context.Background(), key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("raw get %s: %v", key, err)
	}
	return resp.Kvs[0].ModRevision
}

func TestRewriteMovesStaleValuesToTheWriteKey(t *testing.T) {
	ctx := context.Background()
	e, err := etcd.Start(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	// Plaintext written before encryption was enabled.
	plain := newSecretStore(t, e, nil)
	if _, err := plain.Create(ctx, plain.Key("ns", "old"), secret("old", "plain-distinct"), false); err != nil {
		t.Fatal(err)
	}
	tr := &xorTransformer{}
	tr.set(1, 1)
	s := newSecretStore(t, e, tr)
	got, err := s.Get(ctx, s.Key("ns", "old"))
	if err != nil || string(got.(*corev1.Secret).Data["v"]) != "plain-distinct" {
		t.Fatalf("plaintext after enabling: %v %v", got, err)
	}
	if _, err := s.Create(ctx, s.Key("ns", "gen1"), secret("gen1", "one"), false); err != nil {
		t.Fatal(err)
	}
	tr.set(2, 1, 2)
	if n, err := s.Rewrite(ctx); err != nil || n != 2 {
		t.Fatalf("rewrite: %d %v", n, err)
	}
	for _, name := range []string{"old", "gen1"} {
		if raw := rawValue(t, e, s.Key("ns", name)); !bytes.HasPrefix(raw, []byte("x2:")) {
			t.Errorf("%s after rewrite: %q", name, raw[:8])
		}
	}
	// Once the old generation is gone everything still reads.
	tr.set(2, 2)
	if l, err := s.List(ctx, ListOptions{}); err != nil || len(l.Items) != 2 {
		t.Fatalf("list with only the new key: %v %v", l, err)
	}
	// A second rewrite finds nothing stale and writes nothing.
	rev := rawRev(t, e, s.Key("ns", "old"))
	if _, err := s.Rewrite(ctx); err != nil {
		t.Fatal(err)
	}
	if rawRev(t, e, s.Key("ns", "old")) != rev {
		t.Error("rewrite of a current value wrote it again")
	}
}

func TestRewriteKeepsConcurrentUpdates(t *testing.T) {
	ctx := context.Background()
	e, err := etcd.Start(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	tr := &xorTransformer{}
	tr.set(1, 1)
	s := newSecretStore(t, e, tr)
	const n = 40
	for i := range n {
		if _, err := s.Create(ctx, s.Key("ns", fmt.Sprint(i)), secret(fmt.Sprint(i), "0"), false); err != nil {
			t.Fatal(err)
		}
	}
	tr.set(2, 1, 2)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range n {
			_, _, err := s.Update(ctx, s.Key("ns", fmt.Sprint(i)), func(cur runtime.Object) (runtime.Object, error) {
				cur.(*corev1.Secret).Data["v"] = []byte("updated")
				return cur, nil
			}, false)
			if err != nil {
				t.Error(err)
			}
		}
	}()
	if _, err := s.Rewrite(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	tr.set(2, 2)
	l, err := s.List(ctx, ListOptions{})
	if err != nil || len(l.Items) != n {
		t.Fatalf("list: %v %v", err, l)
	}
	for _, obj := range l.Items {
		if v := string(obj.(*corev1.Secret).Data["v"]); v != "updated" {
			t.Errorf("%s lost its update: %q", obj.(*corev1.Secret).Name, v)
		}
	}
}

func TestUndecryptableValueIsANamed500(t *testing.T) {
	ctx := context.Background()
	e, err := etcd.Start(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	tr := &xorTransformer{}
	tr.set(1, 1)
	s := newSecretStore(t, e, tr)
	key := s.Key("ns", "lost")
	if _, err := s.Create(ctx, key, secret("lost", "x"), false); err != nil {
		t.Fatal(err)
	}
	tr.set(2, 2) // generation 1's key is gone
	for name, f := range map[string]func() error{
		"get":  func() error { _, err := s.Get(ctx, key); return err },
		"list": func() error { _, err := s.List(ctx, ListOptions{}); return err },
		"update": func() error {
			_, _, err := s.Update(ctx, key, func(c runtime.Object) (runtime.Object, error) { return c, nil }, false)
			return err
		},
	} {
		err := f()
		if !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), `secrets "lost"`) {
			t.Errorf("%s: %v, want a 500 naming the Secret", name, err)
		}
	}
	// Raw bytes in etcd that are not ours at all are an error too, not a panic.
	if _, err := e.Client.Put(ctx, s.Key("ns", "junk"), "x9:\xff"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, s.Key("ns", "junk")); !apierrors.IsInternalError(err) {
		t.Errorf("junk: %v", err)
	}
	// A value that decrypts, but to garbage (a wrong AES-CBC key whose
	// output happens to end in valid padding), is named as well.
	if _, err := e.Client.Put(ctx, s.Key("ns", "garbled"), "x2:not a protobuf value"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, s.Key("ns", "garbled")); !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), `secrets "garbled"`) {
		t.Errorf("garbled: %v, want a 500 naming the Secret", err)
	}
}
