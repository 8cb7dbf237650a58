package daemonset

import (
	"sync"
	"time"
)

// expectationsTimeout is how long unobserved creates or deletes hold a
// DaemonSet back (upstream's five minutes): long enough for a slow watch,
// short enough that a lost event cannot wedge it.
const expectationsTimeout = 5 * time.Minute

// expectation is what one sync is waiting to see through the informer:
// a count of creations (a created pod's name is not known in advance) and
// the keys of the pods it deleted, so that one pod seen twice (its
// deletionTimestamp, then its removal) counts once.
type expectation struct {
	add  int
	dels map[string]struct{}
	at   time.Time
}

// expectations only ever suppresses action: once satisfied or expired,
// the controller acts on the observed world again.
type expectations struct {
	mu  sync.Mutex
	m   map[string]*expectation
	now func() time.Time
}

func newExpectations() *expectations {
	return &expectations{m: map[string]*expectation{}, now: time.Now}
}

func (e *expectations) satisfied(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	exp, ok := e.m[key]
	return !ok || (exp.add <= 0 && len(exp.dels) == 0) || e.now().Sub(exp.at) > expectationsTimeout
}

// expect replaces the DaemonSet's record: it is only set by a sync that
// found the previous one satisfied.
func (e *expectations) expect(key string, adds int, delKeys []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	dels := make(map[string]struct{}, len(delKeys))
	for _, k := range delKeys {
		dels[k] = struct{}{}
	}
	e.m[key] = &expectation{add: adds, dels: dels, at: e.now()}
}

func (e *expectations) creationObserved(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if exp, ok := e.m[key]; ok && exp.add > 0 {
		exp.add--
	}
}

func (e *expectations) deletionObserved(key, podKey string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if exp, ok := e.m[key]; ok {
		delete(exp.dels, podKey)
	}
}

func (e *expectations) remove(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, key)
}
