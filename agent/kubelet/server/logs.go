package server

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kelp-project/kelp/runtime"
	"github.com/kelp-project/kelp/runtime/containerlog"
)

// nextLine reads the next complete line of a CRI log file. A line still
// being written is left unread (the reader is rewound to its start), so a
// follower reads it whole once the logger finishes it; ok is false then
// and at the end of the file.
func nextLine(f *os.File, br *bufio.Reader) (line []byte, ok bool) {
	b, _ := br.ReadBytes('\n')
	if len(b) > 0 && b[len(b)-1] == '\n' {
		return b, true
	}
	if len(b) > 0 {
		_, _ = f.Seek(-int64(len(b)), io.SeekCurrent)
		br.Reset(f)
	}
	return nil, false
}

// logOptions are the containerLogs query parameters (those of
// PodLogOptions).
type logOptions struct {
	follow, previous, timestamps bool
	tail                         int64 // -1: all
	since                        time.Time
	limit                        int64 // 0: none
}

func parseLogOptions(r *http.Request) logOptions {
	q := r.URL.Query()
	o := logOptions{follow: boolParam(q, "follow"), previous: boolParam(q, "previous"), timestamps: boolParam(q, "timestamps"), tail: -1}
	if v, err := strconv.ParseInt(q.Get("tailLines"), 10, 64); err == nil && v >= 0 {
		o.tail = v
	}
	if v, err := strconv.ParseInt(q.Get("sinceSeconds"), 10, 64); err == nil && v > 0 {
		o.since = time.Now().Add(-time.Duration(v) * time.Second)
	}
	if v, err := time.Parse(time.RFC3339, q.Get("sinceTime")); err == nil {
		o.since = v
	}
	if v, err := strconv.ParseInt(q.Get("limitBytes"), 10, 64); err == nil && v > 0 {
		o.limit = v
	}
	return o
}

// containerLogs serves a container's log as kubectl logs shows it: the
// content of each line (partial lines joined), optionally with timestamps,
// the last tailLines, since a time, up to limitBytes, and followed until
// the container stops when follow is set.
func (s *Server) containerLogs(w http.ResponseWriter, r *http.Request) {
	o := parseLogOptions(r)
	c, err := s.container(r, o.previous)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	path := c.LogPath
	f, err := os.Open(path)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "text/plain")
	out := &limitWriter{w: w, left: o.limit}
	// Each CRI line's content goes out as it is read, a newline after an F
	// line only, as upstream's kubelet writes logs: a last line that never
	// got its newline (a P line, printf's output) is shown too, and a
	// timestamp, if asked, starts each whole line.
	midLine := false
	write := func(l containerlog.Line) bool {
		if !o.since.IsZero() && l.Time.Before(o.since) {
			return true
		}
		var b []byte
		if o.timestamps && !midLine {
			b = append(b, l.Time.Format(time.RFC3339Nano)+" "...)
		}
		b = append(b, l.Content...)
		if midLine = l.Partial; !midLine {
			b = append(b, '\n')
		}
		return out.write(b)
	}
	// The existing content, with tailLines applied.
	br := bufio.NewReader(f)
	var lines []containerlog.Line
	for b, ok := nextLine(f, br); ok; b, ok = nextLine(f, br) {
		if l, ok := containerlog.ParseLine(b); ok {
			lines = append(lines, l)
		}
	}
	if o.tail >= 0 {
		full := 0
		start := len(lines)
		for start > 0 && int64(full) < o.tail+1 {
			start--
			if !lines[start].Partial {
				full++
			}
		}
		if int64(full) > o.tail && start < len(lines) {
			start++
		}
		lines = lines[start:]
	}
	for _, l := range lines {
		if !write(l) {
			return
		}
	}
	if fl, ok := w.(http.Flusher); ok {
		fl.Flush()
	}
	if !o.follow || o.previous {
		return
	}
	// Follow: poll for new lines until the container stops (and its last
	// lines are out) or the client goes away.
	for {
		if b, ok := nextLine(f, br); ok {
			if l, ok := containerlog.ParseLine(b); ok && !write(l) {
				return
			}
			continue
		}
		if fl, ok := w.(http.Flusher); ok {
			fl.Flush()
		}
		st, serr := s.runtime.ContainerStatus(r.Context(), c.ID)
		if serr != nil || st.State != runtime.StateRunning {
			time.Sleep(200 * time.Millisecond) // the logger's last writes
			rest, _ := io.ReadAll(br)
			for _, line := range bytes.SplitAfter(rest, []byte("\n")) {
				if l, ok := containerlog.ParseLine(line); ok && !write(l) {
					return
				}
			}
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
		if rotated(f, path) {
			nf, err := os.Open(path)
			if err != nil {
				continue
			}
			f.Close()
			f = nf
			br.Reset(f)
		}
	}
}

// rotated reports whether path now names another file than f.
func rotated(f *os.File, path string) bool {
	a, err1 := f.Stat()
	b, err2 := os.Stat(path)
	return err1 == nil && err2 == nil && !os.SameFile(a, b)
}

type limitWriter struct {
	w    io.Writer
	left int64 // 0 = unlimited
	done bool
}

func (l *limitWriter) write(b []byte) bool {
	if l.done {
		return false
	}
	if l.left > 0 {
		if int64(len(b)) >= l.left {
			b = b[:l.left]
			l.done = true
		}
		l.left -= int64(len(b))
	}
	_, err := l.w.Write(b)
	return err == nil && !l.done
}

// attach streams a running container's output from now on, over the same
// WebSocket channels as exec. The output is read from the container's log:
// containerd's shim hands stdout and stderr to the log writer, not to kelp.
// Writing to a container's stdin is not supported yet.
func (s *Server) attach(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if boolParam(q, "stdin") {
		http.Error(w, "attaching to a container's stdin is not supported by kelp yet; kubectl attach without -i streams its output", http.StatusBadRequest)
		return
	}
	c, err := s.container(r, false)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f, err := os.Open(c.LogPath)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	defer f.Close()
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	ch, ok := openChannels(w, r, false)
	if !ok {
		return
	}
	defer ch.conn.Close()
	streams := ch.streams
	br := bufio.NewReader(f)
	for {
		if b, ok := nextLine(f, br); ok {
			if l, ok := containerlog.ParseLine(b); ok {
				out := streams[1]
				if l.Stderr {
					out = streams[2]
				}
				line := l.Content
				if !l.Partial {
					line = append(line, '\n')
				}
				if _, err := out.Write(line); err != nil {
					return
				}
			}
			continue
		}
		if st, err := s.runtime.ContainerStatus(r.Context(), c.ID); err != nil || st.State != runtime.StateRunning {
			ch.result(metav1.Status{Status: metav1.StatusSuccess})
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}
