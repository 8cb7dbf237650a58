package cgroups

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// fakeV2 is a unified hierarchy as the kernel shows its root: the
// controllers available, none enabled for children yet.
func fakeV2(t *testing.T, controllers string) string {
	t.Helper()
	root := t.TempDir()
	write(t, filepath.Join(root, "cgroup.controllers"), controllers)
	write(t, filepath.Join(root, "cgroup.subtree_control"), "")
	return root
}

// fakeV1 is a legacy hierarchy: one mount per controller (cpu and
// cpuacct co-mounted with symlinks, as systemd mounts them).
func fakeV1(t *testing.T, controllers ...string) string {
	t.Helper()
	root := t.TempDir()
	for _, c := range controllers {
		if c == "cpu" || c == "cpuacct" {
			continue
		}
		write(t, filepath.Join(root, c, "cgroup.procs"), "")
	}
	if len(controllers) > 0 && (contains(controllers, "cpu") || contains(controllers, "cpuacct")) {
		write(t, filepath.Join(root, "cpu,cpuacct", "cgroup.procs"), "")
		must(t, os.Symlink("cpu,cpuacct", filepath.Join(root, "cpu")))
		must(t, os.Symlink("cpu,cpuacct", filepath.Join(root, "cpuacct")))
	}
	return root
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

func write(t *testing.T, p, s string) {
	t.Helper()
	must(t, os.MkdirAll(filepath.Dir(p), 0o755))
	must(t, os.WriteFile(p, []byte(s), 0o644))
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("reading %s: %v", p, err)
	}
	return string(b)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// wantFiles checks each file under dir holds its value.
func wantFiles(t *testing.T, dir string, want map[string]string) {
	t.Helper()
	for name, v := range want {
		if got := read(t, filepath.Join(dir, name)); got != v {
			t.Errorf("%s/%s = %q, want %q", dir, name, got, v)
		}
	}
}

func TestDetectVersion(t *testing.T) {
	if v, err := DetectVersion(fakeV2(t, "cpu memory pids")); err != nil || v != V2 {
		t.Errorf("unified: %v %v", v, err)
	}
	hybrid := fakeV1(t, "cpu", "memory", "pids")
	write(t, filepath.Join(hybrid, "unified", "cgroup.controllers"), "") // v2 mount without controllers
	if v, err := DetectVersion(hybrid); err != nil || v != V1 {
		t.Errorf("hybrid: %v %v", v, err)
	}
	if v, err := DetectVersion(fakeV1(t, "memory")); err != nil || v != V1 {
		t.Errorf("legacy: %v %v", v, err)
	}
	if _, err := DetectVersion(t.TempDir()); err == nil {
		t.Error("no cgroup filesystem detected as one")
	}
}

func TestResolveDriver(t *testing.T) {
	running := t.TempDir() // stands for /run/systemd/system
	absent := filepath.Join(running, "none")
	for _, c := range []struct {
		flag, dir string
		want      Driver
		err       bool
	}{
		{"", absent, Cgroupfs, false},
		{"auto", absent, Cgroupfs, false},
		{"auto", running, Systemd, false},
		{"", running, Systemd, false},
		{"cgroupfs", running, Cgroupfs, false},
		{"systemd", running, Systemd, false},
		{"systemd", absent, "", true},
		{"cgroupsfs", absent, "", true},
	} {
		d, err := ResolveDriver(c.flag, c.dir)
		if d != c.want || (err != nil) != c.err {
			t.Errorf("ResolveDriver(%q, systemd running %v) = %q, %v", c.flag, c.dir == running, d, err)
		}
	}
}

func TestDetectHost(t *testing.T) {
	root := fakeV2(t, "cpu memory pids")
	h, err := Detect(root, "auto", filepath.Join(root, "no-systemd"), "/kubepods")
	if err != nil || h.Version != V2 || h.Layout.Driver != Cgroupfs || h.Root != root {
		t.Fatalf("Detect: %+v %v", h, err)
	}
	if !h.MemoryController() {
		t.Error("memory in cgroup.controllers not seen")
	}
	if _, err := Detect(root, "auto", filepath.Join(root, "no-systemd"), "kubepods"); err == nil {
		t.Error("relative cgroup root accepted")
	}
	if _, err := Detect(root, "auto", filepath.Join(root, "no-systemd"), "/"); err == nil {
		t.Error("the hierarchy's root accepted as the pods' cgroup")
	}
}

func TestMemoryControllerMissing(t *testing.T) {
	// A Raspberry Pi without cgroup_enable=memory: no memory controller.
	if (Host{Root: fakeV2(t, "cpuset cpu io pids"), Version: V2}).MemoryController() {
		t.Error("v2 without memory in cgroup.controllers")
	}
	if (Host{Root: fakeV1(t, "cpu", "pids"), Version: V1}).MemoryController() {
		t.Error("v1 without a memory mount")
	}
	if !(Host{Root: fakeV1(t, "cpu", "memory"), Version: V1}).MemoryController() {
		t.Error("v1 memory mount not seen")
	}
}

func TestSharesToWeight(t *testing.T) {
	for shares, want := range map[uint64]uint64{0: 0, 1: 1, 2: 1, 1024: 39, 102: 4, 262144: 10000, 1 << 20: 10000} {
		if got := SharesToWeight(shares); got != want {
			t.Errorf("SharesToWeight(%d) = %d, want %d", shares, got, want)
		}
	}
}

func TestLayoutCgroupfs(t *testing.T) {
	l, err := NewLayout(Cgroupfs, "/kubepods")
	must(t, err)
	uid := "1f0e-77"
	for _, c := range []struct {
		q                QOS
		parent, dir, ctr string
	}{
		{Guaranteed, "/kubepods/pod1f0e-77", "kubepods/pod1f0e-77", "/kubepods/pod1f0e-77/c1"},
		{Burstable, "/kubepods/burstable/pod1f0e-77", "kubepods/burstable/pod1f0e-77", "/kubepods/burstable/pod1f0e-77/c1"},
		{BestEffort, "/kubepods/besteffort/pod1f0e-77", "kubepods/besteffort/pod1f0e-77", "/kubepods/besteffort/pod1f0e-77/c1"},
	} {
		name := l.Pod(c.q, uid)
		if got := l.Parent(name); got != c.parent {
			t.Errorf("%q parent %q, want %q", c.q, got, c.parent)
		}
		if got := l.Dir(name); got != c.dir {
			t.Errorf("%q dir %q, want %q", c.q, got, c.dir)
		}
		if got := l.ContainerPath(l.Parent(name), "c1"); got != c.ctr {
			t.Errorf("%q container path %q, want %q", c.q, got, c.ctr)
		}
		if got := l.ContainerDir(l.Parent(name), "c1"); got != strings.TrimPrefix(c.ctr, "/") {
			t.Errorf("%q container dir %q", c.q, got)
		}
	}
	nested, err := NewLayout(Cgroupfs, "/kelp-lab/node1/")
	must(t, err)
	if got := nested.Dir(nested.QoS(Burstable)); got != "kelp-lab/node1/burstable" {
		t.Errorf("nested root: %q", got)
	}
}

func TestLayoutSystemd(t *testing.T) {
	l, err := NewLayout(Systemd, "/kubepods")
	must(t, err)
	uid := "1f0e-77"
	for _, c := range []struct {
		q           QOS
		parent, dir string
	}{
		{Guaranteed, "kubepods-pod1f0e_77.slice", "kubepods.slice/kubepods-pod1f0e_77.slice"},
		{Burstable, "kubepods-burstable-pod1f0e_77.slice", "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1f0e_77.slice"},
		{BestEffort, "kubepods-besteffort-pod1f0e_77.slice", "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1f0e_77.slice"},
	} {
		name := l.Pod(c.q, uid)
		if got := l.Parent(name); got != c.parent {
			t.Errorf("%q parent %q, want %q", c.q, got, c.parent)
		}
		if got := l.Dir(name); got != c.dir {
			t.Errorf("%q dir %q, want %q", c.q, got, c.dir)
		}
		if got := l.ContainerPath(c.parent, "c1"); got != c.parent+":cri-containerd:c1" {
			t.Errorf("%q container path %q", c.q, got)
		}
		if got := l.ContainerDir(c.parent, "c1"); got != c.dir+"/cri-containerd-c1.scope" {
			t.Errorf("%q container dir %q", c.q, got)
		}
	}
	// A root of several components, with a dash to escape.
	lab, err := NewLayout(Systemd, "/kelp-lab/n1")
	must(t, err)
	if got := lab.Dir(lab.QoS(BestEffort)); got != "kelp_lab.slice/kelp_lab-n1.slice/kelp_lab-n1-besteffort.slice" {
		t.Errorf("lab root: %q", got)
	}
	if got := lab.Parent(lab.Root()); got != "kelp_lab-n1.slice" {
		t.Errorf("lab root parent: %q", got)
	}
}

func TestExpandSlice(t *testing.T) {
	for in, want := range map[string]string{
		"kubepods.slice":                  "kubepods.slice",
		"kubepods-burstable-podx.slice":   "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podx.slice",
		"system.slice":                    "system.slice",
		"-.slice":                         "-.slice",
		"notaslice":                       "notaslice",
		"kubepods-besteffort-pod_a.slice": "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod_a.slice",
	} {
		if got := expandSlice(in); got != want {
			t.Errorf("expandSlice(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSliceProperties(t *testing.T) {
	inf := ^uint64(0)
	res := Resources{CPUShares: 1024, CPUQuota: 25000, CPUPeriod: 100000, MemoryLimit: 64 << 20, PidsLimit: 100}
	props := func(v Version, r Resources) map[string]any {
		m := map[string]any{}
		for _, p := range sliceProperties(v, r) {
			m[p.Name] = p.Value
		}
		return m
	}
	v2 := props(V2, res)
	want2 := map[string]any{"Description": "kelp pod cgroup", "CPUAccounting": true, "MemoryAccounting": true, "TasksAccounting": true,
		"CPUWeight": uint64(39), "CPUQuotaPerSecUSec": uint64(250000), "MemoryMax": uint64(64 << 20), "TasksMax": uint64(100)}
	if !reflect.DeepEqual(v2, want2) {
		t.Errorf("v2 properties %v, want %v", v2, want2)
	}
	v1 := props(V1, res)
	if v1["CPUShares"] != uint64(1024) || v1["MemoryLimit"] != uint64(64<<20) || v1["CPUWeight"] != nil || v1["MemoryMax"] != nil {
		t.Errorf("v1 properties %v", v1)
	}
	// 1 ms of a 100 ms period is 10 ms/s; 1.5 ms is rounded up to 20 ms/s.
	if q := props(V2, Resources{CPUQuota: 1500})["CPUQuotaPerSecUSec"]; q != uint64(20000) {
		t.Errorf("rounded quota %v", q)
	}
	unset := props(V2, Resources{})
	if unset["CPUQuotaPerSecUSec"] != inf || unset["MemoryMax"] != inf || unset["TasksMax"] != inf || unset["CPUWeight"] != nil {
		t.Errorf("unset limits %v", unset)
	}
}

func TestDetectSwapAccounting(t *testing.T) {
	root := fakeV2(t, "cpu memory pids")
	none := filepath.Join(root, "none")
	h, err := Detect(root, "cgroupfs", none, "/kubepods")
	must(t, err)
	if h.SwapLimit {
		t.Error("swap accounting seen without memory.swap.max")
	}
	write(t, filepath.Join(root, "init.scope", "memory.swap.max"), "max\n")
	if h, _ := Detect(root, "cgroupfs", none, "/kubepods"); !h.SwapLimit {
		t.Error("memory.swap.max below the root not seen")
	}
	v1 := fakeV1(t, "memory")
	write(t, filepath.Join(v1, "x", "memory.swap.max"), "")
	if h, _ := Detect(v1, "cgroupfs", none, "/kubepods"); h.SwapLimit {
		t.Error("v1 host with a v2 swap limit")
	}
}
