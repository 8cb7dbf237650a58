package printers

import (
	"time"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func init() {
	cells([]metav1.TableColumnDefinition{
		nameColumn(),
		column("Min Available", "string", "The minimum number of pods that must be available."),
		column("Max Unavailable", "string", "The maximum number of pods that may be unavailable."),
		column("Allowed Disruptions", "integer", "Calculated number of pods that may be disrupted at this time."),
		ageColumn(),
	}, func(pdb *policyv1.PodDisruptionBudget, now time.Time) []interface{} {
		return []interface{}{
			pdb.Name,
			intOrStringOrNA(pdb.Spec.MinAvailable),
			intOrStringOrNA(pdb.Spec.MaxUnavailable),
			int64(pdb.Status.DisruptionsAllowed),
			age(pdb.ObjectMeta, now),
		}
	})
}

// intOrStringOrNA renders a count or percentage; only one of minAvailable and
// maxUnavailable may be set, and the other shows N/A.
func intOrStringOrNA(v *intstr.IntOrString) string {
	if v == nil {
		return "N/A"
	}
	return v.String()
}
