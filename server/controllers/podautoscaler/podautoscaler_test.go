package podautoscaler

import (
	"context"
	"strings"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubefake "k8s.io/client-go/kubernetes/fake"
	scalefake "k8s.io/client-go/scale/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
)

// staticMapper knows apps/v1 Deployments only.
type staticMapper struct{ *apimeta.DefaultRESTMapper }

func (staticMapper) Reset() {}

// fixture is a controller on fake clients whose target Deployment "web"
// has replicas; updates of its scale are recorded in scaled.
type fixture struct {
	c        *Controller
	client   *kubefake.Clientset
	recorder *record.FakeRecorder
	replicas int32
	scaled   []int32
}

func newFixture(t *testing.T, hpa *autoscalingv2.HorizontalPodAutoscaler, replicas int32, targetExists bool) *fixture {
	t.Helper()
	f := &fixture{client: kubefake.NewClientset(hpa), recorder: record.NewFakeRecorder(100), replicas: replicas}
	m := apimeta.NewDefaultRESTMapper([]schema.GroupVersion{{Group: "apps", Version: "v1"}})
	m.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, apimeta.RESTScopeNamespace)
	scales := &scalefake.FakeScaleClient{}
	scales.AddReactor("get", "deployments", func(a core.Action) (bool, runtime.Object, error) {
		if !targetExists {
			return true, nil, apierrors.NewNotFound(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web")
		}
		return true, &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
			Spec: autoscalingv1.ScaleSpec{Replicas: f.replicas}, Status: autoscalingv1.ScaleStatus{Replicas: f.replicas, Selector: "app=web"}}, nil
	})
	scales.AddReactor("update", "deployments", func(a core.Action) (bool, runtime.Object, error) {
		sc := a.(core.UpdateAction).GetObject().(*autoscalingv1.Scale)
		f.scaled = append(f.scaled, sc.Spec.Replicas)
		f.replicas = sc.Spec.Replicas
		return true, sc, nil
	})
	f.c = &Controller{hpas: f.client, scales: scales, mapper: staticMapper{m}, recorder: f.recorder, period: SyncPeriod,
		now: func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }}
	return f
}

func testHPA(minReplicas, maxReplicas int32) *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Generation: 3},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    ptr.To(minReplicas), MaxReplicas: maxReplicas,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
				Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(int32(50))}}}},
		},
	}
}

// reconcile runs one sync and returns the stored HPA.
func (f *fixture) reconcile(t *testing.T, hpa *autoscalingv2.HorizontalPodAutoscaler) (*autoscalingv2.HorizontalPodAutoscaler, error) {
	t.Helper()
	err := f.c.reconcile(context.Background(), hpa)
	got, getErr := f.client.AutoscalingV2().HorizontalPodAutoscalers("default").Get(context.Background(), "web", metav1.GetOptions{})
	if getErr != nil {
		t.Fatal(getErr)
	}
	return got, err
}

func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func condition(hpa *autoscalingv2.HorizontalPodAutoscaler, typ autoscalingv2.HorizontalPodAutoscalerConditionType) autoscalingv2.HorizontalPodAutoscalerCondition {
	for _, c := range hpa.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return autoscalingv2.HorizontalPodAutoscalerCondition{}
}

func hasEvent(events []string, prefix string) bool {
	for _, e := range events {
		if strings.HasPrefix(e, prefix) {
			return true
		}
	}
	return false
}

func TestScalesIntoRange(t *testing.T) {
	for _, tc := range []struct {
		name     string
		replicas int32
		want     int32
		reason   string
	}{
		{"below minReplicas", 1, 3, "Current number of replicas below Spec.MinReplicas"},
		{"above maxReplicas", 9, 5, "Current number of replicas above Spec.MaxReplicas"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hpa := testHPA(3, 5)
			f := newFixture(t, hpa, tc.replicas, true)
			got, err := f.reconcile(t, hpa)
			if err != nil {
				t.Fatal(err)
			}
			if len(f.scaled) != 1 || f.scaled[0] != tc.want {
				t.Fatalf("scale updates %v, want [%d]", f.scaled, tc.want)
			}
			if s := got.Status; s.CurrentReplicas != tc.replicas || s.DesiredReplicas != tc.want || s.LastScaleTime == nil ||
				s.ObservedGeneration == nil || *s.ObservedGeneration != 3 {
				t.Errorf("status %+v", s)
			}
			if c := condition(got, autoscalingv2.AbleToScale); c.Status != corev1.ConditionTrue || c.Reason != "SucceededRescale" {
				t.Errorf("AbleToScale %+v", c)
			}
			want := "Normal SuccessfulRescale New size: " + string(rune('0'+tc.want)) + "; reason: " + tc.reason
			if ev := f.events(); !hasEvent(ev, want) {
				t.Errorf("events %q, want %q", ev, want)
			}
		})
	}
}

func TestNoMetricsAPI(t *testing.T) {
	hpa := testHPA(1, 5)
	f := newFixture(t, hpa, 2, true)
	got, err := f.reconcile(t, hpa)
	if err == nil || !strings.Contains(err.Error(), "invalid metrics (1 invalid out of 1)") {
		t.Fatalf("error %v", err)
	}
	if len(f.scaled) != 0 {
		t.Errorf("scaled %v without metrics", f.scaled)
	}
	c := condition(got, autoscalingv2.ScalingActive)
	if c.Status != corev1.ConditionFalse || c.Reason != "FailedGetResourceMetric" ||
		!strings.Contains(c.Message, "failed to get cpu utilization") || !strings.Contains(c.Message, "no metrics API (metrics.k8s.io) is served in this cluster") {
		t.Errorf("ScalingActive %+v", c)
	}
	if c := condition(got, autoscalingv2.AbleToScale); c.Status != corev1.ConditionTrue || c.Reason != "SucceededGetScale" {
		t.Errorf("AbleToScale %+v", c)
	}
	if s := got.Status; s.CurrentReplicas != 2 || s.DesiredReplicas != 0 || len(s.CurrentMetrics) != 1 {
		t.Errorf("status %+v", s)
	}
	ev := f.events()
	if !hasEvent(ev, "Warning FailedGetResourceMetric failed to get cpu utilization") || !hasEvent(ev, "Warning FailedComputeMetricsReplicas invalid metrics") {
		t.Errorf("events %q", ev)
	}
}

func TestScaledToZeroIsLeftAlone(t *testing.T) {
	hpa := testHPA(1, 5)
	f := newFixture(t, hpa, 0, true)
	got, err := f.reconcile(t, hpa)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.scaled) != 0 {
		t.Errorf("scaled %v", f.scaled)
	}
	if c := condition(got, autoscalingv2.ScalingActive); c.Status != corev1.ConditionFalse || c.Reason != "ScalingDisabled" {
		t.Errorf("ScalingActive %+v", c)
	}
}

func TestMissingTarget(t *testing.T) {
	hpa := testHPA(1, 5)
	f := newFixture(t, hpa, 0, false)
	got, err := f.reconcile(t, hpa)
	if err == nil {
		t.Fatal("no error for a missing target")
	}
	if c := condition(got, autoscalingv2.AbleToScale); c.Status != corev1.ConditionFalse || c.Reason != "FailedGetScale" ||
		!strings.HasPrefix(c.Message, "the HPA controller was unable to get the target's current scale: ") {
		t.Errorf("AbleToScale %+v", c)
	}
	// A kind discovery does not know.
	hpa.Spec.ScaleTargetRef.Kind = "Unknown"
	got, _ = f.reconcile(t, hpa)
	if c := condition(got, autoscalingv2.AbleToScale); c.Reason != "FailedGetScale" || !strings.Contains(c.Message, "no matches for") {
		t.Errorf("AbleToScale %+v", c)
	}
	if ev := f.events(); !hasEvent(ev, "Warning FailedGetScale") {
		t.Errorf("events %q", ev)
	}
}
