package defaults

import (
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The kinds of resource.k8s.io/v1, as upstream's pkg/apis/resource/v1
// defaults (and the +default="Equal" of a device toleration's operator).
// DeviceClass has none.

// ResourceClaim defaults a claim's requests and, in its status, the
// tolerations of an allocation.
func ResourceClaim(c *resourcev1.ResourceClaim) {
	deviceClaim(&c.Spec.Devices)
	if a := c.Status.Allocation; a != nil {
		for i := range a.Devices.Results {
			deviceTolerations(a.Devices.Results[i].Tolerations)
		}
	}
}

// ResourceClaimTemplate defaults the claim spec it stamps out.
func ResourceClaimTemplate(t *resourcev1.ResourceClaimTemplate) { deviceClaim(&t.Spec.Spec.Devices) }

// ResourceSlice stamps its devices' taints with the time they were added.
func ResourceSlice(s *resourcev1.ResourceSlice) {
	for i := range s.Spec.Devices {
		for j := range s.Spec.Devices[i].Taints {
			deviceTaint(&s.Spec.Devices[i].Taints[j])
		}
	}
}

// DeviceTaintRule stamps its taint with the time it was added.
func DeviceTaintRule(r *resourcev1.DeviceTaintRule) { deviceTaint(&r.Spec.Taint) }

func deviceClaim(c *resourcev1.DeviceClaim) {
	for i := range c.Requests {
		r := &c.Requests[i]
		if e := r.Exactly; e != nil {
			allocationMode(&e.AllocationMode, &e.Count)
			deviceTolerations(e.Tolerations)
		}
		for j := range r.FirstAvailable {
			s := &r.FirstAvailable[j]
			allocationMode(&s.AllocationMode, &s.Count)
			deviceTolerations(s.Tolerations)
		}
	}
}

// allocationMode: ExactCount of one device unless told otherwise.
func allocationMode(mode *resourcev1.DeviceAllocationMode, count *int64) {
	if *mode == "" {
		*mode = resourcev1.DeviceAllocationModeExactCount
	}
	if *mode == resourcev1.DeviceAllocationModeExactCount && *count == 0 {
		*count = 1
	}
}

func deviceTolerations(ts []resourcev1.DeviceToleration) {
	for i := range ts {
		if ts[i].Operator == "" {
			ts[i].Operator = resourcev1.DeviceTolerationOpEqual
		}
	}
}

// deviceTaint: timeAdded is now, to the second, when unset.
func deviceTaint(t *resourcev1.DeviceTaint) {
	if t.TimeAdded == nil {
		t.TimeAdded = &metav1.Time{Time: time.Now().Truncate(time.Second)}
	}
}
