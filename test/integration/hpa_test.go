package integration

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

func hpaDeployment(name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
			},
		},
	}
}

func waitHPA(t *testing.T, cs kubernetes.Interface, name, what string, ok func(*autoscalingv2.HorizontalPodAutoscaler) bool) *autoscalingv2.HorizontalPodAutoscaler {
	t.Helper()
	var hpa *autoscalingv2.HorizontalPodAutoscaler
	// The controller looks again every 15 s (upstream's sync period).
	waitWithin(t, 45*time.Second, what, func() bool {
		var err error
		hpa, err = cs.AutoscalingV2().HorizontalPodAutoscalers("default").Get(context.Background(), name, metav1.GetOptions{})
		return err == nil && ok(hpa)
	})
	return hpa
}

func hpaCondition(hpa *autoscalingv2.HorizontalPodAutoscaler, typ autoscalingv2.HorizontalPodAutoscalerConditionType) autoscalingv2.HorizontalPodAutoscalerCondition {
	for _, c := range hpa.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return autoscalingv2.HorizontalPodAutoscalerCondition{}
}

func deploymentReplicas(t *testing.T, cs kubernetes.Interface, name string) int32 {
	t.Helper()
	d, err := cs.AppsV1().Deployments("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return *d.Spec.Replicas
}

// One HorizontalPodAutoscaler, two versions: written through autoscaling/v1
// and read through v2 (the CPU target a Utilization metric, the defaults
// of v2), and the other way (what v1 cannot hold in its annotations).
func TestHPAVersions(t *testing.T) {
	s := startServer(t, "--disable-controller-manager")
	cs, ctx := s.client(), ctxT(t)

	v1 := &autoscalingv1.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "from-v1"},
		Spec: autoscalingv1.HorizontalPodAutoscalerSpec{
			ScaleTargetRef:                 autoscalingv1.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MaxReplicas:                    4,
			TargetCPUUtilizationPercentage: ptr.To(int32(60)),
		},
	}
	created, err := cs.AutoscalingV1().HorizontalPodAutoscalers("default").Create(ctx, v1, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.Spec.MinReplicas == nil || *created.Spec.MinReplicas != 1 || *created.Spec.TargetCPUUtilizationPercentage != 60 {
		t.Errorf("v1 create returned %+v", created.Spec)
	}
	got, err := cs.AutoscalingV2().HorizontalPodAutoscalers("default").Get(ctx, "from-v1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m := got.Spec.Metrics; len(m) != 1 || m[0].Type != autoscalingv2.ResourceMetricSourceType || m[0].Resource.Name != corev1.ResourceCPU ||
		m[0].Resource.Target.Type != autoscalingv2.UtilizationMetricType || *m[0].Resource.Target.AverageUtilization != 60 {
		t.Errorf("v2 metrics of a v1 HPA: %+v", m)
	}
	if got.Generation != 1 || *got.Spec.MinReplicas != 1 || got.Spec.MaxReplicas != 4 || len(got.Annotations) != 0 {
		t.Errorf("v2 read of a v1 HPA: %+v", got.ObjectMeta)
	}

	// v2 with a second metric and a behavior: v1 shows the CPU target and
	// keeps the rest in annotations, and a v1 update carries them back.
	v2 := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "from-v2"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    ptr.To(int32(2)), MaxReplicas: 6,
			Metrics: []autoscalingv2.MetricSpec{
				{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU,
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(int32(70))}}},
				{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: "qps"},
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("10"))}}},
			},
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To(int32(60))}},
		},
	}
	made, err := cs.AutoscalingV2().HorizontalPodAutoscalers("default").Create(ctx, v2, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b := made.Spec.Behavior; b.ScaleUp == nil || len(b.ScaleUp.Policies) != 2 || *b.ScaleDown.StabilizationWindowSeconds != 60 || len(b.ScaleDown.Policies) != 1 {
		t.Errorf("behavior not defaulted: %+v", b)
	}
	asV1, err := cs.AutoscalingV1().HorizontalPodAutoscalers("default").Get(ctx, "from-v2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if asV1.Spec.TargetCPUUtilizationPercentage == nil || *asV1.Spec.TargetCPUUtilizationPercentage != 70 {
		t.Errorf("v1 CPU target %v", asV1.Spec.TargetCPUUtilizationPercentage)
	}
	var others []autoscalingv1.MetricSpec
	if err := json.Unmarshal([]byte(asV1.Annotations["autoscaling.alpha.kubernetes.io/metrics"]), &others); err != nil || len(others) != 1 ||
		others[0].Pods == nil || others[0].Pods.MetricName != "qps" {
		t.Errorf("metrics annotation %q: %v", asV1.Annotations["autoscaling.alpha.kubernetes.io/metrics"], err)
	}
	if !strings.Contains(asV1.Annotations["autoscaling.alpha.kubernetes.io/behavior"], `"StabilizationWindowSeconds":60`) {
		t.Errorf("behavior annotation %q", asV1.Annotations["autoscaling.alpha.kubernetes.io/behavior"])
	}
	asV1.Spec.MaxReplicas = 8
	if _, err := cs.AutoscalingV1().HorizontalPodAutoscalers("default").Update(ctx, asV1, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	back, err := cs.AutoscalingV2().HorizontalPodAutoscalers("default").Get(ctx, "from-v2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if back.Spec.MaxReplicas != 8 || len(back.Spec.Metrics) != 2 || back.Spec.Behavior == nil || *back.Spec.Behavior.ScaleDown.StabilizationWindowSeconds != 60 ||
		len(back.Annotations) != 0 || back.Generation != 2 {
		t.Errorf("after a v1 update, v2 reads %+v %+v", back.ObjectMeta, back.Spec)
	}

	// Upstream's validation, with v2's field paths through either version.
	bad := v1.DeepCopy()
	bad.Name, bad.Spec.MinReplicas, bad.Spec.MaxReplicas = "bad", ptr.To(int32(5)), 3
	_, err = cs.AutoscalingV1().HorizontalPodAutoscalers("default").Create(ctx, bad, metav1.CreateOptions{})
	expectInvalid(t, "maxReplicas < minReplicas through v1", err, "spec.maxReplicas")
	zero := v2.DeepCopy()
	zero.Name, zero.Spec.MinReplicas = "zero", ptr.To(int32(0))
	_, err = cs.AutoscalingV2().HorizontalPodAutoscalers("default").Create(ctx, zero, metav1.CreateOptions{})
	expectInvalid(t, "minReplicas 0 without an object or external metric", err, "spec.metrics")
	neg := v2.DeepCopy()
	neg.Name, neg.Spec.MinReplicas, neg.Spec.MaxReplicas = "neg", ptr.To(int32(-1)), 0
	_, err = cs.AutoscalingV2().HorizontalPodAutoscalers("default").Create(ctx, neg, metav1.CreateOptions{})
	expectInvalid(t, "negative minReplicas", err, "spec.minReplicas")
	expectInvalid(t, "maxReplicas unset", err, "spec.maxReplicas")
	noRef := v1.DeepCopy()
	noRef.Name, noRef.Spec.ScaleTargetRef.APIVersion = "noref", "v1"
	_, err = cs.AutoscalingV1().HorizontalPodAutoscalers("default").Create(ctx, noRef, metav1.CreateOptions{})
	expectInvalid(t, "a Deployment without an API group", err, "spec.scaleTargetRef.apiVersion")
	policy := v2.DeepCopy()
	policy.Name = "policy"
	policy.Spec.Behavior.ScaleUp = &autoscalingv2.HPAScalingRules{Policies: []autoscalingv2.HPAScalingPolicy{{Type: "Pods", Value: 0, PeriodSeconds: 1801}}}
	_, err = cs.AutoscalingV2().HorizontalPodAutoscalers("default").Create(ctx, policy, metav1.CreateOptions{})
	expectInvalid(t, "a zero policy value", err, "spec.behavior.scaleUp.policies[0].value")
	expectInvalid(t, "a too long policy period", err, "spec.behavior.scaleUp.policies[0].periodSeconds")
}

// kubectl autoscale (autoscaling/v2 since kubectl 1.23) and kubectl get hpa
// with upstream's columns; the controller brings the Deployment into
// range both ways, then reports that it cannot read metrics.
func TestHPAController(t *testing.T) {
	s := startServer(t)
	cs, ctx := s.client(), ctxT(t)
	if _, err := cs.AppsV1().Deployments("default").Create(ctx, hpaDeployment("web", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	out := s.mustKubectl("autoscale", "deployment", "web", "--min=2", "--max=5", "--cpu-percent=50")
	if !strings.Contains(out, "autoscaled") {
		t.Errorf("kubectl autoscale: %s", out)
	}

	// Below minReplicas: scaled up to 2 at once.
	hpa := waitHPA(t, cs, "web", "a rescale to minReplicas", func(h *autoscalingv2.HorizontalPodAutoscaler) bool {
		return h.Status.DesiredReplicas == 2 && h.Status.LastScaleTime != nil
	})
	if got := deploymentReplicas(t, cs, "web"); got != 2 {
		t.Errorf("deployment has %d replicas, want 2", got)
	}
	if c := hpaCondition(hpa, autoscalingv2.AbleToScale); c.Status != corev1.ConditionTrue {
		t.Errorf("AbleToScale %+v", c)
	}
	waitHPAEvent(t, cs, "SuccessfulRescale", "New size: 2; reason: Current number of replicas below Spec.MinReplicas")

	// Within range: no metrics API, so ScalingActive False with upstream's
	// reason and a message that says so, and a Warning event.
	hpa = waitHPA(t, cs, "web", "ScalingActive False", func(h *autoscalingv2.HorizontalPodAutoscaler) bool {
		return hpaCondition(h, autoscalingv2.ScalingActive).Reason == "FailedGetResourceMetric"
	})
	c := hpaCondition(hpa, autoscalingv2.ScalingActive)
	if c.Status != corev1.ConditionFalse || !strings.Contains(c.Message, "no metrics API (metrics.k8s.io) is served in this cluster") {
		t.Errorf("ScalingActive %+v", c)
	}
	if hpa.Status.CurrentReplicas != 2 {
		t.Errorf("currentReplicas %d", hpa.Status.CurrentReplicas)
	}
	waitHPAEvent(t, cs, "FailedGetResourceMetric", "failed to get cpu utilization")

	table := s.mustKubectl("get", "hpa")
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "NAME REFERENCE TARGETS MINPODS MAXPODS REPLICAS AGE" ||
		!strings.HasPrefix(strings.Join(strings.Fields(lines[1]), " "), "web Deployment/web cpu: <unknown>/50% 2 5 2 ") {
		t.Errorf("kubectl get hpa:\n%s", table)
	}
	if out := s.mustKubectl("explain", "hpa.spec"); !strings.Contains(out, "scaleTargetRef") || !strings.Contains(out, "autoscaling") {
		t.Errorf("kubectl explain hpa.spec:\n%s", out)
	}

	// Above maxReplicas: scaled down to 5.
	if _, err := cs.AppsV1().Deployments("default").UpdateScale(ctx, "web", &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}, Spec: autoscalingv1.ScaleSpec{Replicas: 8}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitHPA(t, cs, "web", "a rescale to maxReplicas", func(h *autoscalingv2.HorizontalPodAutoscaler) bool { return h.Status.DesiredReplicas == 5 })
	if got := deploymentReplicas(t, cs, "web"); got != 5 {
		t.Errorf("deployment has %d replicas, want 5", got)
	}
	waitHPAEvent(t, cs, "SuccessfulRescale", "New size: 5; reason: Current number of replicas above Spec.MaxReplicas")

	// A target that does not exist.
	missing := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "missing"}, Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "nothing"}, MaxReplicas: 3}}
	if _, err := cs.AutoscalingV2().HorizontalPodAutoscalers("default").Create(ctx, missing, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitHPA(t, cs, "missing", "AbleToScale False", func(h *autoscalingv2.HorizontalPodAutoscaler) bool {
		c := hpaCondition(h, autoscalingv2.AbleToScale)
		return c.Status == corev1.ConditionFalse && c.Reason == "FailedGetScale"
	})
}

// waitHPAEvent waits for an event of the reason whose message contains msg.
func waitHPAEvent(t *testing.T, cs kubernetes.Interface, reason, msg string) {
	t.Helper()
	waitWithin(t, 30*time.Second, "event "+reason+": "+msg, func() bool {
		list, err := cs.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{FieldSelector: "reason=" + reason})
		if err != nil {
			return false
		}
		for _, e := range list.Items {
			if strings.Contains(e.Message, msg) && e.Source.Component == "horizontal-pod-autoscaler" {
				return true
			}
		}
		return false
	})
}
