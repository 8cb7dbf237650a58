// Package nodelock serialises the test runs that use this host's node
// network (cni0, the pod CIDR, table ip kelp): the e2e tests, the node
// benchmarks and the conformance harness (../shared/conformance/run.sh,
// which takes the same lock with flock(1)), from any checkout.
package nodelock

import (
	"fmt"
	"os"
	"sync"
	"syscall"
)

// Path is the lock file; flock(1) and Acquire agree on it.
const Path = "/tmp/kelp-node.lock"

// Acquire waits for the lock and returns its release. The descriptor is
// close-on-exec, so containerd, which kelp starts and which outlives it,
// never inherits the lock.
func Acquire() (release func(), err error) { return acquire(Path) }

func acquire(path string) (release func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("node lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("node lock %s: %w", path, err)
	}
	// The open file is the lock: it must stay reachable until release,
	// or a caller that drops release (e2e's TestMain holds the lock for
	// the whole run) would lose it to the file's finalizer at the next
	// GC, and another run would share the node network with this one.
	heldMu.Lock()
	held[f] = struct{}{}
	heldMu.Unlock()
	return func() {
		heldMu.Lock()
		delete(held, f)
		heldMu.Unlock()
		f.Close()
	}, nil
}

var (
	heldMu sync.Mutex
	held   = map[*os.File]struct{}{}
)
