package validation

import (
	"fmt"
	"path"
	"slices"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var (
	supportedAccessModes     = sets.New(corev1.ReadWriteOnce, corev1.ReadOnlyMany, corev1.ReadWriteMany, corev1.ReadWriteOncePod)
	supportedVolumeModes     = sets.New(corev1.PersistentVolumeBlock, corev1.PersistentVolumeFilesystem)
	supportedReclaimPolicies = sets.New(corev1.PersistentVolumeReclaimDelete, corev1.PersistentVolumeReclaimRecycle, corev1.PersistentVolumeReclaimRetain)
)

const (
	maxProvisionerParameterCount = 512
	maxProvisionerParameterSize  = 256 * (1 << 10)
)

func validateAccessModes(modes []corev1.PersistentVolumeAccessMode, fldPath *field.Path, requiredMsg string) field.ErrorList {
	var errs field.ErrorList
	if len(modes) == 0 {
		errs = append(errs, field.Required(fldPath, requiredMsg))
	}
	rwop, other := false, false
	for _, m := range modes {
		if !supportedAccessModes.Has(m) {
			errs = append(errs, field.NotSupported(fldPath, m, sets.List(supportedAccessModes)))
		}
		if m == corev1.ReadWriteOncePod {
			rwop = true
		} else if supportedAccessModes.Has(m) {
			other = true
		}
	}
	if rwop && other {
		errs = append(errs, field.Forbidden(fldPath, "may not use ReadWriteOncePod with other access modes"))
	}
	return errs
}

// validatePVCSpec is ValidatePersistentVolumeClaimSpec. Note upstream's
// path for the storage request: spec.resources[storage].
func validatePVCSpec(spec *corev1.PersistentVolumeClaimSpec, fldPath *field.Path) field.ErrorList {
	allErrs := validateAccessModes(spec.AccessModes, fldPath.Child("accessModes"), "at least 1 access mode is required")
	if spec.Selector != nil {
		allErrs = append(allErrs, validateLabelSelector(spec.Selector, fldPath.Child("selector"))...)
	}
	storagePath := fldPath.Child("resources").Key(string(corev1.ResourceStorage))
	if q, ok := spec.Resources.Requests[corev1.ResourceStorage]; !ok {
		allErrs = append(allErrs, field.Required(storagePath, ""))
	} else {
		allErrs = append(allErrs, validatePositiveQuantity(q, storagePath)...)
	}
	for name, q := range spec.Resources.Limits {
		allErrs = append(allErrs, validateNonnegativeQuantity(q, fldPath.Child("resources", "limits").Key(string(name)))...)
	}
	if spec.StorageClassName != nil && *spec.StorageClassName != "" {
		allErrs = append(allErrs, validateName(*spec.StorageClassName, nameIsDNSSubdomain, fldPath.Child("storageClassName"))...)
	}
	if spec.VolumeMode != nil && !supportedVolumeModes.Has(*spec.VolumeMode) {
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("volumeMode"), *spec.VolumeMode, sets.List(supportedVolumeModes)))
	}
	if ds := spec.DataSource; ds != nil {
		if ds.Name == "" {
			allErrs = append(allErrs, field.Required(fldPath.Child("dataSource", "name"), ""))
		}
		if ds.Kind == "" {
			allErrs = append(allErrs, field.Required(fldPath.Child("dataSource", "kind"), ""))
		}
	}
	return allErrs
}

func PersistentVolumeClaim(pvc *corev1.PersistentVolumeClaim) field.ErrorList {
	allErrs := validateObjectMeta(&pvc.ObjectMeta, true, nameIsDNSSubdomain)
	return append(allErrs, validatePVCSpec(&pvc.Spec, specPath)...)
}

// validatePVCUpdate: a claim's spec is fixed at creation (quota and limit
// ranges were enforced against it) except binding (volumeName, once),
// growing the storage request of a bound claim, and the volume attributes
// class.
func PersistentVolumeClaimUpdate(newPVC, oldPVC *corev1.PersistentVolumeClaim) field.ErrorList {
	allErrs := validateObjectMetaUpdate(&newPVC.ObjectMeta, &oldPVC.ObjectMeta)
	allErrs = append(allErrs, validatePVCSpec(&newPVC.Spec, specPath)...)

	newSpec, oldSpec := newPVC.Spec.DeepCopy(), oldPVC.Spec.DeepCopy()
	if oldSpec.VolumeName == "" {
		oldSpec.VolumeName = newSpec.VolumeName
	}
	// A claim created without a class may be given one once (upstream's
	// retroactive default StorageClass, which the PV binder does).
	if _, beta := oldPVC.Annotations[corev1.BetaStorageClassAnnotation]; !beta && oldSpec.StorageClassName == nil &&
		newSpec.StorageClassName != nil && *newSpec.StorageClassName != "" {
		oldSpec.StorageClassName = newSpec.StorageClassName
	}
	// Storage may be resized on bound claims; compared separately below.
	if newPVC.Status.Phase == corev1.ClaimBound && newSpec.Resources.Requests != nil {
		if q, ok := oldSpec.Resources.Requests[corev1.ResourceStorage]; ok {
			newSpec.Resources.Requests[corev1.ResourceStorage] = q
		}
	}
	newSpec.VolumeAttributesClassName = oldSpec.VolumeAttributesClassName
	if !apiequality.Semantic.DeepEqual(newSpec, oldSpec) {
		allErrs = append(allErrs, field.Forbidden(specPath, fmt.Sprintf(
			"spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims\n%s", changedFields(oldSpec, newSpec, "spec"))))
	}
	newSize := newPVC.Spec.Resources.Requests[corev1.ResourceStorage]
	oldSize := oldPVC.Spec.Resources.Requests[corev1.ResourceStorage]
	if newSize.Cmp(oldSize) < 0 {
		// Shrinking is allowed only back towards the real capacity, to
		// recover from a failed expansion.
		capacity, hasCap := oldPVC.Status.Capacity[corev1.ResourceStorage]
		if !hasCap || newSize.Cmp(capacity) <= 0 {
			allErrs = append(allErrs, field.Forbidden(specPath.Child("resources", "requests", "storage"), "field can not be less than status.capacity"))
		}
	}
	return allErrs
}

func PersistentVolume(pv *corev1.PersistentVolume) field.ErrorList {
	allErrs := validateObjectMeta(&pv.ObjectMeta, false, nameIsDNSSubdomain)
	spec := &pv.Spec
	allErrs = append(allErrs, validateAccessModes(spec.AccessModes, specPath.Child("accessModes"), "")...)
	capPath := specPath.Child("capacity")
	if len(spec.Capacity) == 0 {
		allErrs = append(allErrs, field.Required(capPath, ""))
	}
	if _, ok := spec.Capacity[corev1.ResourceStorage]; !ok || len(spec.Capacity) > 1 {
		allErrs = append(allErrs, field.NotSupported(capPath, spec.Capacity, []corev1.ResourceName{corev1.ResourceStorage}))
	}
	for name, q := range spec.Capacity {
		allErrs = append(allErrs, validatePositiveQuantity(q, capPath.Key(string(name)))...)
	}
	if spec.StorageClassName != "" {
		allErrs = append(allErrs, validateName(spec.StorageClassName, nameIsDNSSubdomain, specPath.Child("storageClassName"))...)
	}
	if spec.VolumeMode != nil && !supportedVolumeModes.Has(*spec.VolumeMode) {
		allErrs = append(allErrs, field.NotSupported(specPath.Child("volumeMode"), *spec.VolumeMode, sets.List(supportedVolumeModes)))
	}
	if rp := spec.PersistentVolumeReclaimPolicy; rp != "" && !supportedReclaimPolicies.Has(rp) {
		allErrs = append(allErrs, field.NotSupported(specPath.Child("persistentVolumeReclaimPolicy"), rp, sets.List(supportedReclaimPolicies)))
	}
	allErrs = append(allErrs, validatePVSource(&spec.PersistentVolumeSource, specPath)...)
	if spec.HostPath != nil && path.Clean(spec.HostPath.Path) == "/" && spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimRecycle {
		allErrs = append(allErrs, field.Forbidden(specPath.Child("persistentVolumeReclaimPolicy"), "may not be 'recycle' for a hostPath mount of '/'"))
	}
	if spec.Local != nil && (spec.NodeAffinity == nil || spec.NodeAffinity.Required == nil) {
		allErrs = append(allErrs, field.Required(specPath.Child("nodeAffinity"), "Local volume requires node affinity"))
	}
	if spec.NodeAffinity != nil && spec.NodeAffinity.Required != nil {
		allErrs = append(allErrs, validateNodeSelector(spec.NodeAffinity.Required, specPath.Child("nodeAffinity", "required"))...)
	}
	return allErrs
}

// validatePVUpdate: the volume source, volume mode and (once set) node
// affinity are fixed; capacity, reclaim policy, class, claimRef may change.
func PersistentVolumeUpdate(newPV, oldPV *corev1.PersistentVolume) field.ErrorList {
	allErrs := validateObjectMetaUpdate(&newPV.ObjectMeta, &oldPV.ObjectMeta)
	allErrs = append(allErrs, PersistentVolume(newPV)...)
	if !apiequality.Semantic.DeepEqual(newPV.Spec.PersistentVolumeSource, oldPV.Spec.PersistentVolumeSource) {
		allErrs = append(allErrs, field.Forbidden(specPath.Child("persistentvolumesource"), "spec.persistentvolumesource is immutable after creation"))
	}
	allErrs = append(allErrs, validateImmutable(newPV.Spec.VolumeMode, oldPV.Spec.VolumeMode, specPath.Child("volumeMode"))...)
	if oldPV.Spec.NodeAffinity != nil {
		allErrs = append(allErrs, validateImmutable(newPV.Spec.NodeAffinity, oldPV.Spec.NodeAffinity, specPath.Child("nodeAffinity"))...)
	}
	return allErrs
}

func StorageClass(sc *storagev1.StorageClass) field.ErrorList {
	allErrs := validateObjectMeta(&sc.ObjectMeta, false, nameIsDNSSubdomain)
	allErrs = append(allErrs, validateProvisioner(sc.Provisioner, field.NewPath("provisioner"))...)
	allErrs = append(allErrs, validateProvisionerParameters(sc.Parameters, true, field.NewPath("parameters"))...)
	if rp := sc.ReclaimPolicy; rp != nil && *rp != corev1.PersistentVolumeReclaimDelete && *rp != corev1.PersistentVolumeReclaimRetain {
		allErrs = append(allErrs, field.NotSupported(field.NewPath("reclaimPolicy"), *rp,
			[]corev1.PersistentVolumeReclaimPolicy{corev1.PersistentVolumeReclaimDelete, corev1.PersistentVolumeReclaimRetain}))
	}
	modes := []storagev1.VolumeBindingMode{storagev1.VolumeBindingImmediate, storagev1.VolumeBindingWaitForFirstConsumer}
	if sc.VolumeBindingMode == nil {
		allErrs = append(allErrs, field.Required(field.NewPath("volumeBindingMode"), ""))
	} else if !slices.Contains(modes, *sc.VolumeBindingMode) {
		allErrs = append(allErrs, field.NotSupported(field.NewPath("volumeBindingMode"), *sc.VolumeBindingMode, modes))
	}
	for i, t := range sc.AllowedTopologies {
		p := field.NewPath("allowedTopologies").Index(i)
		if len(t.MatchLabelExpressions) == 0 {
			allErrs = append(allErrs, field.Required(p.Child("matchLabelExpressions"), "must contain at least one key/value pair"))
		}
		for j, e := range t.MatchLabelExpressions {
			ep := p.Child("matchLabelExpressions").Index(j)
			allErrs = append(allErrs, metav1validation.ValidateLabelName(e.Key, ep.Child("key"))...)
			if len(e.Values) == 0 {
				allErrs = append(allErrs, field.Required(ep.Child("values"), "must specify as least one value"))
			}
		}
	}
	return allErrs
}

// validateStorageClassUpdate: a class is a contract with volumes already
// provisioned from it, so only metadata and allowVolumeExpansion,
// mountOptions and allowedTopologies may change.
func StorageClassUpdate(newSC, oldSC *storagev1.StorageClass) field.ErrorList {
	allErrs := validateObjectMetaUpdate(&newSC.ObjectMeta, &oldSC.ObjectMeta)
	allErrs = append(allErrs, StorageClass(newSC)...)
	if !apiequality.Semantic.DeepEqual(newSC.Parameters, oldSC.Parameters) {
		allErrs = append(allErrs, field.Forbidden(field.NewPath("parameters"), "updates to parameters are forbidden."))
	}
	if newSC.Provisioner != oldSC.Provisioner {
		allErrs = append(allErrs, field.Forbidden(field.NewPath("provisioner"), "updates to provisioner are forbidden."))
	}
	if !apiequality.Semantic.DeepEqual(newSC.ReclaimPolicy, oldSC.ReclaimPolicy) {
		allErrs = append(allErrs, field.Forbidden(field.NewPath("reclaimPolicy"), "updates to reclaimPolicy are forbidden."))
	}
	allErrs = append(allErrs, validateImmutable(newSC.VolumeBindingMode, oldSC.VolumeBindingMode, field.NewPath("volumeBindingMode"))...)
	return allErrs
}
