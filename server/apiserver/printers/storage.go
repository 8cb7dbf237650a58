package printers

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	storageutil "k8s.io/kubectl/pkg/util/storage"
)

func init() {
	pvSpecDoc := corev1.PersistentVolumeSpec{}.SwaggerDoc()
	pvStatusDoc := corev1.PersistentVolumeStatus{}.SwaggerDoc()
	cells([]metav1.TableColumnDefinition{
		nameColumn(),
		column("Capacity", "string", pvSpecDoc["capacity"]),
		column("Access Modes", "string", pvSpecDoc["accessModes"]),
		column("Reclaim Policy", "string", pvSpecDoc["persistentVolumeReclaimPolicy"]),
		column("Status", "string", pvStatusDoc["phase"]),
		column("Claim", "string", pvSpecDoc["claimRef"]),
		column("StorageClass", "string", "StorageClass of the pv"),
		column("VolumeAttributesClass", "string", "VolumeAttributesClass of the pv"),
		column("Reason", "string", pvStatusDoc["reason"]),
		ageColumn(),
		wide(column("VolumeMode", "string", pvSpecDoc["volumeMode"])),
	}, func(pv *corev1.PersistentVolume, now time.Time) []interface{} {
		claim := ""
		if ref := pv.Spec.ClaimRef; ref != nil {
			claim = ref.Namespace + "/" + ref.Name
		}
		phase := string(pv.Status.Phase)
		if pv.DeletionTimestamp != nil {
			phase = "Terminating"
		}
		capacity := pv.Spec.Capacity[corev1.ResourceStorage]
		return []interface{}{
			pv.Name,
			capacity.String(),
			storageutil.GetAccessModesAsString(pv.Spec.AccessModes),
			string(pv.Spec.PersistentVolumeReclaimPolicy),
			phase,
			claim,
			storageutil.GetPersistentVolumeClass(pv),
			orUnset(pv.Spec.VolumeAttributesClassName),
			pv.Status.Reason,
			age(pv.ObjectMeta, now),
			volumeModeString(pv.Spec.VolumeMode),
		}
	})

	pvcSpecDoc := corev1.PersistentVolumeClaimSpec{}.SwaggerDoc()
	pvcStatusDoc := corev1.PersistentVolumeClaimStatus{}.SwaggerDoc()
	cells([]metav1.TableColumnDefinition{
		nameColumn(),
		column("Status", "string", pvcStatusDoc["phase"]),
		column("Volume", "string", pvcSpecDoc["volumeName"]),
		column("Capacity", "string", pvcStatusDoc["capacity"]),
		column("Access Modes", "string", pvcStatusDoc["accessModes"]),
		column("StorageClass", "string", "StorageClass of the pvc"),
		column("VolumeAttributesClass", "string", "VolumeAttributesClass of the pvc"),
		ageColumn(),
		wide(column("VolumeMode", "string", pvcSpecDoc["volumeMode"])),
	}, func(pvc *corev1.PersistentVolumeClaim, now time.Time) []interface{} {
		phase := string(pvc.Status.Phase)
		if pvc.DeletionTimestamp != nil {
			phase = "Terminating"
		}
		// Capacity and access modes describe the bound volume, so they stay
		// blank until the claim is bound rather than echoing the request.
		capacity, accessModes := "", ""
		if pvc.Spec.VolumeName != "" {
			accessModes = storageutil.GetAccessModesAsString(pvc.Status.AccessModes)
			q := pvc.Status.Capacity[corev1.ResourceStorage]
			capacity = q.String()
		}
		return []interface{}{
			pvc.Name,
			phase,
			pvc.Spec.VolumeName,
			capacity,
			accessModes,
			storageutil.GetPersistentVolumeClaimClass(pvc),
			orUnset(pvc.Spec.VolumeAttributesClassName),
			age(pvc.ObjectMeta, now),
			volumeModeString(pvc.Spec.VolumeMode),
		}
	})

	scDoc := storagev1.StorageClass{}.SwaggerDoc()
	cells([]metav1.TableColumnDefinition{
		nameColumn(),
		column("Provisioner", "string", scDoc["provisioner"]),
		column("ReclaimPolicy", "string", scDoc["reclaimPolicy"]),
		column("VolumeBindingMode", "string", scDoc["volumeBindingMode"]),
		column("AllowVolumeExpansion", "string", scDoc["allowVolumeExpansion"]),
		ageColumn(),
	}, func(sc *storagev1.StorageClass, now time.Time) []interface{} {
		name := sc.Name
		if storageutil.IsDefaultAnnotationText(sc.ObjectMeta) == "Yes" {
			name += " (default)"
		}
		// Unset fields print their API defaults.
		reclaim := string(corev1.PersistentVolumeReclaimDelete)
		if sc.ReclaimPolicy != nil {
			reclaim = string(*sc.ReclaimPolicy)
		}
		binding := string(storagev1.VolumeBindingImmediate)
		if sc.VolumeBindingMode != nil {
			binding = string(*sc.VolumeBindingMode)
		}
		return []interface{}{
			name,
			sc.Provisioner,
			reclaim,
			binding,
			deref(sc.AllowVolumeExpansion),
			age(sc.ObjectMeta, now),
		}
	})
}

func volumeModeString(m *corev1.PersistentVolumeMode) string {
	if m == nil {
		return "<unset>"
	}
	return string(*m)
}

func orUnset(s *string) string {
	if s == nil {
		return "<unset>"
	}
	return *s
}
