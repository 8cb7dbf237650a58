package scheduler

import (
	"container/heap"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	"github.com/kelp-project/kelp/config"
)

// Backoff is how long a pod that failed to schedule waits before its next
// attempt: Initial, doubling per attempt up to Max (upstream's
// podInitialBackoffSeconds and podMaxBackoffSeconds).
type Backoff struct {
	Initial, Max time.Duration
}

// DefaultBackoff is kube-scheduler's: 1 s doubling up to 10 s (declared in
// package config with the flags that override it).
var DefaultBackoff = Backoff{Initial: config.PodInitialBackoff, Max: config.PodMaxBackoff}

const (
	// podMaxInUnschedulable is how long a pod may sit in the unschedulable
	// set without a cluster event before it is retried anyway (upstream's
	// podMaxInUnschedulablePodsDuration).
	podMaxInUnschedulable = 5 * time.Minute
)

type queuedPod struct {
	key       string
	pod       *v1.Pod
	attempts  int
	timestamp time.Time // when first queued (FIFO within a priority)
	lastTry   time.Time // when the last attempt ended
	deleted   bool      // deleted (or bound by someone else) while in flight
	index     int       // heap index
	// moveSeen is the queue's moveRequestCycle at pop time: a cluster event
	// after that means the pod must not park in the unschedulable set.
	popCycle int64
}

type activeHeap []*queuedPod

func (h activeHeap) Len() int { return len(h) }
func (h activeHeap) Less(i, j int) bool {
	pi, pj := corev1helpers.PodPriority(h[i].pod), corev1helpers.PodPriority(h[j].pod)
	if pi != pj {
		return pi > pj
	}
	return h[i].timestamp.Before(h[j].timestamp)
}
func (h activeHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *activeHeap) Push(x any) {
	qp := x.(*queuedPod)
	qp.index = len(*h)
	*h = append(*h, qp)
}
func (h *activeHeap) Pop() any {
	old := *h
	n := len(old)
	qp := old[n-1]
	old[n-1] = nil
	*h = old[:n-1]
	qp.index = -1
	return qp
}

// schedulingQueue has three parts like upstream: active (ready to try),
// backoff (failed recently, waiting out its backoff) and unschedulable
// (waiting for a cluster event). Pods being scheduled are "in flight".
type schedulingQueue struct {
	mu      sync.Mutex
	cond    *sync.Cond
	now     func() time.Time
	backoff Backoff
	closed  bool

	active        activeHeap
	activeSet     map[string]*queuedPod
	backingOff    map[string]*queuedPod
	unschedulable map[string]*queuedPod
	inFlight      map[string]*queuedPod

	schedulingCycle  int64
	moveRequestCycle int64

	// parked is signalled when a pod enters backingOff or unschedulable,
	// so flushLoop ticks only while some pod waits there.
	parked chan struct{}
}

func newSchedulingQueue(now func() time.Time, b Backoff) *schedulingQueue {
	q := &schedulingQueue{
		now:           now,
		backoff:       b,
		activeSet:     map[string]*queuedPod{},
		backingOff:    map[string]*queuedPod{},
		unschedulable: map[string]*queuedPod{},
		inFlight:      map[string]*queuedPod{},
		parked:        make(chan struct{}, 1),
	}
	q.cond = sync.NewCond(&q.mu)
	return q
}

func (b Backoff) duration(attempts int) time.Duration {
	d := b.Initial
	for i := 1; i < attempts; i++ {
		d *= 2
		if d >= b.Max {
			return b.Max
		}
	}
	return min(d, b.Max)
}

func (q *schedulingQueue) readyAt(qp *queuedPod) time.Time {
	return qp.lastTry.Add(q.backoff.duration(qp.attempts))
}

func (q *schedulingQueue) pushActiveLocked(qp *queuedPod) {
	q.activeSet[qp.key] = qp
	heap.Push(&q.active, qp)
	q.cond.Signal()
}

// add queues a new unscheduled pod, or refreshes the object of a queued one.
func (q *schedulingQueue) add(key string, pod *v1.Pod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if qp := q.lookupLocked(key); qp != nil {
		if qp.pod.UID != pod.UID { // recreated under the same name
			q.deleteLocked(key)
		} else {
			qp.pod = pod
			return
		}
	}
	q.pushActiveLocked(&queuedPod{key: key, pod: pod, timestamp: q.now(), index: -1})
}

// update refreshes a queued pod; a spec/metadata change moves an
// unschedulable pod back for another try (after its backoff).
func (q *schedulingQueue) update(key string, pod *v1.Pod, changed bool) {
	q.mu.Lock()
	if qp := q.unschedulable[key]; qp != nil && changed && qp.pod.UID == pod.UID {
		qp.pod = pod
		delete(q.unschedulable, key)
		q.toActiveOrBackoffLocked(qp)
		q.mu.Unlock()
		return
	}
	q.mu.Unlock()
	q.add(key, pod)
}

func (q *schedulingQueue) lookupLocked(key string) *queuedPod {
	if qp := q.activeSet[key]; qp != nil {
		return qp
	}
	if qp := q.backingOff[key]; qp != nil {
		return qp
	}
	if qp := q.unschedulable[key]; qp != nil {
		return qp
	}
	return q.inFlight[key]
}

func (q *schedulingQueue) delete(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.deleteLocked(key)
}

func (q *schedulingQueue) deleteLocked(key string) {
	if qp := q.activeSet[key]; qp != nil {
		heap.Remove(&q.active, qp.index)
		delete(q.activeSet, key)
	}
	delete(q.backingOff, key)
	delete(q.unschedulable, key)
	if qp := q.inFlight[key]; qp != nil {
		qp.deleted = true
	}
}

// pop blocks until a pod is active or the queue is closed (nil).
func (q *schedulingQueue) pop() *queuedPod {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.active) == 0 && !q.closed {
		q.cond.Wait()
	}
	if q.closed {
		return nil
	}
	qp := heap.Pop(&q.active).(*queuedPod)
	delete(q.activeSet, qp.key)
	q.schedulingCycle++
	qp.popCycle = q.schedulingCycle
	qp.attempts++
	q.inFlight[qp.key] = qp
	return qp
}

// done ends an attempt that needs no retry (bound, or pod gone).
func (q *schedulingQueue) done(qp *queuedPod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.inFlight[qp.key] == qp {
		delete(q.inFlight, qp.key)
	}
}

// requeue ends a failed attempt. unschedulable pods park until a cluster
// event (unless one already happened during the attempt); other failures
// (API errors) retry after backoff.
func (q *schedulingQueue) requeue(qp *queuedPod, unschedulable bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.inFlight[qp.key] != qp {
		return
	}
	delete(q.inFlight, qp.key)
	if qp.deleted {
		return
	}
	qp.lastTry = q.now()
	if unschedulable && q.moveRequestCycle < qp.popCycle {
		q.unschedulable[qp.key] = qp
		q.signalParkedLocked()
		return
	}
	q.backingOff[qp.key] = qp
	q.signalParkedLocked()
}

func (q *schedulingQueue) toActiveOrBackoffLocked(qp *queuedPod) {
	if q.now().Before(q.readyAt(qp)) {
		q.backingOff[qp.key] = qp
		q.signalParkedLocked()
		return
	}
	q.pushActiveLocked(qp)
}

// moveAllUnschedulable handles a cluster event that may make parked pods
// schedulable.
func (q *schedulingQueue) moveAllUnschedulable() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for key, qp := range q.unschedulable {
		delete(q.unschedulable, key)
		q.toActiveOrBackoffLocked(qp)
	}
	q.moveRequestCycle = q.schedulingCycle
}

// flush moves pods whose backoff expired to active and retries pods parked
// too long.
func (q *schedulingQueue) signalParkedLocked() {
	select {
	case q.parked <- struct{}{}:
	default:
	}
}

// flush moves the pods whose backoff is over to the active queue, and
// the ones unschedulable for too long back to it; it reports whether any
// pod still waits in backoff or unschedulable.
func (q *schedulingQueue) flush() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	for key, qp := range q.backingOff {
		if !now.Before(q.readyAt(qp)) {
			delete(q.backingOff, key)
			q.pushActiveLocked(qp)
		}
	}
	for key, qp := range q.unschedulable {
		if now.Sub(qp.lastTry) > podMaxInUnschedulable {
			delete(q.unschedulable, key)
			q.toActiveOrBackoffLocked(qp)
		}
	}
	return len(q.backingOff) > 0 || len(q.unschedulable) > 0
}

// flushLoop flushes every interval while some pod waits in backoff or
// unschedulable, and otherwise sleeps until one does: an idle scheduler
// sets no timer.
func (q *schedulingQueue) flushLoop(interval time.Duration, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-q.parked:
		}
		t := time.NewTicker(interval)
		for waiting := true; waiting; {
			select {
			case <-stop:
				t.Stop()
				return
			case <-t.C:
			}
			waiting = q.flush()
		}
		t.Stop()
	}
}

func (q *schedulingQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.cond.Broadcast()
}

// counts returns (active, backoff, unschedulable, inFlight) sizes.
func (q *schedulingQueue) counts() (int, int, int, int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.active), len(q.backingOff), len(q.unschedulable), len(q.inFlight)
}
