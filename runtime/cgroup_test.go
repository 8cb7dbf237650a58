package runtime

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kelp-project/kelp/runtime/cgroups"
)

// TestPodCgroupOnHost runs a container in a pod cgroup made by
// EnsurePodCgroup on this host's real cgroups (v1 on these machines):
// the pod-level limits land in the kernel's files, the container's own
// below them, its usage reads back, and both go on removal.
func TestPodCgroupOnHost(t *testing.T) {
	rt := needRuntime(t)
	ctx := context.Background()
	host := rt.Cgroups()
	uid := "cgtest-" + randomHex(3)
	pod := cgroups.Resources{CPUShares: 512, CPUQuota: 100000, CPUPeriod: 100000, MemoryLimit: 128 << 20, PidsLimit: 64}
	parent, err := rt.EnsurePodCgroup(ctx, cgroups.Guaranteed, uid, pod)
	if err != nil {
		t.Fatal(err)
	}
	podDir := host.Layout.Dir(host.Layout.Pod(cgroups.Guaranteed, uid))
	defer func() { _ = rt.RemovePodCgroup(ctx, cgroups.Guaranteed, uid) }()

	spec := newSpec(t, rt, "sleep", "1000")
	spec.CgroupParent = parent
	spec.Resources = Resources{CPUShares: 256, CPUQuota: 50000, CPUPeriod: 100000, MemoryLimit: 64 << 20, PidsLimit: 32}
	run(t, rt, spec)
	waitState(t, rt, spec.ID, StateRunning, 5*time.Second)
	ctrDir := host.Layout.ContainerDir(parent, spec.ID)

	file := func(controller, dir, name string) string {
		p := filepath.Join(host.Root, controller, dir, name)
		if host.Version == cgroups.V2 {
			p = filepath.Join(host.Root, dir, name)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Errorf("reading %s: %v", p, err)
		}
		return strings.TrimSpace(string(b))
	}
	want := map[[3]string]string{}
	if host.Version == cgroups.V2 {
		for dir, v := range map[string][4]string{podDir: {"20", "100000 100000", "134217728", "64"}, ctrDir: {"10", "50000 100000", "67108864", "32"}} {
			want[[3]string{"", dir, "cpu.weight"}] = v[0]
			want[[3]string{"", dir, "cpu.max"}] = v[1]
			want[[3]string{"", dir, "memory.max"}] = v[2]
			want[[3]string{"", dir, "pids.max"}] = v[3]
		}
	} else {
		for dir, v := range map[string][5]string{podDir: {"512", "100000", "100000", "134217728", "64"}, ctrDir: {"256", "50000", "100000", "67108864", "32"}} {
			want[[3]string{"cpu", dir, "cpu.shares"}] = v[0]
			want[[3]string{"cpu", dir, "cpu.cfs_quota_us"}] = v[1]
			want[[3]string{"cpu", dir, "cpu.cfs_period_us"}] = v[2]
			want[[3]string{"memory", dir, "memory.limit_in_bytes"}] = v[3]
			want[[3]string{"pids", dir, "pids.max"}] = v[4]
		}
	}
	for k, v := range want {
		if got := file(k[0], k[1], k[2]); got != v {
			t.Errorf("%s %s/%s = %q, want %q", k[0], k[1], k[2], got, v)
		}
	}
	// The container's process is in the container's cgroup, below the pod's.
	st, err := rt.ContainerStatus(ctx, spec.ID)
	if err != nil {
		t.Fatal(err)
	}
	procs := file("pids", ctrDir, "cgroup.procs")
	if !strings.Contains("\n"+procs+"\n", "\n"+strconv.Itoa(int(st.Pid))+"\n") {
		t.Errorf("pid %d not in %s/cgroup.procs: %q", st.Pid, ctrDir, procs)
	}
	stats, err := rt.ContainerStats(ctx, spec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Pids < 1 || stats.MemoryUsage == 0 || stats.CPUUsageNanos == 0 || stats.OOMKills != 0 {
		t.Errorf("stats %+v", stats)
	}

	if err := rt.StopContainer(ctx, spec.ID, 0); err != nil {
		t.Fatal(err)
	}
	if err := rt.RemoveContainer(ctx, spec.ID); err != nil {
		t.Fatal(err)
	}
	if err := rt.RemovePodCgroup(ctx, cgroups.Guaranteed, uid); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"cpu", "memory", "pids"} {
		p := filepath.Join(host.Root, c, podDir)
		if host.Version == cgroups.V2 {
			p = filepath.Join(host.Root, podDir)
		}
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("pod cgroup %s left: %v", p, err)
		}
	}
}
