// Package dirwatch tells when the files of one directory change, through
// inotify: kelp's watched directories (the manifests to deploy, the image
// archives to import) cost nothing while nothing changes, where polling
// would wake an idle node every few seconds.
package dirwatch

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Watcher tells, through C, that something in its directory changed. It uses inotify rather than polling: an idle kelp reads no
// directory and wakes no goroutine until a file is written.
//
// It reacts to files closed after writing, renamed in or out, and
// deleted, and to symlinks created (they are never written). Not to
// creation or modification of regular files: a file is read once its
// writer has closed it, so a half-written manifest is never applied (and
// never prunes the objects of its unwritten half).
type Watcher struct {
	dir string
	f   *os.File
	fd  int
	wd  int // the directory's watch
	// C has room for one signal: changes that come while the last is
	// being handled fold into one.
	C chan struct{}
	// Lost gets a signal when the directory itself went (deleted or
	// renamed), and with it the watch; Rewatch restores it.
	Lost chan struct{}
}

const watchMask = unix.IN_CLOSE_WRITE | unix.IN_MOVED_TO | unix.IN_MOVED_FROM | unix.IN_DELETE |
	unix.IN_CREATE | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR

// New watches dir, made if missing (mode 0700).
func New(dir string) (*Watcher, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	// Non-blocking, so that os.File hands the descriptor to the runtime's
	// poller: Read parks the goroutine, and Close wakes it.
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	w := &Watcher{dir: dir, fd: fd, f: os.NewFile(uintptr(fd), "inotify"), C: make(chan struct{}, 1), Lost: make(chan struct{}, 1)}
	if err := w.add(); err != nil {
		w.f.Close()
		return nil, err
	}
	go w.read()
	return w, nil
}

func (w *Watcher) add() error {
	wd, err := unix.InotifyAddWatch(w.fd, w.dir, watchMask)
	if err != nil {
		return fmt.Errorf("inotify watch %s: %w", w.dir, err)
	}
	w.wd = wd
	return nil
}

// Rewatch makes the directory again and watches it. A directory renamed
// away keeps its old watch, which is dropped (deleted, it is gone
// already and the removal fails harmlessly).
func (w *Watcher) Rewatch() error {
	_, _ = unix.InotifyRmWatch(w.fd, uint32(w.wd))
	if err := os.MkdirAll(w.dir, 0o700); err != nil {
		return err
	}
	return w.add()
}

// Close stops the watch; C gets no more signals.
func (w *Watcher) Close() error { return w.f.Close() }

func (w *Watcher) read() {
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		n, err := w.f.Read(buf)
		if err != nil {
			if !errors.Is(err, os.ErrClosed) {
				// Signal anyway: the loop resyncs, and a reader that
				// cannot read has nothing better to do.
				signal(w.C)
			}
			return
		}
		changed, lost := w.parse(buf[:n])
		if lost {
			signal(w.Lost)
		}
		if changed {
			signal(w.C)
		}
	}
}

// parse reads a batch of inotify events: whether a file that matters
// changed, and whether the watch was lost.
func (w *Watcher) parse(b []byte) (changed, lost bool) {
	for len(b) >= unix.SizeofInotifyEvent {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&b[0]))
		end := unix.SizeofInotifyEvent + int(ev.Len)
		if end > len(b) {
			break
		}
		name := strings.TrimRight(string(b[unix.SizeofInotifyEvent:end]), "\x00")
		b = b[end:]
		switch {
		case ev.Mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF|unix.IN_IGNORED) != 0:
			lost, changed = true, true
		case ev.Mask&unix.IN_Q_OVERFLOW != 0:
			changed = true
		case name == "" || strings.HasPrefix(name, "."):
			// Editors' swap and temporary files.
		case ev.Mask&unix.IN_CREATE != 0:
			if fi, err := os.Lstat(filepath.Join(w.dir, name)); err == nil && fi.Mode()&os.ModeSymlink != 0 {
				changed = true
			}
		default:
			changed = true
		}
	}
	return changed, lost
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
