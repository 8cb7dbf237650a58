package admission

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	volumehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/kelp-project/kelp/server/claims"
)

// Upstream's finalizers protecting claims and volumes in use.
const (
	pvcProtectionFinalizer = claims.PVCProtectionFinalizer
	pvProtectionFinalizer  = claims.PVProtectionFinalizer
)

var (
	pvsResource            = corev1.SchemeGroupVersion.WithResource("persistentvolumes").GroupResource()
	storageClassesResource = storagev1.SchemeGroupVersion.WithResource("storageclasses")
)

// creatingClaim returns the claim a top-level PVC create carries.
func creatingClaim(a *Attributes) (*corev1.PersistentVolumeClaim, bool) {
	if a.Operation != "CREATE" || a.Resource.GroupResource() != pvcsResource || a.Subresource != "" {
		return nil, false
	}
	pvc, ok := a.Object.(*corev1.PersistentVolumeClaim)
	return pvc, ok
}

// defaultStorageClass gives a claim created without a storageClassName the
// default StorageClass, as upstream's DefaultStorageClass plugin: the
// newest of several defaults, none if there is no default (the PV binder
// assigns one later, should one appear). A claim asking for class "" keeps
// asking for no class.
type defaultStorageClass struct{ classes ObjectGetter }

func (d defaultStorageClass) Admit(ctx context.Context, a *Attributes) error {
	pvc, ok := creatingClaim(a)
	if !ok || volumehelpers.PersistentVolumeClaimHasClass(pvc) {
		return nil
	}
	objs, err := d.classes.List(ctx, "")
	if err != nil {
		return apierrors.NewForbidden(a.Resource.GroupResource(), a.Name, err)
	}
	classes := make([]*storagev1.StorageClass, 0, len(objs))
	for _, o := range objs {
		if c, ok := o.(*storagev1.StorageClass); ok {
			classes = append(classes, c)
		}
	}
	if def := claims.DefaultClass(classes); def != nil {
		name := def.Name
		pvc.Spec.StorageClassName = &name
	}
	return nil
}

// storageObjectInUseProtection adds the protection finalizer to every new
// claim and volume, as upstream's StorageObjectInUseProtection plugin: the
// pvc-protection and pv-protection controllers remove it once nothing
// uses the object.
type storageObjectInUseProtection struct{}

func (storageObjectInUseProtection) Admit(_ context.Context, a *Attributes) error {
	if a.Operation != "CREATE" || a.Subresource != "" {
		return nil
	}
	switch obj := a.Object.(type) {
	case *corev1.PersistentVolumeClaim:
		if a.Resource.GroupResource() == pvcsResource && !slices.Contains(obj.Finalizers, pvcProtectionFinalizer) {
			obj.Finalizers = append(obj.Finalizers, pvcProtectionFinalizer)
		}
	case *corev1.PersistentVolume:
		if a.Resource.GroupResource() == pvsResource && !slices.Contains(obj.Finalizers, pvProtectionFinalizer) {
			obj.Finalizers = append(obj.Finalizers, pvProtectionFinalizer)
		}
	}
	return nil
}
