package containerd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root: it starts containerd (run `go test` as root)")
	}
	if _, err := exec.LookPath("containerd"); err != nil {
		if _, err := os.Stat("/usr/bin/containerd"); err != nil {
			t.Fatal("this test needs containerd installed (/usr/bin/containerd)")
		}
	}
}

func randName(t *testing.T) string {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// testConfig returns a config with a temp agent dir and a unique socket
// under /run; everything is removed at the end of the test.
func testConfig(t *testing.T) Config {
	t.Helper()
	runDir := "/run/kelp-test-" + randName(t)
	t.Cleanup(func() { os.RemoveAll(runDir) })
	return Config{
		Dir:     t.TempDir(),
		Address: filepath.Join(runDir, "containerd.sock"),
	}
}

func shrinkTimings(t *testing.T) {
	oldInterval, oldMin := probeInterval, backoffMin
	probeInterval, backoffMin = 200*time.Millisecond, 100*time.Millisecond
	t.Cleanup(func() { probeInterval, backoffMin = oldInterval, oldMin })
}

func stopOnCleanup(t *testing.T, s *Supervisor) {
	t.Cleanup(func() {
		if pid := s.PID(); pid > 0 && alive(pid) {
			_ = s.Stop()
		}
	})
}

func TestSupervisorLifecycle(t *testing.T) {
	requireRoot(t)
	shrinkTimings(t)
	cfg := testConfig(t)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	stopOnCleanup(t, s)
	if s.Address() != cfg.Address {
		t.Fatalf("Address() = %q, want %q", s.Address(), cfg.Address)
	}
	if err := probe(ctx, cfg.Address); err != nil {
		t.Fatalf("version: %v", err)
	}
	if _, err := os.Stat(filepath.Join(cfg.Dir, "etc", "containerd", "config.toml")); err != nil {
		t.Fatal(err)
	}
	pid := s.PID()
	if pid <= 0 {
		t.Fatal("no pid")
	}
	b, err := os.ReadFile(filepath.Join(filepath.Dir(cfg.Address), "containerd.pid"))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b); got != itoa(pid)+"\n" {
		t.Fatalf("pid file %q, want %d", got, pid)
	}
	// Its own session: not in our process group.
	if sid, _ := unix.Getsid(pid); sid != pid {
		t.Fatalf("containerd sid = %d, want its own session %d", sid, pid)
	}

	// kill -9: the supervisor restarts it.
	if err := unix.Kill(pid, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if np := s.PID(); np != pid && np > 0 && probe(ctx, cfg.Address) == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("containerd was not restarted after kill -9")
		}
		time.Sleep(50 * time.Millisecond)
	}
	pid2 := s.PID()
	t.Logf("restarted: pid %d -> %d", pid, pid2)

	// kelp "restarts": the first supervisor's context ends, containerd
	// keeps running, and a second Start adopts it.
	cancel()
	s.watchWG.Wait()
	time.Sleep(300 * time.Millisecond)
	if !alive(pid2) {
		t.Fatal("containerd died when the supervising context ended")
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	s2, err := Start(ctx2, cfg)
	if err != nil {
		t.Fatal(err)
	}
	stopOnCleanup(t, s2)
	if s2.PID() != pid2 {
		t.Fatalf("second Start has pid %d, want adopted %d", s2.PID(), pid2)
	}
	if n := countContainerd(t, s2); n != 1 {
		t.Fatalf("%d containerd processes with our config, want 1", n)
	}

	if err := s2.Stop(); err != nil {
		t.Fatal(err)
	}
	if alive(pid2) {
		t.Fatal("containerd still running after Stop")
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(cfg.Address), "containerd.pid")); !os.IsNotExist(err) {
		t.Fatalf("pid file left after Stop: %v", err)
	}
	time.Sleep(3 * probeInterval)
	if n := countContainerd(t, s2); n != 0 {
		t.Fatalf("%d containerd processes after Stop, want 0", n)
	}
}

func TestSupervisorNetNS(t *testing.T) {
	requireRoot(t)
	name := "kelp-test-" + randName(t)
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })

	cfg := testConfig(t)
	cfg.NetNS = "/run/netns/" + name
	s, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	stopOnCleanup(t, s)
	theirs, err := os.Readlink("/proc/" + itoa(s.PID()) + "/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	ours, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(cfg.NetNS, &st); err != nil {
		t.Fatal(err)
	}
	want := "net:[" + itoa(int(st.Ino)) + "]"
	if theirs == ours || theirs != want {
		t.Fatalf("containerd netns %s, ours %s, want %s", theirs, ours, want)
	}
	// Only the network namespace was switched.
	for _, ns := range []string{"mnt", "pid", "uts", "ipc"} {
		a, _ := os.Readlink("/proc/" + itoa(s.PID()) + "/ns/" + ns)
		b, _ := os.Readlink("/proc/self/ns/" + ns)
		if a != b {
			t.Errorf("%s namespace differs: %s vs %s", ns, a, b)
		}
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
}

func countContainerd(t *testing.T, s *Supervisor) int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		pid, err := atoi(e.Name())
		if err != nil {
			continue
		}
		if s.isOurContainerd(pid) {
			n++
		}
	}
	return n
}

func itoa(i int) string { return strconv.Itoa(i) }

func atoi(s string) (int, error) { return strconv.Atoi(s) }

func TestSupervisorUnresponsive(t *testing.T) {
	requireRoot(t)
	shrinkTimings(t)
	oldTimeout := probeTimeout
	probeTimeout = 300 * time.Millisecond
	t.Cleanup(func() { probeTimeout = oldTimeout })
	cfg := testConfig(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	stopOnCleanup(t, s)
	pid := s.PID()
	// A frozen containerd still exists but no longer answers.
	if err := unix.Kill(pid, unix.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Kill(pid, unix.SIGKILL) })
	deadline := time.Now().Add(20 * time.Second)
	for {
		if np := s.PID(); np != pid && np > 0 && probe(ctx, cfg.Address) == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("an unresponsive containerd was not replaced")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if alive(pid) {
		t.Fatal("the unresponsive containerd is still running")
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
}
