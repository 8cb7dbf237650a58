package validation

import (
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestCSIDriver(t *testing.T) {
	d := defaulted(&storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "csi.example.com"}})
	expectErrors(t, CSIDriver(d), nil)

	undefaulted := &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "csi.example.com"}}
	expectErrors(t, CSIDriver(undefaulted), []want{
		{field.ErrorTypeRequired, "spec.attachedRequired", ""},
		{field.ErrorTypeRequired, "spec.podInfoOnMount", ""},
		{field.ErrorTypeRequired, "spec.storageCapacity", ""},
		{field.ErrorTypeRequired, "spec.seLinuxMount", ""},
	})

	bad := d.DeepCopy()
	bad.Spec.FSGroupPolicy = ptr.To(storagev1.FSGroupPolicy("Sometimes"))
	bad.Spec.VolumeLifecycleModes = []storagev1.VolumeLifecycleMode{"Forever"}
	bad.Spec.TokenRequests = []storagev1.TokenRequest{{Audience: "a", ExpirationSeconds: ptr.To(int64(60))}, {Audience: "a"}}
	bad.Spec.NodeAllocatableUpdatePeriodSeconds = ptr.To(int64(5))
	expectErrors(t, CSIDriver(bad), []want{
		{field.ErrorTypeNotSupported, "spec.fsGroupPolicy", ""},
		{field.ErrorTypeNotSupported, "spec.volumeLifecycleModes", ""},
		{field.ErrorTypeInvalid, "spec.tokenRequests[0].expirationSeconds", "less than 10 minutes"},
		{field.ErrorTypeDuplicate, "spec.tokenRequests[1].audience", ""},
		{field.ErrorTypeInvalid, "spec.nodeAllocatableUpdatePeriodSeconds", ""},
	})
	noTokens := d.DeepCopy()
	noTokens.Spec.ServiceAccountTokenInSecrets = ptr.To(true)
	expectErrors(t, CSIDriver(noTokens), []want{{field.ErrorTypeInvalid, "spec.serviceAccountTokenInSecrets", "no tokenRequests"}})

	old := stored(d.DeepCopy())
	changed := old.DeepCopy()
	changed.Spec.PodInfoOnMount = ptr.To(true)
	changed.Spec.RequiresRepublish = ptr.To(true)
	expectErrors(t, CSIDriverUpdate(changed, old), nil)
	fixed := old.DeepCopy()
	fixed.Spec.AttachRequired = ptr.To(false)
	fixed.Spec.VolumeLifecycleModes = []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecycleEphemeral}
	expectErrors(t, CSIDriverUpdate(fixed, old), []want{
		{field.ErrorTypeInvalid, "spec.attachedRequired", "field is immutable"},
		{field.ErrorTypeInvalid, "spec.volumeLifecycleModes", "field is immutable"},
	})
}

func TestCSINode(t *testing.T) {
	n := &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{
		Name: "csi.example.com", NodeID: "node-1", TopologyKeys: []string{"topology.example.com/zone"},
		Allocatable: &storagev1.VolumeNodeResources{Count: ptr.To(int32(10))},
	}}}}
	expectErrors(t, CSINode(n), nil)

	bad := n.DeepCopy()
	bad.Spec.Drivers = append(bad.Spec.Drivers, storagev1.CSINodeDriver{
		Name: "csi.example.com", NodeID: strings.Repeat("x", 257), TopologyKeys: []string{"a", "a", "bad key"},
		Allocatable: &storagev1.VolumeNodeResources{Count: ptr.To(int32(-1))},
	}, storagev1.CSINodeDriver{Name: "Bad_Driver"})
	expectErrors(t, CSINode(bad), []want{
		{field.ErrorTypeDuplicate, "spec.drivers[1].name", ""},
		{field.ErrorTypeInvalid, "spec.drivers[1].nodeID", "256 characters or less"},
		{field.ErrorTypeDuplicate, "spec.drivers[1]", ""},
		{field.ErrorTypeInvalid, "spec.drivers[1]", ""},
		{field.ErrorTypeInvalid, "spec.drivers[1].allocatable.count", ""},
		{field.ErrorTypeInvalid, "spec.drivers[2].name", ""},
		{field.ErrorTypeRequired, "spec.drivers[2].nodeID", ""},
	})

	old := stored(n.DeepCopy())
	recount := old.DeepCopy()
	recount.Spec.Drivers[0].Allocatable.Count = ptr.To(int32(20))
	recount.Spec.Drivers = append(recount.Spec.Drivers, storagev1.CSINodeDriver{Name: "other.example.com", NodeID: "n1"})
	expectErrors(t, CSINodeUpdate(recount, old), nil)
	moved := old.DeepCopy()
	moved.Spec.Drivers[0].NodeID = "node-2"
	expectErrors(t, CSINodeUpdate(moved, old), []want{{field.ErrorTypeInvalid, "spec.drivers", "field is immutable"}})

	status := old.DeepCopy()
	status.Status.StorageHealth = []storagev1.StorageHealth{
		{Name: "csi.example.com", HealthConditions: []storagev1.StorageHealthCondition{{Status: "Fine", Reason: ""}}},
		{Name: "csi.example.com"},
	}
	expectErrors(t, CSINodeStatusUpdate(status, old), []want{
		{field.ErrorTypeNotSupported, "status.storageHealth[0].healthConditions[0].status", ""},
		{field.ErrorTypeRequired, "status.storageHealth[0].healthConditions[0].reason", ""},
		{field.ErrorTypeDuplicate, "status.storageHealth[1]", ""},
	})
}

func volumeAttachment() *storagev1.VolumeAttachment {
	return &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: "va-1"}, Spec: storagev1.VolumeAttachmentSpec{
		Attacher: "csi.example.com", NodeName: "node-1",
		Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To("pv-1")},
	}}
}

func TestVolumeAttachment(t *testing.T) {
	va := volumeAttachment()
	expectErrors(t, VolumeAttachment(va), nil)

	none := va.DeepCopy()
	none.Spec.Source.PersistentVolumeName = nil
	none.Spec.Attacher = ""
	none.Spec.NodeName = "Node_1"
	expectErrors(t, VolumeAttachment(none), []want{
		{field.ErrorTypeRequired, "spec.source", "exactly one of inlineVolumeSpec and persistentVolumeName"},
		{field.ErrorTypeRequired, "spec.attacher", ""},
		{field.ErrorTypeInvalid, "spec.nodeName", ""},
	})
	both := va.DeepCopy()
	both.Spec.Source.InlineVolumeSpec = &corev1.PersistentVolumeSpec{}
	expectErrors(t, VolumeAttachment(both), []want{{field.ErrorTypeForbidden, "spec.source", ""}})
	inline := va.DeepCopy()
	inline.Spec.Source = storagev1.VolumeAttachmentSource{InlineVolumeSpec: &corev1.PersistentVolumeSpec{
		Capacity:               corev1.ResourceList{corev1.ResourceStorage: mustQ("1Gi")},
		AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data"}},
	}}
	expectErrors(t, VolumeAttachment(inline), []want{
		{field.ErrorTypeForbidden, "spec.source.inlineVolumeSpec.capacity", "inline volumes"},
		{field.ErrorTypeRequired, "spec.source.inlineVolumeSpec.csi", "inline volumes"},
	})
	badName := va.DeepCopy()
	badName.Spec.Source.PersistentVolumeName = ptr.To("PV_1")
	expectErrors(t, VolumeAttachment(badName), []want{{field.ErrorTypeInvalid, "spec.source.persistentVolumeName", ""}})
	badStatus := va.DeepCopy()
	badStatus.Status.AttachError = &storagev1.VolumeError{Message: strings.Repeat("x", 1025), ErrorCode: ptr.To(int32(-1))}
	expectErrors(t, VolumeAttachment(badStatus), []want{
		{field.ErrorTypeTooLong, "status.attachError.message", ""},
		{field.ErrorTypeInvalid, "status.attachError.errorCode", ""},
	})

	old := stored(va.DeepCopy())
	attached := old.DeepCopy()
	attached.Status.Attached = true
	expectErrors(t, VolumeAttachmentUpdate(attached, old), nil)
	moved := old.DeepCopy()
	moved.Spec.NodeName = "node-2"
	expectErrors(t, VolumeAttachmentUpdate(moved, old), []want{{field.ErrorTypeInvalid, "spec", "field is immutable"}})
}

func TestCSIStorageCapacity(t *testing.T) {
	c := &storagev1.CSIStorageCapacity{ObjectMeta: metav1.ObjectMeta{Name: "cap-1", Namespace: "default"},
		StorageClassName: "local", Capacity: ptr.To(mustQ("10Gi")),
		NodeTopology: &metav1.LabelSelector{MatchLabels: map[string]string{"topology.example.com/zone": "a"}}}
	expectErrors(t, CSIStorageCapacity(c), nil)

	bad := c.DeepCopy()
	bad.StorageClassName = "Not_A_Class"
	bad.Capacity = ptr.To(mustQ("-1"))
	bad.NodeTopology.MatchLabels = map[string]string{"bad key!": "a"}
	expectErrors(t, CSIStorageCapacity(bad), []want{
		{field.ErrorTypeInvalid, "storageClassName", ""},
		{field.ErrorTypeInvalid, "capacity", ""},
		{field.ErrorTypeInvalid, "nodeTopology.matchLabels", ""},
	})

	old := stored(c.DeepCopy())
	grown := old.DeepCopy()
	grown.Capacity = ptr.To(mustQ("20Gi"))
	grown.MaximumVolumeSize = ptr.To(mustQ("5Gi"))
	expectErrors(t, CSIStorageCapacityUpdate(grown, old), nil)
	moved := old.DeepCopy()
	moved.StorageClassName = "other"
	moved.NodeTopology = nil
	expectErrors(t, CSIStorageCapacityUpdate(moved, old), []want{
		{field.ErrorTypeInvalid, "storageClassName", "field is immutable"},
		{field.ErrorTypeInvalid, "nodeTopology", "field is immutable"},
	})
}

func TestVolumeAttributesClass(t *testing.T) {
	c := &storagev1.VolumeAttributesClass{ObjectMeta: metav1.ObjectMeta{Name: "gold"}, DriverName: "csi.example.com",
		Parameters: map[string]string{"iops": "1000"}}
	expectErrors(t, VolumeAttributesClass(c), nil)

	bad := c.DeepCopy()
	bad.DriverName = ""
	bad.Parameters = nil
	expectErrors(t, VolumeAttributesClass(bad), []want{
		{field.ErrorTypeRequired, "driverName", ""},
		{field.ErrorTypeRequired, "parameters", "at least one key/value pair"},
	})
	bad.DriverName = "Bad Driver!"
	expectErrors(t, VolumeAttributesClass(bad), []want{{field.ErrorTypeInvalid, "driverName", ""}})

	old := stored(c.DeepCopy())
	relabelled := old.DeepCopy()
	relabelled.Labels = map[string]string{"tier": "gold"}
	expectErrors(t, VolumeAttributesClassUpdate(relabelled, old), nil)
	changed := old.DeepCopy()
	changed.Parameters = map[string]string{"iops": "2000"}
	changed.DriverName = "other.example.com"
	expectErrors(t, VolumeAttributesClassUpdate(changed, old), []want{
		{field.ErrorTypeForbidden, "parameters", "updates to parameters are forbidden."},
		{field.ErrorTypeForbidden, "driverName", "updates to driverName are forbidden."},
	})
}
