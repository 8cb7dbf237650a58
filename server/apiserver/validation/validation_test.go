package validation

import (
	"testing"

	"k8s.io/utils/ptr"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The seed objects must pass create, a no-op update and a status write
// after defaulting, exactly as the API server runs them.
func TestSeedObjectsValidate(t *testing.T) {
	d := defaulted(seedDeployment())
	expectErrors(t, Validate(d), nil)
	stored(d)
	expectErrors(t, ValidateUpdate(d.DeepCopy(), d), nil)
	expectErrors(t, ValidateStatusUpdate(d.DeepCopy(), d), nil)

	s := defaulted(seedService())
	expectErrors(t, Validate(s), nil)
	// After the allocator assigns the cluster IP.
	s.Spec.ClusterIP, s.Spec.ClusterIPs = "10.96.0.10", []string{"10.96.0.10"}
	expectErrors(t, Validate(s), nil)
	stored(s)
	expectErrors(t, ValidateUpdate(s.DeepCopy(), s), nil)
	expectErrors(t, ValidateStatusUpdate(s.DeepCopy(), s), nil)

	// A pod the Deployment's ReplicaSet would create from the template.
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "container-lab-7d9f-abcde", Labels: d.Spec.Template.Labels}, Spec: *d.Spec.Template.Spec.DeepCopy()}
	expectErrors(t, Validate(defaulted(p)), nil)
}

func TestMetadataUpdateRules(t *testing.T) {
	old := stored(defaulted(seedDeployment()))
	old.Generation = 3
	old.CreationTimestamp = metav1.Unix(1000, 0)

	tests := []struct {
		name   string
		mutate func(d *appsv1.Deployment)
		wants  []want
	}{
		{"creationTimestamp", func(d *appsv1.Deployment) { d.CreationTimestamp = metav1.Unix(2000, 0) },
			[]want{{field.ErrorTypeInvalid, "metadata.creationTimestamp", "field is immutable"}}},
		{"generation decrement", func(d *appsv1.Deployment) { d.Generation = 2 },
			[]want{{field.ErrorTypeInvalid, "metadata.generation", "must not be decremented"}}},
		{"bad label on update", func(d *appsv1.Deployment) { d.Labels = map[string]string{"a": "b c"} },
			[]want{{field.ErrorTypeInvalid, "metadata.labels", ""}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := old.DeepCopy()
			tc.mutate(d)
			expectErrors(t, ValidateUpdate(d, old), tc.wants)
		})
	}

	t.Run("finalizers cannot be added while deleting", func(t *testing.T) {
		o := old.DeepCopy()
		now := metav1.Now()
		o.DeletionTimestamp = &now
		d := o.DeepCopy()
		d.Finalizers = []string{"example.com/hold"}
		expectErrors(t, ValidateUpdate(d, o), []want{{field.ErrorTypeForbidden, "metadata.finalizers", "no new finalizers"}})
	})
}

func TestGenericUpdateReportsOnce(t *testing.T) {
	// Limit ranges have no specific update rule: the generic path runs
	// both metadata-update and full validation, which both check labels.
	lrOld := stored(&corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "lr"}})
	lr := lrOld.DeepCopy()
	lr.Labels = map[string]string{"a": "b c"}
	errs := ValidateUpdate(lr, lrOld)
	if len(errs) != 1 {
		t.Fatalf("want exactly one error, got:\n%s", dump(errs))
	}
}

func TestTypeMismatch(t *testing.T) {
	errs := ValidateUpdate(&corev1.Pod{}, &corev1.Service{})
	expectErrors(t, errs, []want{{field.ErrorTypeInternal, "kind", ""}})
	errs = ValidateStatusUpdate(&corev1.Pod{}, nil)
	expectErrors(t, errs, []want{{field.ErrorTypeInternal, "kind", ""}})
}

func TestUnknownKindsGetMetadataChecks(t *testing.T) {
	// A kind without rules of its own (kelp serves no ComponentStatus, and
	// every kind it serves has its rules): metadata is still checked, with
	// the most permissive upstream name rule (URL path segment).
	obj := &corev1.ComponentStatus{}
	expectErrors(t, Validate(obj), []want{{field.ErrorTypeRequired, "metadata.name", ""}})
	obj.Name = "scheduler"
	obj.Labels = map[string]string{"bad key!": "x"}
	expectErrors(t, Validate(obj), []want{{field.ErrorTypeInvalid, "metadata.labels", ""}})
	// Lists have no object metadata and pass through.
	expectErrors(t, Validate(&corev1.PodList{}), nil)

	hpa := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "container-lab"},
		MaxReplicas:    5,
	}}
	expectErrors(t, Validate(defaulted(hpa)), nil)
	hpa.Spec.MinReplicas = ptr.To(int32(6))
	expectErrors(t, Validate(hpa), []want{{field.ErrorTypeInvalid, "spec.maxReplicas", "must be greater than or equal to `minReplicas`"}})
}
