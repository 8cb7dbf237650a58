package runtime

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A fake /proc: the shims of two containerds and namespaces, and processes
// that are not shims, each with a command line and a stat line.
func TestListShimsFindsOnlyOurs(t *testing.T) {
	root := t.TempDir()
	write := func(pid, cmdline, stat string) {
		dir := filepath.Join(root, pid)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		_ = os.WriteFile(filepath.Join(dir, "cmdline"), []byte(strings.ReplaceAll(cmdline, " ", "\x00")+"\x00"), 0o644)
		_ = os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644)
	}
	if err := os.WriteFile(filepath.Join(root, "stat"), []byte("cpu  1 2 3\nbtime 1700000000\nprocesses 9\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// starttime (field 22) 12345 ticks = 123.45 s after boot; the command
	// name holds a space and a parenthesis, as comm may.
	stat := func(pid string) string {
		return pid + " (containerd-shim) x) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 10 0 12345 0 0"
	}
	ours := "/run/kelp/containerd/containerd.sock"
	write("100", "/usr/bin/containerd-shim-runc-v2 -namespace k8s.io -id abc -address "+ours, stat("100"))
	write("101", "/usr/bin/containerd-shim-runc-v2 -namespace k8s.io -id other -address /run/containerd/containerd.sock", stat("101"))
	write("102", "/usr/bin/containerd-shim-runc-v2 -namespace moby -id m -address "+ours, stat("102"))
	write("103", "/usr/bin/containerd --config /var/lib/kelp/agent/etc/containerd/config.toml", stat("103"))
	write("104", "containerd-shim-runc-v2 --namespace=k8s.io -id", stat("104")) // malformed
	write("self", "x", "")
	shims, err := ListShims(root, ours)
	if err != nil {
		t.Fatal(err)
	}
	if len(shims) != 1 || shims[0].PID != 100 || shims[0].ID != "abc" {
		t.Fatalf("shims of %s: %+v, want pid 100 (abc) only", ours, shims)
	}
	if want := time.Unix(1700000000, 0).Add(123450 * time.Millisecond); !shims[0].Started.Equal(want) {
		t.Errorf("start time %v, want %v", shims[0].Started, want)
	}
}

func TestParseShim(t *testing.T) {
	for _, c := range []struct {
		args []string
		ok   bool
		id   string
	}{
		{[]string{"/usr/bin/containerd-shim-runc-v2", "-namespace", "k8s.io", "-id", "x1", "-address", "/s", "-publish-binary", "/usr/bin/containerd"}, true, "x1"},
		{[]string{"containerd-shim-runc-v2", "-debug", "-namespace", "k8s.io", "-address", "/s", "-id", "x2"}, true, "x2"},
		{[]string{"containerd-shim", "-namespace", "k8s.io", "-id", "x", "-address", "/s"}, false, ""},
		{[]string{"/usr/bin/containerd-shim-runc-v2", "-namespace", "k8s.io", "-address", "/s"}, false, ""},
		{nil, false, ""},
	} {
		s, ok := parseShim(c.args)
		if ok != c.ok || s.ID != c.id {
			t.Errorf("parseShim(%q) = %+v, %v; want id %q, %v", c.args, s, ok, c.id, c.ok)
		}
	}
}

// A shim started the way containerd starts one, but never given a task
// (what a kill -9 of kelp mid-creation leaves), is removed; the shim of a
// running container is not.
func TestRemoveOrphanShimsKillsOnlyShimsWithoutTask(t *testing.T) {
	rt := needRuntime(t)
	spec := newSpec(t, rt, "sleep", "1000")
	run(t, rt, spec)
	waitState(t, rt, spec.ID, StateRunning, 5*time.Second)

	id := "orphan-" + randomHex(4)
	bundle := t.TempDir()
	// The shim reads the bundle's spec at start (for its grouping label).
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), []byte(`{"ociVersion":"1.0.2"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	// ... and logs to the fifo "log" there, which containerd reads; the
	// shim exits if it cannot.
	if err := syscall.Mkfifo(filepath.Join(bundle, "log"), 0o600); err != nil {
		t.Fatal(err)
	}
	go func() {
		if f, err := os.Open(filepath.Join(bundle, "log")); err == nil {
			_, _ = io.Copy(io.Discard, f)
			f.Close()
		}
	}()
	cmd := exec.Command(shimBinary, "-namespace", Namespace, "-id", id, "-address", rt.opts.Address, "-publish-binary", "containerd", "start")
	cmd.Dir = bundle
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("starting a bare shim: %v\n%s", err, out)
	}
	orphan := findShim(t, rt, id)
	if orphan == nil {
		t.Fatalf("the bare shim %s is not listed", id)
	}
	sock := shimSocket(orphan.PID)
	if sock == "" {
		t.Fatal("the shim's socket is not found from its bundle's address file")
	}
	// Too young: another client may be about to create its task.
	if removed, err := rt.RemoveOrphanShims(context.Background()); err != nil || len(removed) != 0 {
		t.Fatalf("a shim younger than %v removed: %v %v", orphanMinAge, removed, err)
	}
	time.Sleep(time.Until(orphan.Started.Add(orphanMinAge + 100*time.Millisecond)))
	removed, err := rt.RemoveOrphanShims(context.Background())
	if err != nil || len(removed) != 1 || removed[0] != id {
		t.Fatalf("removed %v (%v), want only %s", removed, err, id)
	}
	deadline := time.Now().Add(5 * time.Second)
	for findShim(t, rt, id) != nil && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if findShim(t, rt, id) != nil {
		t.Errorf("the orphan shim %s still runs", id)
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("the orphan's socket %s is left: %v", sock, err)
	}
	if st, err := rt.ContainerStatus(context.Background(), spec.ID); err != nil || st.State != StateRunning {
		t.Errorf("the running container after orphan removal: %+v %v", st, err)
	}
}

// findShim is the live shim serving id (a killed one may linger as a
// zombie: PID 1 here reaps nothing).
func findShim(t *testing.T, rt *Runtime, id string) *Shim {
	shims, err := ListShims("/proc", rt.opts.Address)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range shims {
		b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(s.PID), "stat"))
		if s.ID == id && !strings.Contains(string(b), ") Z ") {
			return &s
		}
	}
	return nil
}
