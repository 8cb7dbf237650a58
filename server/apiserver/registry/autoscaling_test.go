package registry

import (
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kelp-project/kelp/server/apiserver/conversion"
)

// The v1 resource keeps the annotated status out of writes to its main
// endpoint and the annotated spec out of writes to /status, as upstream's
// strategies do on the converted object; a new HPA starts without status.
func TestHPAV1SpecStatusSplit(t *testing.T) {
	r := horizontalPodAutoscalersV1()
	old := &autoscalingv1.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		conversion.HorizontalPodAutoscalerConditionsAnnotation: "old-conditions", conversion.MetricSpecsAnnotation: "old-metrics"}}}
	client := &autoscalingv1.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		conversion.HorizontalPodAutoscalerConditionsAnnotation: "new-conditions", conversion.MetricStatusesAnnotation: "new-current",
		conversion.MetricSpecsAnnotation: "new-metrics", "other": "x"}}}

	main := client.DeepCopy()
	r.PrepareForUpdate(main, old)
	if a := main.Annotations; a[conversion.HorizontalPodAutoscalerConditionsAnnotation] != "old-conditions" || a[conversion.MetricStatusesAnnotation] != "" ||
		a[conversion.MetricSpecsAnnotation] != "new-metrics" || a["other"] != "x" {
		t.Errorf("main endpoint: %v", a)
	}
	status := client.DeepCopy()
	r.PrepareForStatusUpdate(status, old)
	if a := status.Annotations; a[conversion.MetricSpecsAnnotation] != "old-metrics" || a[conversion.HorizontalPodAutoscalerConditionsAnnotation] != "new-conditions" {
		t.Errorf("status: %v", a)
	}
	created := client.DeepCopy()
	r.PrepareForCreate(created)
	if a := created.Annotations; a[conversion.HorizontalPodAutoscalerConditionsAnnotation] != "" || a[conversion.MetricStatusesAnnotation] != "" || a[conversion.MetricSpecsAnnotation] != "new-metrics" {
		t.Errorf("create: %v", a)
	}
	if client.Annotations[conversion.MetricStatusesAnnotation] != "new-current" {
		t.Error("a hook changed the map it was given")
	}
}

// A v1 HPA is stored as v2 with v2's defaults; a v2 write never stores v1's
// round-trip annotations.
func TestHPAStorage(t *testing.T) {
	v1 := &autoscalingv1.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{
		conversion.BehaviorSpecsAnnotation: `{"ScaleUp":{"StabilizationWindowSeconds":30}}`}}, Spec: autoscalingv1.HorizontalPodAutoscalerSpec{MaxReplicas: 3}}
	stored := HPAToV2(v1).(*autoscalingv2.HorizontalPodAutoscaler)
	if b := stored.Spec.Behavior; b == nil || *b.ScaleUp.StabilizationWindowSeconds != 30 || len(b.ScaleUp.Policies) != 2 || b.ScaleDown == nil ||
		*stored.Spec.MinReplicas != 1 || len(stored.Spec.Metrics) != 1 || len(stored.Annotations) != 0 {
		t.Errorf("stored %+v %+v", stored.ObjectMeta, stored.Spec)
	}
	v2 := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{conversion.MetricSpecsAnnotation: "[]", "keep": "1"}}}
	horizontalPodAutoscalers().PrepareForCreate(v2)
	if len(v2.Annotations) != 1 || v2.Annotations["keep"] != "1" {
		t.Errorf("v2 annotations %v", v2.Annotations)
	}
}
