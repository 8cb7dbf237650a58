package nodelock

import (
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// tryLock reports whether path can be locked now through a new open file.
func tryLock(t *testing.T, path string) bool {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil
}

// A caller that drops release (as e2e's TestMain does) keeps the lock
// through garbage collections until it exits.
func TestDroppedReleaseKeepsTheLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	if _, err := acquire(path); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		runtime.GC()
		time.Sleep(10 * time.Millisecond) // finalizers run on their own goroutine
	}
	if tryLock(t, path) {
		t.Fatal("the lock was lost while held (its file was collected and closed)")
	}
}

// release gives the lock back.
func TestReleaseGivesTheLockBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	release, err := acquire(path)
	if err != nil {
		t.Fatal(err)
	}
	if tryLock(t, path) {
		t.Fatal("the lock is not held")
	}
	release()
	if !tryLock(t, path) {
		t.Fatal("the lock was not given back by release")
	}
}
