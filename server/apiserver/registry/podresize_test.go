package registry

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kelp-project/kelp/server/apiserver/defaults"
)

// resizablePod is a running Burstable pod as the API stores it: defaulted,
// with a running container whose resources the kubelet reports.
func resizablePod() *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", Labels: map[string]string{"app": "a"}, ResourceVersion: "5", Generation: 1},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c1", Image: "busybox",
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("20m"), corev1.ResourceMemory: resource.MustParse("35Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("30m"), corev1.ResourceMemory: resource.MustParse("45Mi")},
			}}}},
	}
	defaults.Pod(p)
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, QOSClass: corev1.PodQOSBurstable, ContainerStatuses: []corev1.ContainerStatus{{
		Name: "c1", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
		Resources: p.Spec.Containers[0].Resources.DeepCopy()}}}
	return p
}

func TestPreparePodResizeKeepsOnlyResources(t *testing.T) {
	old := resizablePod()
	in := old.DeepCopy()
	in.Labels = map[string]string{"app": "changed"}
	in.Spec.Containers[0].Image = "nginx"
	in.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU] = resource.MustParse("50m")
	in.Spec.ActiveDeadlineSeconds = i64(5)
	in.Status.Phase = corev1.PodFailed
	preparePodResize(in, old)
	c := in.Spec.Containers[0]
	if got := c.Resources.Limits[corev1.ResourceCPU]; got.Cmp(resource.MustParse("50m")) != 0 {
		t.Errorf("cpu limit = %s, want the resized 50m", got.String())
	}
	if c.Image != "busybox" || in.Spec.ActiveDeadlineSeconds != nil || in.Labels["app"] != "a" {
		t.Errorf("a resize changed more than resources: image %q, activeDeadlineSeconds %v, labels %v", c.Image, in.Spec.ActiveDeadlineSeconds, in.Labels)
	}
	if errs := validatePodResize(in, old); len(errs) != 0 {
		t.Errorf("valid resize refused: %v", errs)
	}
}

func TestValidatePodResize(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(p *corev1.Pod)
		old    func(p *corev1.Pod)
		want   string // "" = valid
	}{
		{name: "cpu and memory grow", change: func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("25m")
			p.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory] = resource.MustParse("50Mi")
		}},
		{name: "QoS class changes", change: func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests = p.Spec.Containers[0].Resources.Limits.DeepCopy()
		}, want: "Pod QOS Class may not change as a result of resizing"},
		{name: "request removed", change: func(p *corev1.Pod) {
			delete(p.Spec.Containers[0].Resources.Requests, corev1.ResourceMemory)
		}, want: "resource requests cannot be removed"},
		{name: "limit removed", change: func(p *corev1.Pod) {
			delete(p.Spec.Containers[0].Resources.Limits, corev1.ResourceCPU)
		}, want: "resource limits cannot be removed"},
		{name: "ephemeral storage", change: func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceEphemeralStorage] = resource.MustParse("1Gi")
		}, want: "only cpu and memory resources are mutable"},
		{name: "image", change: func(p *corev1.Pod) { p.Spec.Containers[0].Image = "nginx" }, want: "only cpu and memory resources are mutable"},
		{name: "resizePolicy changed, as upstream refuses", change: func(p *corev1.Pod) {
			p.Spec.Containers[0].ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceCPU, RestartPolicy: corev1.RestartContainer}}
		}, want: "only cpu and memory resources are mutable"},
		{name: "container renamed", change: func(p *corev1.Pod) { p.Spec.Containers[0].Name = "c2" }, want: "containers may not be renamed or reordered on resize"},
		{name: "static pod", old: func(p *corev1.Pod) { p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"} },
			change: func(p *corev1.Pod) {}, want: "static pods cannot be resized"},
		{name: "windows pod", old: func(p *corev1.Pod) { p.Spec.OS = &corev1.PodOS{Name: corev1.Windows} },
			change: func(p *corev1.Pod) {}, want: "windows pods cannot be resized"},
		{name: "node without resize", old: func(p *corev1.Pod) { p.Status.ContainerStatuses[0].Resources = nil },
			change: func(p *corev1.Pod) {}, want: "Pod running on node without support for resize"},
		{name: "RestartContainer in a Never pod", old: func(p *corev1.Pod) { p.Spec.RestartPolicy = corev1.RestartPolicyNever },
			change: func(p *corev1.Pod) {
				p.Spec.Containers[0].ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.RestartContainer}}
			}, want: "must be 'NotRequired' when pod `restartPolicy` is 'Never'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := resizablePod()
			if tc.old != nil {
				tc.old(old)
			}
			p := old.DeepCopy()
			tc.change(p)
			errs := validatePodResize(p, old)
			if tc.want == "" {
				if len(errs) != 0 {
					t.Fatalf("valid resize refused: %v", errs)
				}
				return
			}
			if !strings.Contains(errs.ToAggregate().Error(), tc.want) {
				t.Fatalf("errors %v, want one saying %q", errs, tc.want)
			}
		})
	}
}

// A plain pod update that changes resources stays forbidden: only the
// resize subresource may.
func TestPodUpdateOfResourcesForbidden(t *testing.T) {
	old := resizablePod()
	p := old.DeepCopy()
	p.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU] = resource.MustParse("50m")
	s := served(t, "", "pods").Strategy
	errs := s.ValidateUpdate(p, old)
	if !strings.Contains(errs.ToAggregate().Error(), "pod updates may not change fields other than") {
		t.Fatalf("errors %v, want the forbidden pod update", errs)
	}
}
