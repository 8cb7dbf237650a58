package runtime

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"
)

// execOut runs cmd in id and returns stdout+stderr and the exit code.
func execOut(t *testing.T, rt *Runtime, id string, cmd ...string) (string, int) {
	t.Helper()
	var out syncBuffer
	code, err := rt.Exec(context.Background(), id, cmd, nil, &out, &out, false)
	if err != nil {
		t.Fatalf("exec %v: %v", cmd, err)
	}
	return out.String(), code
}

// syncBuffer lets stdout and stderr share one buffer.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestExecHostnameExitCodeAndStdin(t *testing.T) {
	rt := needRuntime(t)
	spec := newSpec(t, rt, "sleep", "1000")
	spec.Hostname = "kelp-pod"
	spec.Env = []string{"FOO=pod"}
	run(t, rt, spec)
	waitState(t, rt, spec.ID, StateRunning, 5*time.Second)

	if out, code := execOut(t, rt, spec.ID, "hostname"); code != 0 || out != "kelp-pod\n" {
		t.Errorf("hostname: %d %q", code, out)
	}
	var out, errOut bytes.Buffer
	code, err := rt.Exec(context.Background(), spec.ID, []string{"sh", "-c", "echo $FOO; echo oops >&2; exit 7"}, nil, &out, &errOut, false)
	if err != nil || code != 7 || out.String() != "pod\n" || errOut.String() != "oops\n" {
		t.Errorf("exit 7: %d %v %q %q", code, err, out.String(), errOut.String())
	}
	out.Reset()
	code, err = rt.Exec(context.Background(), spec.ID, []string{"cat"}, strings.NewReader("from stdin\n"), &out, nil, false)
	if err != nil || code != 0 || out.String() != "from stdin\n" {
		t.Errorf("cat: %d %v %q", code, err, out.String())
	}
	// Streams may all be nil.
	if code, err := rt.Exec(context.Background(), spec.ID, []string{"false"}, nil, nil, nil, false); err != nil || code != 1 {
		t.Errorf("false: %d %v", code, err)
	}
	if _, err := rt.Exec(context.Background(), spec.ID, []string{"/no/such/binary"}, nil, nil, nil, false); err == nil {
		t.Log("exec of a missing binary returned no error (runc reports it at start)")
	}
}

func TestExecTTY(t *testing.T) {
	rt := needRuntime(t)
	spec := newSpec(t, rt, "sleep", "1000")
	run(t, rt, spec)
	waitState(t, rt, spec.ID, StateRunning, 5*time.Second)
	var out bytes.Buffer
	code, err := rt.Exec(context.Background(), spec.ID, []string{"sh", "-c", "test -t 1 && echo tty"}, nil, &out, nil, true)
	if err != nil || code != 0 || !strings.Contains(out.String(), "tty") {
		t.Errorf("tty exec: %d %v %q", code, err, out.String())
	}
}

func TestExecCancelKills(t *testing.T) {
	rt := needRuntime(t)
	spec := newSpec(t, rt, "sleep", "1000")
	run(t, rt, spec)
	waitState(t, rt, spec.ID, StateRunning, 5*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := rt.Exec(ctx, spec.ID, []string{"sleep", "100"}, nil, nil, nil, false); err == nil {
		t.Error("cancelled exec returned no error")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("cancelled exec took %v", d)
	}
}

func TestExecNotFound(t *testing.T) {
	rt := needRuntime(t)
	if _, err := rt.Exec(context.Background(), "no-such-container", []string{"true"}, nil, nil, nil, false); !IsNotFound(err) {
		t.Errorf("err %v, want not found", err)
	}
}
