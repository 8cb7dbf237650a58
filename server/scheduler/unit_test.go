package scheduler

import (
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func deleteOpts() metav1.DeleteOptions { return metav1.DeleteOptions{} }

func TestBackoffDuration(t *testing.T) {
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	for i, w := range want {
		if got := DefaultBackoff.duration(i + 1); got != w {
			t.Errorf("attempt %d: got %v want %v", i+1, got, w)
		}
	}
}

func TestPodRequestsInitAndOverhead(t *testing.T) {
	p := makePod("p", "500m", "100Mi")
	p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "b", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
		v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("100Mi"),
	}}})
	p.Spec.InitContainers = []v1.Container{{Name: "init", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
		v1.ResourceCPU: resource.MustParse("1500m"), v1.ResourceMemory: resource.MustParse("50Mi"),
	}}}}
	p.Spec.Overhead = v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("10Mi")}
	pi := newPodInfo(p)
	if pi.request.MilliCPU != 1600 {
		t.Errorf("cpu = %dm, want 1600m (max(1000,1500)+100)", pi.request.MilliCPU)
	}
	if pi.request.Memory != 210*1024*1024 {
		t.Errorf("memory = %d, want 210Mi (max(200Mi,50Mi)+10Mi)", pi.request.Memory)
	}
	empty := newPodInfo(makePod("e", "", ""))
	if empty.request.MilliCPU != 0 || empty.nonZero.MilliCPU != defaultMilliCPURequest || empty.nonZero.Memory != defaultMemoryRequest {
		t.Errorf("best-effort pod: request %+v nonZero %+v", empty.request, empty.nonZero)
	}
}

func TestQueueBackoffAndUnschedulable(t *testing.T) {
	now := time.Unix(1000, 0)
	q := newSchedulingQueue(func() time.Time { return now }, DefaultBackoff)
	p := makePod("p", "", "")
	q.add("default/p", p)
	qp := q.pop()
	q.requeue(qp, true)
	if a, b, u, f := q.counts(); a != 0 || b != 0 || u != 1 || f != 0 {
		t.Fatalf("after unschedulable: active=%d backoff=%d unsched=%d inflight=%d", a, b, u, f)
	}
	// A cluster event inside the backoff window moves it to backoff, not active.
	now = now.Add(500 * time.Millisecond)
	q.moveAllUnschedulable()
	if a, b, u, _ := q.counts(); a != 0 || b != 1 || u != 0 {
		t.Fatalf("after event: active=%d backoff=%d unsched=%d", a, b, u)
	}
	now = now.Add(600 * time.Millisecond)
	q.flush()
	if a, b, _, _ := q.counts(); a != 1 || b != 0 {
		t.Fatalf("after backoff expiry: active=%d backoff=%d", a, b)
	}
	qp = q.pop()
	if qp.attempts != 2 {
		t.Fatalf("attempts = %d", qp.attempts)
	}
	// A move request during the attempt sends a failure to backoff.
	q.moveAllUnschedulable()
	q.requeue(qp, true)
	if _, b, u, _ := q.counts(); b != 1 || u != 0 {
		t.Fatalf("event during attempt: backoff=%d unsched=%d", b, u)
	}
	now = now.Add(1500 * time.Millisecond) // 2nd backoff is 2s
	q.flush()
	if a, _, _, _ := q.counts(); a != 0 {
		t.Fatal("left backoff before 2s")
	}
	now = now.Add(600 * time.Millisecond)
	q.flush()
	if a, _, _, _ := q.counts(); a != 1 {
		t.Fatal("did not leave backoff after 2s")
	}
	q.delete("default/p")
	if a, b, u, f := q.counts(); a+b+u+f != 0 {
		t.Fatal("delete left the pod queued")
	}
}

// The flush loop ticks only while a pod waits in backoff or unschedulable:
// an idle scheduler sets no timer, and a pod that backs off still gets
// back to the active queue.
func TestFlushLoopTicksOnlyWhilePodsWait(t *testing.T) {
	var mu sync.Mutex
	now, flushes := time.Unix(1000, 0), 0
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		flushes++ // each flush reads the clock (as add and requeue do, once each)
		return now
	}
	q := newSchedulingQueue(clock, DefaultBackoff)
	stop := make(chan struct{})
	defer close(stop)
	go q.flushLoop(time.Millisecond, stop)
	calls := func() int {
		mu.Lock()
		defer mu.Unlock()
		return flushes
	}
	time.Sleep(50 * time.Millisecond)
	if n := calls(); n != 0 {
		t.Fatalf("the idle queue was flushed %d times", n)
	}
	q.add("default/p", makePod("p", "", ""))
	qp := q.pop()
	q.requeue(qp, false) // an API error: back off 1 s
	deadline := time.Now().Add(5 * time.Second)
	for calls() < 5 {
		if time.Now().After(deadline) {
			t.Fatal("a pod in backoff did not start the flush ticks")
		}
		time.Sleep(time.Millisecond)
	}
	mu.Lock()
	now = now.Add(2 * time.Second)
	mu.Unlock()
	for {
		if a, b, _, _ := q.counts(); a == 1 && b == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the pod never left backoff")
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // the last flush found nothing waiting
	settled := calls()
	time.Sleep(50 * time.Millisecond)
	if n := calls(); n != settled {
		t.Errorf("the flush loop went on ticking with nothing waiting: %d more flushes", n-settled)
	}
}

// A resize that lowers a bound pod's requests frees room (the queue's
// unschedulable pods are moved); one that raises them does not.
func TestScaledDown(t *testing.T) {
	pod := func(cpu string) *v1.Pod {
		return &v1.Pod{Spec: v1.PodSpec{NodeName: "n1", Containers: []v1.Container{{Name: "c",
			Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}}}}}}
	}
	if !scaledDown(pod("500m"), pod("200m")) {
		t.Error("500m → 200m is not a scale-down")
	}
	if scaledDown(pod("200m"), pod("500m")) {
		t.Error("200m → 500m is a scale-down")
	}
	// While the kubelet has not actuated the shrink, the pod still counts
	// at its actual (status) resources: no room is freed yet.
	resizing := pod("200m")
	resizing.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c", AllocatedResources: v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m")},
		Resources: &v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m")}}}}
	if scaledDown(pod("500m"), resizing) {
		t.Error("a shrink not yet actuated frees room")
	}
}
