package defaults

import (
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/utils/ptr"

	"github.com/kelp-project/kelp/server/apiserver/conversion"
)

// HorizontalPodAutoscalerV1 is upstream's v1 defaulting: minReplicas 1.
// The implicit CPU target is the conversion's (conversion.HorizontalPodAutoscalerV1ToV2),
// which alone sees the metrics annotation.
func HorizontalPodAutoscalerV1(h *autoscalingv1.HorizontalPodAutoscaler) {
	if h.Spec.MinReplicas == nil {
		h.Spec.MinReplicas = ptr.To(int32(1))
	}
}

// HorizontalPodAutoscalerV2 is upstream's v2 defaulting: minReplicas 1, an
// 80% CPU utilization target when no metric is named, and a behavior that
// is given completed from upstream's scale-up and scale-down rules.
func HorizontalPodAutoscalerV2(h *autoscalingv2.HorizontalPodAutoscaler) {
	if h.Spec.MinReplicas == nil {
		h.Spec.MinReplicas = ptr.To(int32(1))
	}
	if len(h.Spec.Metrics) == 0 {
		h.Spec.Metrics = []autoscalingv2.MetricSpec{{
			Type: autoscalingv2.ResourceMetricSourceType,
			Resource: &autoscalingv2.ResourceMetricSource{
				Name: corev1.ResourceCPU,
				Target: autoscalingv2.MetricTarget{
					Type:               autoscalingv2.UtilizationMetricType,
					AverageUtilization: ptr.To(conversion.DefaultCPUUtilization),
				},
			},
		}}
	}
	// A nil behavior means the controller's defaults and stays nil.
	if b := h.Spec.Behavior; b != nil {
		b.ScaleUp = completeScalingRules(b.ScaleUp, hpaScaleUpRules())
		b.ScaleDown = completeScalingRules(b.ScaleDown, hpaScaleDownRules())
	}
}

// hpaScaleUpRules are upstream's: no stabilization, the larger of 4 pods
// or 100% per 15 s.
func hpaScaleUpRules() *autoscalingv2.HPAScalingRules {
	return &autoscalingv2.HPAScalingRules{
		StabilizationWindowSeconds: ptr.To(int32(0)),
		SelectPolicy:               ptr.To(autoscalingv2.MaxChangePolicySelect),
		Policies: []autoscalingv2.HPAScalingPolicy{
			{Type: autoscalingv2.PodsScalingPolicy, Value: 4, PeriodSeconds: 15},
			{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15},
		},
	}
}

// hpaScaleDownRules are upstream's: 100% per 15 s. The stabilization
// window stays unset: the controller's
// --horizontal-pod-autoscaler-downscale-stabilization (5 minutes) applies.
func hpaScaleDownRules() *autoscalingv2.HPAScalingRules {
	return &autoscalingv2.HPAScalingRules{
		SelectPolicy: ptr.To(autoscalingv2.MaxChangePolicySelect),
		Policies: []autoscalingv2.HPAScalingPolicy{
			{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15},
		},
	}
}

// completeScalingRules is upstream's copyHPAScalingRules: what the client
// set wins over the defaults; a set but empty policy list is kept (and
// refused by validation), as upstream.
func completeScalingRules(from, to *autoscalingv2.HPAScalingRules) *autoscalingv2.HPAScalingRules {
	if from == nil {
		return to
	}
	if from.SelectPolicy != nil {
		to.SelectPolicy = from.SelectPolicy
	}
	if from.StabilizationWindowSeconds != nil {
		to.StabilizationWindowSeconds = from.StabilizationWindowSeconds
	}
	if from.Policies != nil {
		to.Policies = from.Policies
	}
	if from.Tolerance != nil {
		to.Tolerance = from.Tolerance
	}
	return to
}

func PriorityClass(pc *schedulingv1.PriorityClass) {
	if pc.PreemptionPolicy == nil {
		pc.PreemptionPolicy = ptr.To(corev1.PreemptLowerPriority)
	}
}
