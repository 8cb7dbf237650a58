// Package cgroups is the node's cgroup stage: which cgroup version the
// host runs (v1, legacy or hybrid, or v2, unified), which driver places
// cgroups (cgroupfs, or systemd when systemd is the init), where pod
// cgroups go (upstream kubelet's layout, see Layout), and the pod-level
// limits, OOM kills and usage that live in cgroup files.
//
// runc creates the containers' own cgroups from the OCI spec, on either
// version: this package only says where (Layout.ContainerPath) and makes
// the levels above them (QoS and pod cgroups) with their limits.
//
// Every file is read under an injected root (by default /sys/fs/cgroup),
// so tests run on a fake tree.
package cgroups

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// DefaultRoot is where the cgroup filesystem is mounted.
const DefaultRoot = "/sys/fs/cgroup"

// SystemdRunDir exists when systemd is the running init (sd_booted(3)).
const SystemdRunDir = "/run/systemd/system"

// Version is the host's cgroup version.
type Version int

const (
	// V1 is a legacy or hybrid host: a hierarchy per controller under
	// <root>/<controller> (a hybrid host also has a v2 mount at
	// <root>/unified, with no controllers that kelp uses).
	V1 Version = 1
	// V2 is a unified host: one hierarchy at <root>.
	V2 Version = 2
)

func (v Version) String() string { return fmt.Sprintf("v%d", int(v)) }

// V1Controllers are the v1 hierarchies kelp reads or writes (runc joins
// every mounted one).
var V1Controllers = []string{"cpu", "cpuacct", "cpuset", "memory", "pids", "devices", "freezer", "blkio"}

// DetectVersion reads the hierarchy mounted at root. The unified mount
// is recognised by cgroup.controllers at its top, which only cgroup2 has;
// v1 by a controller's cgroup.procs.
func DetectVersion(root string) (Version, error) {
	if exists(filepath.Join(root, "cgroup.controllers")) {
		return V2, nil
	}
	for _, c := range V1Controllers {
		if exists(filepath.Join(root, c, "cgroup.procs")) {
			return V1, nil
		}
	}
	return 0, fmt.Errorf("no cgroup filesystem at %s (neither cgroup2 nor a v1 controller is mounted)", root)
}

// Driver is who creates cgroups: kelp and runc writing the filesystem
// (cgroupfs), or systemd through its units (systemd), which a systemd
// host needs so that systemd does not fight over cgroups it thinks it
// owns.
type Driver string

const (
	Cgroupfs Driver = "cgroupfs"
	Systemd  Driver = "systemd"
	// Auto picks systemd when systemd runs, cgroupfs otherwise.
	Auto Driver = "auto"
)

// ResolveDriver turns the --cgroup-driver flag into a driver: "" and
// "auto" choose systemd when systemdRunDir exists (SystemdRunDir), as
// sd_booted does. Asking for systemd without a running systemd is an
// error now rather than a runc failure at the first container.
func ResolveDriver(flag string, systemdRunDir string) (Driver, error) {
	running := exists(systemdRunDir)
	switch Driver(flag) {
	case "", Auto:
		if running {
			return Systemd, nil
		}
		return Cgroupfs, nil
	case Cgroupfs:
		return Cgroupfs, nil
	case Systemd:
		if !running {
			return "", fmt.Errorf("cgroup driver systemd: systemd is not running (no %s)", systemdRunDir)
		}
		return Systemd, nil
	default:
		return "", fmt.Errorf("unknown cgroup driver %q (auto, cgroupfs or systemd)", flag)
	}
}

// Host is what the runtime and kubelet need to know about this node's
// cgroups.
type Host struct {
	Root    string // the cgroup mount, DefaultRoot
	Version Version
	Layout  Layout
	// SwapLimit is whether v2 cgroups have memory.swap.max (the kernel
	// accounts swap): runc fails to set a swap limit without it.
	SwapLimit bool
}

// Detect reads the version under root and resolves the driver (see
// ResolveDriver); cgroupRoot is the --cgroup-root (/kubepods).
func Detect(root, driverFlag, systemdRunDir, cgroupRoot string) (Host, error) {
	v, err := DetectVersion(root)
	if err != nil {
		return Host{}, err
	}
	d, err := ResolveDriver(driverFlag, systemdRunDir)
	if err != nil {
		return Host{}, err
	}
	l, err := NewLayout(d, cgroupRoot)
	if err != nil {
		return Host{}, err
	}
	return Host{Root: root, Version: v, Layout: l, SwapLimit: v == V2 && swapAccounting(root)}, nil
}

// swapAccounting: the root cgroup has no memory.swap.max of its own, so
// any cgroup below it (systemd's init.scope, kelp's kubepods) tells.
func swapAccounting(root string) bool {
	m, _ := filepath.Glob(filepath.Join(root, "*", "memory.swap.max"))
	return len(m) > 0
}

// FS is the host's cgroup files (fs.go).
func (h Host) FS() *FS { return &FS{Root: h.Root, Version: h.Version} }

// MemoryController reports whether the memory controller is usable: in
// <root>/cgroup.controllers on v2, mounted at <root>/memory on v1. Pod
// memory limits and OOM detection need it; Raspberry Pi kernels leave it
// off unless cmdline.txt turns it on.
func (h Host) MemoryController() bool {
	if h.Version == V2 {
		b, err := os.ReadFile(filepath.Join(h.Root, "cgroup.controllers"))
		return err == nil && hasWord(string(b), "memory")
	}
	return exists(filepath.Join(h.Root, "memory", "cgroup.procs"))
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func hasWord(text, word string) bool {
	for _, w := range strings.Fields(text) {
		if w == word {
			return true
		}
	}
	return false
}

var errNotAbs = errors.New("must be an absolute path such as /kubepods")
