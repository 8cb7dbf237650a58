package runtime

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLoggerArgsRoundTrip(t *testing.T) {
	args := LoggerArgs("/var/log/pods/x/c/0.log")
	if !IsLoggerInvocation(args) {
		t.Fatalf("%v not recognised", args)
	}
	// The shim emits the key/value pairs in map order.
	shuffled := []string{"--path", "/var/log/pods/x/c/0.log", "internal", "container-logger"}
	if !IsLoggerInvocation(shuffled) {
		t.Errorf("%v not recognised", shuffled)
	}
	if IsLoggerInvocation([]string{"server", "--path", "x"}) || IsLoggerInvocation(nil) {
		t.Error("false positive")
	}
	q := loggerQuery("/p")
	if q["internal"] != "container-logger" || q["--path"] != "/p" {
		t.Errorf("query %v", q)
	}
	if err := LoggerMain([]string{"internal", "container-logger"}); err == nil {
		t.Error("missing --path accepted")
	}
}

func TestLoggerCRIFormat(t *testing.T) {
	now := func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC) }
	long := strings.Repeat("a", logChunk+10)
	in := "one\n\r\n" + long + "\nlast-no-newline"
	var out bytes.Buffer
	copyCRI(&out, strings.NewReader(in), "stderr", now)
	ts := "2026-01-02T03:04:05.000000006Z"
	want := []string{
		ts + " stderr F one",
		ts + " stderr F ",
		ts + " stderr P " + long[:logChunk],
		ts + " stderr F " + long[logChunk:],
		ts + " stderr F last-no-newline",
	}
	got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(got) != len(want) {
		t.Fatalf("got %d lines, want %d: %q", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d: %.80q, want %.80q", i, got[i], want[i])
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
