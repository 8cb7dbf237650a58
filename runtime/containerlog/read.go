package containerlog

import (
	"bufio"
	"bytes"
	"os"
	"time"
)

// Line is one line of a CRI-format log file:
// "<RFC3339Nano> <stdout|stderr> <F|P> <content>".
type Line struct {
	Time    time.Time
	Stderr  bool
	Partial bool // a part of a longer line; the following lines complete it
	Content []byte
}

// ParseLine reads one CRI log line (its newline optional).
func ParseLine(b []byte) (Line, bool) {
	b = bytes.TrimSuffix(b, []byte("\n"))
	f := bytes.SplitN(b, []byte(" "), 4)
	if len(f) < 3 {
		return Line{}, false
	}
	ts, err := time.Parse(time.RFC3339Nano, string(f[0]))
	if err != nil {
		return Line{}, false
	}
	l := Line{Time: ts, Stderr: string(f[1]) == "stderr", Partial: string(f[2]) == "P"}
	if len(f) == 4 {
		l.Content = f[3]
	}
	return l, true
}

// Tail returns the content of the last lines of the CRI log at path, at
// most maxBytes of it (its end), as upstream's kubelet reads a failed
// container's log for its termination message under
// FallbackToLogsOnError. A missing file is an empty tail.
func Tail(path string, lines, maxBytes int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	// Whole lines only, in a ring of the last `lines`; a log is at most
	// logMaxSize, so one pass over it is bounded.
	ring := make([][]byte, 0, lines)
	var cur []byte
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), logChunk+256)
	for sc.Scan() {
		l, ok := ParseLine(sc.Bytes())
		if !ok {
			continue
		}
		cur = append(cur, l.Content...)
		if l.Partial {
			continue
		}
		cur = append(cur, '\n')
		if len(ring) == lines {
			ring = append(ring[:0:0], ring[1:]...)
		}
		ring = append(ring, cur)
		cur = nil
	}
	if len(cur) > 0 {
		// Output that ended without a newline (the shim's pipe closed
		// mid-line) is the tail's last line, as it was written.
		if len(ring) == lines {
			ring = append(ring[:0:0], ring[1:]...)
		}
		ring = append(ring, cur)
	}
	out := bytes.Join(ring, nil)
	if len(out) > maxBytes {
		out = out[len(out)-maxBytes:]
	}
	return string(out)
}
