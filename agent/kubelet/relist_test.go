package kubelet

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/kelp-project/kelp/agent/kubelet/kubelettest"
	"github.com/kelp-project/kelp/runtime"
)

// eventRuntime is the fake runtime with an exit event stream the test
// feeds, counting full listings (ListContainers without labels).
type eventRuntime struct {
	*kubelettest.Runtime
	exits     chan string
	fullLists atomic.Int32
}

func (r *eventRuntime) Exits() <-chan string { return r.exits }

func (r *eventRuntime) ListContainers(ctx context.Context, labels map[string]string) ([]runtime.ContainerStatus, error) {
	if len(labels) == 0 {
		r.fullLists.Add(1)
	}
	return r.Runtime.ListContainers(ctx, labels)
}

func kicked(w *podWorker, within time.Duration) bool {
	select {
	case <-w.kickCh:
		return true
	case <-time.After(within):
		return false
	}
}

// The relist is event-driven: an exit wakes only its pod's worker, a new
// subscription after a broken stream (an empty ID) wakes every worker, and
// nothing lists the runtime in between.
func TestRelistFollowsExitEventsWithoutPolling(t *testing.T) {
	rt := &eventRuntime{Runtime: kubelettest.NewRuntime(), exits: make(chan string, 4)}
	rt.Put(runtime.ContainerStatus{ID: "ca", State: runtime.StateExited, Labels: map[string]string{labelPodUID: "a"}})
	rt.Put(runtime.ContainerStatus{ID: "cb", State: runtime.StateRunning, Labels: map[string]string{labelPodUID: "b"}})
	k := New(Config{NodeName: "node-1"}, fake.NewClientset(), rt, record.NewFakeRecorder(10))
	a := &podWorker{uid: "a", kickCh: make(chan struct{}, 1)}
	b := &podWorker{uid: "b", kickCh: make(chan struct{}, 1)}
	k.workers = map[types.UID]*podWorker{"a": a, "b": b}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go k.relist(ctx)

	rt.exits <- "ca"
	if !kicked(a, 2*time.Second) {
		t.Fatal("the exit of pod a's container did not wake pod a's worker")
	}
	if kicked(b, 200*time.Millisecond) {
		t.Error("the exit of pod a's container woke pod b's worker")
	}

	rt.exits <- "" // subscribed again: events may have been lost
	if !kicked(a, 2*time.Second) || !kicked(b, 2*time.Second) {
		t.Error("a new subscription did not wake every worker")
	}

	// The old relist listed every container each second.
	time.Sleep(1500 * time.Millisecond)
	if n := rt.fullLists.Load(); n != 0 {
		t.Errorf("the runtime was listed %d times between events", n)
	}
	if kicked(a, 0) || kicked(b, 0) {
		t.Error("a worker was woken with no event (the resync is every 10 s)")
	}
}

// Each relist tick wakes only the workers whose next sync is due: a
// minute after a sync that went well, 10 s after one that failed or left
// a container waiting.
func TestRelistWakesWorkersWhoseSyncIsDue(t *testing.T) {
	old := relistTick
	relistTick = 20 * time.Millisecond
	t.Cleanup(func() { relistTick = old })
	rt := &eventRuntime{Runtime: kubelettest.NewRuntime(), exits: make(chan string)}
	k := New(Config{NodeName: "node-1"}, fake.NewClientset(), rt, record.NewFakeRecorder(10))
	now := time.Now()
	healthy := &podWorker{uid: "healthy", kickCh: make(chan struct{}, 1)}
	healthy.scheduleSync(now)
	failed := &podWorker{uid: "failed", kickCh: make(chan struct{}, 1), retry: true}
	failed.scheduleSync(now.Add(-resyncInterval))
	if healthy.syncDue(now.Add(resyncInterval)) || !healthy.syncDue(now.Add(syncFrequency)) {
		t.Error("a healthy pod's next sync is not syncFrequency after its last")
	}
	if failed.syncDue(now.Add(-time.Second)) || !failed.syncDue(now) {
		t.Error("a failed pod's next sync is not resyncInterval after its last")
	}
	k.workers = map[types.UID]*podWorker{"healthy": healthy, "failed": failed}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go k.relist(ctx)
	if !kicked(failed, 2*time.Second) {
		t.Error("the worker whose sync is due was not woken")
	}
	if kicked(healthy, 200*time.Millisecond) {
		t.Error("the worker that synced well just now was woken")
	}
}

// A sync that gets every container running schedules the next in a
// minute; one that leaves a container waiting (an image that does not
// pull) retries in 10 s.
func TestSyncOutcomeSetsTheNextSync(t *testing.T) {
	pod, bad := testPod("web", "app"), testPod("pull", "c")
	tk := newTestKubelet(t, pod, bad)
	w := tk.worker(t, pod)
	tk.sync(t, w, pod)
	if w.retry {
		t.Fatalf("a pod whose container runs is to be retried: waiting %v", w.waiting)
	}
	now := time.Now()
	w.scheduleSync(now)
	if w.syncDue(now.Add(syncFrequency - time.Second)) {
		t.Error("a healthy pod is due before syncFrequency")
	}
	tk.rt.FailPull("img-c", &runtime.PullError{Reason: "ErrImagePull", Message: "no such image"})
	w2 := tk.worker(t, bad)
	tk.sync(t, w2, bad)
	if !w2.retry {
		t.Fatal("a pod whose image does not pull is not to be retried")
	}
	w2.scheduleSync(now)
	if !w2.syncDue(now.Add(resyncInterval)) {
		t.Error("a pod left waiting is not due after resyncInterval")
	}
}
