package replicaset

import (
	"sync"
	"time"
)

// ExpectationsTimeout is how long an unmet expectation blocks a ReplicaSet
// from being managed again. Upstream uses five minutes: long enough for a
// slow watch, short enough that a lost event cannot wedge a ReplicaSet.
const ExpectationsTimeout = 5 * time.Minute

// expectation records the pod creations and deletions a ReplicaSet is
// waiting to observe through the informer. Deletions are tracked by pod key
// so that the same pod seen twice (update with deletionTimestamp, then
// delete) only lowers the count once.
type expectation struct {
	add        int64
	del        int64
	deleteKeys map[string]struct{}
	timestamp  time.Time
}

func (e *expectation) fulfilled() bool { return e.add <= 0 && e.del <= 0 }

// expectations is a TTL'd cache of per-ReplicaSet-key expectations. It is
// the only private memory the controller has, and it only ever suppresses
// action: once it is satisfied or expired the controller acts on the
// observed world again.
type expectations struct {
	mu  sync.Mutex
	m   map[string]*expectation
	now func() time.Time
}

func newExpectations() *expectations {
	return &expectations{m: map[string]*expectation{}, now: time.Now}
}

// satisfied reports whether the ReplicaSet with this key may be managed:
// no record, everything observed, or the record expired.
func (e *expectations) satisfied(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	exp, ok := e.m[key]
	if !ok {
		return true
	}
	if exp.fulfilled() {
		return true
	}
	return e.now().Sub(exp.timestamp) > ExpectationsTimeout
}

func (e *expectations) expectCreations(key string, n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.m[key] = &expectation{add: int64(n), timestamp: e.now()}
}

func (e *expectations) expectDeletions(key string, podKeys []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	set := make(map[string]struct{}, len(podKeys))
	for _, k := range podKeys {
		set[k] = struct{}{}
	}
	e.m[key] = &expectation{del: int64(len(set)), deleteKeys: set, timestamp: e.now()}
}

// creationObserved lowers the expected creations by one.
func (e *expectations) creationObserved(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if exp, ok := e.m[key]; ok && exp.add > 0 {
		exp.add--
	}
}

// deletionObserved lowers the expected deletions if podKey was one of them.
func (e *expectations) deletionObserved(key, podKey string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	exp, ok := e.m[key]
	if !ok {
		return
	}
	if _, want := exp.deleteKeys[podKey]; want {
		delete(exp.deleteKeys, podKey)
		exp.del--
	}
}

func (e *expectations) remove(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, key)
}
