// Package claims holds the readings of PersistentVolumeClaims that the API
// server (admission, the Node authorizer), the controllers and the
// scheduler must make alike: which claims a pod uses, which StorageClass
// is the default, and the finalizers that keep claims and volumes in use.
// It imports only API types, so any layer may use it.
package claims

import (
	"sort"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/component-helpers/storage/ephemeral"
	storageutil "k8s.io/kubectl/pkg/util/storage"
)

// Upstream's finalizers: admission puts them on every new claim and
// volume, and the pvc-protection and pv-protection controllers take them
// off once nothing uses the object.
const (
	PVCProtectionFinalizer = "kubernetes.io/pvc-protection"
	PVProtectionFinalizer  = "kubernetes.io/pv-protection"
)

// Name is the claim a pod's volume uses: its persistentVolumeClaim's, or
// "<pod>-<volume>" for a generic ephemeral volume; "" for other volumes.
func Name(pod *corev1.Pod, v *corev1.Volume) string {
	switch {
	case v.PersistentVolumeClaim != nil:
		return v.PersistentVolumeClaim.ClaimName
	case v.Ephemeral != nil:
		return ephemeral.VolumeClaimName(pod, v)
	}
	return ""
}

// OfPod lists the claims a pod's volumes use, in volume order.
func OfPod(pod *corev1.Pod) []string {
	var out []string
	for i := range pod.Spec.Volumes {
		if n := Name(pod, &pod.Spec.Volumes[i]); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// DefaultClass is the default StorageClass among classes: the one
// annotated default (or with the beta annotation), the newest when several
// are (upstream 1.28+), ties broken by name; nil when none is.
func DefaultClass(classes []*storagev1.StorageClass) *storagev1.StorageClass {
	var defaults []*storagev1.StorageClass
	for _, c := range classes {
		if c.Annotations[storageutil.IsDefaultStorageClassAnnotation] == "true" || c.Annotations[storageutil.BetaIsDefaultStorageClassAnnotation] == "true" {
			defaults = append(defaults, c)
		}
	}
	if len(defaults) == 0 {
		return nil
	}
	sort.Slice(defaults, func(i, j int) bool {
		ti, tj := defaults[i].CreationTimestamp, defaults[j].CreationTimestamp
		if !ti.Equal(&tj) {
			return tj.Before(&ti)
		}
		return defaults[i].Name < defaults[j].Name
	})
	return defaults[0]
}
