package validation

import (
	"fmt"
	"math"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The CSI kinds of storage.k8s.io/v1, as upstream's
// pkg/apis/storage/validation over the v1 types, with the feature gates
// at their 1.37 defaults (SELinuxMountReadWriteOncePod,
// MutableCSINodeAllocatableCount and VolumeLimitScaling on).

const (
	maxAttachedVolumeMetadataSize = 256 * (1 << 10)
	maxVolumeErrorMessageSize     = 1024
	csiNodeIDMaxLength            = 256
	maxStorageHealthConditions    = 16
)

// validateCSIDriverName is core's ValidateCSIDriverName: the driver name
// in a PV, a VolumeAttachment or a CSINode entry.
func validateCSIDriverName(name string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if name == "" {
		errs = append(errs, field.Required(fldPath, ""))
	}
	if len(name) > 63 {
		errs = append(errs, field.TooLong(fldPath, name, 63))
	}
	return append(errs, invalidFor(name, validation.IsDNS1123Subdomain(strings.ToLower(name)), fldPath)...)
}

func requiredBool(v *bool, fldPath *field.Path) field.ErrorList {
	if v == nil {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	return nil
}

func CSIDriver(d *storagev1.CSIDriver) field.ErrorList {
	allErrs := validateObjectMeta(&d.ObjectMeta, false, nameIsDNSSubdomain)
	return append(allErrs, validateCSIDriverSpec(&d.Spec, specPath)...)
}

func validateCSIDriverSpec(spec *storagev1.CSIDriverSpec, fldPath *field.Path) field.ErrorList {
	// Upstream's path for attachRequired is "attachedRequired".
	allErrs := requiredBool(spec.AttachRequired, fldPath.Child("attachedRequired"))
	allErrs = append(allErrs, requiredBool(spec.PodInfoOnMount, fldPath.Child("podInfoOnMount"))...)
	allErrs = append(allErrs, requiredBool(spec.StorageCapacity, fldPath.Child("storageCapacity"))...)
	if p := spec.FSGroupPolicy; p != nil {
		supported := []storagev1.FSGroupPolicy{storagev1.FileFSGroupPolicy, storagev1.NoneFSGroupPolicy, storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy}
		if !sets.New(supported...).Has(*p) {
			allErrs = append(allErrs, field.NotSupported(fldPath.Child("fsGroupPolicy"), *p, supported))
		}
	}
	audiences := sets.New[string]()
	for i, tr := range spec.TokenRequests {
		p := fldPath.Child("tokenRequests").Index(i)
		if audiences.Has(tr.Audience) {
			allErrs = append(allErrs, field.Duplicate(p.Child("audience"), tr.Audience))
			continue
		}
		audiences.Insert(tr.Audience)
		if s := tr.ExpirationSeconds; s != nil {
			if *s < 600 {
				allErrs = append(allErrs, field.Invalid(p.Child("expirationSeconds"), *s, "may not specify a duration less than 10 minutes"))
			}
			if *s > 1<<32 {
				allErrs = append(allErrs, field.Invalid(p.Child("expirationSeconds"), *s, "may not specify a duration larger than 2^32 seconds"))
			}
		}
	}
	for _, m := range spec.VolumeLifecycleModes {
		if m != storagev1.VolumeLifecyclePersistent && m != storagev1.VolumeLifecycleEphemeral {
			allErrs = append(allErrs, field.NotSupported(fldPath.Child("volumeLifecycleModes"), m,
				[]string{string(storagev1.VolumeLifecyclePersistent), string(storagev1.VolumeLifecycleEphemeral)}))
		}
	}
	allErrs = append(allErrs, requiredBool(spec.SELinuxMount, fldPath.Child("seLinuxMount"))...)
	if p := spec.NodeAllocatableUpdatePeriodSeconds; p != nil && *p < 10 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("nodeAllocatableUpdatePeriodSeconds"), *p, "must be greater than or equal to 10 seconds"))
	}
	if s := spec.ServiceAccountTokenInSecrets; s != nil && len(spec.TokenRequests) == 0 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("serviceAccountTokenInSecrets"), *s, "serviceAccountTokenInSecrets is set but no tokenRequests are specified"))
	}
	return append(allErrs, requiredBool(spec.PreventPodSchedulingIfMissing, fldPath.Child("preventPodSchedulingIfMissing"))...)
}

// CSIDriverUpdate: attachRequired and volumeLifecycleModes are fixed;
// the rest of the spec may change (upstream bumps the generation).
func CSIDriverUpdate(d, old *storagev1.CSIDriver) field.ErrorList {
	allErrs := validateObjectMetaUpdate(&d.ObjectMeta, &old.ObjectMeta)
	allErrs = append(allErrs, validateCSIDriverSpec(&d.Spec, specPath)...)
	allErrs = append(allErrs, validateImmutable(d.Spec.AttachRequired, old.Spec.AttachRequired, specPath.Child("attachedRequired"))...)
	return append(allErrs, validateImmutable(d.Spec.VolumeLifecycleModes, old.Spec.VolumeLifecycleModes, specPath.Child("volumeLifecycleModes"))...)
}

func CSINode(n *storagev1.CSINode) field.ErrorList {
	allErrs := validateObjectMeta(&n.ObjectMeta, false, nameIsDNSSubdomain)
	names := sets.New[string]()
	for i, d := range n.Spec.Drivers {
		p := specPath.Child("drivers").Index(i)
		allErrs = append(allErrs, validateCSIDriverName(d.Name, p.Child("name"))...)
		if d.NodeID == "" {
			allErrs = append(allErrs, field.Required(p.Child("nodeID"), ""))
		}
		if len(d.NodeID) > csiNodeIDMaxLength {
			allErrs = append(allErrs, field.Invalid(p.Child("nodeID"), d.NodeID, fmt.Sprintf("must be %d characters or less", csiNodeIDMaxLength)))
		}
		if a := d.Allocatable; a != nil && a.Count != nil {
			allErrs = append(allErrs, validateNonnegative(int64(*a.Count), p.Child("allocatable", "count"))...)
		}
		if names.Has(d.Name) {
			allErrs = append(allErrs, field.Duplicate(p.Child("name"), d.Name))
		}
		names.Insert(d.Name)
		keys := sets.New[string]()
		for _, k := range d.TopologyKeys {
			if k == "" {
				allErrs = append(allErrs, field.Required(p, k))
			}
			if keys.Has(k) {
				allErrs = append(allErrs, field.Duplicate(p, k))
			}
			keys.Insert(k)
			allErrs = append(allErrs, validateQualifiedName(k, p)...)
		}
	}
	return allErrs
}

// CSINodeUpdate: a driver entry, once registered, changes only its
// allocatable count (MutableCSINodeAllocatableCount).
func CSINodeUpdate(n, old *storagev1.CSINode) field.ErrorList {
	allErrs := dedupe(append(validateObjectMetaUpdate(&n.ObjectMeta, &old.ObjectMeta), CSINode(n)...))
	for _, od := range old.Spec.Drivers {
		for _, nd := range n.Spec.Drivers {
			if od.Name != nd.Name {
				continue
			}
			a, b := od.DeepCopy(), nd.DeepCopy()
			a.Allocatable, b.Allocatable = nil, nil
			allErrs = append(allErrs, validateImmutable(*b, *a, specPath.Child("drivers"))...)
		}
	}
	return allErrs
}

func CSINodeStatusUpdate(n, old *storagev1.CSINode) field.ErrorList {
	allErrs := validateObjectMetaUpdate(&n.ObjectMeta, &old.ObjectMeta)
	fldPath := field.NewPath("status", "storageHealth")
	seen := sets.New[string]()
	statuses := []storagev1.StorageHealthStatusType{storagev1.StorageDegraded, storagev1.StorageUnreachable}
	for i, h := range n.Status.StorageHealth {
		p := fldPath.Index(i)
		if seen.Has(h.Name) {
			allErrs = append(allErrs, field.Duplicate(p, h.Name))
		}
		seen.Insert(h.Name)
		if h.Name == "" {
			allErrs = append(allErrs, field.Required(p.Child("name"), ""))
		} else {
			allErrs = append(allErrs, validateCSIDriverName(h.Name, p.Child("name"))...)
		}
		if len(h.HealthConditions) > maxStorageHealthConditions {
			allErrs = append(allErrs, field.TooMany(p.Child("healthConditions"), len(h.HealthConditions), maxStorageHealthConditions))
			continue
		}
		for j, c := range h.HealthConditions {
			cp := p.Child("healthConditions").Index(j)
			if !sets.New(statuses...).Has(c.Status) {
				allErrs = append(allErrs, field.NotSupported(cp.Child("status"), c.Status, statuses))
			}
			if c.Reason == "" {
				allErrs = append(allErrs, field.Required(cp.Child("reason"), ""))
			} else {
				allErrs = append(allErrs, invalidFor(c.Reason, metav1validation.IsValidConditionReason(c.Reason), cp.Child("reason"))...)
				if len(c.Reason) > 256 {
					allErrs = append(allErrs, field.TooLong(cp.Child("reason"), c.Reason, 256))
				}
			}
			if len(c.Message) > 1024 {
				allErrs = append(allErrs, field.TooLong(cp.Child("message"), c.Message, 1024))
			}
			if m := c.AccessMode; m != nil && !supportedAccessModes.Has(*m) {
				allErrs = append(allErrs, field.NotSupported(cp.Child("accessMode"), *m, sets.List(supportedAccessModes)))
			}
			if m := c.VolumeMode; m != nil && !supportedVolumeModes.Has(*m) {
				allErrs = append(allErrs, field.NotSupported(cp.Child("volumeMode"), *m, []corev1.PersistentVolumeMode{corev1.PersistentVolumeFilesystem, corev1.PersistentVolumeBlock}))
			}
		}
	}
	return allErrs
}

func VolumeAttachment(va *storagev1.VolumeAttachment) field.ErrorList {
	allErrs := validateObjectMeta(&va.ObjectMeta, false, nameIsDNSSubdomain)
	spec := &va.Spec
	allErrs = append(allErrs, validateCSIDriverName(spec.Attacher, specPath.Child("attacher"))...)
	src, srcPath := &spec.Source, specPath.Child("source")
	switch {
	case src.InlineVolumeSpec == nil && src.PersistentVolumeName == nil:
		allErrs = append(allErrs, field.Required(srcPath, "must specify exactly one of inlineVolumeSpec and persistentVolumeName"))
	case src.InlineVolumeSpec != nil && src.PersistentVolumeName != nil:
		allErrs = append(allErrs, field.Forbidden(srcPath, "must specify exactly one of inlineVolumeSpec and persistentVolumeName"))
	case src.PersistentVolumeName != nil:
		if *src.PersistentVolumeName == "" {
			allErrs = append(allErrs, field.Required(srcPath.Child("persistentVolumeName"), "must specify non empty persistentVolumeName"))
		}
	case src.InlineVolumeSpec != nil:
		allErrs = append(allErrs, validateInlinePVSpec(src.InlineVolumeSpec, srcPath.Child("inlineVolumeSpec"))...)
	}
	allErrs = append(allErrs, invalidFor(spec.NodeName, nameIsDNSSubdomain(spec.NodeName, false), specPath.Child("nodeName"))...)
	allErrs = append(allErrs, validateVolumeAttachmentStatus(&va.Status)...)
	if name := src.PersistentVolumeName; name != nil {
		allErrs = append(allErrs, invalidFor(*name, nameIsDNSSubdomain(*name, false), field.NewPath("spec.source.persistentVolumeName"))...)
	}
	return allErrs
}

// validateInlinePVSpec is ValidatePersistentVolumeSpec for an inline
// volume: a CSI source, no capacity, no claimRef.
func validateInlinePVSpec(spec *corev1.PersistentVolumeSpec, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if spec.ClaimRef != nil {
		allErrs = append(allErrs, field.Forbidden(fldPath.Child("claimRef"), "may not be specified in the context of inline volumes"))
	}
	if len(spec.Capacity) != 0 {
		allErrs = append(allErrs, field.Forbidden(fldPath.Child("capacity"), "may not be specified in the context of inline volumes"))
	}
	if spec.CSI == nil {
		allErrs = append(allErrs, field.Required(fldPath.Child("csi"), "has to be specified in the context of inline volumes"))
	}
	allErrs = append(allErrs, validateAccessModes(spec.AccessModes, fldPath.Child("accessModes"), "")...)
	if spec.VolumeMode != nil && !supportedVolumeModes.Has(*spec.VolumeMode) {
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("volumeMode"), *spec.VolumeMode, sets.List(supportedVolumeModes)))
	}
	if rp := spec.PersistentVolumeReclaimPolicy; rp != "" && !supportedReclaimPolicies.Has(rp) {
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("persistentVolumeReclaimPolicy"), rp, sets.List(supportedReclaimPolicies)))
	}
	return append(allErrs, validatePVSource(&spec.PersistentVolumeSource, fldPath)...)
}

func validateVolumeAttachmentStatus(s *storagev1.VolumeAttachmentStatus) field.ErrorList {
	var allErrs field.ErrorList
	p := field.NewPath("status")
	size := 0
	for k, v := range s.AttachmentMetadata {
		size += len(k) + len(v)
	}
	if size > maxAttachedVolumeMetadataSize {
		allErrs = append(allErrs, field.TooLong(p.Child("attachmentMetadata"), "", maxAttachedVolumeMetadataSize))
	}
	for name, e := range map[string]*storagev1.VolumeError{"attachError": s.AttachError, "detachError": s.DetachError} {
		if e == nil {
			continue
		}
		if len(e.Message) > maxVolumeErrorMessageSize {
			allErrs = append(allErrs, field.TooLong(p.Child(name, "message"), "", maxVolumeErrorMessageSize))
		}
		if e.ErrorCode != nil && *e.ErrorCode < 0 {
			allErrs = append(allErrs, field.Invalid(p.Child(name, "errorCode"), *e.ErrorCode, inclusiveRangeError(0, math.MaxInt32)))
		}
	}
	return allErrs
}

// VolumeAttachmentUpdate: the spec is fixed. Upstream's update
// validation (both endpoints) revalidates the object and checks the spec
// only; metadata rules are the generic update's.
func VolumeAttachmentUpdate(va, old *storagev1.VolumeAttachment) field.ErrorList {
	allErrs := dedupe(append(validateObjectMetaUpdate(&va.ObjectMeta, &old.ObjectMeta), VolumeAttachment(va)...))
	if !apiequality.Semantic.DeepEqual(va.Spec, old.Spec) {
		allErrs = append(allErrs, field.Invalid(specPath, va.Spec, fieldImmutableMsg))
	}
	return allErrs
}

func CSIStorageCapacity(c *storagev1.CSIStorageCapacity) field.ErrorList {
	allErrs := validateObjectMeta(&c.ObjectMeta, true, nameIsDNSSubdomain)
	allErrs = append(allErrs, validateLabelSelector(c.NodeTopology, field.NewPath("nodeTopology"))...)
	allErrs = append(allErrs, invalidFor(c.StorageClassName, nameIsDNSSubdomain(c.StorageClassName, false), field.NewPath("storageClassName"))...)
	if c.Capacity != nil {
		allErrs = append(allErrs, validateNonnegativeQuantity(*c.Capacity, field.NewPath("capacity"))...)
	}
	return allErrs
}

// CSIStorageCapacityUpdate: what the capacity was asked for (topology and
// class) is fixed.
func CSIStorageCapacityUpdate(c, old *storagev1.CSIStorageCapacity) field.ErrorList {
	allErrs := dedupe(append(validateObjectMetaUpdate(&c.ObjectMeta, &old.ObjectMeta), CSIStorageCapacity(c)...))
	if !apiequality.Semantic.DeepEqual(c.NodeTopology, old.NodeTopology) {
		allErrs = append(allErrs, field.Invalid(field.NewPath("nodeTopology"), c.NodeTopology, "field is immutable"))
	}
	if c.StorageClassName != old.StorageClassName {
		allErrs = append(allErrs, field.Invalid(field.NewPath("storageClassName"), c.StorageClassName, "field is immutable"))
	}
	return allErrs
}

func VolumeAttributesClass(c *storagev1.VolumeAttributesClass) field.ErrorList {
	allErrs := validateObjectMeta(&c.ObjectMeta, false, nameIsDNSSubdomain)
	allErrs = append(allErrs, validateProvisioner(c.DriverName, field.NewPath("driverName"))...)
	return append(allErrs, validateProvisionerParameters(c.Parameters, false, field.NewPath("parameters"))...)
}

func VolumeAttributesClassUpdate(c, old *storagev1.VolumeAttributesClass) field.ErrorList {
	allErrs := validateObjectMetaUpdate(&c.ObjectMeta, &old.ObjectMeta)
	if c.DriverName != old.DriverName {
		allErrs = append(allErrs, field.Forbidden(field.NewPath("driverName"), "updates to driverName are forbidden."))
	}
	if !apiequality.Semantic.DeepEqual(c.Parameters, old.Parameters) {
		allErrs = append(allErrs, field.Forbidden(field.NewPath("parameters"), "updates to parameters are forbidden."))
	}
	return dedupe(append(allErrs, VolumeAttributesClass(c)...))
}

// validateProvisioner is upstream's: a StorageClass's provisioner or a
// VolumeAttributesClass's driverName, required and (lowercased) a
// qualified name.
func validateProvisioner(name string, fldPath *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	return validateQualifiedName(strings.ToLower(name), fldPath)
}

// validateProvisionerParameters is upstream's validateParameters, shared
// by StorageClass (empty allowed) and VolumeAttributesClass.
func validateProvisionerParameters(params map[string]string, allowEmpty bool, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if len(params) > maxProvisionerParameterCount {
		return field.ErrorList{field.TooLong(fldPath, "", maxProvisionerParameterCount)}
	}
	size := 0
	for k, v := range params {
		if k == "" {
			allErrs = append(allErrs, field.Invalid(fldPath, k, "field can not be empty."))
		}
		size += len(k) + len(v)
	}
	if size > maxProvisionerParameterSize {
		allErrs = append(allErrs, field.TooLong(fldPath, "", maxProvisionerParameterSize))
	}
	if !allowEmpty && len(params) == 0 {
		allErrs = append(allErrs, field.Required(fldPath, "must contain at least one key/value pair"))
	}
	return allErrs
}
