package validation

import (
	"fmt"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// HorizontalPodAutoscalers, upstream's pkg/apis/autoscaling/validation on
// the autoscaling/v2 shape (upstream's internal type has it; a v1 object is
// converted first, so both versions report v2's field paths, as upstream).

// Upstream's bounds of the scaling rules.
const (
	hpaMaxPeriodSeconds              int32 = 1800
	hpaMaxStabilizationWindowSeconds int32 = 3600
)

// hpaOptions are upstream's HorizontalPodAutoscalerSpecValidationOptions.
type hpaOptions struct {
	// minReplicasLowerBound is 0: HPAScaleToZero is on by default in 1.37.
	minReplicasLowerBound int32
	scaleTargetRef        crossVersionRefOptions
	objectMetrics         crossVersionRefOptions
}

type crossVersionRefOptions struct {
	allowEmptyAPIGroup     bool
	allowInvalidAPIVersion bool
}

// hpaValidationOptions is upstream's validationOptionsForHorizontalPodAutoscaler:
// a scale target needs an API group, except a ReplicationController; an
// update that keeps the target's apiVersion and kind, or whose old object
// metrics were already invalid, is not held to the apiVersion rule again.
func hpaValidationOptions(h, old *autoscalingv2.HorizontalPodAutoscaler) hpaOptions {
	opts := hpaOptions{objectMetrics: crossVersionRefOptions{allowEmptyAPIGroup: true}}
	ref := h.Spec.ScaleTargetRef
	switch {
	case old != nil && old.Spec.ScaleTargetRef.APIVersion == ref.APIVersion && old.Spec.ScaleTargetRef.Kind == ref.Kind:
		opts.scaleTargetRef.allowInvalidAPIVersion = true
	case ref.Kind == "ReplicationController":
		opts.scaleTargetRef.allowEmptyAPIGroup = true
	}
	if old != nil {
		for _, m := range old.Spec.Metrics {
			if m.Type == autoscalingv2.ObjectMetricSourceType && m.Object != nil && validateAPIVersion(m.Object.DescribedObject, opts.objectMetrics) != nil {
				opts.objectMetrics.allowInvalidAPIVersion = true
				break
			}
		}
	}
	return opts
}

func HorizontalPodAutoscaler(h *autoscalingv2.HorizontalPodAutoscaler) field.ErrorList {
	allErrs := validateObjectMeta(&h.ObjectMeta, true, nameIsDNSSubdomain)
	return append(allErrs, validateHPASpec(&h.Spec, specPath, hpaValidationOptions(h, nil))...)
}

func HorizontalPodAutoscalerUpdate(h, old *autoscalingv2.HorizontalPodAutoscaler) field.ErrorList {
	allErrs := validateObjectMetaUpdate(&h.ObjectMeta, &old.ObjectMeta)
	return append(allErrs, validateHPASpec(&h.Spec, specPath, hpaValidationOptions(h, old))...)
}

func HorizontalPodAutoscalerStatusUpdate(h, old *autoscalingv2.HorizontalPodAutoscaler) field.ErrorList {
	allErrs := validateObjectMetaUpdate(&h.ObjectMeta, &old.ObjectMeta)
	for i, c := range h.Status.Conditions {
		if c.ObservedGeneration != nil {
			allErrs = append(allErrs, validateNonnegative(*c.ObservedGeneration, statusPath.Child("conditions").Index(i).Child("observedGeneration"))...)
		}
	}
	allErrs = append(allErrs, validateNonnegative(int64(h.Status.CurrentReplicas), statusPath.Child("currentReplicas"))...)
	return append(allErrs, validateNonnegative(int64(h.Status.DesiredReplicas), statusPath.Child("desiredReplicas"))...)
}

func validateHPASpec(spec *autoscalingv2.HorizontalPodAutoscalerSpec, fldPath *field.Path, opts hpaOptions) field.ErrorList {
	var allErrs field.ErrorList
	if spec.MinReplicas != nil && *spec.MinReplicas < opts.minReplicasLowerBound {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("minReplicas"), *spec.MinReplicas,
			fmt.Sprintf("must be greater than or equal to %d", opts.minReplicasLowerBound)))
	}
	if spec.MaxReplicas == 0 {
		allErrs = append(allErrs, field.Required(fldPath.Child("maxReplicas"), "must be set and greater than 0"))
	} else if spec.MaxReplicas < 0 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("maxReplicas"), spec.MaxReplicas, "must be greater than or equal to 1"))
	}
	if spec.MinReplicas != nil && spec.MaxReplicas < *spec.MinReplicas {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("maxReplicas"), spec.MaxReplicas, "must be greater than or equal to `minReplicas`"))
	}
	allErrs = append(allErrs, validateCrossVersionObjectReference(spec.ScaleTargetRef, fldPath.Child("scaleTargetRef"), opts.scaleTargetRef)...)
	allErrs = append(allErrs, validateHPAMetrics(spec.Metrics, fldPath.Child("metrics"), spec.MinReplicas, opts.objectMetrics)...)
	if b := spec.Behavior; b != nil {
		allErrs = append(allErrs, validateScalingRules(b.ScaleUp, fldPath.Child("behavior", "scaleUp"))...)
		allErrs = append(allErrs, validateScalingRules(b.ScaleDown, fldPath.Child("behavior", "scaleDown"))...)
	}
	return allErrs
}

func validateCrossVersionObjectReference(ref autoscalingv2.CrossVersionObjectReference, fldPath *field.Path, opts crossVersionRefOptions) field.ErrorList {
	var allErrs field.ErrorList
	if ref.Kind == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("kind"), ""))
	} else {
		allErrs = append(allErrs, validateName(ref.Kind, nameIsPathSegment, fldPath.Child("kind"))...)
	}
	if ref.Name == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("name"), ""))
	} else {
		allErrs = append(allErrs, validateName(ref.Name, nameIsPathSegment, fldPath.Child("name"))...)
	}
	if err := validateAPIVersion(ref, opts); err != nil {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("apiVersion"), ref.APIVersion, err.Error()))
	}
	return allErrs
}

func validateAPIVersion(ref autoscalingv2.CrossVersionObjectReference, opts crossVersionRefOptions) error {
	if opts.allowInvalidAPIVersion {
		return nil
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return err
	}
	if !opts.allowEmptyAPIGroup && gv.Group == "" {
		return fmt.Errorf("apiVersion must specify API group")
	}
	return nil
}

func validateHPAMetrics(metrics []autoscalingv2.MetricSpec, fldPath *field.Path, minReplicas *int32, opts crossVersionRefOptions) field.ErrorList {
	var allErrs field.ErrorList
	objectOrExternal := false
	for i, m := range metrics {
		allErrs = append(allErrs, validateMetricSpec(m, fldPath.Index(i), opts)...)
		if m.Type == autoscalingv2.ObjectMetricSourceType || m.Type == autoscalingv2.ExternalMetricSourceType {
			objectOrExternal = true
		}
	}
	// At zero replicas no pod reports a resource or pods metric; only an
	// object's or an external one can wake the target.
	if minReplicas != nil && *minReplicas == 0 && !objectOrExternal {
		allErrs = append(allErrs, field.Forbidden(fldPath, "must specify at least one Object or External metric to support scaling to zero replicas"))
	}
	return allErrs
}

var (
	validSelectPolicies = []string{string(autoscalingv2.DisabledPolicySelect), string(autoscalingv2.MaxChangePolicySelect), string(autoscalingv2.MinChangePolicySelect)}
	validPolicyTypes    = []string{string(autoscalingv2.PercentScalingPolicy), string(autoscalingv2.PodsScalingPolicy)}
	validMetricSources  = []string{string(autoscalingv2.ContainerResourceMetricSourceType), string(autoscalingv2.ExternalMetricSourceType),
		string(autoscalingv2.ObjectMetricSourceType), string(autoscalingv2.PodsMetricSourceType), string(autoscalingv2.ResourceMetricSourceType)}
)

func validateScalingRules(rules *autoscalingv2.HPAScalingRules, fldPath *field.Path) field.ErrorList {
	if rules == nil {
		return nil
	}
	var allErrs field.ErrorList
	if w := rules.StabilizationWindowSeconds; w != nil && *w < 0 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("stabilizationWindowSeconds"), w, "must be greater than or equal to zero"))
	}
	if w := rules.StabilizationWindowSeconds; w != nil && *w > hpaMaxStabilizationWindowSeconds {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("stabilizationWindowSeconds"), w,
			fmt.Sprintf("must be less than or equal to %v", hpaMaxStabilizationWindowSeconds)))
	}
	if p := rules.SelectPolicy; p != nil && !contains(validSelectPolicies, string(*p)) {
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("selectPolicy"), p, validSelectPolicies))
	}
	policiesPath := fldPath.Child("policies")
	if len(rules.Policies) == 0 {
		allErrs = append(allErrs, field.Required(policiesPath, "must specify at least one Policy"))
	}
	for i, p := range rules.Policies {
		idx := policiesPath.Index(i)
		if p.Type != autoscalingv2.PodsScalingPolicy && p.Type != autoscalingv2.PercentScalingPolicy {
			allErrs = append(allErrs, field.NotSupported(idx.Child("type"), p.Type, validPolicyTypes))
		}
		if p.Value <= 0 {
			allErrs = append(allErrs, field.Invalid(idx.Child("value"), p.Value, "must be greater than zero"))
		}
		if p.PeriodSeconds <= 0 {
			allErrs = append(allErrs, field.Invalid(idx.Child("periodSeconds"), p.PeriodSeconds, "must be greater than zero"))
		}
		if p.PeriodSeconds > hpaMaxPeriodSeconds {
			allErrs = append(allErrs, field.Invalid(idx.Child("periodSeconds"), p.PeriodSeconds,
				fmt.Sprintf("must be less than or equal to %v", hpaMaxPeriodSeconds)))
		}
	}
	if rules.Tolerance != nil {
		allErrs = append(allErrs, validateNonnegativeQuantity(*rules.Tolerance, fldPath.Child("tolerance"))...)
	}
	return allErrs
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// validateMetricSpec is upstream's: the type is known and its source is
// the one filled in; only the first source present is validated.
func validateMetricSpec(spec autoscalingv2.MetricSpec, fldPath *field.Path, opts crossVersionRefOptions) field.ErrorList {
	var allErrs field.ErrorList
	if spec.Type == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("type"), "must specify a metric source type"))
	}
	if !contains(validMetricSources, string(spec.Type)) {
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("type"), spec.Type, validMetricSources))
	}
	var present []string
	if spec.Object != nil {
		present = append(present, "object")
		if len(present) == 1 {
			allErrs = append(allErrs, validateObjectSource(spec.Object, fldPath.Child("object"), opts)...)
		}
	}
	if spec.External != nil {
		present = append(present, "external")
		if len(present) == 1 {
			allErrs = append(allErrs, validateExternalSource(spec.External, fldPath.Child("external"))...)
		}
	}
	if spec.Pods != nil {
		present = append(present, "pods")
		if len(present) == 1 {
			allErrs = append(allErrs, validatePodsSource(spec.Pods, fldPath.Child("pods"))...)
		}
	}
	if spec.Resource != nil {
		present = append(present, "resource")
		if len(present) == 1 {
			allErrs = append(allErrs, validateResourceSource(spec.Resource.Name, spec.Resource.Target, fldPath.Child("resource"))...)
		}
	}
	if spec.ContainerResource != nil {
		present = append(present, "containerResource")
		if len(present) == 1 {
			allErrs = append(allErrs, validateContainerResourceSource(spec.ContainerResource, fldPath.Child("containerResource"))...)
		}
	}

	var expected string
	missing := false
	switch spec.Type {
	case autoscalingv2.ObjectMetricSourceType:
		expected, missing = "object", spec.Object == nil
	case autoscalingv2.PodsMetricSourceType:
		expected, missing = "pods", spec.Pods == nil
	case autoscalingv2.ResourceMetricSourceType:
		expected, missing = "resource", spec.Resource == nil
	case autoscalingv2.ExternalMetricSourceType:
		expected, missing = "external", spec.External == nil
	case autoscalingv2.ContainerResourceMetricSourceType:
		expected, missing = "containerResource", spec.ContainerResource == nil
	default:
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("type"), spec.Type, validMetricSources))
	}
	if missing {
		allErrs = append(allErrs, field.Required(fldPath.Child(expected), "must populate information for the given metric source"))
	}
	if len(present) != 1 {
		for _, typ := range present {
			if typ != expected {
				allErrs = append(allErrs, field.Forbidden(fldPath.Child(typ), "must populate the given metric source only"))
			}
		}
	}
	return allErrs
}

func validateObjectSource(src *autoscalingv2.ObjectMetricSource, fldPath *field.Path, opts crossVersionRefOptions) field.ErrorList {
	allErrs := validateCrossVersionObjectReference(src.DescribedObject, fldPath.Child("describedObject"), opts)
	allErrs = append(allErrs, validateMetricIdentifier(src.Metric, fldPath.Child("metric"))...)
	allErrs = append(allErrs, validateMetricTarget(src.Target, fldPath.Child("target"))...)
	if src.Target.Value == nil && src.Target.AverageValue == nil {
		allErrs = append(allErrs, field.Required(fldPath.Child("target", "averageValue"), "must set either a target value or averageValue"))
	}
	return allErrs
}

func validateExternalSource(src *autoscalingv2.ExternalMetricSource, fldPath *field.Path) field.ErrorList {
	allErrs := validateMetricIdentifier(src.Metric, fldPath.Child("metric"))
	allErrs = append(allErrs, validateMetricTarget(src.Target, fldPath.Child("target"))...)
	if src.Target.Value == nil && src.Target.AverageValue == nil {
		allErrs = append(allErrs, field.Required(fldPath.Child("target", "averageValue"), "must set either a target value for metric or a per-pod target"))
	}
	if src.Target.Value != nil && src.Target.AverageValue != nil {
		allErrs = append(allErrs, field.Forbidden(fldPath.Child("target", "value"), "may not set both a target value for metric and a per-pod target"))
	}
	return allErrs
}

func validatePodsSource(src *autoscalingv2.PodsMetricSource, fldPath *field.Path) field.ErrorList {
	allErrs := validateMetricIdentifier(src.Metric, fldPath.Child("metric"))
	allErrs = append(allErrs, validateMetricTarget(src.Target, fldPath.Child("target"))...)
	if src.Target.AverageValue == nil {
		allErrs = append(allErrs, field.Required(fldPath.Child("target", "averageValue"), "must specify a positive target averageValue"))
	}
	return allErrs
}

func validateContainerResourceSource(src *autoscalingv2.ContainerResourceMetricSource, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if src.Name == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("name"), "must specify a resource name"))
	} else {
		allErrs = append(allErrs, validateContainerResourceName(src.Name, fldPath.Child("name"))...)
	}
	if src.Container == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("container"), "must specify a container"))
	} else {
		allErrs = append(allErrs, validateDNS1123Label(src.Container, fldPath.Child("container"))...)
	}
	allErrs = append(allErrs, validateMetricTarget(src.Target, fldPath.Child("target"))...)
	return append(allErrs, validateUtilizationOrValue(src.Target, fldPath.Child("target"))...)
}

func validateResourceSource(name corev1.ResourceName, target autoscalingv2.MetricTarget, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if name == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("name"), "must specify a resource name"))
	}
	allErrs = append(allErrs, validateMetricTarget(target, fldPath.Child("target"))...)
	return append(allErrs, validateUtilizationOrValue(target, fldPath.Child("target"))...)
}

// validateUtilizationOrValue: a resource target is a utilization or a raw
// average value, exactly one of them.
func validateUtilizationOrValue(t autoscalingv2.MetricTarget, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if t.AverageUtilization == nil && t.AverageValue == nil {
		allErrs = append(allErrs, field.Required(fldPath.Child("averageUtilization"), "must set either a target raw value or a target utilization"))
	}
	if t.AverageUtilization != nil && t.AverageValue != nil {
		allErrs = append(allErrs, field.Forbidden(fldPath.Child("averageValue"), "may not set both a target raw value and a target utilization"))
	}
	return allErrs
}

func validateMetricTarget(mt autoscalingv2.MetricTarget, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if mt.Type == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("type"), "must specify a metric target type"))
	}
	if mt.Type != autoscalingv2.UtilizationMetricType && mt.Type != autoscalingv2.ValueMetricType && mt.Type != autoscalingv2.AverageValueMetricType {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("type"), mt.Type, "must be either Utilization, Value, or AverageValue"))
	}
	if mt.Value != nil && mt.Value.Sign() != 1 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("value"), mt.Value, "must be positive"))
	}
	if mt.AverageValue != nil && mt.AverageValue.Sign() != 1 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("averageValue"), mt.AverageValue, "must be positive"))
	}
	if mt.AverageUtilization != nil && *mt.AverageUtilization < 1 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("averageUtilization"), mt.AverageUtilization, "must be greater than 0"))
	}
	return allErrs
}

func validateMetricIdentifier(id autoscalingv2.MetricIdentifier, fldPath *field.Path) field.ErrorList {
	if id.Name == "" {
		return field.ErrorList{field.Required(fldPath.Child("name"), "must specify a metric name")}
	}
	return validateName(id.Name, nameIsPathSegment, fldPath.Child("name"))
}
