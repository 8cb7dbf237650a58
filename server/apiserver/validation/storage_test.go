package validation

import (
	"testing"

	"k8s.io/utils/ptr"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func pvc() *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data"}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: mustQ("1Gi")}},
	}}
}

func TestPVC(t *testing.T) {
	c := defaulted(pvc())
	expectErrors(t, Validate(c), nil)

	bad := c.DeepCopy()
	bad.Spec.AccessModes = nil
	bad.Spec.Resources.Requests = nil
	expectErrors(t, Validate(bad), []want{
		{field.ErrorTypeRequired, "spec.accessModes", "at least 1 access mode is required"},
		{field.ErrorTypeRequired, "spec.resources[storage]", ""},
	})
	mixed := c.DeepCopy()
	mixed.Spec.AccessModes = append(mixed.Spec.AccessModes, corev1.ReadWriteOncePod)
	expectErrors(t, Validate(mixed), []want{{field.ErrorTypeForbidden, "spec.accessModes", "ReadWriteOncePod"}})

	old := stored(c.DeepCopy())
	old.Status.Phase = corev1.ClaimBound
	old.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: mustQ("1Gi")}
	grown := old.DeepCopy()
	grown.Spec.Resources.Requests[corev1.ResourceStorage] = mustQ("2Gi")
	grown.Spec.VolumeName = "pv-1"
	expectErrors(t, ValidateUpdate(grown, old), nil)
	shrunk := old.DeepCopy()
	shrunk.Spec.Resources.Requests[corev1.ResourceStorage] = mustQ("500Mi")
	expectErrors(t, ValidateUpdate(shrunk, old), []want{{field.ErrorTypeForbidden, "spec.resources.requests.storage", ""}})
	remode := old.DeepCopy()
	remode.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
	expectErrors(t, ValidateUpdate(remode, old), []want{{field.ErrorTypeForbidden, "spec", "spec is immutable after creation"}})
}

func TestPV(t *testing.T) {
	pv := defaulted(&corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-1"}, Spec: corev1.PersistentVolumeSpec{
		Capacity:               corev1.ResourceList{corev1.ResourceStorage: mustQ("10Gi")},
		AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data/pv-1"}},
	}})
	expectErrors(t, Validate(pv), nil)

	bad := pv.DeepCopy()
	bad.Spec.Capacity = nil
	bad.Spec.NFS = &corev1.NFSVolumeSource{Server: "nfs", Path: "/x"}
	bad.Spec.PersistentVolumeReclaimPolicy = "Shred"
	expectErrors(t, Validate(bad), []want{
		{field.ErrorTypeRequired, "spec.capacity", ""},
		{field.ErrorTypeForbidden, "spec.nfs", "may not specify more than 1 volume type"},
		{field.ErrorTypeNotSupported, "spec.persistentVolumeReclaimPolicy", ""},
	})
	none := pv.DeepCopy()
	none.Spec.HostPath = nil
	expectErrors(t, Validate(none), []want{{field.ErrorTypeRequired, "spec", "must specify a volume type"}})

	old := stored(pv.DeepCopy())
	moved := old.DeepCopy()
	moved.Spec.HostPath.Path = "/elsewhere"
	expectErrors(t, ValidateUpdate(moved, old), []want{{field.ErrorTypeForbidden, "spec.persistentvolumesource", "immutable"}})
	retained := old.DeepCopy()
	retained.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
	expectErrors(t, ValidateUpdate(retained, old), nil)
}

func TestStorageClass(t *testing.T) {
	sc := defaulted(&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "standard"}, Provisioner: "rancher.io/local-path",
		Parameters: map[string]string{"type": "ssd"}})
	expectErrors(t, Validate(sc), nil)

	noProv := sc.DeepCopy()
	noProv.Provisioner = ""
	expectErrors(t, Validate(noProv), []want{{field.ErrorTypeRequired, "provisioner", ""}})

	old := stored(sc.DeepCopy())
	reparam := old.DeepCopy()
	reparam.Parameters["type"] = "hdd"
	reparam.Provisioner = "example.com/other"
	expectErrors(t, ValidateUpdate(reparam, old), []want{
		{field.ErrorTypeForbidden, "parameters", "updates to parameters are forbidden."},
		{field.ErrorTypeForbidden, "provisioner", "updates to provisioner are forbidden."},
	})
	expand := old.DeepCopy()
	expand.AllowVolumeExpansion = ptr.To(true)
	expectErrors(t, ValidateUpdate(expand, old), nil)
}

// A claim created without a class may be given one once (the retroactive
// default StorageClass); a class, once set, stays.
func TestPVCClassSetOnce(t *testing.T) {
	old := stored(defaulted(pvc()))
	given := old.DeepCopy()
	given.Spec.StorageClassName = ptr.To("local-path")
	expectErrors(t, ValidateUpdate(given, old), nil)
	changed := given.DeepCopy()
	changed.Spec.StorageClassName = ptr.To("fast")
	expectErrors(t, ValidateUpdate(changed, given), []want{{field.ErrorTypeForbidden, "spec", "spec is immutable after creation"}})
	noClass := old.DeepCopy()
	noClass.Spec.StorageClassName = ptr.To("") // asked for no class
	expectErrors(t, ValidateUpdate(given, noClass), []want{{field.ErrorTypeForbidden, "spec", "spec is immutable after creation"}})
}
