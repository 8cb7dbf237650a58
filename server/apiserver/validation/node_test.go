package validation

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestRuntimeClass(t *testing.T) {
	rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "kata"}, Handler: "kata-qemu",
		Overhead: &nodev1.Overhead{PodFixed: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}},
		Scheduling: &nodev1.Scheduling{NodeSelector: map[string]string{"runtime": "kata"},
			Tolerations: []corev1.Toleration{{Key: "kata", Operator: corev1.TolerationOpExists}}}}
	expectErrors(t, Validate(rc), nil)

	bad := rc.DeepCopy()
	bad.Handler = "Kata.QEMU"
	bad.Overhead.PodFixed[corev1.ResourceMemory] = resource.MustParse("-1")
	bad.Scheduling.NodeSelector["bad key!"] = "x"
	bad.Scheduling.Tolerations = append(bad.Scheduling.Tolerations, corev1.Toleration{Key: "kata", Operator: corev1.TolerationOpExists},
		corev1.Toleration{Key: "x", Operator: "Near"})
	expectErrors(t, Validate(bad), []want{
		{field.ErrorTypeInvalid, "handler", "RFC 1123 label"},
		{field.ErrorTypeInvalid, "overhead.limits[memory]", "must be greater than or equal to 0"},
		{field.ErrorTypeInvalid, "scheduling.nodeSelector", "name part must consist of"},
		{field.ErrorTypeDuplicate, "scheduling.tolerations[1]", ""},
		{field.ErrorTypeNotSupported, "scheduling.tolerations[2].operator", ""},
	})
	expectErrors(t, Validate(&nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "x"}}),
		[]want{{field.ErrorTypeInvalid, "handler", ""}})

	old := stored(rc.DeepCopy())
	changed := old.DeepCopy()
	changed.Handler = "runc"
	expectErrors(t, ValidateUpdate(changed, old), []want{{field.ErrorTypeInvalid, "handler", "field is immutable"}})
	// Overhead and scheduling concern pods created later: they may change.
	changed = old.DeepCopy()
	changed.Overhead = nil
	changed.Scheduling.NodeSelector = nil
	expectErrors(t, ValidateUpdate(changed, old), nil)
}

func TestReplicationControllerStatusBounds(t *testing.T) {
	rc := stored(&corev1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}})
	next := rc.DeepCopy()
	next.Status = corev1.ReplicationControllerStatus{Replicas: 1, FullyLabeledReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 3}
	expectErrors(t, ValidateStatusUpdate(next, rc), []want{
		{field.ErrorTypeInvalid, "status.fullyLabeledReplicas", "cannot be greater than status.replicas"},
		{field.ErrorTypeInvalid, "status.readyReplicas", "cannot be greater than status.replicas"},
		{field.ErrorTypeInvalid, "status.availableReplicas", "cannot be greater than readyReplicas"},
	})
}
