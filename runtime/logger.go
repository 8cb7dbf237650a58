package runtime

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kelp-project/kelp/resident"
)

// Container logs are written by a separate "logging binary" that the
// containerd shim starts for each task (containerd's binary:// log URI),
// so they keep flowing while kelp is down. The protocol, as implemented by
// the runc v2 shim (pkg/process/io_util.go NewBinaryCmd):
//   - fd 3 is the container's stdout, fd 4 its stderr (read ends of pipes);
//   - fd 5 is a pipe the shim waits on: closing it says "ready", and the
//     shim starts the container only after that;
//   - env holds only CONTAINER_ID and CONTAINER_NAMESPACE;
//   - argv is built from the URI's query: each key followed by its first
//     value, in Go map order, i.e. the key/value PAIRS arrive in random
//     order. LoggerArgs is therefore a list of pairs, and LoggerMain and
//     IsLoggerInvocation accept the pairs in any order.
//
// With a TTY there is a single stream (fd 3); it is logged as stdout.

const (
	// logMaxSize and logMaxFiles are kubelet's containerLogMaxSize and
	// containerLogMaxFiles defaults.
	logMaxSize  = 10 << 20
	logMaxFiles = 5
	// logChunk is the longest piece written as one CRI line; longer lines
	// are split into "P" (partial) lines ending with an "F" line.
	logChunk = 16 << 10
)

// LoggerArgs are the arguments kelp passes to itself as the logging
// binary. They are key/value pairs (see above): the shim may reorder the
// pairs but keeps each pair together.
func LoggerArgs(logPath string) []string {
	return []string{"internal", "container-logger", "--path", logPath}
}

// loggerQuery turns LoggerArgs into the URI query cio.BinaryIO wants.
func loggerQuery(logPath string) map[string]string {
	a := LoggerArgs(logPath)
	q := map[string]string{}
	for i := 0; i+1 < len(a); i += 2 {
		q[a[i]] = a[i+1]
	}
	return q
}

// IsLoggerInvocation reports whether args (os.Args[1:]) are a shim's
// invocation of the logger, whatever order the pairs came in. main.go
// should check this before normal flag parsing, since "--path X" may come
// before "internal container-logger".
func IsLoggerInvocation(args []string) bool {
	v, ok := pairValue(args, "internal")
	return ok && v == "container-logger"
}

func pairValue(args []string, key string) (string, bool) {
	for i := 0; i+1 < len(args); i += 2 {
		if args[i] == key {
			return args[i+1], true
		}
	}
	// Also accept a plain "--path X" anywhere (manual invocation).
	for i := 0; i+1 < len(args); i++ {
		if args[i] == key {
			return args[i+1], true
		}
	}
	return "", false
}

// LoggerMain is what `kelp internal container-logger --path P` runs. It
// copies the container's stdout (fd 3) and stderr (fd 4) into P in CRI
// format until both reach EOF (the container and all holders exited).
func LoggerMain(args []string) error {
	path, ok := pairValue(args, "--path")
	if !ok || !filepath.IsAbs(path) {
		return fmt.Errorf("container-logger: --path <absolute path> is required (got %q)", args)
	}
	w, err := openRotating(path, logMaxSize, logMaxFiles)
	if err != nil {
		return err
	}
	defer w.Close()

	// SIGTERM from the shim: keep draining (the pipes end soon after);
	// dying early would lose the container's last lines.
	signal.Ignore(syscall.SIGTERM, syscall.SIGPIPE, syscall.SIGHUP)

	var wg sync.WaitGroup
	for fd, stream := range map[uintptr]string{3: "stdout", 4: "stderr"} {
		f := os.NewFile(fd, stream)
		if f == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			copyCRI(w, f, stream, time.Now)
			f.Close()
		}()
	}
	if ready := os.NewFile(5, "ready"); ready != nil {
		ready.Close()
	}
	// The logger is kelp itself, whose package initialisation leaves
	// megabytes of garbage and of touched binary pages behind; one of
	// these runs per container, so give that memory back (a failure only
	// leaves it resident) and keep the heap small from here on.
	debug.SetGCPercent(20)
	_, _, _ = resident.Trim()
	wg.Wait()
	return nil
}

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
