package registry

import (
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// A status write that takes devices out of the allocation drops their
// reported status with them.
func TestResourceClaimStatusDropsDeallocatedDevices(t *testing.T) {
	r := served(t, "resource.k8s.io", "resourceclaims")
	result := resourcev1.DeviceRequestAllocationResult{Request: "req", Driver: "d.example.com", Pool: "p", Device: "dev-0"}
	old := &resourcev1.ResourceClaim{Status: resourcev1.ResourceClaimStatus{
		Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{result}}},
		Devices:    []resourcev1.AllocatedDeviceStatus{{Driver: "d.example.com", Pool: "p", Device: "dev-0"}},
	}}
	kept := old.DeepCopy()
	r.PrepareForStatusUpdate(kept, old)
	if len(kept.Status.Devices) != 1 {
		t.Fatalf("status of an allocated device dropped: %+v", kept.Status.Devices)
	}
	deallocated := old.DeepCopy()
	deallocated.Status.Allocation = nil
	r.PrepareForStatusUpdate(deallocated, old)
	if deallocated.Status.Devices != nil {
		t.Fatalf("status of a deallocated device kept: %+v", deallocated.Status.Devices)
	}
	// Alpha fields of the allocation are dropped unless already stored.
	skipping := old.DeepCopy()
	skipping.Status.Allocation.Devices.Results[0].SkipNodeOperations = []resourcev1.SkipNodeOperation{"*"}
	r.PrepareForStatusUpdate(skipping, old)
	if skipping.Status.Allocation.Devices.Results[0].SkipNodeOperations != nil {
		t.Fatal("skipNodeOperations (alpha) kept")
	}
}

// Changing a rule's taint effect makes it a new taint, added now.
func TestDeviceTaintRuleNewEffectIsAddedNow(t *testing.T) {
	r := served(t, "resource.k8s.io", "devicetaintrules")
	then := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	old := &resourcev1.DeviceTaintRule{Spec: resourcev1.DeviceTaintRuleSpec{Taint: resourcev1.DeviceTaint{Key: "k", Effect: resourcev1.DeviceTaintEffectNone, TimeAdded: &then}}}
	same := old.DeepCopy()
	r.PrepareForUpdate(same, old)
	if !same.Spec.Taint.TimeAdded.Equal(&then) {
		t.Fatalf("unchanged taint re-stamped: %v", same.Spec.Taint.TimeAdded)
	}
	changed := old.DeepCopy()
	changed.Spec.Taint.Effect = resourcev1.DeviceTaintEffectNoExecute
	r.PrepareForUpdate(changed, old)
	if !changed.Spec.Taint.TimeAdded.After(then.Time) {
		t.Fatalf("new effect kept the old timeAdded %v", changed.Spec.Taint.TimeAdded)
	}
}

func TestResourceSliceFieldsAndAlphaFields(t *testing.T) {
	r := served(t, "resource.k8s.io", "resourceslices")
	s := &resourcev1.ResourceSlice{Spec: resourcev1.ResourceSliceSpec{
		Driver: "d.example.com", NodeName: ptr.To("n1"), Pool: resourcev1.ResourcePool{Name: "pool"},
		SkipNodeOperations: []resourcev1.SkipNodeOperation{"*"},
		Devices: []resourcev1.Device{{Name: "dev", Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
			"list": {IntValues: []int64{1}}, "one": {IntValue: ptr.To(int64(1))},
		}}},
	}}
	_, fs, err := r.Attrs(s)
	if err != nil {
		t.Fatal(err)
	}
	if fs["spec.nodeName"] != "n1" || fs["spec.driver"] != "d.example.com" || fs["spec.pool.name"] != "pool" {
		t.Fatalf("selectable fields %v", fs)
	}
	r.PrepareForCreate(s)
	if s.Spec.SkipNodeOperations != nil || s.Spec.Devices[0].Attributes["list"].IntValues != nil || s.Spec.Devices[0].Attributes["one"].IntValue == nil {
		t.Fatalf("alpha fields not dropped (or too much dropped): %+v", s.Spec)
	}
}
