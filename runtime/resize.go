package runtime

import (
	"context"
	"fmt"

	"github.com/containerd/containerd"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/kelp-project/kelp/runtime/cgroups"
)

// UpdateContainerResources changes the cgroup limits of a running
// container in place (in-place pod resize): containerd's task Update,
// which has runc update the container's cgroup, converting v1 units for
// v2 as at creation. Limits left 0 in res are left as they are (the API
// never removes a limit). labels are then merged into the container's
// labels: the kubelet records there what the container now runs with, so
// a kelp restart knows it.
func (r *Runtime) UpdateContainerResources(ctx context.Context, id string, res Resources, labels map[string]string) error {
	ctx = r.ctx(ctx)
	c, err := r.load(ctx, id)
	if err != nil {
		return err
	}
	task, err := c.Task(ctx, nil)
	if err != nil {
		return fmt.Errorf("task of %s: %w", id, err)
	}
	if err := task.Update(ctx, containerd.WithResources(linuxResources(res, r.opts.Cgroups))); err != nil {
		return fmt.Errorf("update the resources of %s: %w", id, err)
	}
	if len(labels) > 0 {
		if _, err := c.SetLabels(ctx, labels); err != nil {
			return fmt.Errorf("labels of %s: %w", id, err)
		}
	}
	return nil
}

// linuxResources is res as the OCI spec writes it (withResources does
// the same at creation); unset values stay nil, which runc update leaves
// alone.
func linuxResources(res Resources, host cgroups.Host) *specs.LinuxResources {
	out := &specs.LinuxResources{}
	if res.CPUShares > 0 || res.CPUQuota > 0 {
		out.CPU = &specs.LinuxCPU{}
		if res.CPUShares > 0 {
			shares := res.CPUShares
			out.CPU.Shares = &shares
		}
		if res.CPUQuota > 0 {
			quota, period := res.CPUQuota, res.CPUPeriod
			if period == 0 {
				period = cgroups.DefaultCPUPeriod
			}
			out.CPU.Quota, out.CPU.Period = &quota, &period
		}
	}
	if res.MemoryLimit > 0 {
		limit := res.MemoryLimit
		out.Memory = &specs.LinuxMemory{Limit: &limit}
		if host.Version == cgroups.V2 && host.SwapLimit {
			// No swap, as at creation (withResources).
			swap := limit
			out.Memory.Swap = &swap
		}
	}
	if res.PidsLimit > 0 {
		out.Pids = &specs.LinuxPids{Limit: res.PidsLimit}
	}
	return out
}
