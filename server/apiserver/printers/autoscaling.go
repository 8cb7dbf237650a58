package printers

import (
	"fmt"
	"strings"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kelp-project/kelp/server/apiserver/conversion"
)

// hpaMetricLimit is how many metrics the TARGETS cell shows.
const hpaMetricLimit = 2

func init() {
	specDoc := autoscalingv2.HorizontalPodAutoscalerSpec{}.SwaggerDoc()
	columns := []metav1.TableColumnDefinition{
		nameColumn(),
		column("Reference", "string", specDoc["scaleTargetRef"]),
		column("Targets", "string", specDoc["metrics"]),
		column("MinPods", "string", specDoc["minReplicas"]),
		column("MaxPods", "string", specDoc["maxReplicas"]),
		column("Replicas", "string", autoscalingv2.HorizontalPodAutoscalerStatus{}.SwaggerDoc()["currentReplicas"]),
		ageColumn(),
	}
	cells(columns, hpaCells)
	// Upstream prints both versions from its internal type, which has v2's
	// shape: a v1 object prints as its v2 form, annotated metrics included.
	cells(columns, func(hpa *autoscalingv1.HorizontalPodAutoscaler, now time.Time) []interface{} {
		return hpaCells(conversion.HorizontalPodAutoscalerV1ToV2(hpa), now)
	})
}

func hpaCells(hpa *autoscalingv2.HorizontalPodAutoscaler, now time.Time) []interface{} {
	minPods := "<unset>"
	if hpa.Spec.MinReplicas != nil {
		minPods = fmt.Sprintf("%d", *hpa.Spec.MinReplicas)
	}
	return []interface{}{
		hpa.Name,
		hpa.Spec.ScaleTargetRef.Kind + "/" + hpa.Spec.ScaleTargetRef.Name,
		hpaTargets(hpa.Spec.Metrics, hpa.Status.CurrentMetrics),
		minPods,
		int64(hpa.Spec.MaxReplicas),
		int64(hpa.Status.CurrentReplicas),
		age(hpa.ObjectMeta, now),
	}
}

// hpaTargets renders "current/target" per metric. statuses are matched to
// specs by index, as the controller writes them in spec order; a missing
// status shows as <unknown>.
func hpaTargets(specs []autoscalingv2.MetricSpec, statuses []autoscalingv2.MetricStatus) string {
	if len(specs) == 0 {
		return "<none>"
	}
	list := make([]string, 0, len(specs))
	for i, spec := range specs {
		var st *autoscalingv2.MetricStatus
		if i < len(statuses) {
			st = &statuses[i]
		}
		list = append(list, hpaTarget(spec, st))
	}
	if len(list) > hpaMetricLimit {
		return fmt.Sprintf("%s + %d more...", strings.Join(list[:hpaMetricLimit], ", "), len(list)-hpaMetricLimit)
	}
	return strings.Join(list, ", ")
}

func hpaTarget(spec autoscalingv2.MetricSpec, st *autoscalingv2.MetricStatus) string {
	current := "<unknown>"
	switch {
	case spec.Type == autoscalingv2.ExternalMetricSourceType && spec.External != nil:
		if spec.External.Target.AverageValue != nil {
			if st != nil && st.External != nil && st.External.Current.AverageValue != nil {
				current = st.External.Current.AverageValue.String()
			}
			return fmt.Sprintf("%s/%s (avg)", current, spec.External.Target.AverageValue.String())
		}
		if st != nil && st.External != nil {
			current = st.External.Current.Value.String()
		}
		return fmt.Sprintf("%s/%s", current, spec.External.Target.Value.String())

	case spec.Type == autoscalingv2.PodsMetricSourceType && spec.Pods != nil:
		if st != nil && st.Pods != nil {
			current = st.Pods.Current.AverageValue.String()
		}
		return fmt.Sprintf("%s/%s", current, spec.Pods.Target.AverageValue.String())

	case spec.Type == autoscalingv2.ObjectMetricSourceType && spec.Object != nil:
		if spec.Object.Target.AverageValue != nil {
			if st != nil && st.Object != nil && st.Object.Current.AverageValue != nil {
				current = st.Object.Current.AverageValue.String()
			}
			return fmt.Sprintf("%s/%s (avg)", current, spec.Object.Target.AverageValue.String())
		}
		if st != nil && st.Object != nil {
			current = st.Object.Current.Value.String()
		}
		return fmt.Sprintf("%s/%s", current, spec.Object.Target.Value.String())

	case spec.Type == autoscalingv2.ResourceMetricSourceType && spec.Resource != nil:
		var cur *autoscalingv2.MetricValueStatus
		if st != nil && st.Resource != nil {
			cur = &st.Resource.Current
		}
		return resourceTarget(spec.Resource.Name.String(), spec.Resource.Target, cur)

	case spec.Type == autoscalingv2.ContainerResourceMetricSourceType && spec.ContainerResource != nil:
		var cur *autoscalingv2.MetricValueStatus
		if st != nil && st.ContainerResource != nil {
			cur = &st.ContainerResource.Current
		}
		return resourceTarget(spec.ContainerResource.Name.String(), spec.ContainerResource.Target, cur)
	}
	// Also covers a source whose type does not match its filled-in field,
	// which validation rejects; better a marker than a nil dereference.
	return "<unknown type>"
}

// resourceTarget renders "name: current/target" for cpu/memory style metrics,
// as an absolute average value or as a utilization percentage.
func resourceTarget(name string, target autoscalingv2.MetricTarget, cur *autoscalingv2.MetricValueStatus) string {
	current := "<unknown>"
	if target.AverageValue != nil {
		if cur != nil {
			current = cur.AverageValue.String()
		}
		return fmt.Sprintf("%s: %s/%s", name, current, target.AverageValue.String())
	}
	if cur != nil && cur.AverageUtilization != nil {
		current = fmt.Sprintf("%d%%", *cur.AverageUtilization)
	}
	want := "<auto>"
	if target.AverageUtilization != nil {
		want = fmt.Sprintf("%d%%", *target.AverageUtilization)
	}
	return fmt.Sprintf("%s: %s/%s", name, current, want)
}
