package validation

import (
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kelp-project/kelp/server/apiserver/defaults/defaultstest"
)

// want names one expected error: its type, its exact field path, and
// optionally a substring of its detail.
type want struct {
	typ    field.ErrorType
	field  string
	detail string
}

// expectErrors asserts that every wanted error is present and, when
// exact is set, that nothing else was reported.
func expectErrors(t *testing.T, errs field.ErrorList, wants []want) {
	t.Helper()
	if len(wants) == 0 {
		if len(errs) != 0 {
			t.Fatalf("expected no errors, got:\n%s", dump(errs))
		}
		return
	}
	for _, w := range wants {
		found := false
		for _, e := range errs {
			if e.Type == w.typ && e.Field == w.field && strings.Contains(e.Detail, w.detail) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("missing %s error at %q (detail %q); got:\n%s", w.typ, w.field, w.detail, dump(errs))
		}
	}
}

func dump(errs field.ErrorList) string {
	var b strings.Builder
	for _, e := range errs {
		b.WriteString("  " + e.Error() + "\n")
	}
	return b.String()
}

// defaulted applies server defaults, as the API server does before
// validating.
func defaulted[T runtime.Object](obj T) T {
	defaultstest.Apply(obj)
	return obj
}

// seedDeployment is the container-lab Deployment from the project seed.
func seedDeployment() *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "container-lab", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(3)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "container-lab"}},
			Strategy: appsv1.DeploymentStrategy{
				Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0)),
				},
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "container-lab"}},
				Spec:       seedPodSpec(),
			},
		},
	}
}

func seedPodSpec() corev1.PodSpec {
	return corev1.PodSpec{
		TerminationGracePeriodSeconds: ptr.To(int64(30)),
		Containers: []corev1.Container{{
			Name:  "app",
			Image: "username/container-lab:v2",
			Ports: []corev1.ContainerPort{{ContainerPort: 8000}},
			ReadinessProbe: &corev1.Probe{
				ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
					Path: "/healthz", Port: intstr.FromInt32(8000),
				}},
				PeriodSeconds: 2,
			},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{
					corev1.ResourceCPU:    resource.MustParse("100m"),
					corev1.ResourceMemory: resource.MustParse("128Mi"),
				},
				Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
			},
			Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{
				Exec: &corev1.ExecAction{Command: []string{"sleep", "5"}},
			}},
		}},
	}
}

// seedService is the container-lab Service from the project seed.
func seedService() *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "container-lab", Namespace: "default"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "container-lab"},
			Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8000)}},
		},
	}
}

func seedPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "container-lab-abc", Namespace: "default", Labels: map[string]string{"app": "container-lab"}},
		Spec:       seedPodSpec(),
	}
}

func simpleJob() *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "pi", Namespace: "default", UID: "3f2c6a1e-0000-4000-8000-000000000001"},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "pi", Image: "perl:5.34", Command: []string{"perl", "-e", "print 1"}}},
		}}},
	}
}

// stored marks an object as persisted, as the server does before updates.
func stored[T metav1.Object](obj T) T {
	obj.SetResourceVersion("1")
	obj.SetUID("0b7c8a2e-0000-4000-8000-000000000000")
	return obj
}

func mustQ(s string) resource.Quantity { return resource.MustParse(s) }
