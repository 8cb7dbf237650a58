package conversion

import (
	"encoding/json"
	"reflect"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func fullV2() *autoscalingv2.HorizontalPodAutoscaler {
	q := resource.MustParse("10")
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Annotations: map[string]string{"keep": "me"}},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    ptr.To(int32(2)), MaxReplicas: 9,
			Metrics: []autoscalingv2.MetricSpec{
				{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: "qps"},
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &q}}},
				{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: "queue"},
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: &q}}},
				{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU,
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(int32(70))}}},
			},
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{
				StabilizationWindowSeconds: ptr.To(int32(60)), SelectPolicy: ptr.To(autoscalingv2.MinChangePolicySelect),
				Policies:  []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: 1, PeriodSeconds: 30}},
				Tolerance: ptr.To(resource.MustParse("50m")),
			}},
		},
		Status: autoscalingv2.HorizontalPodAutoscalerStatus{
			ObservedGeneration: ptr.To(int64(4)), CurrentReplicas: 3, DesiredReplicas: 4,
			CurrentMetrics: []autoscalingv2.MetricStatus{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricStatus{
				Name: corev1.ResourceCPU, Current: autoscalingv2.MetricValueStatus{AverageUtilization: ptr.To(int32(40)), AverageValue: ptr.To(resource.MustParse("200m"))}}}},
			Conditions: []autoscalingv2.HorizontalPodAutoscalerCondition{{Type: autoscalingv2.ScalingActive, Status: corev1.ConditionFalse, Reason: "FailedGetResourceMetric", Message: "m"}},
		},
	}
}

// A v2 HPA read through v1 and written back is the same HPA: what v1
// lacks travels in upstream's annotations, in upstream's formats.
func TestHPARoundTripThroughV1(t *testing.T) {
	in := fullV2()
	v1 := HorizontalPodAutoscalerV2ToV1(in)
	if v1.Spec.TargetCPUUtilizationPercentage == nil || *v1.Spec.TargetCPUUtilizationPercentage != 70 ||
		v1.Status.CurrentCPUUtilizationPercentage == nil || *v1.Status.CurrentCPUUtilizationPercentage != 40 {
		t.Errorf("v1 CPU fields %+v %+v", v1.Spec, v1.Status)
	}
	var metrics []autoscalingv1.MetricSpec
	if err := json.Unmarshal([]byte(v1.Annotations[MetricSpecsAnnotation]), &metrics); err != nil || len(metrics) != 2 || metrics[0].Pods.MetricName != "qps" ||
		metrics[1].External.MetricName != "queue" {
		t.Errorf("metrics annotation %s (%v)", v1.Annotations[MetricSpecsAnnotation], err)
	}
	// The behavior annotation is upstream's internal type marshalled
	// without JSON tags.
	if got, want := v1.Annotations[BehaviorSpecsAnnotation],
		`{"ScaleUp":null,"ScaleDown":{"StabilizationWindowSeconds":60,"SelectPolicy":"Min","Policies":[{"Type":"Pods","Value":1,"PeriodSeconds":30}],"Tolerance":"50m"}}`; got != want {
		t.Errorf("behavior annotation\n got %s\nwant %s", got, want)
	}
	if v1.Annotations["keep"] != "me" || v1.Annotations[MetricStatusesAnnotation] == "" || v1.Annotations[HorizontalPodAutoscalerConditionsAnnotation] == "" {
		t.Errorf("annotations %v", v1.Annotations)
	}
	if in.Annotations[MetricSpecsAnnotation] != "" {
		t.Error("the conversion wrote into its input's annotations")
	}

	back := HorizontalPodAutoscalerV1ToV2(v1)
	want := fullV2()
	// v1 puts the CPU target after the annotated metrics, as upstream.
	if !equality.Semantic.DeepEqual(back.Spec, want.Spec) {
		t.Errorf("spec after the round trip\n got %+v\nwant %+v", back.Spec, want.Spec)
	}
	if !equality.Semantic.DeepEqual(back.Status, want.Status) {
		t.Errorf("status after the round trip\n got %+v\nwant %+v", back.Status, want.Status)
	}
	if !reflect.DeepEqual(back.Annotations, map[string]string{"keep": "me"}) {
		t.Errorf("annotations after the round trip %v", back.Annotations)
	}
}

// v1 without a CPU target or annotated metrics had an implicit 80% CPU
// target; conversion makes it explicit. A malformed annotation is ignored.
func TestHPAV1ImplicitCPUTarget(t *testing.T) {
	v1 := &autoscalingv1.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{MetricSpecsAnnotation: "not json"}},
		Spec: autoscalingv1.HorizontalPodAutoscalerSpec{MaxReplicas: 3}}
	v2 := HorizontalPodAutoscalerV1ToV2(v1)
	if m := v2.Spec.Metrics; len(m) != 1 || m[0].Resource == nil || m[0].Resource.Name != corev1.ResourceCPU || *m[0].Resource.Target.AverageUtilization != DefaultCPUUtilization {
		t.Errorf("metrics %+v", m)
	}
	if len(v2.Annotations) != 0 {
		t.Errorf("annotations %v", v2.Annotations)
	}
	if v2.APIVersion != "autoscaling/v2" || HorizontalPodAutoscalerV2ToV1(v2).APIVersion != "autoscaling/v1" {
		t.Error("conversions do not set their kinds")
	}
}

// An object metric with an averageValue keeps a zero v1 targetValue out
// of v2, as upstream (v1 cannot omit it and writes "0").
func TestHPAObjectMetricAverageValue(t *testing.T) {
	avg := resource.MustParse("5")
	m := metricSpecFromV1(autoscalingv1.MetricSpec{Type: autoscalingv1.ObjectMetricSourceType, Object: &autoscalingv1.ObjectMetricSource{
		Target: autoscalingv1.CrossVersionObjectReference{Kind: "Service", Name: "s"}, MetricName: "rps", AverageValue: &avg}})
	if m.Object.Target.Type != autoscalingv2.AverageValueMetricType || m.Object.Target.Value != nil || m.Object.Target.AverageValue.Cmp(avg) != 0 {
		t.Errorf("object target %+v", m.Object.Target)
	}
}
