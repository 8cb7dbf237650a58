// Package containerlog writes containers' output to their CRI-format log
// files, outside kelp's own process so logs keep flowing while kelp is
// stopped or restarting.
//
// The containerd shim starts a "logging binary" for each task
// (containerd's binary:// log URI). That binary is kelp's small launcher,
// never the full kelp (whose package initialisation alone costs ~100 MB
// and ~0.1 s): it hands the container's pipes to the node's log daemon
// and parks (writer.go); the daemon, one per node, copies every
// container's output into its file (daemon.go). A container therefore
// costs a goroutine pair in the daemon and a parked placeholder process,
// not a logger process of its own.
package containerlog

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

const (
	// logMaxSize and logMaxFiles are kubelet's containerLogMaxSize and
	// containerLogMaxFiles defaults.
	logMaxSize  = 10 << 20
	logMaxFiles = 5
	// logChunk is the longest piece written as one CRI line; longer lines
	// are split into "P" (partial) lines ending with an "F" line.
	logChunk = 16 << 10
)

// copyCRI reads r and writes each line as
// "<RFC3339Nano> <stream> <F|P> <content>\n": F for a whole line, P for
// a part of one. A read that ends mid-line is written at once as a P line
// rather than held for its newline: the shim keeps the pipe open until the
// task is deleted, so a container's last output without a newline (printf,
// cat of a file without one) would otherwise never reach the log while
// anyone can read it. Readers join P lines with what follows, so the
// content is the same.
func copyCRI(w io.Writer, r io.Reader, stream string, now func() time.Time) {
	buf := make([]byte, logChunk)
	carry := 0 // a '\r' held back from the last read: it may begin a "\r\n"
	for {
		n, err := r.Read(buf[carry:])
		chunk := buf[:carry+n]
		carry = 0
		for len(chunk) > 0 {
			i := bytes.IndexByte(chunk, '\n')
			if i < 0 {
				if chunk[len(chunk)-1] == '\r' && err == nil {
					chunk = chunk[:len(chunk)-1]
					carry = 1
				}
				if len(chunk) > 0 {
					_, _ = w.Write(criLine(now(), stream, "P", chunk))
				}
				break
			}
			// As bufio's ReadLine, and so containerd's CRI logger: a line
			// ends at "\n" or "\r\n" (a terminal's end of line).
			_, _ = w.Write(criLine(now(), stream, "F", bytes.TrimSuffix(chunk[:i], []byte("\r"))))
			chunk = chunk[i+1:]
		}
		if carry == 1 {
			buf[0] = '\r'
		}
		if err != nil {
			return
		}
	}
}

func criLine(t time.Time, stream, tag string, content []byte) []byte {
	b := make([]byte, 0, len(content)+64)
	b = t.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, ' ')
	b = append(b, stream...)
	b = append(b, ' ')
	b = append(b, tag...)
	b = append(b, ' ')
	b = append(b, content...)
	return append(b, '\n')
}

// rotatingFile appends whole lines to path. When a write would take it
// past max bytes, the file is renamed to <path>.<UTC timestamp> and a new
// one opened; only the newest files-1 rotated files are kept. Writers are
// serialised (stdout and stderr share it), so lines never interleave.
type rotatingFile struct {
	mu    sync.Mutex
	path  string
	max   int64
	files int
	f     *os.File
	size  int64
}

func openRotating(path string, max int64, files int) (*rotatingFile, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	w := &rotatingFile{path: path, max: max, files: files}
	return w, w.open()
}

func (w *rotatingFile) open() error {
	f, err := os.OpenFile(w.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	w.f, w.size = f, st.Size()
	return nil
}

func (w *rotatingFile) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return 0, errors.New("log file closed")
	}
	if w.size > 0 && w.size+int64(len(b)) > w.max {
		if err := w.rotate(); err != nil {
			return 0, err
		}
	}
	n, err := w.f.Write(b)
	w.size += int64(n)
	return n, err
}

func (w *rotatingFile) rotate() error {
	w.f.Close()
	w.f = nil
	rotated := w.path + "." + time.Now().UTC().Format("20060102-150405.000000000")
	if err := os.Rename(w.path, rotated); err != nil {
		return err
	}
	w.prune()
	return w.open()
}

// prune deletes the oldest rotated files beyond files-1; the timestamp
// suffix sorts chronologically.
func (w *rotatingFile) prune() {
	old, _ := filepath.Glob(w.path + ".*")
	var rotated []string
	for _, o := range old {
		if suffix := strings.TrimPrefix(o, w.path+"."); len(suffix) > 0 && suffix[0] >= '0' && suffix[0] <= '9' {
			rotated = append(rotated, o)
		}
	}
	sort.Strings(rotated)
	for len(rotated) > w.files-1 {
		_ = os.Remove(rotated[0])
		rotated = rotated[1:]
	}
}

func (w *rotatingFile) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	return err
}

// follow copies a container's stdout and stderr (either may be nil) into
// w until both end, then closes w.
func follow(w io.WriteCloser, stdout, stderr *os.File) {
	var wg sync.WaitGroup
	for _, s := range []struct {
		f    *os.File
		name string
	}{{stdout, "stdout"}, {stderr, "stderr"}} {
		if s.f == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			copyCRI(w, s.f, s.name, time.Now)
			s.f.Close()
		}()
	}
	wg.Wait()
	w.Close()
}
