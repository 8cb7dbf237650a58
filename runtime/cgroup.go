package runtime

// The runtime's side of the cgroup stage (package runtime/cgroups): which
// host it runs on, where a container's cgroup goes in its OCI spec, and
// the pod cgroups the kubelet asks for.

import (
	"context"
	"fmt"

	"github.com/kelp-project/kelp/runtime/cgroups"
)

// resolveCgroups detects the host's cgroups unless the caller gave them
// (tests do, with a fake tree).
func (o *Options) resolveCgroups() error {
	if o.Cgroups.Root != "" {
		return nil
	}
	h, err := cgroups.Detect(cgroups.DefaultRoot, o.CgroupDriver, cgroups.SystemdRunDir, o.CgroupRoot)
	if err != nil {
		return fmt.Errorf("cgroups: %w", err)
	}
	o.Cgroups = h
	return nil
}

// Cgroups is the host's cgroup setup as this runtime uses it.
func (r *Runtime) Cgroups() cgroups.Host { return r.opts.Cgroups }

// EnsurePodCgroup makes the pod's cgroup under its QoS level with the
// pod-level limits res, and returns the cgroup parent its containers get
// (ContainerSpec.CgroupParent).
func (r *Runtime) EnsurePodCgroup(_ context.Context, qos cgroups.QOS, uid string, res Resources) (string, error) {
	return r.pods.EnsurePod(qos, uid, res)
}

// RemovePodCgroup removes the pod's cgroup once its containers are
// removed.
func (r *Runtime) RemovePodCgroup(_ context.Context, qos cgroups.QOS, uid string) error {
	return r.pods.RemovePod(qos, uid)
}

// RemoveOrphanPodCgroups removes the cgroups of pods not in keep (pod
// UIDs), once their containers are gone: pods deleted while kelp was
// down.
func (r *Runtime) RemoveOrphanPodCgroups(_ context.Context, keep map[string]bool) error {
	return r.pods.RemoveOrphans(keep)
}

// ContainerStats reads the usage of a container's cgroup (present until
// the container is removed).
func (r *Runtime) ContainerStats(ctx context.Context, id string) (cgroups.Stats, error) {
	ctx = r.ctx(ctx)
	c, err := r.load(ctx, id)
	if err != nil {
		return cgroups.Stats{}, err
	}
	labels, err := c.Labels(ctx)
	if err != nil {
		return cgroups.Stats{}, err
	}
	return r.opts.Cgroups.FS().Stats(labels[labelCgroup])
}

// cgroupParent is the container's parent: the kubelet's pod cgroup, or
// the pods' root if it gave none.
func (r *Runtime) cgroupParent(spec ContainerSpec) string {
	if spec.CgroupParent != "" {
		return spec.CgroupParent
	}
	l := r.opts.Cgroups.Layout
	return l.Parent(l.Root())
}

// cgroupPath is the spec's linux.cgroupsPath, in the driver's form.
func (r *Runtime) cgroupPath(spec ContainerSpec) string {
	return r.opts.Cgroups.Layout.ContainerPath(r.cgroupParent(spec), spec.ID)
}

// cgroupDir is where runc makes the container's cgroup, relative to a
// hierarchy's root: kept as a label, for OOM kills and stats (also after
// a kelp restart) and to remove what runc left.
func (r *Runtime) cgroupDir(spec ContainerSpec) string {
	return r.opts.Cgroups.Layout.ContainerDir(r.cgroupParent(spec), spec.ID)
}

// removeCgroup removes the container's cgroup in every hierarchy. runc
// normally does this on delete; this covers a task that never ran.
func (r *Runtime) removeCgroup(dir string) {
	if dir == "" {
		return
	}
	_ = r.opts.Cgroups.FS().Remove(dir)
}

// cgroupOOMKilled reports whether the kernel OOM-killed a process in the
// container's cgroup at dir (v1 memory.oom_control or v2 memory.events).
func (r *Runtime) cgroupOOMKilled(dir string) bool {
	return dir != "" && r.opts.Cgroups.FS().OOMKilled(dir)
}
