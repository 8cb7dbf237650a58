package cgroups

import (
	"fmt"
	"path"
	"strings"
)

// QOS is a pod's QoS class as a cgroup level, named as upstream's kubelet
// names them. Guaranteed pods have no level of their own: they sit
// directly under the root (kubepods), so their limits are not diluted by
// a shared parent.
type QOS string

const (
	Guaranteed QOS = ""
	Burstable  QOS = "burstable"
	BestEffort QOS = "besteffort"
)

// systemdScopePrefix names a container's scope under the systemd driver
// (<prefix>-<id>.scope), as containerd's CRI does, so tools that know
// CRI's cgroups (cadvisor, systemd-cgls readers) recognise kelp's.
const systemdScopePrefix = "cri-containerd"

// Layout places pod and container cgroups. A cgroup is named by its path
// components from the hierarchy's root, as upstream's CgroupName:
// {"kubepods", "burstable", "pod<uid>"}; the driver decides how a name
// is spelt:
//
//	cgroupfs: /kubepods/burstable/pod<uid>, container <parent>/<id>
//	systemd:  kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice,
//	          container "<pod slice>:cri-containerd:<id>" (runc's slice:prefix:name)
type Layout struct {
	Driver Driver
	root   []string
}

// NewLayout takes --cgroup-root, an absolute path with at least one
// component (the kubepods cgroup itself, "/kubepods" by default).
func NewLayout(d Driver, cgroupRoot string) (Layout, error) {
	if !path.IsAbs(cgroupRoot) {
		return Layout{}, fmt.Errorf("cgroup root %q %w", cgroupRoot, errNotAbs)
	}
	var root []string
	for _, c := range strings.Split(path.Clean(cgroupRoot), "/") {
		if c != "" {
			root = append(root, c)
		}
	}
	if len(root) == 0 {
		return Layout{}, fmt.Errorf("cgroup root %q: pods need a cgroup of their own, not the hierarchy's root", cgroupRoot)
	}
	if d != Cgroupfs && d != Systemd {
		return Layout{}, fmt.Errorf("cgroup driver %q is not resolved", d)
	}
	return Layout{Driver: d, root: root}, nil
}

// Root is the name of the pods' root cgroup (kubepods).
func (l Layout) Root() []string { return append([]string(nil), l.root...) }

// QoS is the name of a QoS class's cgroup (the root for Guaranteed).
func (l Layout) QoS(q QOS) []string {
	if q == Guaranteed {
		return l.Root()
	}
	return append(l.Root(), string(q))
}

// Pod is the name of a pod's cgroup: pod<uid> under its QoS level.
func (l Layout) Pod(q QOS, uid string) []string {
	return append(l.QoS(q), "pod"+uid)
}

// Dir is where the cgroup named name is, relative to a hierarchy's root
// (<mount>/<Dir> on v2, <mount>/<controller>/<Dir> on v1).
func (l Layout) Dir(name []string) string {
	if l.Driver == Systemd {
		dirs := make([]string, len(name))
		for i := range name {
			dirs[i] = sliceName(name[:i+1])
		}
		return path.Join(dirs...)
	}
	return path.Join(name...)
}

// Parent is the cgroup named name in the form a container's cgroup
// parent takes (CRI's CgroupParent): a path for cgroupfs, a slice unit
// for systemd.
func (l Layout) Parent(name []string) string {
	if l.Driver == Systemd {
		return sliceName(name)
	}
	return "/" + path.Join(name...)
}

// ContainerPath is the OCI spec's linux.cgroupsPath for container id
// under parent (as Parent gives it). runc's systemd driver reads
// "slice:prefix:name" and makes the unit <prefix>-<name>.scope in slice;
// its cgroupfs driver takes a path under each hierarchy's root.
func (l Layout) ContainerPath(parent, id string) string {
	if l.Driver == Systemd {
		return parent + ":" + systemdScopePrefix + ":" + id
	}
	return path.Join("/", parent, id)
}

// ContainerDir is where runc puts the cgroup of ContainerPath(parent,
// id), relative to a hierarchy's root, for reading its files.
func (l Layout) ContainerDir(parent, id string) string {
	if l.Driver == Systemd {
		return path.Join(expandSlice(parent), systemdScopePrefix+"-"+id+".scope")
	}
	return strings.TrimPrefix(path.Join("/", parent, id), "/")
}

// sliceName is upstream's systemd spelling of a cgroup name: components
// escaped ('-' is systemd's nesting separator, so it becomes '_', as in a
// pod UID) and joined by '-': {"kubepods","burstable","podA-B"} is
// kubepods-burstable-podA_B.slice.
func sliceName(name []string) string {
	parts := make([]string, len(name))
	for i, c := range name {
		parts[i] = strings.ReplaceAll(c, "-", "_")
	}
	return strings.Join(parts, "-") + ".slice"
}

// expandSlice is the directory of a slice, as systemd nests it:
// a-b-c.slice is a.slice/a-b.slice/a-b-c.slice.
func expandSlice(slice string) string {
	base := strings.TrimSuffix(slice, ".slice")
	if base == slice || base == "" || base == "-" {
		return slice // not a slice (or the root slice): taken as it is
	}
	var dirs []string
	prefix := ""
	for _, c := range strings.Split(base, "-") {
		prefix += c
		dirs = append(dirs, prefix+".slice")
		prefix += "-"
	}
	return path.Join(dirs...)
}
