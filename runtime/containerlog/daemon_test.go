package containerlog

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The test binary doubles as the logging binary: the shims these tests
// stand in for run it with the writer's or the daemon's arguments.
func TestMain(m *testing.M) {
	if IsInvocation(os.Args[1:]) {
		if err := Main(os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// shim starts the logging binary as the runc shim does: the read ends of
// two pipes as fds 3 and 4, a ready pipe as fd 5, and waits for ready.
type shim struct {
	cmd            *exec.Cmd
	stdout, stderr *os.File // write ends: the container's output
}

func startShim(t *testing.T, logPath, socket string) *shim {
	t.Helper()
	or, ow, _ := os.Pipe()
	er, ew, _ := os.Pipe()
	rr, rw, _ := os.Pipe()
	cmd := exec.Command(os.Args[0], WriterArgs(logPath, socket)...)
	cmd.Env = []string{"CONTAINER_ID=x", "CONTAINER_NAMESPACE=k8s.io"}
	cmd.ExtraFiles = []*os.File{or, er, rw}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	or.Close()
	er.Close()
	rw.Close()
	_, _ = rr.Read(make([]byte, 1)) // EOF: ready
	rr.Close()
	s := &shim{cmd: cmd, stdout: ow, stderr: ew}
	t.Cleanup(func() { s.delete(t) })
	return s
}

// delete is the shim's task delete: close the pipes, SIGTERM the logging
// binary, wait for it.
func (s *shim) delete(t *testing.T) {
	if s.cmd.ProcessState != nil {
		return
	}
	s.stdout.Close()
	s.stderr.Close()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Errorf("logging binary %d still running 5 s after SIGTERM", s.cmd.Process.Pid)
		_ = s.cmd.Process.Kill()
	}
}

func argv0(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	a, _, _ := strings.Cut(string(b), "\x00")
	return a
}

// waitLog waits until the CRI log at path holds want, "<stream>
// <content>" of each line, in order within each stream (the two streams
// are copied independently).
func waitLog(t *testing.T, path string, want ...string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		var got []string
		for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
			if f := strings.SplitN(l, " ", 4); len(f) == 4 {
				got = append(got, f[1]+" "+f[3])
			}
		}
		if byStream(got) == byStream(want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s holds %q, want %q", path, got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func startDaemon(t *testing.T, socket string) {
	t.Helper()
	if err := EnsureDaemon(os.Args[0], socket, socket+".log"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = StopDaemon(socket) })
}

// A container's pipes go to the daemon; its writer parks in sleep(1),
// holding them; a restarted daemon takes the output up from the parked
// writer, and what was written meanwhile is not lost.
func TestDaemonServesParkedWritersAndSurvivesItsRestart(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatalf("taking pipes over from a parked writer (pidfd_getfd) needs root; euid %d", os.Geteuid())
	}
	dir := t.TempDir()
	socket := filepath.Join(dir, "containerlog.sock")
	startDaemon(t, socket)
	if err := EnsureDaemon(os.Args[0], socket, socket+".log"); err != nil {
		t.Fatalf("a second EnsureDaemon should find the first: %v", err)
	}
	logPath := filepath.Join(dir, "pod", "c", "0.log")
	s := startShim(t, logPath, socket)
	fmt.Fprintln(s.stdout, "one")
	fmt.Fprintln(s.stderr, "two")
	waitLog(t, logPath, "stdout one", "stderr two")
	// It parks just after saying ready.
	for i := 0; i < 200 && argv0(s.cmd.Process.Pid) != parkedName; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if a := argv0(s.cmd.Process.Pid); a != parkedName {
		t.Errorf("the writer's argv[0] is %q, want it parked as %q", a, parkedName)
	}

	if err := StopDaemon(socket); err != nil {
		t.Fatal(err)
	}
	if Ping(socket) == nil {
		t.Fatal("daemon still answers after StopDaemon")
	}
	// Written while no daemon runs: it waits in the pipe (the parked
	// writer keeps it open, so the container gets no SIGPIPE).
	if _, err := fmt.Fprintln(s.stdout, "while stopped"); err != nil {
		t.Fatalf("writing while the daemon is down: %v", err)
	}
	startDaemon(t, socket)
	fmt.Fprintln(s.stdout, "after restart")
	waitLog(t, logPath, "stdout one", "stderr two", "stdout while stopped", "stdout after restart")
	b, _ := os.ReadFile(socket + ".log")
	if !bytes.Contains(b, []byte("took over 1 containers")) {
		t.Errorf("daemon log does not report taking over the parked writer:\n%s", b)
	}
	s.delete(t)
}

// With no daemon answering, the writer copies the output itself.
func TestWriterWithoutDaemonWritesItself(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "0.log")
	s := startShim(t, logPath, filepath.Join(dir, "nobody.sock"))
	fmt.Fprint(s.stdout, "a\nb")
	fmt.Fprintln(s.stderr, "c")
	waitLog(t, logPath, "stdout a", "stdout b", "stderr c")
	if a := argv0(s.cmd.Process.Pid); a == parkedName {
		t.Error("writer parked although no daemon took its pipes")
	}
	s.delete(t)
	b, _ := os.ReadFile(logPath)
	if !strings.Contains(string(b), " stdout P b\n") {
		t.Errorf("last partial line missing after delete:\n%s", b)
	}
}

// Requests the daemon refuses get an error and leave it serving.
func TestDaemonRefusesBadRequests(t *testing.T) {
	dir := t.TempDir()
	socket := filepath.Join(dir, "d.sock")
	startDaemon(t, socket)
	r, w, _ := os.Pipe()
	defer r.Close()
	defer w.Close()
	for _, c := range []struct {
		req  string
		fds  []int
		want string
	}{
		{"v1 relative/path", []int{int(r.Fd()), int(r.Fd())}, "absolute"},
		{"v1 /tmp/x.log", []int{int(r.Fd())}, "want 2 descriptors, got 1"},
		{"v1 /tmp/x.log", nil, "want 2 descriptors, got 0"},
		{"hello", nil, "unknown request"},
		{"v1 " + filepath.Join(dir, "d.sock", "under-a-socket.log"), []int{int(r.Fd()), int(r.Fd())}, "not a directory"},
	} {
		conn, err := net.Dial("unix", socket)
		if err != nil {
			t.Fatal(err)
		}
		uc := conn.(*net.UnixConn)
		var oob []byte
		if c.fds != nil {
			oob = unix.UnixRights(c.fds...)
		}
		if _, _, err := uc.WriteMsgUnix([]byte(c.req+"\n"), oob, nil); err != nil {
			t.Fatal(err)
		}
		err = readReply(uc)
		conn.Close()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want an error with %q", c.req, err, c.want)
		}
	}
	if err := Ping(socket); err != nil {
		t.Errorf("daemon stopped answering after bad requests: %v", err)
	}
	// A second daemon for the same socket leaves the first serving.
	out, err := exec.Command(os.Args[0], DaemonArgs(socket)...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "another daemon serves") {
		t.Errorf("second daemon: %v %s", err, out)
	}
	if err := Ping(socket); err != nil {
		t.Errorf("first daemon gone after a second started: %v", err)
	}
}

func byStream(lines []string) string {
	var out, err []string
	for _, l := range lines {
		if strings.HasPrefix(l, "stdout ") {
			out = append(out, l)
		} else {
			err = append(err, l)
		}
	}
	return strings.Join(append(out, err...), "|")
}
