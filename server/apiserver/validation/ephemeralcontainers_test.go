package validation

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPodEphemeralContainersUpdate(t *testing.T) {
	ec := func(name string) corev1.EphemeralContainer {
		return corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: name, Image: "busybox",
			ImagePullPolicy: corev1.PullIfNotPresent, TerminationMessagePolicy: corev1.TerminationMessageReadFile}}
	}
	base := func() *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", ResourceVersion: "1"},
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyAlways, DNSPolicy: corev1.DNSClusterFirst,
				Containers:          []corev1.Container{{Name: "app", Image: "busybox", ImagePullPolicy: corev1.PullIfNotPresent, TerminationMessagePolicy: corev1.TerminationMessageReadFile}},
				EphemeralContainers: []corev1.EphemeralContainer{ec("one")}}}
	}
	for _, tc := range []struct {
		name   string
		mutate func(p *corev1.Pod)
		field  string // "" = valid
		detail string
	}{
		{"an addition", func(p *corev1.Pod) { p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, ec("two")) }, "", ""},
		{"reordered", func(p *corev1.Pod) {
			p.Spec.EphemeralContainers = []corev1.EphemeralContainer{ec("two"), ec("one")}
		}, "", ""},
		{"a removal", func(p *corev1.Pod) { p.Spec.EphemeralContainers = nil }, "spec.ephemeralContainers", `"one" may not be removed`},
		{"a change", func(p *corev1.Pod) { p.Spec.EphemeralContainers[0].Image = "nginx" }, "spec.ephemeralContainers", `"one" may not be changed`},
		{"a name taken", func(p *corev1.Pod) { p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, ec("app")) }, "spec.ephemeralContainers[1].name", ""},
		{"an unknown target", func(p *corev1.Pod) {
			e := ec("two")
			e.TargetContainerName = "none"
			p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, e)
		}, "spec.ephemeralContainers[1].targetContainerName", ""},
		{"resources", func(p *corev1.Pod) {
			e := ec("two")
			e.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
			p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, e)
		}, "spec.ephemeralContainers[1].resources", "cannot be set for an Ephemeral Container"},
		{"a restart policy", func(p *corev1.Pod) {
			e := ec("two")
			always := corev1.ContainerRestartPolicyAlways
			e.RestartPolicy = &always
			p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, e)
		}, "spec.ephemeralContainers[1].restartPolicy", "cannot be set for an Ephemeral Container"},
		{"a subPath", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
			e := ec("two")
			e.VolumeMounts = []corev1.VolumeMount{{Name: "v", MountPath: "/v", SubPath: "x"}}
			p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, e)
		}, "spec.ephemeralContainers[1].volumeMounts[0].subPath", ""},
		{"a static pod", func(p *corev1.Pod) { p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"} }, "<root>", "static pods"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := base()
			if tc.field == "<root>" {
				old.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"}
			}
			p := base()
			tc.mutate(p)
			errs := PodEphemeralContainersUpdate(p, old)
			if tc.field == "" {
				if len(errs) > 0 {
					t.Fatalf("valid update refused: %v", errs)
				}
				return
			}
			for _, e := range errs {
				if (e.Field == tc.field || tc.field == "<root>") && strings.Contains(e.Error(), tc.detail) {
					return
				}
			}
			t.Fatalf("errors %v, want one on %s with %q", errs, tc.field, tc.detail)
		})
	}
}
