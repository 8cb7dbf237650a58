package validation

import (
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
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

func validateScaleTargetRef(kind, name string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if kind == "" {
		errs = append(errs, field.Required(p.Child("kind"), ""))
	} else {
		errs = append(errs, validateName(kind, nameIsPathSegment, p.Child("kind"))...)
	}
	if name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	} else {
		errs = append(errs, validateName(name, nameIsPathSegment, p.Child("name"))...)
	}
	return errs
}

func validateReplicaBounds(minReplicas *int32, maxReplicas int32) field.ErrorList {
	var errs field.ErrorList
	minVal := int32(1)
	if minReplicas != nil {
		minVal = *minReplicas
		if minVal < 1 {
			errs = append(errs, field.Invalid(specPath.Child("minReplicas"), minVal, "must be greater than or equal to 1"))
		}
	}
	if maxReplicas < 1 {
		errs = append(errs, field.Invalid(specPath.Child("maxReplicas"), maxReplicas, "must be greater than 0"))
	}
	if minReplicas != nil && maxReplicas < minVal {
		errs = append(errs, field.Invalid(specPath.Child("maxReplicas"), maxReplicas, "must be greater than or equal to `minReplicas`"))
	}
	return errs
}

func HorizontalPodAutoscalerV1(h *autoscalingv1.HorizontalPodAutoscaler) field.ErrorList {
	allErrs := validateObjectMeta(&h.ObjectMeta, true, nameIsDNSSubdomain)
	allErrs = append(allErrs, validateScaleTargetRef(h.Spec.ScaleTargetRef.Kind, h.Spec.ScaleTargetRef.Name, specPath.Child("scaleTargetRef"))...)
	allErrs = append(allErrs, validateReplicaBounds(h.Spec.MinReplicas, h.Spec.MaxReplicas)...)
	if t := h.Spec.TargetCPUUtilizationPercentage; t != nil && *t < 1 {
		allErrs = append(allErrs, field.Invalid(specPath.Child("targetCPUUtilizationPercentage"), *t, "must be greater than 0"))
	}
	return allErrs
}

func HorizontalPodAutoscalerV2(h *autoscalingv2.HorizontalPodAutoscaler) field.ErrorList {
	allErrs := validateObjectMeta(&h.ObjectMeta, true, nameIsDNSSubdomain)
	allErrs = append(allErrs, validateScaleTargetRef(h.Spec.ScaleTargetRef.Kind, h.Spec.ScaleTargetRef.Name, specPath.Child("scaleTargetRef"))...)
	allErrs = append(allErrs, validateReplicaBounds(h.Spec.MinReplicas, h.Spec.MaxReplicas)...)
	types := []autoscalingv2.MetricSourceType{autoscalingv2.ObjectMetricSourceType, autoscalingv2.PodsMetricSourceType,
		autoscalingv2.ResourceMetricSourceType, autoscalingv2.ExternalMetricSourceType, autoscalingv2.ContainerResourceMetricSourceType}
	for i, m := range h.Spec.Metrics {
		p := specPath.Child("metrics").Index(i)
		switch m.Type {
		case autoscalingv2.ResourceMetricSourceType:
			if m.Resource == nil {
				allErrs = append(allErrs, field.Required(p.Child("resource"), "must populate information for the given metric source"))
			}
		case autoscalingv2.PodsMetricSourceType:
			if m.Pods == nil {
				allErrs = append(allErrs, field.Required(p.Child("pods"), "must populate information for the given metric source"))
			}
		case autoscalingv2.ObjectMetricSourceType:
			if m.Object == nil {
				allErrs = append(allErrs, field.Required(p.Child("object"), "must populate information for the given metric source"))
			}
		case autoscalingv2.ExternalMetricSourceType:
			if m.External == nil {
				allErrs = append(allErrs, field.Required(p.Child("external"), "must populate information for the given metric source"))
			}
		case autoscalingv2.ContainerResourceMetricSourceType:
			if m.ContainerResource == nil {
				allErrs = append(allErrs, field.Required(p.Child("containerResource"), "must populate information for the given metric source"))
			}
		case "":
			allErrs = append(allErrs, field.Required(p.Child("type"), "must specify a metric source type"))
		default:
			allErrs = append(allErrs, field.NotSupported(p.Child("type"), m.Type, types))
		}
	}
	return allErrs
}
