package runtime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/cio"

	"golang.org/x/sys/unix"

	"github.com/kelp-project/kelp/runtime/cgroups"
)

var criLineRE = regexp.MustCompile(`^(\S+) (stdout|stderr) (F|P) (.*)$`)

func TestContainerRunToCompletionLogsAndExits(t *testing.T) {
	rt := needRuntime(t)
	spec := newSpec(t, rt, "sh", "-c", "echo hello; echo err >&2")
	run(t, rt, spec)
	st := waitState(t, rt, spec.ID, StateExited, 10*time.Second)
	if st.ExitCode != 0 || st.Reason != ReasonCompleted {
		t.Errorf("exit %d reason %q, want 0 Completed", st.ExitCode, st.Reason)
	}
	if st.StartedAt.IsZero() || st.FinishedAt.Before(st.StartedAt) || st.CreatedAt.After(st.StartedAt) {
		t.Errorf("times: created %v started %v finished %v", st.CreatedAt, st.StartedAt, st.FinishedAt)
	}
	if st.Labels["test"] != t.Name() || st.Labels[labelLogPath] != "" {
		t.Errorf("labels %v", st.Labels)
	}
	got := map[string]string{}
	for _, l := range readLog(t, spec.LogPath, 2) {
		m := criLineRE.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("not a CRI log line: %q", l)
		}
		if _, err := time.Parse(time.RFC3339Nano, m[1]); err != nil || m[3] != "F" {
			t.Errorf("bad line %q: %v", l, err)
		}
		got[m[2]] = m[4]
	}
	if got["stdout"] != "hello" || got["stderr"] != "err" {
		t.Errorf("log streams %v", got)
	}
	waitExit(t, rt, spec.ID)
}

// waitExit drains Exits() until id shows up (other tests' exits may be
// queued in front of it).
func waitExit(t *testing.T, rt *Runtime, id string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case got := <-rt.Exits():
			if got == id {
				return
			}
		case <-timeout:
			t.Fatalf("no exit event for %s", id)
		}
	}
}

func TestContainerStopKillsAfterGrace(t *testing.T) {
	rt := needRuntime(t)
	// sleep as PID 1 has no SIGTERM handler, and the kernel drops
	// default-action signals to a namespace's init: only SIGKILL works.
	spec := newSpec(t, rt, "sleep", "1000")
	run(t, rt, spec)
	st := waitState(t, rt, spec.ID, StateRunning, 5*time.Second)
	if st.Pid == 0 {
		t.Error("running container has no pid")
	}
	grace := 1500 * time.Millisecond
	start := time.Now()
	if err := rt.StopContainer(context.Background(), spec.ID, grace); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < grace || d > grace+3*time.Second {
		t.Errorf("stop took %v, want about %v", d, grace)
	}
	st = waitState(t, rt, spec.ID, StateExited, time.Second)
	if st.ExitCode != 137 || st.Reason != ReasonError {
		t.Errorf("exit %d reason %q, want 137 Error", st.ExitCode, st.Reason)
	}
	// Stopping a stopped container is a no-op.
	if err := rt.StopContainer(context.Background(), spec.ID, grace); err != nil {
		t.Error(err)
	}
}

func TestContainerStopHonoursTermTrap(t *testing.T) {
	rt := needRuntime(t)
	spec := newSpec(t, rt, "sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.1; done")
	run(t, rt, spec)
	waitState(t, rt, spec.ID, StateRunning, 5*time.Second)
	time.Sleep(200 * time.Millisecond) // let sh install the trap
	start := time.Now()
	if err := rt.StopContainer(context.Background(), spec.ID, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("stop took %v; TERM should have ended it", d)
	}
	st := waitState(t, rt, spec.ID, StateExited, time.Second)
	if st.ExitCode != 0 || st.Reason != ReasonCompleted {
		t.Errorf("exit %d reason %q, want 0 Completed", st.ExitCode, st.Reason)
	}
}

func TestContainerStopUsesImageStopSignal(t *testing.T) {
	rt := needRuntime(t)
	spec := newSpec(t, rt, "sh", "-c", "trap 'exit 3' USR1; while true; do sleep 0.1; done")
	spec.Image.StopSignal = "SIGUSR1"
	run(t, rt, spec)
	waitState(t, rt, spec.ID, StateRunning, 5*time.Second)
	time.Sleep(200 * time.Millisecond)
	if err := rt.StopContainer(context.Background(), spec.ID, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if st := waitState(t, rt, spec.ID, StateExited, time.Second); st.ExitCode != 3 {
		t.Errorf("exit %d, want 3 (USR1 trap)", st.ExitCode)
	}
}

func TestContainerOOMKilled(t *testing.T) {
	rt := needRuntime(t)
	spec := newSpec(t, rt, "sh", "-c", `x=$(head -c 100000000 /dev/zero | tr "\0" "x"); echo survived`)
	spec.Resources.MemoryLimit = 32 << 20
	run(t, rt, spec)
	st := waitState(t, rt, spec.ID, StateExited, 30*time.Second)
	if st.ExitCode != 137 || st.Reason != ReasonOOMKilled {
		t.Errorf("exit %d reason %q, want 137 OOMKilled", st.ExitCode, st.Reason)
	}
	// The fallback used after a kelp restart that missed the event: the
	// cgroup lives until the task is deleted and counted the kill.
	if !rt.cgroupOOMKilled(filepath.Join(spec.CgroupParent, spec.ID)) {
		t.Error("memory.oom_control does not show the OOM kill")
	}
}

func TestContainerResourcesInCgroup(t *testing.T) {
	rt := needRuntime(t)
	spec := newSpec(t, rt, "sleep", "1000")
	spec.Resources = Resources{CPUShares: 512, CPUQuota: 50000, CPUPeriod: 100000, MemoryLimit: 64 << 20}
	run(t, rt, spec)
	waitState(t, rt, spec.ID, StateRunning, 5*time.Second)
	cg := filepath.Join(spec.CgroupParent, spec.ID)
	// runc state lives in this node's own root, not /run/containerd/runc.
	if _, err := os.Stat(filepath.Join(rt.opts.StateDir, "runc", Namespace, spec.ID)); err != nil {
		t.Errorf("runc state not under the node's runc root: %v", err)
	}
	files := map[string]string{
		"cpu/cpu.cfs_quota_us":               "50000",
		"cpu/cpu.cfs_period_us":              "100000",
		"cpu/cpu.shares":                     "512",
		"memory/memory.limit_in_bytes":       "67108864",
		"memory/memory.oom_control":          "", // exists
		"pids/cgroup.procs":                  "", // exists
		"devices/devices.list":               "", // exists
		"cpuacct/cpuacct.usage":              "", // exists
		"freezer/freezer.state":              "THAWED",
		"blkio/blkio.weight":                 "", // exists
		"cpuset/cpuset.cpus":                 "", // exists
		"memory/memory.memsw.limit_in_bytes": "",
	}
	if rt.Cgroups().Version == cgroups.V2 {
		// One hierarchy: the same limits as runc converts them.
		files = map[string]string{
			"memory.swap.max": "0", // swap = the limit: no swap (without swap accounting, not there)
			"cpu.max":         "50000 100000",
			"cpu.weight":      "20", // 512 shares
			"memory.max":      "67108864",
			"memory.events":   "", // exists
			"pids.current":    "", // exists
			"cgroup.procs":    "", // exists
			"cpuset.cpus":     "", // exists
		}
	}
	for file, want := range files {
		dir, f := filepath.Split(file)
		b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", dir, cg, f))
		if err != nil {
			if strings.Contains(file, "memsw") || strings.Contains(file, "blkio") || strings.Contains(file, "swap.max") {
				continue // optional in some kernels (swap accounting)
			}
			t.Errorf("%s: %v", file, err)
			continue
		}
		if want != "" && strings.TrimSpace(string(b)) != want {
			t.Errorf("%s = %q, want %q", file, strings.TrimSpace(string(b)), want)
		}
	}
	if err := rt.StopContainer(context.Background(), spec.ID, 0); err != nil {
		t.Fatal(err)
	}
	if err := rt.RemoveContainer(context.Background(), spec.ID); err != nil {
		t.Fatal(err)
	}
	gone := filepath.Join("/sys/fs/cgroup/cpu", cg)
	if rt.Cgroups().Version == cgroups.V2 {
		gone = filepath.Join("/sys/fs/cgroup", cg)
	}
	if _, err := os.Stat(gone); !os.IsNotExist(err) {
		t.Errorf("cgroup %s left behind: %v", cg, err)
	}
}

func TestContainerCommandArgsEnvPrecedence(t *testing.T) {
	rt := needRuntime(t)
	img := testImage()
	img.Entrypoint = []string{"sh", "-c"}
	img.Cmd = []string{"echo image-cmd $FOO $BAR; pwd"}
	cases := []struct {
		name          string
		command, args []string
		want          string
	}{
		{"image", nil, nil, "image-cmd pod image"},
		{"args", nil, []string{"echo args $FOO"}, "args pod"},
		{"command", []string{"echo", "cmd"}, nil, "cmd"},
		{"command+args", []string{"sh", "-c"}, []string{"echo both $BAR"}, "both image"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			spec := newSpec(t, rt)
			spec.Image, spec.Command, spec.Args = img, c.command, c.args
			spec.Env = []string{"FOO=pod"}
			spec.WorkingDir = "/tmp"
			run(t, rt, spec)
			st := waitState(t, rt, spec.ID, StateExited, 10*time.Second)
			if st.ExitCode != 0 {
				t.Fatalf("exit %d", st.ExitCode)
			}
			line := criLineRE.FindStringSubmatch(readLog(t, spec.LogPath, 1)[0])
			if line == nil || line[4] != c.want {
				t.Errorf("first log line %v, want %q", line, c.want)
			}
			if c.name == "image" {
				lines := readLog(t, spec.LogPath, 2)
				if !strings.HasSuffix(lines[1], " /tmp") {
					t.Errorf("working dir line %q", lines[1])
				}
			}
		})
	}
}

func TestContainerReadOnlyRootfsAndMounts(t *testing.T) {
	rt := needRuntime(t)
	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "hosts"), []byte("127.0.0.1 kelp-test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The container's own memory limit, read-only, where each version has it.
	memFile := "/sys/fs/cgroup/memory/memory.limit_in_bytes"
	if rt.Cgroups().Version == cgroups.V2 {
		memFile = "/sys/fs/cgroup/memory.max"
	}
	spec := newSpec(t, rt, "sh", "-c", `
		echo x > /x 2>/dev/null && exit 10
		echo y > /scratch/y || exit 11
		grep -q kelp-test /etc/hosts || exit 12
		echo z > /etc/hosts 2>/dev/null && exit 13
		echo w > /data/w || exit 14
		ls `+memFile+` >/dev/null || exit 15
		echo 1 > `+memFile+` 2>/dev/null && exit 16
		exit 0`)
	spec.Security.ReadOnlyRootfs = true
	spec.Mounts = []Mount{
		{Destination: "/scratch", Type: "tmpfs"},
		{Source: filepath.Join(host, "hosts"), Destination: "/etc/hosts", ReadOnly: true},
		{Source: host, Destination: "/data"},
	}
	run(t, rt, spec)
	st := waitState(t, rt, spec.ID, StateExited, 10*time.Second)
	if st.ExitCode != 0 {
		t.Errorf("exit %d (see script for which check failed)", st.ExitCode)
	}
	if _, err := os.Stat(filepath.Join(host, "w")); err != nil {
		t.Errorf("write through bind mount: %v", err)
	}
}

func TestContainerRemoveIdempotentAndNotFound(t *testing.T) {
	rt := needRuntime(t)
	ctx := context.Background()
	spec := newSpec(t, rt, "sleep", "1000")
	if err := rt.CreateContainer(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if st, err := rt.ContainerStatus(ctx, spec.ID); err != nil || st.State != StateCreated {
		t.Fatalf("status %+v %v, want created", st, err)
	}
	if err := rt.StartContainer(ctx, spec.ID); err != nil {
		t.Fatal(err)
	}
	waitState(t, rt, spec.ID, StateRunning, 5*time.Second)
	list, err := rt.ListContainers(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range list {
		found = found || (c.ID == spec.ID && c.State == StateRunning)
	}
	if !found {
		t.Errorf("running container missing from list %v", list)
	}
	// A label filter keeps exactly the matching containers.
	mine, err := rt.ListContainers(ctx, map[string]string{"test": t.Name()})
	if err != nil || len(mine) != 1 || mine[0].ID != spec.ID {
		t.Errorf("list by label: %v %v", mine, err)
	}
	if none, err := rt.ListContainers(ctx, map[string]string{"test": "no-such-test"}); err != nil || len(none) != 0 {
		t.Errorf("list by a label nobody has: %v %v", none, err)
	}
	for i := 0; i < 2; i++ { // removing a running container kills it
		if err := rt.RemoveContainer(ctx, spec.ID); err != nil {
			t.Fatalf("remove #%d: %v", i, err)
		}
	}
	if _, err := rt.ContainerStatus(ctx, spec.ID); !IsNotFound(err) {
		t.Errorf("status after remove: %v, want not found", err)
	}
	if err := rt.StopContainer(ctx, spec.ID, time.Second); !IsNotFound(err) {
		t.Errorf("stop after remove: %v, want not found", err)
	}
}

func TestContainerSecurityContext(t *testing.T) {
	rt := needRuntime(t)
	uid, gid := int64(65534), int64(1234)
	spec := newSpec(t, rt, "sleep", "1000")
	spec.Hostname = "kelp-pod"
	spec.Security = Security{RunAsUser: &uid, RunAsGroup: &gid, SupplementalGroups: []int64{4321}, NoNewPrivileges: true}
	run(t, rt, spec)
	waitState(t, rt, spec.ID, StateRunning, 5*time.Second)
	out, code := execOut(t, rt, spec.ID, "sh", "-c", "id -u; id -g; id -G; grep NoNewPrivs /proc/self/status")
	if code != 0 || !strings.Contains(out, "65534\n1234\n") || !strings.Contains(out, "4321") || !strings.Contains(out, "NoNewPrivs:\t1") {
		t.Errorf("exec: %d %q", code, out)
	}

	priv := newSpec(t, rt, "sleep", "1000")
	priv.Security = Security{CapDrop: []string{"ALL"}, CapAdd: []string{"net_admin"}}
	run(t, rt, priv)
	waitState(t, rt, priv.ID, StateRunning, 5*time.Second)
	out, _ = execOut(t, rt, priv.ID, "grep", "CapBnd", "/proc/self/status")
	if !strings.Contains(out, "0000000000001000") { // CAP_NET_ADMIN = bit 12
		t.Errorf("caps with drop ALL + NET_ADMIN: %q", out)
	}
}

func TestContainerPrivileged(t *testing.T) {
	rt := needRuntime(t)
	spec := newSpec(t, rt, "sleep", "1000")
	spec.Security.Privileged = true
	run(t, rt, spec)
	waitState(t, rt, spec.ID, StateRunning, 5*time.Second)
	out, code := execOut(t, rt, spec.ID, "sh", "-c", "grep CapEff /proc/self/status; ls /dev/null")
	self, _ := os.ReadFile("/proc/self/status")
	want := regexp.MustCompile(`CapEff:\t[0-9a-f]+`).FindString(string(self))
	if code != 0 || want == "" || !strings.Contains(out, want) {
		t.Errorf("privileged exec: %d %q", code, out)
	}
}

func TestContainerTTYLogsAsStdout(t *testing.T) {
	rt := needRuntime(t)
	spec := newSpec(t, rt, "sh", "-c", "test -t 1 && echo on-tty")
	spec.TTY = true
	run(t, rt, spec)
	st := waitState(t, rt, spec.ID, StateExited, 10*time.Second)
	if st.ExitCode != 0 {
		t.Errorf("exit %d: stdout is not a terminal", st.ExitCode)
	}
	m := criLineRE.FindStringSubmatch(readLog(t, spec.LogPath, 1)[0])
	if m == nil || m[2] != "stdout" || m[4] != "on-tty" {
		t.Errorf("tty log line %v", m)
	}
}

// pinNetNS creates a network namespace pinned by a bind mount on a file in
// the test's temp dir, as the kelp agent pins pod sandboxes.
func pinNetNS(t *testing.T) (path string, ino uint64) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "netns")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the thread that unshared exits with the
		// goroutine instead of returning to the pool in another netns.
		goruntime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- err
			return
		}
		errc <- unix.Mount(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()), path, "", unix.MS_BIND, "")
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(path, unix.MNT_DETACH) })
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return path, st.Ino
}

func TestContainerJoinsPodNetNS(t *testing.T) {
	rt := needRuntime(t)
	nsPath, ino := pinNetNS(t)
	spec := newSpec(t, rt, "sleep", "1000")
	spec.NetNSPath = nsPath
	run(t, rt, spec)
	waitState(t, rt, spec.ID, StateRunning, 5*time.Second)
	out, code := execOut(t, rt, spec.ID, "readlink", "/proc/self/ns/net")
	if want := fmt.Sprintf("net:[%d]\n", ino); code != 0 || out != want {
		t.Errorf("container netns %q, want %q", out, want)
	}
}

func TestContainerCreateFailureCanBeRetried(t *testing.T) {
	rt := needRuntime(t)
	ctx := context.Background()
	spec := newSpec(t, rt, "true")
	bad := spec
	bad.Mounts = []Mount{{Destination: "/x", Type: "nfs"}} // spec build fails after the snapshot exists
	if err := rt.CreateContainer(ctx, bad); err == nil {
		t.Fatal("bad mount accepted")
	}
	if err := rt.CreateContainer(ctx, spec); err != nil {
		t.Fatalf("retry: %v", err)
	}
	if err := rt.CreateContainer(ctx, spec); err == nil {
		t.Error("duplicate create accepted")
	}
	if err := rt.StartContainer(ctx, spec.ID); err != nil {
		t.Fatal(err)
	}
	if st := waitState(t, rt, spec.ID, StateExited, 10*time.Second); st.ExitCode != 0 {
		t.Errorf("exit %d", st.ExitCode)
	}
}

// A task a previous kelp created and died before starting (containerd
// finished the creation after the client was gone) is started, not met
// with "already exists" forever; a stopped one gives way to a new one.
func TestStartContainerAdoptsALeftTask(t *testing.T) {
	rt := needRuntime(t)
	ctx := rt.ctx(context.Background())
	spec := newSpec(t, rt, "sleep", "1000")
	if err := rt.CreateContainer(ctx, spec); err != nil {
		t.Fatal(err)
	}
	c, err := rt.client.LoadContainer(ctx, spec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.NewTask(ctx, cio.NullIO); err != nil {
		t.Fatal(err)
	}
	if st, err := rt.ContainerStatus(ctx, spec.ID); err != nil || st.State != StateCreated {
		t.Fatalf("a created, unstarted task: %+v %v", st, err)
	}
	if err := rt.StartContainer(ctx, spec.ID); err != nil {
		t.Fatalf("starting a container whose task was left created: %v", err)
	}
	waitState(t, rt, spec.ID, StateRunning, 5*time.Second)
	if err := rt.StopContainer(ctx, spec.ID, 0); err != nil {
		t.Fatal(err)
	}
	waitState(t, rt, spec.ID, StateExited, 5*time.Second)
	if err := rt.StartContainer(ctx, spec.ID); err != nil {
		t.Fatalf("starting a container whose task had stopped: %v", err)
	}
	waitState(t, rt, spec.ID, StateRunning, 5*time.Second)
}

// A container's last output without a newline is in its log while the
// task is still there (the shim holds the pipe open until it is deleted),
// so kubectl logs of a completed pod shows it.
func TestLoggerWritesOutputWithoutNewline(t *testing.T) {
	rt := needRuntime(t)
	spec := newSpec(t, rt, "sh", "-c", "printf no-newline")
	run(t, rt, spec)
	waitState(t, rt, spec.ID, StateExited, 10*time.Second)
	m := criLineRE.FindStringSubmatch(readLog(t, spec.LogPath, 1)[0])
	if m == nil || m[3] != "P" || m[4] != "no-newline" {
		t.Errorf("log line %q, want a P line with no-newline", m)
	}
}
