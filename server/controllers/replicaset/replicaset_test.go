package replicaset

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
)

const ns = "default"

type env struct {
	client  *fake.Clientset
	factory informers.SharedInformerFactory
	ctrl    *Controller
	rec     *record.FakeRecorder
	ctx     context.Context
}

// newEnv builds a fake clientset (with generateName and UID filled in on
// pod create, as the API server would) and a real informer factory on it.
func newEnv(t *testing.T, objs ...runtime.Object) *env {
	t.Helper()
	client := fake.NewClientset(objs...)
	var n int64
	client.PrependReactor("create", "pods", func(a core.Action) (bool, runtime.Object, error) {
		pod := a.(core.CreateAction).GetObject().(*v1.Pod)
		i := atomic.AddInt64(&n, 1)
		if pod.Name == "" && pod.GenerateName != "" {
			pod.Name = fmt.Sprintf("%s%05d", pod.GenerateName, i)
		}
		if pod.UID == "" {
			pod.UID = types.UID(fmt.Sprintf("pod-uid-%d", i))
		}
		return false, nil, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	rec := record.NewFakeRecorder(10000)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
	})
	return &env{client: client, factory: factory, ctrl: New(client, factory, rec), rec: rec, ctx: ctx}
}

// run runs the controller in the background until the test ends.
func (e *env) run(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan struct{})
	go func() {
		e.ctrl.Run(ctx, 2)
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Errorf("Run did not return after cancel")
		}
	})
}

// startInformers starts only the informers, so tests can call sync directly.
func (e *env) startInformers(t *testing.T) {
	t.Helper()
	e.factory.Start(e.ctx.Done())
	if !cache.WaitForCacheSync(e.ctx.Done(), e.ctrl.rsSynced, e.ctrl.podSynced) {
		t.Fatal("caches did not sync")
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

func (e *env) pods(t *testing.T) []v1.Pod {
	t.Helper()
	l, err := e.client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

func (e *env) podNames(t *testing.T) []string {
	var names []string
	for _, p := range e.pods(t) {
		names = append(names, p.Name)
	}
	sort.Strings(names)
	return names
}

func (e *env) countActions(verb, resource, subresource string) int {
	n := 0
	for _, a := range e.client.Actions() {
		if a.GetVerb() == verb && a.GetResource().Resource == resource && a.GetSubresource() == subresource {
			n++
		}
	}
	return n
}

func (e *env) getRS(t *testing.T, name string) *apps.ReplicaSet {
	t.Helper()
	rs, err := e.client.AppsV1().ReplicaSets(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func drainEvents(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case ev := <-rec.Events:
			out = append(out, ev)
		default:
			return out
		}
	}
}

func newRS(name string, replicas int32) *apps.ReplicaSet {
	return &apps.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("rs-uid-" + name), Generation: 1},
		Spec: apps.ReplicaSetSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name, "tier": "fe"}},
				Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "nginx:1.27"}}},
			},
		},
	}
}

func ownedPod(name string, rs *apps.ReplicaSet, lbls map[string]string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: name, Namespace: ns, UID: types.UID("uid-" + name), Labels: lbls,
	}}
	if rs != nil {
		p.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(rs, apps.SchemeGroupVersion.WithKind("ReplicaSet"))}
	}
	return p
}

func readyCond(since time.Time) v1.PodCondition {
	return v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(since)}
}

func TestScaleUpCreatesPodsFromTemplate(t *testing.T) {
	rs := newRS("web", 5)
	e := newEnv(t, rs)
	e.run(t)

	waitFor(t, "5 pods and status.replicas=5", func() bool {
		return len(e.pods(t)) == 5 && e.getRS(t, "web").Status.Replicas == 5
	})
	for _, p := range e.pods(t) {
		if !strings.HasPrefix(p.Name, "web-") || p.GenerateName != "web-" {
			t.Errorf("pod %q: generateName %q, want web-", p.Name, p.GenerateName)
		}
		if p.Labels["app"] != "web" || p.Labels["tier"] != "fe" || len(p.Labels) != 2 {
			t.Errorf("pod %s labels %v, want template labels", p.Name, p.Labels)
		}
		if len(p.Spec.Containers) != 1 || p.Spec.Containers[0].Image != "nginx:1.27" {
			t.Errorf("pod %s spec not from template: %+v", p.Name, p.Spec.Containers)
		}
		ref := metav1.GetControllerOf(&p)
		if ref == nil || ref.UID != rs.UID || ref.Name != "web" || ref.Kind != "ReplicaSet" ||
			ref.APIVersion != "apps/v1" || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
			t.Errorf("pod %s ownerRef %+v", p.Name, p.OwnerReferences)
		}
	}
	// Settle, then make sure nothing more was created.
	time.Sleep(200 * time.Millisecond)
	if got := e.countActions("create", "pods", ""); got != 5 {
		t.Errorf("create calls = %d, want 5", got)
	}
	created := 0
	for _, ev := range drainEvents(e.rec) {
		if strings.HasPrefix(ev, "Normal SuccessfulCreate Created pod: web-") {
			created++
		}
	}
	if created != 5 {
		t.Errorf("SuccessfulCreate events = %d, want 5", created)
	}
}

// TestExpectationsPreventDuplicateCreates hides the pod watch so the cache
// stays stale: without expectations every sync would create 4 more pods.
func TestExpectationsPreventDuplicateCreates(t *testing.T) {
	rs := newRS("web", 4)
	e := newEnv(t, rs)
	podWatch := watch.NewRaceFreeFake()
	e.client.PrependWatchReactor("pods", func(core.Action) (bool, watch.Interface, error) {
		return true, podWatch, nil
	})
	e.startInformers(t)
	key := ns + "/web"

	for i := 0; i < 20; i++ {
		if err := e.ctrl.sync(e.ctx, key); err != nil {
			t.Fatalf("sync %d: %v", i, err)
		}
	}
	if got := e.countActions("create", "pods", ""); got != 4 {
		t.Fatalf("after 20 syncs on a stale cache: %d creates, want 4", got)
	}
	if e.ctrl.expectations.Satisfied(key) {
		t.Fatal("expectations satisfied before any pod was observed")
	}

	// Deliver 3 of the 4 adds: still waiting, still no creates.
	pods := e.pods(t)
	for _, p := range pods[:3] {
		podWatch.Add(p.DeepCopy())
	}
	waitFor(t, "3 pods in cache", func() bool {
		l, _ := e.ctrl.podLister.List(labelsEverything())
		return len(l) == 3
	})
	for i := 0; i < 5; i++ {
		_ = e.ctrl.sync(e.ctx, key)
	}
	if got := e.countActions("create", "pods", ""); got != 4 {
		t.Fatalf("with 3/4 observed: %d creates, want 4", got)
	}
	podWatch.Add(pods[3].DeepCopy())
	waitFor(t, "expectations satisfied", func() bool { return e.ctrl.expectations.Satisfied(key) })
	_ = e.ctrl.sync(e.ctx, key)
	if got := e.countActions("create", "pods", ""); got != 4 {
		t.Fatalf("after all observed: %d creates, want 4", got)
	}

	// A pod disappears: exactly one replacement.
	if err := e.client.CoreV1().Pods(ns).Delete(e.ctx, pods[0].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	podWatch.Delete(pods[0].DeepCopy())
	waitFor(t, "pod gone from cache", func() bool {
		l, _ := e.ctrl.podLister.List(labelsEverything())
		return len(l) == 3
	})
	for i := 0; i < 10; i++ {
		_ = e.ctrl.sync(e.ctx, key)
	}
	if got := e.countActions("create", "pods", ""); got != 5 {
		t.Fatalf("after one pod deleted: %d creates, want 5", got)
	}
}

// scaleDownFixture: pods whose deletion order is fully determined.
func scaleDownFixture(rs *apps.ReplicaSet, now time.Time) []*v1.Pod {
	lbl := func() map[string]string { return map[string]string{"app": rs.Name, "tier": "fe"} }
	mk := func(name, node string, phase v1.PodPhase, ready *time.Time, restarts int32, created time.Time) *v1.Pod {
		p := ownedPod(name, rs, lbl())
		p.Spec.NodeName = node
		p.Status.Phase = phase
		p.CreationTimestamp = metav1.NewTime(created)
		if ready != nil {
			p.Status.Conditions = []v1.PodCondition{readyCond(*ready)}
		} else {
			p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse}}
		}
		p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c", RestartCount: restarts}}
		return p
	}
	hourAgo, minAgo := now.Add(-time.Hour), now.Add(-time.Minute)
	old, newer := now.Add(-2*time.Hour), now.Add(-90*time.Minute)
	return []*v1.Pod{
		mk("e-ready-long", "n5", v1.PodRunning, &hourAgo, 0, old),
		mk("g-restarts", "n7", v1.PodRunning, &hourAgo, 5, old),
		mk("a-unassigned", "", v1.PodPending, nil, 0, old),
		mk("h-newer", "n8", v1.PodRunning, &hourAgo, 0, newer),
		mk("c-unknown", "n3", v1.PodUnknown, nil, 0, old),
		mk("f-recently-ready", "n6", v1.PodRunning, &minAgo, 0, old),
		mk("b-pending", "n2", v1.PodPending, nil, 0, old),
		mk("d-not-ready", "n4", v1.PodRunning, nil, 0, old),
	}
}

func TestDeletionOrder(t *testing.T) {
	rs := newRS("web", 0)
	pods := scaleDownFixture(rs, time.Now())
	got := podsToDelete(pods, len(pods))
	var names []string
	for _, p := range got {
		names = append(names, p.Name)
	}
	want := []string{"a-unassigned", "b-pending", "c-unknown", "d-not-ready", "f-recently-ready", "g-restarts", "h-newer", "e-ready-long"}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Fatalf("deletion order\n got %v\nwant %v", names, want)
	}

	// Two ready pods sharing a node go before an equal pod alone on a node,
	// and a lower pod-deletion-cost goes first of all ready pods.
	now := time.Now()
	mk := func(name, node string) *v1.Pod {
		p := ownedPod(name, rs, nil)
		p.Spec.NodeName = node
		p.Status.Phase = v1.PodRunning
		p.Status.Conditions = []v1.PodCondition{readyCond(now.Add(-time.Hour))}
		p.CreationTimestamp = metav1.NewTime(now.Add(-time.Hour))
		return p
	}
	alone, s1, s2, cheap := mk("alone", "x"), mk("shared1", "y"), mk("shared2", "y"), mk("cheap", "z")
	cheap.Annotations = map[string]string{podDeletionCostAnnotation: "-10"}
	got = podsToDelete([]*v1.Pod{alone, s1, cheap, s2}, 3)
	if got[0].Name != "cheap" || got[1].Name != "shared1" || got[2].Name != "shared2" {
		t.Fatalf("rank/cost order: %s %s %s", got[0].Name, got[1].Name, got[2].Name)
	}
}

func TestScaleDownDeletesPreferredPods(t *testing.T) {
	rs := newRS("web", 3)
	objs := []runtime.Object{rs}
	for _, p := range scaleDownFixture(rs, time.Now()) {
		objs = append(objs, p)
	}
	e := newEnv(t, objs...)
	e.run(t)

	waitFor(t, "3 pods left and status.replicas=3", func() bool {
		return len(e.pods(t)) == 3 && e.getRS(t, "web").Status.Replicas == 3
	})
	time.Sleep(200 * time.Millisecond)
	if got, want := strings.Join(e.podNames(t), ","), "e-ready-long,g-restarts,h-newer"; got != want {
		t.Fatalf("remaining pods %s, want %s", got, want)
	}
	if got := e.countActions("delete", "pods", ""); got != 5 {
		t.Errorf("delete calls = %d, want 5", got)
	}
	if got := e.countActions("create", "pods", ""); got != 0 {
		t.Errorf("create calls = %d, want 0", got)
	}
	deleted := map[string]bool{}
	for _, ev := range drainEvents(e.rec) {
		if name, ok := strings.CutPrefix(ev, "Normal SuccessfulDelete Deleted pod: "); ok {
			deleted[name] = true
		}
	}
	for _, n := range []string{"a-unassigned", "b-pending", "c-unknown", "d-not-ready", "f-recently-ready"} {
		if !deleted[n] {
			t.Errorf("no SuccessfulDelete event for %s (events for %v)", n, deleted)
		}
	}
}

func TestAdoptAndRelease(t *testing.T) {
	rs := newRS("web", 2)
	other := newRS("other", 0)
	keep := ownedPod("keep", rs, map[string]string{"app": "web", "tier": "fe"})
	orphan := ownedPod("orphan", nil, map[string]string{"app": "web"})
	relabeled := ownedPod("relabeled", rs, map[string]string{"app": "moved"})
	foreign := ownedPod("foreign", other, map[string]string{"app": "web"})
	e := newEnv(t, rs, keep, orphan, relabeled, foreign)
	e.run(t)

	get := func(name string) *v1.Pod {
		p, err := e.client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	waitFor(t, "orphan adopted and relabeled pod released", func() bool {
		return metav1.GetControllerOf(get("orphan")) != nil && len(get("relabeled").OwnerReferences) == 0
	})
	ref := metav1.GetControllerOf(get("orphan"))
	if ref.UID != rs.UID || ref.Kind != "ReplicaSet" || ref.Name != "web" ||
		ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
		t.Errorf("adopted ownerRef %+v", ref)
	}
	if r := metav1.GetControllerOf(get("foreign")); r == nil || r.UID != other.UID {
		t.Errorf("foreign pod's owner changed: %+v", r)
	}
	waitFor(t, "status.replicas=2", func() bool { return e.getRS(t, "web").Status.Replicas == 2 })
	time.Sleep(200 * time.Millisecond)
	// keep + orphan = 2 = desired: nothing created or deleted.
	if c, d := e.countActions("create", "pods", ""), e.countActions("delete", "pods", ""); c != 0 || d != 0 {
		t.Errorf("creates=%d deletes=%d, want 0/0", c, d)
	}
	if st := e.getRS(t, "web").Status; st.FullyLabeledReplicas != 1 {
		t.Errorf("fullyLabeledReplicas=%d, want 1 (orphan lacks tier label)", st.FullyLabeledReplicas)
	}
}

// TestNoAdoptionWhenLiveRSIsDeleting: the cache says the RS is alive, but a
// live read shows it being deleted, so the orphan must not be adopted.
func TestNoAdoptionWhenLiveRSIsDeleting(t *testing.T) {
	rs := newRS("web", 1)
	orphan := ownedPod("orphan", nil, map[string]string{"app": "web"})
	e := newEnv(t, rs, orphan)
	e.client.PrependReactor("get", "replicasets", func(core.Action) (bool, runtime.Object, error) {
		dying := rs.DeepCopy()
		dying.DeletionTimestamp = ptr.To(metav1.Now())
		return true, dying, nil
	})
	e.startInformers(t)
	if err := e.ctrl.sync(e.ctx, ns+"/web"); err == nil || !strings.Contains(err.Error(), "deleted") {
		t.Fatalf("sync error = %v, want a 'has just been deleted' error", err)
	}
	if n := e.countActions("patch", "pods", ""); n != 0 {
		t.Errorf("%d pod patches, want 0", n)
	}
	if n := e.countActions("create", "pods", ""); n != 0 {
		t.Errorf("%d pod creates, want 0 (claim failed, nothing managed)", n)
	}
	p, _ := e.client.CoreV1().Pods(ns).Get(context.Background(), "orphan", metav1.GetOptions{})
	if len(p.OwnerReferences) != 0 {
		t.Errorf("orphan adopted: %+v", p.OwnerReferences)
	}
}

func TestStatusCounts(t *testing.T) {
	rs := newRS("web", 3)
	rs.Generation = 4
	rs.Spec.MinReadySeconds = 60
	now := time.Now()
	full := func() map[string]string { return map[string]string{"app": "web", "tier": "fe"} }
	p1 := ownedPod("p1", rs, full()) // ready 10m: available
	p1.Status.Phase = v1.PodRunning
	p1.Status.Conditions = []v1.PodCondition{readyCond(now.Add(-10 * time.Minute))}
	p2 := ownedPod("p2", rs, full()) // ready 5s: ready, not available
	p2.Status.Phase = v1.PodRunning
	p2.Status.Conditions = []v1.PodCondition{readyCond(now.Add(-5 * time.Second))}
	p3 := ownedPod("p3", rs, map[string]string{"app": "web"}) // not ready, not fully labeled
	p3.Status.Phase = v1.PodRunning
	p3.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse}}
	gone := ownedPod("gone", rs, full()) // terminating: not counted as a replica
	gone.Status.Phase = v1.PodRunning
	gone.DeletionTimestamp = ptr.To(metav1.Now())
	gone.Finalizers = []string{"example.com/hold"}
	done := ownedPod("done", rs, full()) // terminal: ignored
	done.Status.Phase = v1.PodSucceeded

	e := newEnv(t, rs, p1, p2, p3, gone, done)
	e.startInformers(t)
	key := ns + "/web"
	if err := e.ctrl.sync(e.ctx, key); err != nil {
		t.Fatal(err)
	}
	st := e.getRS(t, "web").Status
	if st.Replicas != 3 || st.FullyLabeledReplicas != 2 || st.ReadyReplicas != 2 || st.AvailableReplicas != 1 ||
		st.ObservedGeneration != 4 || st.TerminatingReplicas == nil || *st.TerminatingReplicas != 1 {
		t.Fatalf("status %+v (terminating %v)", st, st.TerminatingReplicas)
	}
	if c := e.countActions("create", "pods", ""); c != 0 {
		t.Errorf("%d creates, want 0", c)
	}
	// Unchanged world: no second status write.
	waitFor(t, "status in cache", func() bool {
		r, err := e.ctrl.kind.Get(ns, "web")
		return err == nil && r.Status.ObservedGeneration == 4
	})
	before := e.countActions("update", "replicasets", "status")
	if err := e.ctrl.sync(e.ctx, key); err != nil {
		t.Fatal(err)
	}
	if after := e.countActions("update", "replicasets", "status"); after != before || before != 1 {
		t.Errorf("status updates before/after resync = %d/%d, want 1/1", before, after)
	}
}

// TestCreateFailureSlowStart: creates fail from the 3rd call on. Slow start
// (1, then 2) stops after the failing batch; the RS gets a FailedCreate
// event and a ReplicaFailure condition, which clears once creates succeed.
func TestCreateFailureSlowStart(t *testing.T) {
	rs := newRS("web", 10)
	e := newEnv(t, rs)
	var calls int64
	var failing atomic.Bool
	failing.Store(true)
	e.client.PrependReactor("create", "pods", func(a core.Action) (bool, runtime.Object, error) {
		if atomic.AddInt64(&calls, 1) >= 3 && failing.Load() {
			return true, nil, apierrors.NewForbidden(v1.Resource("pods"), "", fmt.Errorf("exceeded quota"))
		}
		return false, nil, nil
	})
	e.startInformers(t)
	key := ns + "/web"
	err := e.ctrl.sync(e.ctx, key)
	if err == nil || !apierrors.IsForbidden(err) {
		t.Fatalf("sync err = %v, want Forbidden", err)
	}
	if got := atomic.LoadInt64(&calls); got != 3 {
		t.Fatalf("create attempts = %d, want 3 (batches of 1 and 2)", got)
	}
	if n := len(e.pods(t)); n != 2 {
		t.Fatalf("%d pods, want 2", n)
	}
	var failed bool
	for _, ev := range drainEvents(e.rec) {
		if strings.HasPrefix(ev, "Warning FailedCreate Error creating:") && strings.Contains(ev, "exceeded quota") {
			failed = true
		}
	}
	if !failed {
		t.Error("no FailedCreate event")
	}
	st := e.getRS(t, "web").Status
	if len(st.Conditions) != 1 || st.Conditions[0].Type != apps.ReplicaSetReplicaFailure ||
		st.Conditions[0].Reason != "FailedCreate" || st.Conditions[0].Status != v1.ConditionTrue {
		t.Fatalf("conditions %+v", st.Conditions)
	}

	// Only the 2 created pods are awaited; once seen, the next sync acts.
	waitFor(t, "expectations satisfied", func() bool { return e.ctrl.expectations.Satisfied(key) })
	waitFor(t, "status in cache", func() bool {
		r, _ := e.ctrl.kind.Get(ns, "web")
		return r != nil && len(r.Status.Conditions) == 1
	})
	failing.Store(false)
	if err := e.ctrl.sync(e.ctx, key); err != nil {
		t.Fatal(err)
	}
	if n := len(e.pods(t)); n != 10 {
		t.Fatalf("%d pods after recovery, want 10", n)
	}
	if st := e.getRS(t, "web").Status; len(st.Conditions) != 0 {
		t.Errorf("ReplicaFailure not cleared: %+v", st.Conditions)
	}
}

func TestSlowStartBatch(t *testing.T) {
	var mu sync.Mutex
	n := 0
	ok, err := slowStartBatch(20, 1, func() error {
		mu.Lock()
		defer mu.Unlock()
		n++
		return nil
	})
	if ok != 20 || err != nil || n != 20 {
		t.Fatalf("ok=%d err=%v calls=%d", ok, err, n)
	}
	n = 0
	ok, err = slowStartBatch(100, 1, func() error {
		mu.Lock()
		defer mu.Unlock()
		n++
		if n > 7 { // batches 1,2,4 succeed; the whole batch of 8 fails
			return fmt.Errorf("boom")
		}
		return nil
	})
	if err == nil || n != 15 || ok != 7 {
		t.Fatalf("ok=%d err=%v calls=%d, want 7 successes out of 15 calls", ok, err, n)
	}
}

func labelsEverything() labels.Selector { return labels.Everything() }
