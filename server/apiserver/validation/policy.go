package validation

import (
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func PodDisruptionBudget(pdb *policyv1.PodDisruptionBudget) field.ErrorList {
	allErrs := validateObjectMeta(&pdb.ObjectMeta, true, nameIsDNSSubdomain)
	spec := &pdb.Spec
	// The two are alternative phrasings of one budget.
	if spec.MinAvailable != nil && spec.MaxUnavailable != nil {
		allErrs = append(allErrs, field.Invalid(specPath, spec, "minAvailable and maxUnavailable cannot be both set"))
	}
	if spec.MinAvailable != nil {
		allErrs = append(allErrs, validatePositiveIntOrPercent(spec.MinAvailable, specPath.Child("minAvailable"))...)
		allErrs = append(allErrs, isNotMoreThan100Percent(spec.MinAvailable, specPath.Child("minAvailable"))...)
	}
	if spec.MaxUnavailable != nil {
		allErrs = append(allErrs, validatePositiveIntOrPercent(spec.MaxUnavailable, specPath.Child("maxUnavailable"))...)
		allErrs = append(allErrs, isNotMoreThan100Percent(spec.MaxUnavailable, specPath.Child("maxUnavailable"))...)
	}
	allErrs = append(allErrs, validateLabelSelector(spec.Selector, specPath.Child("selector"))...)
	if p := spec.UnhealthyPodEvictionPolicy; p != nil {
		valid := []policyv1.UnhealthyPodEvictionPolicyType{policyv1.AlwaysAllow, policyv1.IfHealthyBudget}
		if *p != policyv1.AlwaysAllow && *p != policyv1.IfHealthyBudget {
			allErrs = append(allErrs, field.NotSupported(specPath.Child("unhealthyPodEvictionPolicy"), *p, valid))
		}
	}
	return allErrs
}

func PodDisruptionBudgetStatusUpdate(newP, oldP *policyv1.PodDisruptionBudget) field.ErrorList {
	allErrs := validateObjectMetaUpdate(&newP.ObjectMeta, &oldP.ObjectMeta)
	s := &newP.Status
	allErrs = append(allErrs, validateNonnegative(int64(s.DisruptionsAllowed), statusPath.Child("disruptionsAllowed"))...)
	allErrs = append(allErrs, validateNonnegative(int64(s.CurrentHealthy), statusPath.Child("currentHealthy"))...)
	allErrs = append(allErrs, validateNonnegative(int64(s.DesiredHealthy), statusPath.Child("desiredHealthy"))...)
	allErrs = append(allErrs, validateNonnegative(int64(s.ExpectedPods), statusPath.Child("expectedPods"))...)
	return allErrs
}
