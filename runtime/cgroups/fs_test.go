package cgroups

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The full set of limits the kubelet sets on a pod with every limit.
var allLimits = Resources{CPUShares: 512, CPUQuota: 50000, CPUPeriod: 100000, MemoryLimit: 128 << 20, PidsLimit: 256}

func TestApplyV2(t *testing.T) {
	root := fakeV2(t, "cpuset cpu io memory hugetlb pids")
	f := &FS{Root: root, Version: V2}
	must(t, f.Apply("kubepods/burstable/podA", allLimits))
	// Each level enables the limit controllers for the next, so the
	// pod's files exist; others (cpuset, io) are left to runc.
	for _, d := range []string{"", "kubepods", "kubepods/burstable"} {
		if got := read(t, filepath.Join(root, d, "cgroup.subtree_control")); got != "+cpu +memory +pids" {
			t.Errorf("%s/cgroup.subtree_control = %q", d, got)
		}
	}
	wantFiles(t, filepath.Join(root, "kubepods/burstable/podA"), map[string]string{
		"cpu.weight": "20", // 512 shares
		"cpu.max":    "50000 100000",
		"memory.max": "134217728",
		"pids.max":   "256",
	})
	// Applying without limits clears them; no shares leaves the weight.
	must(t, f.Apply("kubepods/burstable/podA", Resources{}))
	wantFiles(t, filepath.Join(root, "kubepods/burstable/podA"), map[string]string{
		"cpu.weight": "20", "cpu.max": "max 100000", "memory.max": "max", "pids.max": "max",
	})
	// A controller enabled already is not written again.
	write(t, filepath.Join(root, "kubepods", "cgroup.subtree_control"), "cpu memory pids")
	must(t, f.Apply("kubepods/besteffort", Resources{CPUShares: 2}))
	if got := read(t, filepath.Join(root, "kubepods", "cgroup.subtree_control")); got != "cpu memory pids" {
		t.Errorf("enabled controllers rewritten: %q", got)
	}
	wantFiles(t, filepath.Join(root, "kubepods/besteffort"), map[string]string{"cpu.weight": "1"})
}

func TestApplyV2WithoutMemoryController(t *testing.T) {
	root := fakeV2(t, "cpu pids")
	f := &FS{Root: root, Version: V2}
	must(t, f.Apply("kubepods/podG", allLimits))
	if got := read(t, filepath.Join(root, "cgroup.subtree_control")); got != "+cpu +pids" {
		t.Errorf("subtree_control %q", got)
	}
	if _, err := os.Stat(filepath.Join(root, "kubepods/podG/memory.max")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("memory.max written without the memory controller: %v", err)
	}
	wantFiles(t, filepath.Join(root, "kubepods/podG"), map[string]string{"cpu.max": "50000 100000", "pids.max": "256"})
}

func TestApplyV1(t *testing.T) {
	root := fakeV1(t, "cpu", "cpuacct", "cpuset", "memory", "pids")
	f := &FS{Root: root, Version: V1}
	must(t, f.Apply("kubepods/podG", allLimits))
	wantFiles(t, filepath.Join(root, "cpu,cpuacct/kubepods/podG"), map[string]string{
		"cpu.shares": "512", "cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": "50000",
	})
	wantFiles(t, filepath.Join(root, "memory/kubepods/podG"), map[string]string{"memory.limit_in_bytes": "134217728"})
	wantFiles(t, filepath.Join(root, "pids/kubepods/podG"), map[string]string{"pids.max": "256"})
	// runc makes the container's cgroup in cpuset (copying the parent's
	// cpus and mems): kelp leaves cpuset alone.
	if _, err := os.Stat(filepath.Join(root, "cpuset/kubepods")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cpuset level made: %v", err)
	}
	must(t, f.Apply("kubepods/podG", Resources{CPUShares: 2}))
	wantFiles(t, filepath.Join(root, "cpu,cpuacct/kubepods/podG"), map[string]string{"cpu.shares": "2", "cpu.cfs_quota_us": "-1"})
	wantFiles(t, filepath.Join(root, "memory/kubepods/podG"), map[string]string{"memory.limit_in_bytes": "-1"})
	wantFiles(t, filepath.Join(root, "pids/kubepods/podG"), map[string]string{"pids.max": "max"})
}

func TestStatsV2(t *testing.T) {
	root := fakeV2(t, "cpu memory pids")
	dir := "kubepods/burstable/podA/c1"
	d := filepath.Join(root, dir)
	write(t, filepath.Join(d, "cpu.stat"), "usage_usec 2500\nuser_usec 2000\nsystem_usec 500\n")
	write(t, filepath.Join(d, "memory.current"), "10485760\n")
	write(t, filepath.Join(d, "memory.stat"), "anon 6291456\nfile 4194304\nactive_file 1048576\ninactive_file 3145728\n")
	write(t, filepath.Join(d, "pids.current"), "3\n")
	write(t, filepath.Join(d, "memory.events"), "low 0\nhigh 0\nmax 4\noom 1\noom_kill 0\n")
	f := &FS{Root: root, Version: V2}
	s, err := f.Stats(dir)
	must(t, err)
	want := Stats{CPUUsageNanos: 2500000, MemoryUsage: 10485760, MemoryWorkingSet: 10485760 - 3145728, Pids: 3}
	if s != want {
		t.Errorf("stats %+v, want %+v", s, want)
	}
	// "oom 1" alone is a limit hit with no kill; oom_kill is the kill.
	if f.OOMKilled(dir) {
		t.Error("OOM-killed with oom_kill 0")
	}
	write(t, filepath.Join(d, "memory.events"), "low 0\nhigh 0\nmax 9\noom 2\noom_kill 1\noom_group_kill 0\n")
	if !f.OOMKilled(dir) {
		t.Error("oom_kill 1 not seen")
	}
	if f.OOMKilled("kubepods/gone") {
		t.Error("a missing cgroup counted as OOM-killed")
	}
	if _, err := f.Stats("kubepods/gone"); err == nil {
		t.Error("stats of a missing cgroup")
	}
}

func TestStatsV1(t *testing.T) {
	root := fakeV1(t, "cpu", "cpuacct", "memory", "pids")
	dir := "kubepods/podG/c1"
	write(t, filepath.Join(root, "cpuacct", dir, "cpuacct.usage"), "123456789\n")
	write(t, filepath.Join(root, "memory", dir, "memory.usage_in_bytes"), "8388608\n")
	write(t, filepath.Join(root, "memory", dir, "memory.stat"), "cache 4096\ninactive_file 1\ntotal_inactive_file 1048576\n")
	write(t, filepath.Join(root, "pids", dir, "pids.current"), "2\n")
	write(t, filepath.Join(root, "memory", dir, "memory.oom_control"), "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n")
	f := &FS{Root: root, Version: V1}
	s, err := f.Stats(dir)
	must(t, err)
	want := Stats{CPUUsageNanos: 123456789, MemoryUsage: 8388608, MemoryWorkingSet: 8388608 - 1048576, Pids: 2}
	if s != want {
		t.Errorf("stats %+v, want %+v", s, want)
	}
	if f.OOMKilled(dir) {
		t.Error("OOM-killed with oom_kill 0")
	}
	write(t, filepath.Join(root, "memory", dir, "memory.oom_control"), "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n")
	if !f.OOMKilled(dir) {
		t.Error("oom_kill 2 not seen")
	}
}

func TestRemove(t *testing.T) {
	// Only rmdir removes a cgroup (its files are not files): the fake
	// tree is bare directories, which rmdir removes the same way.
	root := fakeV1(t, "cpu", "cpuacct", "memory")
	for _, h := range []string{"cpu,cpuacct", "memory"} {
		must(t, os.MkdirAll(filepath.Join(root, h, "kubepods/burstable/podA/c1"), 0o755))
		must(t, os.MkdirAll(filepath.Join(root, h, "kubepods/burstable/podB"), 0o755))
	}
	f := &FS{Root: root, Version: V1}
	must(t, f.Remove("kubepods/burstable/podA"))
	for _, h := range []string{"cpu,cpuacct", "memory"} {
		if _, err := os.Stat(filepath.Join(root, h, "kubepods/burstable/podA")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: podA left: %v", h, err)
		}
		if _, err := os.Stat(filepath.Join(root, h, "kubepods/burstable/podB")); err != nil {
			t.Errorf("%s: podB removed: %v", h, err)
		}
	}
	must(t, f.Remove("kubepods/burstable/podA")) // gone already: fine
	if err := f.Remove("/"); err == nil {
		t.Error("removing the root allowed")
	}
	v2 := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(v2, "kubepods/besteffort/podC/c1"), 0o755))
	must(t, (&FS{Root: v2, Version: V2}).Remove("kubepods"))
	if _, err := os.Stat(filepath.Join(v2, "kubepods")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("v2 tree left: %v", err)
	}
}

// fakeSlices records what a systemd would be asked.
type fakeSlices struct {
	calls []string
	res   map[string]Resources
}

func (s *fakeSlices) EnsureSlice(name string, res Resources) error {
	s.calls = append(s.calls, "start "+name)
	if s.res == nil {
		s.res = map[string]Resources{}
	}
	s.res[name] = res
	return nil
}

func (s *fakeSlices) StopSlice(name string) error {
	s.calls = append(s.calls, "stop "+name)
	return nil
}

func TestPodsCgroupfsV2(t *testing.T) {
	root := fakeV2(t, "cpu memory pids")
	h, err := Detect(root, "cgroupfs", filepath.Join(root, "none"), "/kubepods")
	must(t, err)
	p, err := NewPods(h)
	must(t, err)
	for _, c := range []struct {
		q      QOS
		uid    string
		res    Resources
		parent string
	}{
		{Guaranteed, "g", allLimits, "/kubepods/podg"},
		{Burstable, "b", Resources{CPUShares: 102}, "/kubepods/burstable/podb"},
		{BestEffort, "e", Resources{CPUShares: 2}, "/kubepods/besteffort/pode"},
	} {
		parent, err := p.EnsurePod(c.q, c.uid, c.res)
		if err != nil || parent != c.parent {
			t.Errorf("%q: parent %q %v, want %q", c.q, parent, err, c.parent)
		}
	}
	wantFiles(t, filepath.Join(root, "kubepods/podg"), map[string]string{"cpu.weight": "20", "cpu.max": "50000 100000", "memory.max": "134217728", "pids.max": "256"})
	wantFiles(t, filepath.Join(root, "kubepods/burstable/podb"), map[string]string{"cpu.weight": "4", "cpu.max": "max 100000", "memory.max": "max"})
	wantFiles(t, filepath.Join(root, "kubepods/besteffort"), map[string]string{"cpu.weight": "1"})
	wantFiles(t, filepath.Join(root, "kubepods/besteffort/pode"), map[string]string{"cpu.weight": "1"})
	// The pods' root and the burstable level carry no limit of their own.
	wantFiles(t, filepath.Join(root, "kubepods"), map[string]string{"cpu.max": "max 100000", "memory.max": "max"})
	if _, err := os.Stat(filepath.Join(root, "kubepods/burstable/cpu.weight")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("burstable level weighted: %v", err)
	}
	if _, err := p.EnsurePod("gold", "x", Resources{}); err == nil {
		t.Error("unknown QoS accepted")
	}
	if _, err := p.EnsurePod(Burstable, "", Resources{}); err == nil {
		t.Error("empty UID accepted")
	}
}

func TestPodsSystemd(t *testing.T) {
	root := fakeV2(t, "cpu memory pids")
	l, err := NewLayout(Systemd, "/kubepods")
	must(t, err)
	slices := &fakeSlices{}
	p := &Pods{Layout: l, FS: &FS{Root: root, Version: V2}, Slices: slices}
	parent, err := p.EnsurePod(Burstable, "ab-cd", allLimits)
	must(t, err)
	if parent != "kubepods-burstable-podab_cd.slice" {
		t.Errorf("parent %q", parent)
	}
	wantCalls := []string{"start kubepods.slice", "start kubepods-burstable.slice", "start kubepods-burstable-podab_cd.slice"}
	if !reflect.DeepEqual(slices.calls, wantCalls) {
		t.Errorf("systemd calls %v, want %v", slices.calls, wantCalls)
	}
	if slices.res["kubepods-burstable-podab_cd.slice"] != allLimits {
		t.Errorf("pod slice properties %+v", slices.res["kubepods-burstable-podab_cd.slice"])
	}
	// The same values in the files, where systemd put the slice.
	wantFiles(t, filepath.Join(root, "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podab_cd.slice"),
		map[string]string{"cpu.weight": "20", "cpu.max": "50000 100000", "memory.max": "134217728", "pids.max": "256"})
	slices.calls = nil
	// On cgroupfs a cgroup's files go with its rmdir; the fake tree's are
	// real files, removed first.
	podDir := filepath.Join(root, l.Dir(l.Pod(Burstable, "ab-cd")))
	files, _ := os.ReadDir(podDir)
	for _, f := range files {
		must(t, os.Remove(filepath.Join(podDir, f.Name())))
	}
	if err := p.RemovePod(Burstable, "ab-cd"); err != nil {
		t.Errorf("RemovePod: %v", err)
	}
	if _, err := os.Stat(podDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pod slice's directory left: %v", err)
	}
	if !reflect.DeepEqual(slices.calls, []string{"stop kubepods-burstable-podab_cd.slice"}) {
		t.Errorf("systemd calls %v", slices.calls)
	}
}

func TestPodsRemoveV1(t *testing.T) {
	root := fakeV1(t, "cpu", "cpuacct", "memory", "pids")
	h, err := Detect(root, "cgroupfs", filepath.Join(root, "none"), "/kubepods")
	must(t, err)
	p, err := NewPods(h)
	must(t, err)
	// runc's container cgroup below the pod, bare (it is gone by now in
	// life; here it shows the removal goes deepest first).
	for _, c := range []string{"cpu,cpuacct", "memory", "pids"} {
		must(t, os.MkdirAll(filepath.Join(root, c, "kubepods/besteffort/podq/c1"), 0o755))
	}
	must(t, p.RemovePod(BestEffort, "q"))
	for _, c := range []string{"cpu,cpuacct", "memory", "pids"} {
		if _, err := os.Stat(filepath.Join(root, c, "kubepods/besteffort/podq")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: pod cgroup left: %v", c, err)
		}
	}
	must(t, p.RemoveAll())
	ents, _ := os.ReadDir(filepath.Join(root, "memory"))
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "kubepods") {
			t.Errorf("RemoveAll left %s", e.Name())
		}
	}
}

func TestPodsRemoveOrphans(t *testing.T) {
	for _, d := range []Driver{Cgroupfs, Systemd} {
		t.Run(string(d), func(t *testing.T) {
			root := t.TempDir()
			l, err := NewLayout(d, "/kubepods")
			must(t, err)
			slices := &fakeSlices{}
			p := &Pods{Layout: l, FS: &FS{Root: root, Version: V2}}
			if d == Systemd {
				p.Slices = slices
			}
			// Pods kept and gone in each QoS level, as bare directories
			// (see TestRemove), with the QoS levels themselves under the
			// root, which must never be taken for pods.
			pods := map[string]QOS{"keep-g": Guaranteed, "gone-g": Guaranteed, "keep-b": Burstable, "gone-b": Burstable, "gone-e": BestEffort}
			for uid, q := range pods {
				must(t, os.MkdirAll(filepath.Join(root, l.Dir(l.Pod(q, uid))), 0o755))
			}
			// A pod missing from keep whose cgroup is in use (a file
			// stands for its processes: rmdir fails) is left running.
			busy := filepath.Join(root, l.Dir(l.Pod(Burstable, "busy")))
			write(t, filepath.Join(busy, "c1", "cgroup.procs"), "42\n")
			if err := p.RemoveOrphans(map[string]bool{"keep-g": true, "keep-b": true}); err == nil {
				t.Error("no error for the busy cgroup")
			}
			if _, err := os.Stat(busy); err != nil {
				t.Errorf("busy pod cgroup removed: %v", err)
			}
			for uid, q := range pods {
				_, err := os.Stat(filepath.Join(root, l.Dir(l.Pod(q, uid))))
				if gone := errors.Is(err, os.ErrNotExist); gone != strings.HasPrefix(uid, "gone") {
					t.Errorf("pod %s (%q): removed %v", uid, q, gone)
				}
			}
			for _, q := range []QOS{Burstable, BestEffort} {
				if _, err := os.Stat(filepath.Join(root, l.Dir(l.QoS(q)))); err != nil {
					t.Errorf("QoS level %q removed: %v", q, err)
				}
			}
			if d == Systemd {
				want := []string{"stop kubepods-pod" + "gone_g.slice", "stop kubepods-burstable-podgone_b.slice", "stop kubepods-besteffort-podgone_e.slice"}
				if !reflect.DeepEqual(slices.calls, want) {
					t.Errorf("systemd calls %v, want %v", slices.calls, want)
				}
			}
		})
	}
}
