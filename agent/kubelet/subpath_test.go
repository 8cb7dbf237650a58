package kubelet

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// subPathPod mounts an emptyDir at a subPathExpr built from an annotation
// (through a fieldRef env var) and a literal env var, as the
// VolumeSubpathEnvExpansion conformance specs do.
func subPathPod(annotation string) *corev1.Pod {
	pod := testPod("subpath", "app")
	if annotation != "" {
		pod.Annotations = map[string]string{"mysubpath": annotation}
	}
	pod.Spec.Volumes = []corev1.Volume{{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	c := &pod.Spec.Containers[0]
	c.Env = []corev1.EnvVar{
		{Name: "POD_NAME", Value: "foo"},
		{Name: "ANNOTATION", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['mysubpath']"}}},
	}
	c.VolumeMounts = []corev1.VolumeMount{{Name: "work", MountPath: "/sub", SubPathExpr: "$(ANNOTATION)/$(POD_NAME)"}}
	return pod
}

// A subPathExpr naming an empty variable keeps the container from being
// created (CreateContainerConfigError, the pod Pending), as upstream's
// kubelet; once the pod has the annotation, the container mounts the
// expanded path inside the volume.
func TestSubPathExprExpandsTheContainersEnvironment(t *testing.T) {
	pod := subPathPod("")
	tk := newTestKubelet(t, pod)
	w := tk.worker(t, pod)
	tk.sync(t, w, pod)
	if calls := tk.rt.Took("create"); len(calls) != 0 {
		t.Fatalf("a container was created with an unresolved subPathExpr: %q", calls)
	}
	if ws, ok := w.waiting["app"]; !ok || ws.reason != "CreateContainerConfigError" || !strings.Contains(ws.message, "missing value for ANNOTATION") {
		t.Errorf("waiting state %+v", w.waiting)
	}

	pod = tk.apiPod(t, pod)
	pod.Annotations = map[string]string{"mysubpath": "mypath"}
	if _, err := tk.client.CoreV1().Pods(pod.Namespace).Update(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	tk.sync(t, w, pod)
	spec, ok := tk.rt.SpecOf("app")
	if !ok {
		t.Fatalf("the container was not created once the annotation is there: %q", tk.rt.Calls())
	}
	m, ok := mountAt(spec.Mounts, "/sub")
	if !ok || !strings.HasSuffix(m.Source, "/work/mypath/foo") {
		t.Errorf("mount of /sub: %+v", m)
	}
}

// An expansion that leaves the volume (absolute, or with ..) is refused.
func TestSubPathExprMustStayInTheVolume(t *testing.T) {
	pod := subPathPod("x")
	tk := newTestKubelet(t, pod)
	for _, vars := range []map[string]string{
		{"ANNOTATION": "/etc", "POD_NAME": "foo"},
		{"ANNOTATION": "..", "POD_NAME": "foo"},
		{"ANNOTATION": "a/../..", "POD_NAME": "foo"},
	} {
		if _, err := tk.containerMounts(pod, &pod.Spec.Containers[0], vars); err == nil {
			t.Errorf("subPathExpr with %v accepted", vars)
		}
	}
	// A plain subPath is not expanded.
	pod.Spec.Containers[0].VolumeMounts[0] = corev1.VolumeMount{Name: "work", MountPath: "/sub", SubPath: "$(POD_NAME)"}
	mounts, err := tk.containerMounts(pod, &pod.Spec.Containers[0], map[string]string{"POD_NAME": "foo"})
	if m, _ := mountAt(mounts, "/sub"); err != nil || !strings.HasSuffix(m.Source, "/$(POD_NAME)") {
		t.Errorf("plain subPath: %+v %v", m, err)
	}
}

// A volume mounted over /etc/resolv.conf, /etc/hosts or /etc/hostname (a
// configMap key by subPath, in the Subpath conformance spec) is what the
// container sees there: the pod's own file is not mounted over it.
func TestVolumeOverAnEtcFileWins(t *testing.T) {
	pod := subPathPod("x")
	tk := newTestKubelet(t, pod)
	c := &pod.Spec.Containers[0]
	c.VolumeMounts = []corev1.VolumeMount{{Name: "work", MountPath: "/etc/resolv.conf", SubPath: "resolv"}}
	mounts, err := tk.containerMounts(pod, c, nil)
	if err != nil {
		t.Fatal(err)
	}
	var at []string
	for _, m := range mounts {
		if m.Destination == "/etc/resolv.conf" {
			at = append(at, m.Source)
		}
	}
	if len(at) != 1 || !strings.HasSuffix(at[0], "/work/resolv") {
		t.Errorf("mounts at /etc/resolv.conf: %q, want only the volume's", at)
	}
	if _, ok := mountAt(mounts, "/etc/hosts"); !ok {
		t.Error("/etc/hosts not mounted")
	}
}
