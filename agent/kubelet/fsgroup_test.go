package kubelet

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// With an fsGroup, a secret volume's files and an emptyDir belong to the
// group (readable; the emptyDir writable and setgid), and the containers
// run with the group.
func TestFSGroupOwnsVolumes(t *testing.T) {
	tk := newTestKubelet(t)
	if _, err := tk.client.CoreV1().Secrets("default").Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"},
		Data: map[string][]byte{"password": []byte("hunter2")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := testPod("web", "app")
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{FSGroup: ptr.To[int64](1234), RunAsUser: ptr.To[int64](1000), SupplementalGroups: []int64{7}}
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds", DefaultMode: ptr.To[int32](0o440)}}},
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	tk.addPod(t, pod)
	tk.sync(t, tk.worker(t, pod), pod)

	check := func(p string, wantMode os.FileMode) {
		t.Helper()
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if gid := fi.Sys().(*syscall.Stat_t).Gid; gid != 1234 || fi.Mode()&(os.ModePerm|os.ModeSetgid) != wantMode {
			t.Errorf("%s: gid %d mode %v, want gid 1234 mode %v", p, gid, fi.Mode(), wantMode)
		}
	}
	check(filepath.Join(tk.volumeDir(pod, "creds"), "password"), 0o440)
	check(tk.volumeDir(pod, "creds"), os.ModeSetgid|0o755)
	check(tk.volumeDir(pod, "scratch"), os.ModeSetgid|0o777)

	spec, ok := tk.rt.Spec(createdID(t, tk, "app"))
	if !ok {
		t.Fatalf("app not created: %v", tk.rt.Calls())
	}
	if !slices.Contains(spec.Security.SupplementalGroups, 1234) || !slices.Contains(spec.Security.SupplementalGroups, 7) {
		t.Errorf("supplemental groups %v, want 7 and the fsGroup 1234", spec.Security.SupplementalGroups)
	}
}
