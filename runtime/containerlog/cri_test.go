package containerlog

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestWriterArgsRoundTrip(t *testing.T) {
	args := WriterArgs("/var/log/pods/x/c/0.log", "/run/kelp/runtime/containerlog.sock")
	if !IsInvocation(args) {
		t.Fatalf("%v not recognised", args)
	}
	// The shim emits the key/value pairs in map order.
	shuffled := []string{"--socket", "/s", "--path", "/var/log/pods/x/c/0.log", "internal", "container-logger"}
	if !IsInvocation(shuffled) || !IsInvocation(DaemonArgs("/s")) {
		t.Errorf("%v not recognised", shuffled)
	}
	if IsInvocation([]string{"server", "--path", "x"}) || IsInvocation(nil) || IsInvocation([]string{"internal", "other"}) {
		t.Error("false positive")
	}
	q := WriterQuery("/p", "/s")
	if q["internal"] != "container-logger" || q["--path"] != "/p" || q["--socket"] != "/s" {
		t.Errorf("query %v", q)
	}
	if err := Main([]string{"internal", "container-logger"}); err == nil {
		t.Error("missing --path accepted")
	}
	if err := Main([]string{"internal", "log-daemon", "--socket", "relative"}); err == nil {
		t.Error("relative --socket accepted")
	}
}

// chunks is a reader returning one piece per Read, as a pipe does with
// the container's writes.
type chunks []string

func (c *chunks) Read(b []byte) (int, error) {
	if len(*c) == 0 {
		return 0, io.EOF
	}
	n := copy(b, (*c)[0])
	if n == len((*c)[0]) {
		*c = (*c)[1:]
	} else {
		(*c)[0] = (*c)[0][n:]
	}
	return n, nil
}

func TestLoggerCRIFormat(t *testing.T) {
	now := func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC) }
	ts := "2026-01-02T03:04:05.000000006Z"
	long := strings.Repeat("a", logChunk+10)
	for _, c := range []struct {
		name string
		in   chunks
		want []string // tag and content of each CRI line
	}{
		{"whole lines, CRLF as LF", chunks{"one\n\r\ntwo\r\n"}, []string{"F one", "F ", "F two"}},
		// The last output without a newline is logged at once, not when
		// the pipe closes (the shim holds it open until the task goes).
		{"a line in two writes, then one never ended", chunks{"ab", "c\nlast-no-newline"}, []string{"P ab", "F c", "P last-no-newline"}},
		{"a CRLF split between writes", chunks{"x\r", "\ny"}, []string{"P x", "F ", "P y"}},
		{"a line longer than the buffer", chunks{long + "\n"}, []string{"P " + long[:logChunk], "F " + long[logChunk:]}},
	} {
		var out bytes.Buffer
		in := c.in
		copyCRI(&out, &in, "stderr", now)
		got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		if len(got) != len(c.want) {
			t.Errorf("%s: got %d lines, want %d: %.200q", c.name, len(got), len(c.want), got)
			continue
		}
		for i := range c.want {
			if want := ts + " stderr " + c.want[i]; got[i] != want {
				t.Errorf("%s: line %d: %.80q, want %.80q", c.name, i, got[i], want)
			}
		}
	}
}

func TestLoggerRotation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c", "0.log")
	w, err := openRotating(path, 100, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	line := []byte(strings.Repeat("x", 39) + "\n") // 40 bytes: 2 per file
	for i := 0; i < 20; i++ {
		if _, err := w.Write(line); err != nil {
			t.Fatal(err)
		}
	}
	rotated, _ := filepath.Glob(path + ".*")
	if len(rotated) != 2 {
		t.Errorf("rotated files %v, want 2 (files-1)", rotated)
	}
	for _, p := range append(rotated, path) {
		st, err := os.Stat(p)
		if err != nil || st.Size() > 100 || st.Size()%40 != 0 {
			t.Errorf("%s: %v %v", p, st, err)
		}
	}
}
