package bridge

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// PinNewNetNS creates a new, empty network namespace and pins it by
// bind-mounting its nsfs file onto path (which is created if needed), the
// way `ip netns add` does. The namespace lives as long as the pin (or any
// other reference) does. The calling goroutine's thread is not touched: the
// namespace is created on a dedicated OS thread that is thrown away after.
func PinNewNetNS(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create netns dir: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o444)
	switch {
	case err == nil:
		f.Close()
	case errors.Is(err, os.ErrExist):
		if isNSPin(path) {
			return fmt.Errorf("netns pin %s: already a namespace", path)
		}
		// A stale, unmounted pin file: reuse it.
	default:
		return fmt.Errorf("create netns pin %s: %w", path, err)
	}

	errc := make(chan error, 1)
	go func() {
		// Never unlocked: when this goroutine returns, the Go runtime
		// terminates the thread instead of reusing it in the wrong netns.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("unshare(CLONE_NEWNET): %w", err)
			return
		}
		src := fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid())
		if err := unix.Mount(src, path, "none", unix.MS_BIND, ""); err != nil {
			errc <- fmt.Errorf("bind mount %s on %s: %w", src, path, err)
			return
		}
		errc <- nil
	}()
	if err := <-errc; err != nil {
		os.Remove(path)
		return err
	}
	return nil
}

// UnpinNetNS unmounts and removes a pin created by PinNewNetNS. A missing
// pin is not an error.
func UnpinNetNS(path string) error {
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil &&
		!errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount netns %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove netns pin %s: %w", path, err)
	}
	return nil
}

// isNSPin reports whether path is a mounted namespace file (nsfs).
func isNSPin(path string) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return false
	}
	return st.Type == unix.NSFS_MAGIC
}

// ensureSharedMountDir makes dir a mount point with shared propagation, as
// `ip netns add` does for /run/netns: if dir is not a mount point yet it is
// bind-mounted onto itself first. Pins created below it then propagate to
// (and unmounts from) mount namespaces that were copied from this one, such
// as the ones runc creates for containers with rslave propagation.
// It reports whether it created the self bind mount.
func ensureSharedMountDir(dir string) (bool, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	err := unix.Mount("", dir, "none", unix.MS_SHARED|unix.MS_REC, "")
	if err == nil {
		return false, nil
	}
	if !errors.Is(err, unix.EINVAL) {
		return false, fmt.Errorf("make %s shared: %w", dir, err)
	}
	// Not a mount point.
	if err := unix.Mount(dir, dir, "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return false, fmt.Errorf("bind mount %s on itself: %w", dir, err)
	}
	if err := unix.Mount("", dir, "none", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
		return true, fmt.Errorf("make %s shared: %w", dir, err)
	}
	return true, nil
}

// inNetNS runs fn on a dedicated OS thread switched into ns. Only the
// network namespace is changed. If the thread cannot be switched back, it
// is discarded rather than returned to the scheduler.
func inNetNS(ns netns.NsHandle, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- fmt.Errorf("get current netns: %w", err)
			return // thread stays locked and is discarded
		}
		defer orig.Close()
		if err := netns.Set(ns); err != nil {
			errc <- fmt.Errorf("enter netns: %w", err)
			return
		}
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("restore netns: %w", err))
			return // locked: the thread dies with the goroutine
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// InNetNSPath is inNetNS for a namespace given by path (a pin or
// /proc/<pid>/ns/net). Tests and callers use it to run code in a pod or
// node network namespace.
func InNetNSPath(path string, fn func() error) error {
	ns, err := netns.GetFromPath(path)
	if err != nil {
		return fmt.Errorf("open netns %s: %w", path, err)
	}
	defer ns.Close()
	return inNetNS(ns, fn)
}

// InNetNS runs fn in the network namespace pinned at netnsPath, for the
// kubelet's port-forward (it dials the pod's loopback from inside).
func (b *Bridge) InNetNS(netnsPath string, fn func() error) error {
	return InNetNSPath(netnsPath, fn)
}
