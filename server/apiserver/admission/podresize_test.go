package admission

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func resizeAttrs(cpu string, generation int64) *Attributes {
	old := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Generation: 1},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "busybox",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}}}
	pod := old.DeepCopy()
	pod.Generation = generation
	pod.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse(cpu)
	return &Attributes{Operation: "UPDATE", Resource: podsResource, Subresource: "resize", Namespace: "ns", Name: "p", Object: pod, OldObject: old}
}

func nodeGetter(labels map[string]string) *fakeObjects {
	return &fakeObjects{items: map[string]runtime.Object{"/n1": &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: labels},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}
}

// A resize beyond the node's allocatable is upstream's 403 with cause
// NodeCapacity; one within it passes (the kubelet may still defer it).
func TestPodResizeValidatorNodeCapacity(t *testing.T) {
	p := podResizeValidator{nodes: nodeGetter(nil)}
	if err := p.Validate(context.Background(), resizeAttrs("900m", 2)); err != nil {
		t.Fatalf("resize within allocatable refused: %v", err)
	}
	err := p.Validate(context.Background(), resizeAttrs("2", 2))
	var st *apierrors.StatusError
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "node didn't have enough allocatable resources: cpu, requested: 2000, allocatable: 1000") {
		t.Fatalf("resize beyond allocatable: %v, want the 403", err)
	}
	if st, _ = err.(*apierrors.StatusError); len(st.ErrStatus.Details.Causes) != 1 || st.ErrStatus.Details.Causes[0].Type != causeNodeCapacity {
		t.Fatalf("causes = %+v, want NodeCapacity", st.ErrStatus.Details.Causes)
	}
	// The same generation is no resize (a write that changed nothing).
	if err := p.Validate(context.Background(), resizeAttrs("2", 1)); err != nil {
		t.Fatalf("unchanged generation judged: %v", err)
	}
	win := podResizeValidator{nodes: nodeGetter(map[string]string{corev1.LabelOSStable: "windows"})}
	if err := win.Validate(context.Background(), resizeAttrs("200m", 2)); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "only supported on linux nodes") {
		t.Fatalf("resize on a windows node: %v, want the 403", err)
	}
}

// LimitRanger judges a resize as it judges a create.
func TestLimitRangerJudgesResize(t *testing.T) {
	l := limitRangerWith(&corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "lr", Namespace: "ns"},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer,
			Max: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}}}})
	a := resizeAttrs("400m", 2)
	a.Object.(*corev1.Pod).Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("400m")}
	if err := l.Validate(context.Background(), a); err != nil {
		t.Fatalf("resize within the range refused: %v", err)
	}
	a = resizeAttrs("800m", 2)
	a.Object.(*corev1.Pod).Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("800m")}
	if err := l.Validate(context.Background(), a); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "maximum cpu usage per Container is 500m") {
		t.Fatalf("resize beyond the range: %v, want LimitRanger's 403", err)
	}
}
