package runtime

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/containerd/containerd/containers"
	"github.com/containerd/containerd/namespaces"
	"github.com/containerd/containerd/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/kelp-project/kelp/runtime/cgroups"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden OCI specs in testdata")

// goldenSpec builds the OCI spec of one container with every resource
// the kubelet sets, on a host of version v with driver d, as runc would
// get it from containerd.
func goldenSpec(t *testing.T, v cgroups.Version, d cgroups.Driver) *specs.Spec {
	t.Helper()
	layout, err := cgroups.NewLayout(d, "/kubepods")
	if err != nil {
		t.Fatal(err)
	}
	r := &Runtime{opts: Options{CgroupRoot: "/kubepods", Cgroups: cgroups.Host{Root: cgroups.DefaultRoot, Version: v, Layout: layout, SwapLimit: v == cgroups.V2}}}
	parent := layout.Parent(layout.Pod(cgroups.Burstable, "0a1b-2c3d"))
	spec := ContainerSpec{
		ID:           "0a1b-2c3d-app-0",
		Image:        Image{Ref: "docker.io/library/busybox:1.35", Cmd: []string{"sh"}, Env: []string{"PATH=/bin"}},
		Command:      []string{"sleep", "1000"},
		Env:          []string{"A=b"},
		Hostname:     "web",
		NetNSPath:    "/run/kelp/netns/0a1b-2c3d",
		CgroupParent: parent,
		Mounts:       []Mount{{Source: "/var/lib/kelp/agent/pods/0a1b-2c3d/etc-hosts", Destination: "/etc/hosts"}},
		Resources:    Resources{CPUShares: 256, CPUQuota: 50000, CPUPeriod: 100000, MemoryLimit: 64 << 20, PidsLimit: 512},
	}
	ctx := namespaces.WithNamespace(context.Background(), Namespace)
	s, err := oci.GenerateSpec(ctx, nil, &containers.Container{ID: spec.ID}, r.specOpts(spec)...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSpecGolden compares the whole spec with testdata/spec-<v>-<driver>.json
// (go test -run TestSpecGolden -update rewrites them), after checking the
// cgroup parts by hand, so a golden file never blesses a wrong spec.
func TestSpecGolden(t *testing.T) {
	for _, c := range []struct {
		v          cgroups.Version
		d          cgroups.Driver
		cgroupPath string
	}{
		{cgroups.V1, cgroups.Cgroupfs, "/kubepods/burstable/pod0a1b-2c3d/0a1b-2c3d-app-0"},
		{cgroups.V2, cgroups.Cgroupfs, "/kubepods/burstable/pod0a1b-2c3d/0a1b-2c3d-app-0"},
		{cgroups.V1, cgroups.Systemd, "kubepods-burstable-pod0a1b_2c3d.slice:cri-containerd:0a1b-2c3d-app-0"},
		{cgroups.V2, cgroups.Systemd, "kubepods-burstable-pod0a1b_2c3d.slice:cri-containerd:0a1b-2c3d-app-0"},
	} {
		name := "spec-" + c.v.String() + "-" + string(c.d)
		t.Run(name, func(t *testing.T) {
			s := goldenSpec(t, c.v, c.d)
			if s.Linux.CgroupsPath != c.cgroupPath {
				t.Errorf("cgroupsPath %q, want %q", s.Linux.CgroupsPath, c.cgroupPath)
			}
			res := s.Linux.Resources
			if res.CPU == nil || *res.CPU.Shares != 256 || *res.CPU.Quota != 50000 || *res.CPU.Period != 100000 {
				t.Errorf("cpu %+v", res.CPU)
			}
			if res.Memory == nil || *res.Memory.Limit != 64<<20 {
				t.Errorf("memory %+v", res.Memory)
			}
			// No swap beyond the limit on v2; v1's memsw is left alone.
			if c.v == cgroups.V2 && (res.Memory.Swap == nil || *res.Memory.Swap != 64<<20) {
				t.Errorf("v2 swap %v, want the memory limit", res.Memory.Swap)
			}
			if c.v == cgroups.V1 && res.Memory.Swap != nil {
				t.Errorf("v1 swap set: %d", *res.Memory.Swap)
			}
			if res.Pids == nil || res.Pids.Limit != 512 {
				t.Errorf("pids %+v", res.Pids)
			}
			cgroupNS := false
			for _, ns := range s.Linux.Namespaces {
				cgroupNS = cgroupNS || ns.Type == specs.CgroupNamespace
			}
			if cgroupNS != (c.v == cgroups.V2) {
				t.Errorf("cgroup namespace %v on %s", cgroupNS, c.v)
			}
			var mount *specs.Mount
			for i, m := range s.Mounts {
				if m.Destination == "/sys/fs/cgroup" {
					mount = &s.Mounts[i]
				}
			}
			if mount == nil || mount.Type != "cgroup" || !reflect.DeepEqual(mount.Options, []string{"nosuid", "noexec", "nodev", "relatime", "ro"}) {
				t.Errorf("/sys/fs/cgroup mount %+v", mount)
			}
			got, err := json.MarshalIndent(s, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			file := filepath.Join("testdata", name+".json")
			if *updateGolden {
				if err := os.WriteFile(file, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (go test -run TestSpecGolden -update writes it)", err)
			}
			if string(got) != string(want) {
				t.Errorf("spec differs from %s (-update rewrites it after a deliberate change):\n%s", file, got)
			}
		})
	}
}

// Without swap accounting (no memory.swap.max), no swap limit: runc
// would fail to write it.
func TestSpecNoSwapLimitWithoutSwapAccounting(t *testing.T) {
	l, err := cgroups.NewLayout(cgroups.Cgroupfs, "/kubepods")
	if err != nil {
		t.Fatal(err)
	}
	r := &Runtime{opts: Options{Cgroups: cgroups.Host{Root: cgroups.DefaultRoot, Version: cgroups.V2, Layout: l}}}
	ctx := namespaces.WithNamespace(context.Background(), Namespace)
	s, err := oci.GenerateSpec(ctx, nil, &containers.Container{ID: "c1"}, r.specOpts(ContainerSpec{ID: "c1", Resources: Resources{MemoryLimit: 1 << 30}})...)
	if err != nil {
		t.Fatal(err)
	}
	if m := s.Linux.Resources.Memory; m == nil || *m.Limit != 1<<30 || m.Swap != nil {
		t.Errorf("memory %+v, want the limit and no swap", m)
	}
}

// A pod's containers all go under the pod's cgroup; a spec without a
// parent goes under the pods' root, in either driver's form.
func TestSpecCgroupParentDefault(t *testing.T) {
	for d, want := range map[cgroups.Driver]string{
		cgroups.Cgroupfs: "/kubepods/c1",
		cgroups.Systemd:  "kubepods.slice:cri-containerd:c1",
	} {
		l, err := cgroups.NewLayout(d, "/kubepods")
		if err != nil {
			t.Fatal(err)
		}
		r := &Runtime{opts: Options{Cgroups: cgroups.Host{Root: cgroups.DefaultRoot, Version: cgroups.V2, Layout: l}}}
		if got := r.cgroupPath(ContainerSpec{ID: "c1"}); got != want {
			t.Errorf("%s: %q, want %q", d, got, want)
		}
	}
}

// A pod's sysctls reach the OCI spec, for runc to write inside the
// container's namespaces.
func TestSpecSysctls(t *testing.T) {
	l, err := cgroups.NewLayout(cgroups.Cgroupfs, "/kubepods")
	if err != nil {
		t.Fatal(err)
	}
	r := &Runtime{opts: Options{Cgroups: cgroups.Host{Root: cgroups.DefaultRoot, Version: cgroups.V1, Layout: l}}}
	ctx := namespaces.WithNamespace(context.Background(), Namespace)
	want := map[string]string{"kernel.shm_rmid_forced": "1", "net.ipv4.tcp_syncookies": "0"}
	s, err := oci.GenerateSpec(ctx, nil, &containers.Container{ID: "c1"}, r.specOpts(ContainerSpec{ID: "c1", Sysctls: want})...)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range want {
		if s.Linux.Sysctl[k] != v {
			t.Errorf("sysctl %s = %q, want %q (spec: %v)", k, s.Linux.Sysctl[k], v, s.Linux.Sysctl)
		}
	}
}
