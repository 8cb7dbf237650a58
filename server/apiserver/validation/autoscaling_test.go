package validation

import (
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/kelp-project/kelp/server/apiserver/conversion"
)

func validHPA() *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    ptr.To(int32(1)), MaxReplicas: 5,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
				Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(int32(50))}}}},
		},
	}
}

// Upstream's rules, field paths and messages.
func TestHorizontalPodAutoscaler(t *testing.T) {
	expectErrors(t, HorizontalPodAutoscaler(validHPA()), nil)

	for _, tc := range []struct {
		name   string
		mutate func(*autoscalingv2.HorizontalPodAutoscaler)
		want   []want
	}{
		{"max below min", func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.MinReplicas = ptr.To(int32(6)) },
			[]want{{field.ErrorTypeInvalid, "spec.maxReplicas", "must be greater than or equal to `minReplicas`"}}},
		{"max unset", func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.MaxReplicas = 0 },
			[]want{{field.ErrorTypeRequired, "spec.maxReplicas", "must be set and greater than 0"}}},
		{"negative min", func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.MinReplicas = ptr.To(int32(-1)) },
			[]want{{field.ErrorTypeInvalid, "spec.minReplicas", "must be greater than or equal to 0"}}},
		// HPAScaleToZero (beta, on in 1.37): zero needs an object or external metric.
		{"zero min with a resource metric", func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.MinReplicas = ptr.To(int32(0)) },
			[]want{{field.ErrorTypeForbidden, "spec.metrics", "must specify at least one Object or External metric to support scaling to zero replicas"}}},
		{"no API group", func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.ScaleTargetRef.APIVersion = "v1" },
			[]want{{field.ErrorTypeInvalid, "spec.scaleTargetRef.apiVersion", "apiVersion must specify API group"}}},
		{"no kind or name", func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Spec.ScaleTargetRef.Kind, h.Spec.ScaleTargetRef.Name = "", "a/b"
		},
			[]want{{field.ErrorTypeRequired, "spec.scaleTargetRef.kind", ""}, {field.ErrorTypeInvalid, "spec.scaleTargetRef.name", "may not contain '/'"}}},
		{"two sources", func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Spec.Metrics[0].Pods = &autoscalingv2.PodsMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: "qps"},
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("1"))}}
		}, []want{{field.ErrorTypeForbidden, "spec.metrics[0].pods", "must populate the given metric source only"}}},
		{"no source", func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.Metrics[0].Resource = nil },
			[]want{{field.ErrorTypeRequired, "spec.metrics[0].resource", "must populate information for the given metric source"}}},
		{"unknown type", func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.Metrics[0].Type = "Magic" },
			[]want{{field.ErrorTypeNotSupported, "spec.metrics[0].type", `supported values: "ContainerResource", "External", "Object", "Pods", "Resource"`}}},
		{"utilization and value", func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Spec.Metrics[0].Resource.Target.AverageValue = ptr.To(resource.MustParse("-1"))
		}, []want{{field.ErrorTypeForbidden, "spec.metrics[0].resource.target.averageValue", "may not set both a target raw value and a target utilization"},
			{field.ErrorTypeInvalid, "spec.metrics[0].resource.target.averageValue", "must be positive"}}},
		{"zero utilization", func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Spec.Metrics[0].Resource.Target.AverageUtilization = ptr.To(int32(0))
		},
			[]want{{field.ErrorTypeInvalid, "spec.metrics[0].resource.target.averageUtilization", "must be greater than 0"}}},
		{"behavior", func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{
				ScaleUp: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To(int32(3601)), SelectPolicy: ptr.To(autoscalingv2.ScalingPolicySelect("Most")),
					Policies: []autoscalingv2.HPAScalingPolicy{{Type: "Nodes", Value: 0, PeriodSeconds: 1801}}},
				ScaleDown: &autoscalingv2.HPAScalingRules{Tolerance: ptr.To(resource.MustParse("-1"))},
			}
		}, []want{
			{field.ErrorTypeInvalid, "spec.behavior.scaleUp.stabilizationWindowSeconds", "must be less than or equal to 3600"},
			{field.ErrorTypeNotSupported, "spec.behavior.scaleUp.selectPolicy", `supported values: "Disabled", "Max", "Min"`},
			{field.ErrorTypeNotSupported, "spec.behavior.scaleUp.policies[0].type", `supported values: "Percent", "Pods"`},
			{field.ErrorTypeInvalid, "spec.behavior.scaleUp.policies[0].value", "must be greater than zero"},
			{field.ErrorTypeInvalid, "spec.behavior.scaleUp.policies[0].periodSeconds", "must be less than or equal to 1800"},
			{field.ErrorTypeRequired, "spec.behavior.scaleDown.policies", "must specify at least one Policy"},
			{field.ErrorTypeInvalid, "spec.behavior.scaleDown.tolerance", "must be greater than or equal to 0"},
		}},
		{"external with both targets", func(h *autoscalingv2.HorizontalPodAutoscaler) {
			q := resource.MustParse("1")
			h.Spec.Metrics = []autoscalingv2.MetricSpec{{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: &q, AverageValue: &q}}}}
		}, []want{{field.ErrorTypeRequired, "spec.metrics[0].external.metric.name", "must specify a metric name"},
			{field.ErrorTypeForbidden, "spec.metrics[0].external.target.value", "may not set both a target value for metric and a per-pod target"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := validHPA()
			tc.mutate(h)
			expectErrors(t, HorizontalPodAutoscaler(h), tc.want)
		})
	}

	// A ReplicationController is the one target without an API group.
	rc := validHPA()
	rc.Spec.ScaleTargetRef = autoscalingv2.CrossVersionObjectReference{APIVersion: "v1", Kind: "ReplicationController", Name: "rc"}
	expectErrors(t, HorizontalPodAutoscaler(rc), nil)
	// Zero replicas with an external metric is allowed.
	zero := validHPA()
	zero.Spec.MinReplicas = ptr.To(int32(0))
	zero.Spec.Metrics = append(zero.Spec.Metrics, autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: "queue"}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: ptr.To(resource.MustParse("3"))}}})
	expectErrors(t, HorizontalPodAutoscaler(zero), nil)
}

// An update that keeps the target's apiVersion and kind is not held to
// the apiVersion rule again; status updates check the counts.
func TestHorizontalPodAutoscalerUpdate(t *testing.T) {
	old := validHPA()
	old.Spec.ScaleTargetRef.APIVersion = "v1"
	upd := old.DeepCopy()
	upd.Spec.MaxReplicas = 7
	expectErrors(t, HorizontalPodAutoscalerUpdate(upd, old), nil)
	upd.Spec.ScaleTargetRef.Kind = "StatefulSet"
	expectErrors(t, HorizontalPodAutoscalerUpdate(upd, old), []want{{field.ErrorTypeInvalid, "spec.scaleTargetRef.apiVersion", "apiVersion must specify API group"}})

	st := validHPA()
	st.Status.CurrentReplicas = -1
	st.Status.Conditions = []autoscalingv2.HorizontalPodAutoscalerCondition{{Type: autoscalingv2.AbleToScale, ObservedGeneration: ptr.To(int64(-2))}}
	expectErrors(t, HorizontalPodAutoscalerStatusUpdate(st, validHPA()), []want{
		{field.ErrorTypeInvalid, "status.currentReplicas", "must be greater than or equal to 0"},
		{field.ErrorTypeInvalid, "status.conditions[0].observedGeneration", "must be greater than or equal to 0"},
	})
}

// A v1 HPA is validated as its v2 form, so its errors have v2's paths.
func TestHorizontalPodAutoscalerV1Paths(t *testing.T) {
	v1 := &autoscalingv1.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: autoscalingv1.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv1.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
		MaxReplicas:    3, TargetCPUUtilizationPercentage: ptr.To(int32(0)),
	}}
	expectErrors(t, HorizontalPodAutoscaler(conversion.HorizontalPodAutoscalerV1ToV2(v1)),
		[]want{{field.ErrorTypeInvalid, "spec.metrics[0].resource.target.averageUtilization", "must be greater than 0"}})
}
