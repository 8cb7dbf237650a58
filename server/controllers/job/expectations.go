package job

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

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
