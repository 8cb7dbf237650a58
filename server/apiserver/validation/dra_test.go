package validation

import (
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func draClaim() *resourcev1.ResourceClaim {
	return defaulted(&resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "claim", Namespace: "default"},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "req-0", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "dra.example.com"}}},
		}},
	})
}

func TestDeviceClass(t *testing.T) {
	c := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu.example.com"}, Spec: resourcev1.DeviceClassSpec{
		Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "gpu.example.com"`}}},
		Config: []resourcev1.DeviceClassConfiguration{{DeviceConfiguration: resourcev1.DeviceConfiguration{Opaque: &resourcev1.OpaqueDeviceConfiguration{
			Driver: "gpu.example.com", Parameters: runtime.RawExtension{Raw: []byte(`{"mode":"fast"}`)},
		}}}},
		ExtendedResourceName: ptr.To("example.com/gpu"),
	}}
	expectErrors(t, DeviceClass(c), nil)

	bad := c.DeepCopy()
	bad.Spec.Selectors = []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: "device.driver =="}}, {}, {CEL: &resourcev1.CELDeviceSelector{Expression: "1"}}}
	bad.Spec.Config[0].Opaque.Parameters.Raw = []byte(`[1]`)
	bad.Spec.ExtendedResourceName = ptr.To("cpu")
	expectErrors(t, DeviceClass(bad), []want{
		{field.ErrorTypeInvalid, "spec.selectors[0].cel.expression", "Syntax error"},
		{field.ErrorTypeRequired, "spec.selectors[1].cel", ""},
		{field.ErrorTypeInvalid, "spec.selectors[2].cel.expression", "must evaluate to bool"},
		{field.ErrorTypeInvalid, "spec.config[0].opaque.parameters", "must be a valid JSON object"},
		{field.ErrorTypeInvalid, "spec.extendedResourceName", ""},
	})

	// The conformance test's update: one selector changed to another valid one.
	updated := c.DeepCopy()
	updated.Spec.Selectors[0].CEL.Expression = "1 == 0"
	expectErrors(t, DeviceClassUpdate(updated, c), nil)
	// Stored selectors are not compiled again: an expression valid when
	// stored stays acceptable even if the compiler would now reject it.
	stored := bad.DeepCopy()
	stored.Spec.Config[0].Opaque.Parameters.Raw = []byte(`{}`)
	stored.Spec.ExtendedResourceName = nil
	stored.Spec.Selectors = stored.Spec.Selectors[:1]
	expectErrors(t, DeviceClassUpdate(stored, stored.DeepCopy()), nil)

	expensive := c.DeepCopy()
	expensive.Spec.Selectors[0].CEL.Expression = strings.Repeat("x", resourcev1.CELSelectorExpressionMaxLength+1)
	expectErrors(t, DeviceClass(expensive), []want{{field.ErrorTypeTooLong, "spec.selectors[0].cel.expression", ""}})
}

func TestResourceClaim(t *testing.T) {
	c := draClaim()
	if e := c.Spec.Devices.Requests[0].Exactly; e.AllocationMode != resourcev1.DeviceAllocationModeExactCount || e.Count != 1 {
		t.Fatalf("not defaulted: %+v", e)
	}
	expectErrors(t, ResourceClaim(c), nil)

	bad := c.DeepCopy()
	bad.Spec.Devices.Requests = append(bad.Spec.Devices.Requests,
		resourcev1.DeviceRequest{Name: "req-0", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "x", AllocationMode: resourcev1.DeviceAllocationModeAll, Count: 2}},
		resourcev1.DeviceRequest{Name: "Neither"},
		resourcev1.DeviceRequest{Name: "both", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "x", AllocationMode: "Some"},
			FirstAvailable: []resourcev1.DeviceSubRequest{{Name: "a"}}},
		resourcev1.DeviceRequest{Name: "prio", FirstAvailable: []resourcev1.DeviceSubRequest{
			{Name: "a", DeviceClassName: "x", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1,
				Tolerations: []resourcev1.DeviceToleration{{Key: "k", Operator: resourcev1.DeviceTolerationOpExists, Value: "v"}}},
			{Name: "a", AllocationMode: resourcev1.DeviceAllocationModeExactCount},
		}},
	)
	bad.Spec.Devices.Constraints = []resourcev1.DeviceConstraint{
		{Requests: []string{"req-0", "prio/a", "prio/b", "a/b/c"}, MatchAttribute: ptr.To(resourcev1.FullyQualifiedName("model"))},
		{},
	}
	bad.Spec.Devices.Config = []resourcev1.DeviceClaimConfiguration{{Requests: []string{"nope"}}}
	expectErrors(t, ResourceClaim(bad), []want{
		{field.ErrorTypeInvalid, "spec.devices.requests[1].exactly.count", "must not be specified when allocationMode is 'All'"},
		{field.ErrorTypeDuplicate, "spec.devices.requests[1]", ""},
		{field.ErrorTypeInvalid, "spec.devices.requests[2].name", ""},
		{field.ErrorTypeRequired, "spec.devices.requests[2]", "exactly one of `exactly` or `firstAvailable` is required"},
		{field.ErrorTypeInvalid, "spec.devices.requests[3]", "multiple fields are set"},
		{field.ErrorTypeInvalid, "spec.devices.requests[4].firstAvailable[0].tolerations[0].value", "must be empty for operator `Exists`"},
		{field.ErrorTypeRequired, "spec.devices.requests[4].firstAvailable[1].deviceClassName", ""},
		{field.ErrorTypeInvalid, "spec.devices.requests[4].firstAvailable[1].count", "must be greater than zero"},
		{field.ErrorTypeDuplicate, "spec.devices.requests[4].firstAvailable[1]", ""},
		{field.ErrorTypeInvalid, "spec.devices.constraints[0].requests[2]", "must be the name of a request"},
		{field.ErrorTypeInvalid, "spec.devices.constraints[0].requests[3]", "must be the name of a request"},
		{field.ErrorTypeInvalid, "spec.devices.constraints[0].matchAttribute", "fully qualified name"},
		{field.ErrorTypeRequired, "spec.devices.constraints[1]", `exactly one of "matchAttribute" or "distinctAttribute"`},
		{field.ErrorTypeInvalid, "spec.devices.config[0].requests[0]", "must be the name of a request"},
		{field.ErrorTypeRequired, "spec.devices.config[0].opaque", ""},
	})

	// The spec is immutable; labels are not.
	labeled := c.DeepCopy()
	labeled.ResourceVersion = "1"
	labeled.Labels = map[string]string{"test.dra.example.com": "test"}
	old := c.DeepCopy()
	old.ResourceVersion = "1"
	expectErrors(t, ResourceClaimUpdate(labeled, old), nil)
	changed := labeled.DeepCopy()
	changed.Spec.Devices.Requests[0].Exactly.Count = 2
	expectErrors(t, ResourceClaimUpdate(changed, old), []want{{field.ErrorTypeInvalid, "spec", "field is immutable"}})
}

func TestResourceClaimStatus(t *testing.T) {
	old := draClaim()
	old.ResourceVersion = "1"
	// The conformance test's status: an empty allocation is a valid one.
	c := old.DeepCopy()
	c.Status.Allocation = &resourcev1.AllocationResult{}
	expectErrors(t, ResourceClaimStatusUpdate(c, old), nil)

	reserved := old.DeepCopy()
	reserved.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: "u"}}
	expectErrors(t, ResourceClaimStatusUpdate(reserved, old), []want{{field.ErrorTypeForbidden, "status.reservedFor", "may not be specified"}})

	allocated := old.DeepCopy()
	allocated.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
		Results: []resourcev1.DeviceRequestAllocationResult{
			{Request: "req-0", Driver: "dra.example.com", Pool: "node-1", Device: "gpu-0"},
			{Request: "other", Driver: "", Pool: "a//b", Device: "GPU", ShareID: ptr.To(types.UID("NOT-A-UUID"))},
		},
		Config: []resourcev1.DeviceAllocationConfiguration{{Source: "Elsewhere"}},
	}}
	allocated.Status.Devices = []resourcev1.AllocatedDeviceStatus{
		{Driver: "dra.example.com", Pool: "node-1", Device: "gpu-0", NetworkData: &resourcev1.NetworkDeviceData{IPs: []string{"10.0.0.1/24", "nonsense"}}},
		{Driver: "dra.example.com", Pool: "node-1", Device: "gpu-9"},
	}
	expectErrors(t, ResourceClaimStatusUpdate(allocated, old), []want{
		{field.ErrorTypeInvalid, "status.allocation.devices.results[1].request", ""},
		{field.ErrorTypeRequired, "status.allocation.devices.results[1].driver", ""},
		{field.ErrorTypeInvalid, "status.allocation.devices.results[1].pool", ""},
		{field.ErrorTypeInvalid, "status.allocation.devices.results[1].device", ""},
		{field.ErrorTypeInvalid, "status.allocation.devices.results[1].shareID", ""},
		{field.ErrorTypeNotSupported, "status.allocation.devices.config[0].source", ""},
		{field.ErrorTypeInvalid, "status.devices[0].networkData.ips[1]", ""},
		{field.ErrorTypeInvalid, "status.devices[1]", "must be an allocated device in the claim"},
	})

	// An allocation is never changed in place.
	was := old.DeepCopy()
	was.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
		Results: []resourcev1.DeviceRequestAllocationResult{{Request: "req-0", Driver: "dra.example.com", Pool: "node-1", Device: "gpu-0"}},
	}}
	moved := was.DeepCopy()
	moved.Status.Allocation.Devices.Results[0].Device = "gpu-1"
	expectErrors(t, ResourceClaimStatusUpdate(moved, was), []want{{field.ErrorTypeInvalid, "status.allocation", "field is immutable"}})

	// A claim being deleted may lose consumers, not gain them.
	deleting := was.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{}
	deleting.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: "u"}}
	wasDeleting := was.DeepCopy()
	wasDeleting.DeletionTimestamp = deleting.DeletionTimestamp
	expectErrors(t, ResourceClaimStatusUpdate(deleting, wasDeleting), []want{{field.ErrorTypeForbidden, "status.reservedFor", "new entries may not be added"}})
}

func TestResourceClaimTemplate(t *testing.T) {
	tmpl := defaulted(&resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "tmpl", Namespace: "default"},
		Spec: resourcev1.ResourceClaimTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}},
			Spec:       draClaim().Spec,
		},
	})
	expectErrors(t, ResourceClaimTemplate(tmpl), nil)
	bad := tmpl.DeepCopy()
	bad.Spec.Name = "fixed"
	bad.Spec.Finalizers = []string{"a/b"}
	bad.Spec.Spec.Devices.Requests[0].Exactly.DeviceClassName = ""
	expectErrors(t, ResourceClaimTemplate(bad), []want{
		{field.ErrorTypeForbidden, "spec.metadata.name", "cannot be set"},
		{field.ErrorTypeForbidden, "spec.metadata.finalizers", "cannot be set"},
		{field.ErrorTypeRequired, "spec.spec.devices.requests[0].exactly.deviceClassName", ""},
	})
	old := tmpl.DeepCopy()
	old.ResourceVersion = "1"
	changed := old.DeepCopy()
	changed.Spec.Spec.Devices.Requests[0].Exactly.Count = 3
	expectErrors(t, ResourceClaimTemplateUpdate(changed, old), []want{{field.ErrorTypeInvalid, "spec", "field is immutable"}})
}

func TestResourceSlice(t *testing.T) {
	s := defaulted(&resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "slice"},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   "dra.example.com",
			Pool:     resourcev1.ResourcePool{Name: "cluster", Generation: 1, ResourceSliceCount: 1},
			NodeName: ptr.To("no-such-node"),
			Devices: []resourcev1.Device{{
				Name: "device-0",
				Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
					"model":                     {StringValue: ptr.To("a100")},
					"dra.example.com/driverVer": {VersionValue: ptr.To("1.2.3-rc.1+build.5")},
				},
				Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": {Value: resource.MustParse("40Gi")}},
				Taints:   []resourcev1.DeviceTaint{{Key: "example.com/broken", Effect: resourcev1.DeviceTaintEffectNoSchedule}},
			}},
		},
	})
	if s.Spec.Devices[0].Taints[0].TimeAdded == nil {
		t.Fatal("taint's timeAdded not defaulted")
	}
	expectErrors(t, ResourceSlice(s), nil)

	bad := s.DeepCopy()
	bad.Spec.Driver = "Not_A_Driver"
	bad.Spec.Pool = resourcev1.ResourcePool{Name: "", Generation: -1}
	bad.Spec.AllNodes = ptr.To(true)
	bad.Spec.Devices = append(bad.Spec.Devices, resourcev1.Device{
		Name: "device-0",
		Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
			"both":     {IntValue: ptr.To(int64(1)), BoolValue: ptr.To(true)},
			"version":  {VersionValue: ptr.To("v1")},
			"1invalid": {IntValue: ptr.To(int64(1))},
		},
		Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"mem": {Value: resource.MustParse("1"), RequestPolicy: &resourcev1.CapacityRequestPolicy{}}},
		NodeName: ptr.To("n"),
		Taints:   []resourcev1.DeviceTaint{{Key: "k", Effect: "Sometimes"}},
	})
	expectErrors(t, ResourceSlice(bad), []want{
		{field.ErrorTypeInvalid, "spec.driver", ""},
		{field.ErrorTypeRequired, "spec.pool.name", ""},
		{field.ErrorTypeInvalid, "spec.pool.resourceSliceCount", "must be greater than zero"},
		{field.ErrorTypeInvalid, "spec.pool.generation", ""},
		{field.ErrorTypeInvalid, "spec", "multiple fields are set"},
		{field.ErrorTypeDuplicate, "spec.devices[1]", ""},
		{field.ErrorTypeInvalid, "spec.devices[1].attributes[both]", "exactly one value must be specified"},
		{field.ErrorTypeInvalid, "spec.devices[1].attributes[version].version", "semver"},
		{field.ErrorTypeInvalid, "spec.devices[1].attributes", ""},
		{field.ErrorTypeForbidden, "spec.devices[1].capacity[mem].requestPolicy", "allowMultipleAllocations must be true"},
		{field.ErrorTypeNotSupported, "spec.devices[1].taints[0].effect", ""},
		{field.ErrorTypeInvalid, "spec.devices[1]", "can only be set if `perDeviceNodeSelection`"},
	})

	none := s.DeepCopy()
	none.Spec.NodeName = nil
	expectErrors(t, ResourceSlice(none), []want{{field.ErrorTypeRequired, "spec", "exactly one of `nodeName`"}})

	// The conformance test's update adds a device; the driver, pool and
	// node are fixed.
	old := s.DeepCopy()
	old.ResourceVersion = "1"
	grown := old.DeepCopy()
	grown.Spec.Devices = append(grown.Spec.Devices, resourcev1.Device{Name: "device-1"})
	expectErrors(t, ResourceSliceUpdate(grown, old), nil)
	moved := old.DeepCopy()
	moved.Spec.NodeName = ptr.To("elsewhere")
	moved.Spec.Driver = "other.example.com"
	expectErrors(t, ResourceSliceUpdate(moved, old), []want{
		{field.ErrorTypeInvalid, "spec.nodeName", "field is immutable"},
		{field.ErrorTypeInvalid, "spec.driver", "field is immutable"},
	})
}

func TestCapacityRequestPolicy(t *testing.T) {
	q := resource.MustParse
	qp := func(s string) *resource.Quantity { v := q(s); return &v }
	capacity := q("10Gi")
	path := field.NewPath("p")
	expectErrors(t, validateRequestPolicy(capacity, &resourcev1.CapacityRequestPolicy{Default: qp("1Gi"), ValidValues: []resource.Quantity{q("1Gi"), q("2Gi")}}, path), nil)
	expectErrors(t, validateRequestPolicy(capacity, &resourcev1.CapacityRequestPolicy{Default: qp("3Gi"), ValidValues: []resource.Quantity{q("2Gi"), q("1Gi"), q("20Gi")}}, path), []want{
		{field.ErrorTypeInvalid, "p.validValues[1]", "ascending"},
		{field.ErrorTypeInvalid, "p.validValues[2]", "larger than capacity"},
		{field.ErrorTypeInvalid, "p.validValues", "default value is not valid"},
	})
	expectErrors(t, validateRequestPolicy(capacity, &resourcev1.CapacityRequestPolicy{Default: qp("2Gi"), ValidRange: &resourcev1.CapacityRequestPolicyRange{Min: qp("1Gi"), Max: qp("9Gi"), Step: qp("1Gi")}}, path), nil)
	expectErrors(t, validateRequestPolicy(capacity, &resourcev1.CapacityRequestPolicy{Default: qp("1500Mi"), ValidRange: &resourcev1.CapacityRequestPolicyRange{Min: qp("1Gi"), Step: qp("1Gi")}}, path), []want{
		{field.ErrorTypeInvalid, "p.validRange.step", "not a multiple"},
	})
	expectErrors(t, validateRequestPolicy(capacity, &resourcev1.CapacityRequestPolicy{ValidRange: &resourcev1.CapacityRequestPolicyRange{}}, path), []want{
		{field.ErrorTypeRequired, "p.default", ""},
	})
	expectErrors(t, validateRequestPolicy(q("1"), &resourcev1.CapacityRequestPolicy{Default: qp("500m"), ValidRange: &resourcev1.CapacityRequestPolicyRange{Min: qp("250m"), Step: qp("250m")}}, path), nil)
}

func TestDeviceTaintRule(t *testing.T) {
	r := defaulted(&resourcev1.DeviceTaintRule{
		ObjectMeta: metav1.ObjectMeta{Name: "rule"},
		Spec:       resourcev1.DeviceTaintRuleSpec{Taint: resourcev1.DeviceTaint{Key: "testing", Effect: resourcev1.DeviceTaintEffectNone}},
	})
	if r.Spec.Taint.TimeAdded == nil {
		t.Fatal("timeAdded not defaulted")
	}
	expectErrors(t, DeviceTaintRule(r), nil)

	bad := r.DeepCopy()
	bad.Spec.DeviceSelector = &resourcev1.DeviceTaintSelector{Driver: ptr.To("-bad"), Pool: ptr.To(""), Device: ptr.To("Dev")}
	bad.Spec.Taint = resourcev1.DeviceTaint{Key: "", Value: "not valid!", Effect: ""}
	expectErrors(t, DeviceTaintRule(bad), []want{
		{field.ErrorTypeInvalid, "spec.deviceSelector.driver", ""},
		{field.ErrorTypeRequired, "spec.deviceSelector.pool", ""},
		{field.ErrorTypeInvalid, "spec.deviceSelector.device", ""},
		{field.ErrorTypeInvalid, "spec.taint.key", ""},
		{field.ErrorTypeInvalid, "spec.taint.value", ""},
		{field.ErrorTypeRequired, "spec.taint.effect", ""},
	})

	old := r.DeepCopy()
	old.ResourceVersion = "1"
	up := old.DeepCopy()
	up.Spec.Taint.Effect = resourcev1.DeviceTaintEffectNoExecute
	expectErrors(t, DeviceTaintRuleUpdate(up, old), nil)

	st := old.DeepCopy()
	st.Status.Conditions = []metav1.Condition{{Type: "Testing", Status: metav1.ConditionTrue, LastTransitionTime: metav1.Now(), Reason: "E2E_test_running", Message: "m"}}
	expectErrors(t, DeviceTaintRuleStatusUpdate(st, old), nil)
	st.Status.Conditions = append(st.Status.Conditions, metav1.Condition{Type: "bad type!", Status: "Maybe"})
	expectErrors(t, DeviceTaintRuleStatusUpdate(st, old), []want{
		{field.ErrorTypeInvalid, "status.conditions[1].type", ""},
		{field.ErrorTypeNotSupported, "status.conditions[1].status", ""},
	})
}

func TestDeviceTolerationAndSliceNodeSelector(t *testing.T) {
	expectErrors(t, validateDeviceToleration(resourcev1.DeviceToleration{Operator: "Near", Effect: "Later"}, field.NewPath("t")), []want{
		{field.ErrorTypeNotSupported, "t.operator", ""},
		{field.ErrorTypeNotSupported, "t.effect", ""},
	})
	s := &resourcev1.ResourceSliceSpec{Driver: "d.example.com", Pool: resourcev1.ResourcePool{Name: "p", ResourceSliceCount: 1},
		NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{}, {}}}}
	expectErrors(t, validateResourceSliceSpec(s, nil, specPath), []want{
		{field.ErrorTypeInvalid, "spec.nodeSelector.nodeSelectorTerms", "exactly one node selector term"},
	})
}
