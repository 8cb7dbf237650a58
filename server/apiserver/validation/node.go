package validation

import (
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// RuntimeClass is upstream's ValidateRuntimeClass: the handler is what the
// CRI runtime is asked for, so it must be a DNS label; the overhead is
// checked as a container's limits would be, and the scheduling constraints
// as a pod's nodeSelector and tolerations.
func RuntimeClass(rc *nodev1.RuntimeClass) field.ErrorList {
	allErrs := validateObjectMeta(&rc.ObjectMeta, false, nameIsDNSSubdomain)
	allErrs = append(allErrs, validateDNS1123Label(rc.Handler, field.NewPath("handler"))...)
	if rc.Overhead != nil {
		allErrs = append(allErrs, validateResourceRequirements(&corev1.ResourceRequirements{Limits: rc.Overhead.PodFixed}, field.NewPath("overhead"))...)
	}
	if s := rc.Scheduling; s != nil {
		sp := field.NewPath("scheduling")
		allErrs = append(allErrs, validateLabelsMap(s.NodeSelector, sp.Child("nodeSelector"))...)
		tp := sp.Child("tolerations")
		allErrs = append(allErrs, validateTolerations(s.Tolerations, tp)...)
		// The admission plugin merges these into pods' tolerations, keyed
		// as the API's list keys; two equal keys would be ambiguous.
		seen := map[corev1.Toleration]bool{}
		for i, t := range s.Tolerations {
			k := corev1.Toleration{Key: t.Key, Operator: t.Operator, Value: t.Value, Effect: t.Effect}
			if seen[k] {
				allErrs = append(allErrs, field.Duplicate(tp.Index(i), t))
			}
			seen[k] = true
		}
	}
	return allErrs
}

// RuntimeClassUpdate: pods already running were started with the handler,
// so it may not change under them; overhead and scheduling may (they
// apply to pods created afterwards).
func RuntimeClassUpdate(rc, old *nodev1.RuntimeClass) field.ErrorList {
	allErrs := dedupe(append(validateMetaUpdateOf(rc, old), RuntimeClass(rc)...))
	return append(allErrs, validateImmutable(rc.Handler, old.Handler, field.NewPath("handler"))...)
}
