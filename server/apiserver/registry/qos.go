package registry

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// QOSClass computes a pod's QoS class as upstream does: Guaranteed when
// every container has equal cpu and memory requests and limits, BestEffort
// when none sets any, Burstable otherwise.
func QOSClass(p *corev1.Pod) corev1.PodQOSClass {
	requests := corev1.ResourceList{}
	limits := corev1.ResourceList{}
	zero := resource.Quantity{}
	guaranteed := true
	containers := append(append([]corev1.Container{}, p.Spec.Containers...), p.Spec.InitContainers...)
	for _, c := range containers {
		for name, q := range c.Resources.Requests {
			if name != corev1.ResourceCPU && name != corev1.ResourceMemory || q.Cmp(zero) <= 0 {
				continue
			}
			sum := requests[name]
			sum.Add(q)
			requests[name] = sum
		}
		seen := 0
		for name, q := range c.Resources.Limits {
			if name != corev1.ResourceCPU && name != corev1.ResourceMemory || q.Cmp(zero) <= 0 {
				continue
			}
			seen++
			sum := limits[name]
			sum.Add(q)
			limits[name] = sum
		}
		if seen < 2 {
			guaranteed = false
		}
	}
	if len(requests) == 0 && len(limits) == 0 {
		return corev1.PodQOSBestEffort
	}
	if guaranteed {
		for name, req := range requests {
			if lim, ok := limits[name]; !ok || lim.Cmp(req) != 0 {
				guaranteed = false
			}
		}
	}
	if guaranteed && len(limits) == 2 {
		return corev1.PodQOSGuaranteed
	}
	return corev1.PodQOSBurstable
}
