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
