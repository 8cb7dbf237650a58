package kubelet

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kelp-project/kelp/runtime"
)

func imageVolumePod() *corev1.Pod {
	pod := testPod("imgvol", "app")
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
		Image: &corev1.ImageVolumeSource{Reference: "kitten:1.8", PullPolicy: corev1.PullAlways}}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/volume"}}
	return pod
}

// An image volume is mounted from the runtime before the container starts
// and bound into it read-only (though the mount did not say so); an image
// that cannot be got fails the mount with the runtime's words and starts
// nothing; the pod's cleanup lets its image volumes go.
func TestImageVolume(t *testing.T) {
	pod := imageVolumePod()
	tk := newTestKubelet(t, pod)
	tk.rt.FailPull("kitten:1.8", &runtime.PullError{Reason: "ErrImagePull", Message: `failed to pull and unpack image "docker.io/library/kitten:1.8": no registry`})
	w := tk.worker(t, pod)
	tk.sync(t, w, pod)
	if calls := tk.rt.Took("create"); len(calls) != 0 {
		t.Fatalf("a container was created without its image volume: %q", calls)
	}
	failed := eventsWith(tk, "FailedMount")
	if len(failed) != 1 || !strings.Contains(failed[0], `MountVolume.SetUp failed for volume "data" : failed to pull and unpack image`) {
		t.Fatalf("FailedMount events %q", failed)
	}

	tk.rt.FailPull("kitten:1.8", nil)
	tk.sync(t, w, pod)
	if got := tk.rt.ImageVolumes(string(pod.UID)); got["data"] != "kitten:1.8" {
		t.Fatalf("image volumes %v", got)
	}
	spec, ok := tk.rt.SpecOf("app")
	if !ok {
		t.Fatalf("the container was not created: %q", tk.rt.Calls())
	}
	m, ok := mountAt(spec.Mounts, "/volume")
	if !ok || m.Source != tk.volumeDir(pod, "data") || !m.ReadOnly {
		t.Errorf("mount of /volume: %+v, want the volume's directory, read-only", m)
	}

	w.cleanup(context.Background(), pod)
	if got := tk.rt.ImageVolumes(string(pod.UID)); len(got) != 0 {
		t.Errorf("after cleanup the pod still has image volumes %v", got)
	}
}
