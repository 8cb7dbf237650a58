package job

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// expectationsTimeout bounds how long an unobserved create or delete holds
// a Job back (upstream's five minutes): a lost watch event must not wedge
// it forever.
const expectationsTimeout = 5 * time.Minute

// expectations counts, per Job key, the pod creations and deletions issued
// but not yet seen in the informer. While any are outstanding the Job's
// pod count in the cache is stale, so sync does not create or delete.
type expectations struct {
	mu  sync.Mutex
	m   map[string]*expectation
	now func() time.Time
}

type expectation struct {
	add, del int
	at       time.Time
}

func newExpectations(now func() time.Time) *expectations {
	return &expectations{m: map[string]*expectation{}, now: now}
}

func (e *expectations) satisfied(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	x, ok := e.m[key]
	return !ok || (x.add <= 0 && x.del <= 0) || e.now().Sub(x.at) > expectationsTimeout
}

func (e *expectations) expect(key string, add, del int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.m[key] = &expectation{add: add, del: del, at: e.now()}
}

func (e *expectations) observe(key string, add, del int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x, ok := e.m[key]; ok {
		x.add -= add
		x.del -= del
	}
}

func (e *expectations) remove(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, key)
}

// finalizerExpectations holds, per Job key, the pods whose tracking
// finalizer was removed (and counted in the Job's status) but whose update
// the informer has not delivered yet. Those pods must not be counted again.
type finalizerExpectations struct {
	mu sync.Mutex
	m  map[string]map[types.UID]struct{}
}

func newFinalizerExpectations() *finalizerExpectations {
	return &finalizerExpectations{m: map[string]map[types.UID]struct{}{}}
}

func (f *finalizerExpectations) expectRemoved(key string, uids []types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	set := f.m[key]
	if set == nil {
		set = map[types.UID]struct{}{}
		f.m[key] = set
	}
	for _, u := range uids {
		set[u] = struct{}{}
	}
}

func (f *finalizerExpectations) observed(key string, uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if set := f.m[key]; set != nil {
		delete(set, uid)
		if len(set) == 0 {
			delete(f.m, key)
		}
	}
}

// expected returns a copy of the Job's outstanding removals.
func (f *finalizerExpectations) expected(key string) map[types.UID]struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[types.UID]struct{}, len(f.m[key]))
	for u := range f.m[key] {
		out[u] = struct{}{}
	}
	return out
}

func (f *finalizerExpectations) remove(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.m, key)
}
