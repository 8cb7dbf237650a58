package integration

import (
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
)

// eventLog records informer notifications for configmaps by name.
type eventLog struct {
	mu     sync.Mutex
	events []string
}

func (l *eventLog) add(kind string, obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, kind+":"+cm.Name)
}

func (l *eventLog) has(ev string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.events {
		if e == ev {
			return true
		}
	}
	return false
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitWithin(t, 20*time.Second, what, cond)
}

func waitWithin(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func startInformer(t *testing.T, cs kubernetes.Interface, log *eventLog) cache.SharedIndexInformer {
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace("default"))
	inf := factory.Core().V1().ConfigMaps().Informer()
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { log.add("ADDED", o) },
		UpdateFunc: func(_, o any) { log.add("MODIFIED", o) },
		DeleteFunc: func(o any) { log.add("DELETED", o) },
	})
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	factory.Start(stop)
	if !cache.WaitForCacheSync(stop, inf.HasSynced) {
		t.Fatal("informer never synced")
	}
	return inf
}

func informerRoundTrip(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "before"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	log := &eventLog{}
	startInformer(t, cs, log)
	waitFor(t, "ADDED:before from the initial sync", func() bool { return log.has("ADDED:before") })
	cm, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "live"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "ADDED:live", func() bool { return log.has("ADDED:live") })
	cm.Data = map[string]string{"k": "v"}
	if _, err := cs.CoreV1().ConfigMaps("default").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "MODIFIED:live", func() bool { return log.has("MODIFIED:live") })
	if err := cs.CoreV1().ConfigMaps("default").Delete(ctx, "live", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "DELETED:live", func() bool { return log.has("DELETED:live") })
}

func TestInformerWatchList(t *testing.T) {
	informerRoundTrip(t)
}

func TestInformerListThenWatch(t *testing.T) {
	t.Setenv("KUBE_FEATURE_WatchListClient", "false")
	informerRoundTrip(t)
}

// A watch from a compacted revision gets 410 as an ERROR event; an
// informer relists and carries on.
func TestWatchCompacted(t *testing.T) {
	s := startServer(t, "--etcd-compaction-interval=1s")
	cs := s.client()
	ctx := ctxT(t)
	cm, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "old"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	oldRV := cm.ResourceVersion
	for i := 0; i < 5; i++ {
		cm.Data = map[string]string{"i": strconv.Itoa(i)}
		if cm, err = cs.CoreV1().ConfigMaps("default").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Two compaction ticks: the second compacts past everything above.
	time.Sleep(3 * time.Second)
	w, err := cs.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{ResourceVersion: oldRV})
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	select {
	case ev := <-w.ResultChan():
		if ev.Type != watch.Error {
			t.Fatalf("first event %s, want ERROR", ev.Type)
		}
		st := apierrors.FromObject(ev.Object)
		if !apierrors.IsResourceExpired(st) && !apierrors.IsGone(st) {
			t.Fatalf("error event %v, want 410 Expired", st)
		}
		if code := st.(apierrors.APIStatus).Status().Code; code != 410 {
			t.Fatalf("code %d, want 410", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event on a compacted watch")
	}
	w.Stop()

	log := &eventLog{}
	startInformer(t, cs, log)
	waitFor(t, "informer sees old", func() bool { return log.has("ADDED:old") })
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "informer sees after", func() bool { return log.has("ADDED:after") })
}

func TestListPaging(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	const n = 2000
	// The root-CA publisher adds kube-root-ca.crt to every namespace;
	// wait for it so the count below is stable.
	waitFor(t, "kube-root-ca.crt", func() bool {
		_, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return err == nil
	})
	const total = n + 1
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 32)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			_, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%04d", i)}}, metav1.CreateOptions{})
			if err != nil {
				errs <- err
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	pages := 0
	seen := map[string]bool{}
	rv := ""
	opts := metav1.ListOptions{Limit: 500}
	for {
		list, err := cs.CoreV1().ConfigMaps("default").List(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if rv == "" {
			rv = list.ResourceVersion
		} else if list.ResourceVersion != rv {
			t.Errorf("page %d at resourceVersion %s, first page at %s: not one snapshot", pages, list.ResourceVersion, rv)
		}
		if len(list.Items) > 500 {
			t.Fatalf("page of %d items, limit 500", len(list.Items))
		}
		for _, cm := range list.Items {
			if seen[cm.Name] {
				t.Fatalf("%s listed twice", cm.Name)
			}
			seen[cm.Name] = true
		}
		if pages == 1 && (list.RemainingItemCount == nil || *list.RemainingItemCount != total-500) {
			t.Errorf("remainingItemCount on page 1 = %v, want %d", list.RemainingItemCount, total-500)
		}
		if list.Continue == "" {
			break
		}
		opts.Continue = list.Continue
		// Writes between pages must not show up: the list is one snapshot.
		if pages == 1 {
			if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-late"}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if pages != 5 || len(seen) != total {
		t.Fatalf("%d pages, %d items; want 5 pages (500 each, then 1), %d items", pages, len(seen), total)
	}
	list, err := cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != total+1 {
		t.Errorf("resourceVersion=0 list from the watch cache has %d items, want %d (with cm-late)", len(list.Items), total+1)
	}
}

func TestProtobufClient(t *testing.T) {
	s := startServer(t)
	cs := s.protoClient()
	ctx := ctxT(t)
	w, err := cs.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	cm, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "proto"}, Data: map[string]string{"a": "1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("protobuf create: %v", err)
	}
	cm.Data["a"] = "2"
	cm, err = cs.CoreV1().ConfigMaps("default").Update(ctx, cm, metav1.UpdateOptions{})
	if err != nil || cm.Data["a"] != "2" {
		t.Fatalf("protobuf update: %v %v", err, cm)
	}
	list, err := cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=proto"})
	if err != nil || len(list.Items) != 1 || list.Items[0].Name != "proto" {
		t.Fatalf("protobuf list: %v %v", err, list)
	}
	var got []watch.EventType
	timeout := time.After(10 * time.Second)
	for len(got) < 2 {
		select {
		case ev := <-w.ResultChan():
			cm, ok := ev.Object.(*corev1.ConfigMap)
			if !ok {
				t.Fatalf("protobuf watch event %s carries %T", ev.Type, ev.Object)
			}
			if cm.Name == "proto" { // kube-root-ca.crt may come and go meanwhile
				got = append(got, ev.Type)
			}
		case <-timeout:
			t.Fatalf("protobuf watch got %v", got)
		}
	}
	if got[0] != watch.Added || got[1] != watch.Modified {
		t.Fatalf("protobuf watch events %v", got)
	}
}

func TestRestartKeepsObjectsAndInformersResume(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	cm, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "durable"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.mustKubectl("apply", "-f", "testdata/deployment.yaml")
	dep, err := cs.AppsV1().Deployments("default").Get(ctx, "container-lab", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	log := &eventLog{}
	startInformer(t, cs, log)
	waitFor(t, "initial sync", func() bool { return log.has("ADDED:durable") })

	s.restart()
	cs = s.client()
	got, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "durable", metav1.GetOptions{})
	if err != nil || got.ResourceVersion != cm.ResourceVersion || got.UID != cm.UID {
		t.Fatalf("after restart: %v, rv %s→%s", err, cm.ResourceVersion, got.ResourceVersion)
	}
	// The deployment controller keeps writing its status, so only the
	// identity is compared here; the ConfigMap above checks the RV.
	dep2, err := cs.AppsV1().Deployments("default").Get(ctx, "container-lab", metav1.GetOptions{})
	if err != nil || dep2.UID != dep.UID {
		t.Fatalf("deployment after restart: %v", err)
	}
	// The informer made before the restart reconnects by itself (its
	// client still has the same address and credentials).
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after-restart"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "informer resumes after restart", func() bool { return log.has("ADDED:after-restart") })
}

// Metadata-only clients (the garbage collector's informers) get
// PartialObjectMetadata in lists and in watch events, bookmarks included.
func TestMetadataWatch(t *testing.T) {
	s := startServer(t)
	ctx := ctxT(t)
	mc, err := metadata.NewForConfig(s.config)
	if err != nil {
		t.Fatal(err)
	}
	cms := mc.Resource(corev1.SchemeGroupVersion.WithResource("configmaps")).Namespace("default")
	list, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion, AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	cs := s.client()
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "m"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().ConfigMaps("default").Delete(ctx, "m", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(got) < 2 {
		select {
		case ev := <-w.ResultChan():
			pm, ok := ev.Object.(*metav1.PartialObjectMetadata)
			if !ok {
				t.Fatalf("%s event carries %T: %v", ev.Type, ev.Object, ev.Object)
			}
			// Only m: the controller manager publishes kube-root-ca.crt
			// into default at about the time the test starts.
			if ev.Type != watch.Bookmark && pm.Name == "m" {
				got = append(got, string(ev.Type)+" "+pm.Name)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("events so far %v", got)
		}
	}
	if got[0] != "ADDED m" || got[1] != "DELETED m" {
		t.Errorf("metadata watch events %v", got)
	}
}
