package registry

import (
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/kelp-project/kelp/server/apiserver/defaults"
	"github.com/kelp-project/kelp/server/apiserver/validation"
)

// The kinds of resource.k8s.io/v1, dynamic resource allocation (DRA), as
// upstream's pkg/registry/resource strategies. kelp runs no DRA driver,
// no resource claim controller and no allocation in its scheduler: these
// kinds are stored and served for the clients that write and read them,
// and a pod that references a claim stays Pending (server/scheduler).
// Fields of features that are alpha (off) in 1.37 are dropped on write
// unless the stored object already uses them, as upstream's
// dropDisabledFields.

// draNotAllocated is the warning a write of a kind that asks for devices
// gets: nothing in kelp acts on it.
const draNotAllocated = "kelp does not allocate dynamic resources (DRA): no driver, claim controller or scheduler plugin acts on this object, and a pod using a resource claim stays Pending"

func deviceClasses() *Resource {
	return &Resource{
		GVR: gvr("resource.k8s.io", "v1", "deviceclasses"), Kind: "DeviceClass", Singular: "deviceclass",
		New: func() runtime.Object { return &resourcev1.DeviceClass{} }, NewList: func() runtime.Object { return &resourcev1.DeviceClassList{} },
		Strategy: Strategy{
			Default:              NoDefaults,
			Validate:             validator(validation.DeviceClass),
			ValidateUpdate:       updateValidator(validation.DeviceClassUpdate),
			ValidateStatusUpdate: metaUpdate,
		},
	}
}

// resourceClaims: a request for devices; /status is the allocation (a
// scheduler's), the consumers it is reserved for and the devices' state
// (a driver's). The spec is immutable.
func resourceClaims() *Resource {
	return &Resource{
		GVR: gvr("resource.k8s.io", "v1", "resourceclaims"), Kind: "ResourceClaim", Singular: "resourceclaim", Namespaced: true,
		New: func() runtime.Object { return &resourcev1.ResourceClaim{} }, NewList: func() runtime.Object { return &resourcev1.ResourceClaimList{} },
		Status:       true,
		NoController: draNotAllocated,
		Strategy: Strategy{
			Default:              defaulter(defaults.ResourceClaim),
			Validate:             validator(validation.ResourceClaim),
			ValidateUpdate:       updateValidator(validation.ResourceClaimUpdate),
			ValidateStatusUpdate: updateValidator(validation.ResourceClaimStatusUpdate),
			PrepareForCreate: func(obj runtime.Object) {
				dropDisabledClaimSpec(&obj.(*resourcev1.ResourceClaim).Spec, nil)
			},
			PrepareForUpdate: func(obj, old runtime.Object) {
				dropDisabledClaimSpec(&obj.(*resourcev1.ResourceClaim).Spec, &old.(*resourcev1.ResourceClaim).Spec)
			},
			PrepareForStatusUpdate: func(obj, old runtime.Object) {
				c, was := obj.(*resourcev1.ResourceClaim), old.(*resourcev1.ResourceClaim)
				dropDisabledClaimStatus(&c.Status, &was.Status)
				dropDeallocatedDevices(&c.Status, &was.Status)
			},
		},
	}
}

func resourceClaimTemplates() *Resource {
	return &Resource{
		GVR: gvr("resource.k8s.io", "v1", "resourceclaimtemplates"), Kind: "ResourceClaimTemplate", Singular: "resourceclaimtemplate", Namespaced: true,
		New:          func() runtime.Object { return &resourcev1.ResourceClaimTemplate{} },
		NewList:      func() runtime.Object { return &resourcev1.ResourceClaimTemplateList{} },
		NoController: draNotAllocated,
		Strategy: Strategy{
			Default:              defaulter(defaults.ResourceClaimTemplate),
			Validate:             validator(validation.ResourceClaimTemplate),
			ValidateUpdate:       updateValidator(validation.ResourceClaimTemplateUpdate),
			ValidateStatusUpdate: metaUpdate,
			PrepareForCreate: func(obj runtime.Object) {
				dropDisabledClaimSpec(&obj.(*resourcev1.ResourceClaimTemplate).Spec.Spec, nil)
			},
			PrepareForUpdate: func(obj, old runtime.Object) {
				dropDisabledClaimSpec(&obj.(*resourcev1.ResourceClaimTemplate).Spec.Spec, &old.(*resourcev1.ResourceClaimTemplate).Spec.Spec)
			},
		},
	}
}

// resourceSlices: a driver's published devices, selectable by node,
// driver and pool as upstream (a kubelet's plugin lists its node's).
func resourceSlices() *Resource {
	return &Resource{
		GVR: gvr("resource.k8s.io", "v1", "resourceslices"), Kind: "ResourceSlice", Singular: "resourceslice",
		New: func() runtime.Object { return &resourcev1.ResourceSlice{} }, NewList: func() runtime.Object { return &resourcev1.ResourceSliceList{} },
		Fields: func(o runtime.Object) fields.Set {
			s := o.(*resourcev1.ResourceSlice)
			node := ""
			if s.Spec.NodeName != nil {
				node = *s.Spec.NodeName
			}
			return fields.Set{
				resourcev1.ResourceSliceSelectorNodeName: node,
				resourcev1.ResourceSliceSelectorDriver:   s.Spec.Driver,
				resourcev1.ResourceSliceSelectorPoolName: s.Spec.Pool.Name,
			}
		},
		Strategy: Strategy{
			Default:              defaulter(defaults.ResourceSlice),
			Validate:             validator(validation.ResourceSlice),
			ValidateUpdate:       updateValidator(validation.ResourceSliceUpdate),
			ValidateStatusUpdate: metaUpdate,
			PrepareForCreate: func(obj runtime.Object) {
				dropDisabledSliceFields(&obj.(*resourcev1.ResourceSlice).Spec, nil)
			},
			PrepareForUpdate: func(obj, old runtime.Object) {
				dropDisabledSliceFields(&obj.(*resourcev1.ResourceSlice).Spec, &old.(*resourcev1.ResourceSlice).Spec)
			},
		},
	}
}

// deviceTaintRules: a taint put on the devices a selector picks (GA and
// served by default in 1.37); /status holds the conditions of the
// eviction controller, which kelp does not run.
func deviceTaintRules() *Resource {
	return &Resource{
		GVR: gvr("resource.k8s.io", "v1", "devicetaintrules"), Kind: "DeviceTaintRule", Singular: "devicetaintrule",
		New: func() runtime.Object { return &resourcev1.DeviceTaintRule{} }, NewList: func() runtime.Object { return &resourcev1.DeviceTaintRuleList{} },
		Status:       true,
		NoController: draNotAllocated,
		Strategy: Strategy{
			Default:              defaulter(defaults.DeviceTaintRule),
			Validate:             validator(validation.DeviceTaintRule),
			ValidateUpdate:       updateValidator(validation.DeviceTaintRuleUpdate),
			ValidateStatusUpdate: updateValidator(validation.DeviceTaintRuleStatusUpdate),
			PrepareForUpdate: func(obj, old runtime.Object) {
				r, was := obj.(*resourcev1.DeviceTaintRule), old.(*resourcev1.DeviceTaintRule)
				// A new effect is a new taint: it was added now, unless the
				// writer says when.
				if r.Spec.Taint.Effect != was.Spec.Taint.Effect && r.Spec.Taint.TimeAdded.Equal(was.Spec.Taint.TimeAdded) {
					r.Spec.Taint.TimeAdded = &metav1.Time{Time: time.Now().Truncate(time.Second)}
				}
			},
		},
	}
}

// dropDisabledClaimSpec drops derived attributes (DRADerivedAttributes,
// alpha) from a claim spec unless the stored one has them.
func dropDisabledClaimSpec(spec, old *resourcev1.ResourceClaimSpec) {
	if old != nil && claimHasDerivedAttributes(old) {
		return
	}
	for i := range spec.Devices.Requests {
		r := &spec.Devices.Requests[i]
		if r.Exactly != nil {
			r.Exactly.DerivedAttributes = nil
		}
		for j := range r.FirstAvailable {
			r.FirstAvailable[j].DerivedAttributes = nil
		}
	}
}

func claimHasDerivedAttributes(spec *resourcev1.ResourceClaimSpec) bool {
	for _, r := range spec.Devices.Requests {
		if r.Exactly != nil && len(r.Exactly.DerivedAttributes) > 0 {
			return true
		}
		for _, s := range r.FirstAvailable {
			if len(s.DerivedAttributes) > 0 {
				return true
			}
		}
	}
	return false
}

// dropDisabledClaimStatus drops skipNodeOperations (DRAOptionalNodeOperations,
// alpha) from an allocation unless the stored one has them.
func dropDisabledClaimStatus(status, old *resourcev1.ResourceClaimStatus) {
	if old.Allocation != nil {
		for _, r := range old.Allocation.Devices.Results {
			if len(r.SkipNodeOperations) > 0 {
				return
			}
		}
	}
	if status.Allocation != nil {
		for i := range status.Allocation.Devices.Results {
			status.Allocation.Devices.Results[i].SkipNodeOperations = nil
		}
	}
}

// dropDeallocatedDevices removes the status of devices the write takes
// out of the allocation: a driver's report about a device outlives its
// allocation only until the allocation goes.
func dropDeallocatedDevices(status, old *resourcev1.ResourceClaimStatus) {
	gone := sets.New[string]()
	if old.Allocation != nil {
		for _, r := range old.Allocation.Devices.Results {
			gone.Insert(allocatedDeviceKey(r.Driver, r.Pool, r.Device, (*string)(r.ShareID)))
		}
	}
	if status.Allocation != nil {
		for _, r := range status.Allocation.Devices.Results {
			gone.Delete(allocatedDeviceKey(r.Driver, r.Pool, r.Device, (*string)(r.ShareID)))
		}
	}
	kept := status.Devices[:0]
	for _, d := range status.Devices {
		if !gone.Has(allocatedDeviceKey(d.Driver, d.Pool, d.Device, d.ShareID)) {
			kept = append(kept, d)
		}
	}
	status.Devices = kept
	if len(status.Devices) == 0 {
		status.Devices = nil
	}
}

func allocatedDeviceKey(driver, pool, device string, shareID *string) string {
	k := driver + "/" + pool + "/" + device
	if shareID != nil {
		k += "/" + *shareID
	}
	return k
}

// dropDisabledSliceFields drops what 1.37's alpha features add to a slice
// (partition types, optional node operations, counter compatibility
// groups, node-allocatable resources, list-typed attributes), each unless
// the stored slice already uses it.
func dropDisabledSliceFields(spec, old *resourcev1.ResourceSliceSpec) {
	if old == nil || old.PartitionTypeAttribute == nil {
		spec.PartitionTypeAttribute = nil
	}
	if old == nil || len(old.SkipNodeOperations) == 0 {
		spec.SkipNodeOperations = nil
	}
	var groups, allocatable, lists bool
	if old != nil {
		for _, d := range old.Devices {
			for _, c := range d.ConsumesCounters {
				groups = groups || len(c.CompatibilityGroups) > 0
			}
			allocatable = allocatable || len(d.NodeAllocatableResources) > 0
			for _, a := range d.Attributes {
				lists = lists || a.BoolValues != nil || a.IntValues != nil || a.StringValues != nil || a.VersionValues != nil
			}
		}
	}
	for i := range spec.Devices {
		d := &spec.Devices[i]
		if !groups {
			for j := range d.ConsumesCounters {
				d.ConsumesCounters[j].CompatibilityGroups = nil
			}
		}
		if !allocatable {
			d.NodeAllocatableResources = nil
		}
		if !lists {
			for k, a := range d.Attributes {
				if a.BoolValues != nil || a.IntValues != nil || a.StringValues != nil || a.VersionValues != nil {
					a.BoolValues, a.IntValues, a.StringValues, a.VersionValues = nil, nil, nil, nil
					d.Attributes[k] = a
				}
			}
		}
	}
}
