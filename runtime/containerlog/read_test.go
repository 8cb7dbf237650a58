package containerlog

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The tail is what copyCRI wrote, read back: partial lines joined, the
// last n lines, cut to the last maxBytes.
func TestTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	var in strings.Builder
	for i := range 100 {
		fmt.Fprintf(&in, "line %d\n", i)
	}
	in.WriteString(strings.Repeat("x", logChunk+10) + "\n") // split into P and F lines
	copyCRI(f, strings.NewReader(in.String()), "stderr", time.Now)
	f.Close()

	got := Tail(path, 3, 1<<20)
	want := "line 98\nline 99\n" + strings.Repeat("x", logChunk+10) + "\n"
	if got != want {
		t.Errorf("Tail(3): %d bytes, starts %.20q; want %d bytes", len(got), got, len(want))
	}
	if got := Tail(path, 80, 20); got != strings.Repeat("x", 19)+"\n" {
		t.Errorf("Tail cut to 20 bytes: %q", got)
	}
	// Output without a final newline ends in a P line: it is still the
	// last line (conformance: `echo -n DONE; false` gives "DONE").
	path2 := filepath.Join(t.TempDir(), "1.log")
	f2, err := os.Create(path2)
	if err != nil {
		t.Fatal(err)
	}
	copyCRI(f2, strings.NewReader("first\nDONE"), "stdout", time.Now)
	f2.Close()
	if got := Tail(path2, 80, 2048); got != "first\nDONE" {
		t.Errorf("a last line without a newline: %q", got)
	}
	if got := Tail(path2, 1, 2048); got != "DONE" {
		t.Errorf("the last line without a newline, alone: %q", got)
	}
	if got := Tail(filepath.Join(t.TempDir(), "missing.log"), 80, 2048); got != "" {
		t.Errorf("missing file: %q", got)
	}
	if l, ok := ParseLine([]byte("2026-01-02T03:04:05.000000006Z stdout P hello")); !ok || !l.Partial || l.Stderr || string(l.Content) != "hello" {
		t.Errorf("ParseLine: %+v %v", l, ok)
	}
	if _, ok := ParseLine([]byte("not a cri line")); ok {
		t.Error("ParseLine accepted a line without a timestamp")
	}
}
