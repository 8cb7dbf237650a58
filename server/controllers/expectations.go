package controllers

import (
	"sync"
	"time"
)

// ExpectationsTimeout is how long unobserved creates or deletes hold an
// object's sync back (upstream's five minutes): long enough for a slow
// watch, short enough that a lost event cannot wedge the object.
const ExpectationsTimeout = 5 * time.Minute

// Expectations remembers, per owner key (a ReplicaSet, DaemonSet, Job),
// the pod creations and deletions a sync issued and the informer has not
// shown yet: until they are seen, the cached pod count is stale and a new
// sync would create or delete again. Creations are a count (a created
// pod's name is not known in advance); deletions are pod keys, so one pod
// seen twice (its deletionTimestamp, then its removal) counts once. It is
// the controllers' only private memory and only ever suppresses action:
// once satisfied or expired, the controller acts on the observed world.
type Expectations struct {
	mu  sync.Mutex
	m   map[string]*expectation
	now func() time.Time
}

type expectation struct {
	add  int
	dels map[string]struct{}
	at   time.Time
}

// NewExpectations reads the time from now (nil: time.Now).
func NewExpectations(now func() time.Time) *Expectations {
	if now == nil {
		now = time.Now
	}
	return &Expectations{m: map[string]*expectation{}, now: now}
}

// Satisfied reports whether the owner may be synced: nothing expected,
// everything seen, or the expectation expired.
func (e *Expectations) Satisfied(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	x, ok := e.m[key]
	return !ok || (x.add <= 0 && len(x.dels) == 0) || e.now().Sub(x.at) > ExpectationsTimeout
}

// Expect replaces the owner's expectation: adds creations and the
// deletions of the pods delKeys names.
func (e *Expectations) Expect(key string, adds int, delKeys []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	dels := make(map[string]struct{}, len(delKeys))
	for _, k := range delKeys {
		dels[k] = struct{}{}
	}
	e.m[key] = &expectation{add: adds, dels: dels, at: e.now()}
}

// CreationsObserved lowers the expected creations by n: pods seen, or
// creations that failed and will never be seen.
func (e *Expectations) CreationsObserved(key string, n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x, ok := e.m[key]; ok {
		x.add = max(x.add-n, 0)
	}
}

// DeletionObserved takes podKey off the expected deletions, if it was one.
func (e *Expectations) DeletionObserved(key, podKey string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x, ok := e.m[key]; ok {
		delete(x.dels, podKey)
	}
}

// Remove forgets the owner (it is gone).
func (e *Expectations) Remove(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, key)
}
