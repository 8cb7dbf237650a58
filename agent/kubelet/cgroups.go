package kubelet

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/resource"
	"k8s.io/kubectl/pkg/util/qos"

	"github.com/kelp-project/kelp/runtime"
	"github.com/kelp-project/kelp/runtime/cgroups"
)

// Upstream's conversions (pkg/kubelet/cm): CPU shares from millicores,
// with its bounds, and the CFS quota from a CPU limit.
const (
	minShares    = 2
	maxShares    = 262144
	minQuota     = 1000 // µs: the kernel refuses less
	cpuPeriod    = cgroups.DefaultCPUPeriod
	sharesPerCPU = 1024
)

func milliCPUToShares(milli int64) uint64 {
	return uint64(min(max(milli*sharesPerCPU/1000, minShares), maxShares))
}

func milliCPUToQuota(milli int64) int64 {
	if milli == 0 {
		return 0
	}
	return max(milli*cpuPeriod/1000, minQuota)
}

// podQOS is the pod's QoS level: the class the API server recorded in its
// status, else computed from its spec as upstream does.
func podQOS(pod *corev1.Pod) cgroups.QOS {
	class := pod.Status.QOSClass
	if class == "" {
		class = qos.GetPodQOS(pod)
	}
	switch class {
	case corev1.PodQOSGuaranteed:
		return cgroups.Guaranteed
	case corev1.PodQOSBestEffort:
		return cgroups.BestEffort
	default:
		return cgroups.Burstable
	}
}

// podResources are the pod cgroup's limits, as upstream's
// ResourceConfigForPod sets them: shares from the pod's CPU requests
// (containers summed, init containers at their peak, sidecars counted),
// the CPU quota and the memory limit only when every container has that
// limit (one unlimited container leaves the pod unlimited), BestEffort
// pods at the minimum shares; and --pod-max-pids.
func podResources(pod *corev1.Pod, pidsLimit int64) runtime.Resources {
	reqs := resource.PodRequests(pod, resource.PodResourcesOptions{})
	limits := resource.PodLimits(pod, resource.PodResourcesOptions{})
	cpuLimited, memLimited := true, true
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			if c.Resources.Limits.Cpu().IsZero() {
				cpuLimited = false
			}
			if c.Resources.Limits.Memory().IsZero() {
				memLimited = false
			}
		}
	}
	var r runtime.Resources
	if pidsLimit > 0 {
		r.PidsLimit = pidsLimit
	}
	switch podQOS(pod) {
	case cgroups.BestEffort:
		r.CPUShares = minShares
		return r
	case cgroups.Guaranteed:
		cpuLimited, memLimited = true, true
	}
	r.CPUShares = milliCPUToShares(reqs.Cpu().MilliValue())
	if q := milliCPUToQuota(limits.Cpu().MilliValue()); cpuLimited && q > 0 {
		r.CPUQuota, r.CPUPeriod = q, cpuPeriod
	}
	if m := limits.Memory().Value(); memLimited && m > 0 {
		r.MemoryLimit = m
	}
	return r
}

// podCgroup makes the pod's cgroup with its limits and returns its
// containers' cgroup parent. It runs before each container is created:
// it is idempotent, and so the pod's limits are in place before any of
// its containers runs, also after a kelp restart.
func (k *Kubelet) podCgroup(ctx context.Context, pod *corev1.Pod) (string, error) {
	return k.runtime.EnsurePodCgroup(ctx, podQOS(pod), string(pod.UID), podResources(pod, k.cfg.PodPidsLimit))
}
