package kubelet

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kelp-project/kelp/runtime"
)

// claimPod is a pod with one container mounting claim "data" at /data
// (read-only if asked) and at /ro through a read-only claim volume.
func claimPod(name string) *corev1.Pod {
	pod := testPod(name, "app")
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}},
		{Name: "ro", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data", ReadOnly: true}}},
	}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}, {Name: "ro", MountPath: "/ro"}}
	return pod
}

func testClaim(phase corev1.PersistentVolumeClaimPhase, volume string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "data", UID: "claim-uid"},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: volume}, Status: corev1.PersistentVolumeClaimStatus{Phase: phase}}
}

func testPV(name string, src corev1.PersistentVolumeSource) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: src,
			ClaimRef: &corev1.ObjectReference{Namespace: "default", Name: "data", UID: "claim-uid"}}}
}

func (tk *testKubelet) create(t *testing.T, objs ...any) {
	t.Helper()
	ctx := context.Background()
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *corev1.PersistentVolumeClaim:
			_, err = tk.client.CoreV1().PersistentVolumeClaims(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *corev1.PersistentVolume:
			_, err = tk.client.CoreV1().PersistentVolumes().Create(ctx, o, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func mountAt(mounts []runtime.Mount, dest string) (runtime.Mount, bool) {
	for _, m := range mounts {
		if m.Destination == dest {
			return m, true
		}
	}
	return runtime.Mount{}, false
}

// A bound claim's hostPath volume is bind-mounted from its path, and a
// read-only claim volume read-only.
func TestClaimVolumeIsItsPVsHostPath(t *testing.T) {
	pod := claimPod("web")
	tk := newTestKubelet(t, pod)
	dir := filepath.Join(t.TempDir(), "storage", "pvc-1_default_data")
	orCreate := corev1.HostPathDirectoryOrCreate
	tk.create(t, testClaim(corev1.ClaimBound, "pvc-1"),
		testPV("pvc-1", corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: &orCreate}}))
	w := tk.worker(t, pod)
	tk.sync(t, w, pod)
	spec, ok := tk.rt.SpecOf("app")
	if !ok {
		t.Fatalf("the container was not created: %q", tk.rt.Calls())
	}
	data, ok1 := mountAt(spec.Mounts, "/data")
	ro, ok2 := mountAt(spec.Mounts, "/ro")
	if !ok1 || !ok2 || data.Source != dir || data.ReadOnly || ro.Source != dir || !ro.ReadOnly {
		t.Errorf("mounts %+v", spec.Mounts)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Errorf("DirectoryOrCreate: %v", err)
	}
	// A readOnly volumeMount is honoured too.
	pod.Spec.Containers[0].VolumeMounts[0].ReadOnly = true
	mounts, err := tk.containerMounts(pod, &pod.Spec.Containers[0], nil)
	if m, _ := mountAt(mounts, "/data"); err != nil || !m.ReadOnly || m.Source != dir {
		t.Errorf("readOnly mount: %+v %v", m, err)
	}
}

// A claim not bound yet fails the mount with upstream's words, in a
// FailedMount Event; no container starts, on no empty directory; once the
// claim is bound the next sync mounts it.
func TestUnboundClaimFailsMountUntilBound(t *testing.T) {
	pod := claimPod("web")
	tk := newTestKubelet(t, pod)
	tk.create(t, testClaim(corev1.ClaimPending, ""))
	w := tk.worker(t, pod)
	tk.sync(t, w, pod)
	if calls := tk.rt.Took("create"); len(calls) != 0 {
		t.Fatalf("containers created on an unbound claim: %q", calls)
	}
	failed := eventsWith(tk, "FailedMount")
	want := "Warning FailedMount Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[data]: " +
		"error processing PVC default/data: PVC is not bound"
	if len(failed) != 1 || failed[0] != want {
		t.Errorf("events %q, want %q", failed, want)
	}
	if st := tk.apiPod(t, pod).Status; st.Phase != corev1.PodPending {
		t.Errorf("pod phase %s", st.Phase)
	}
	if _, err := tk.containerMounts(pod, &pod.Spec.Containers[0], nil); err == nil {
		t.Error("mounts for an unresolved claim volume")
	}
	// Bound now (the copy read is not reused while it was unbound).
	dir := t.TempDir()
	claim := testClaim(corev1.ClaimBound, "pvc-1")
	if _, err := tk.client.CoreV1().PersistentVolumeClaims("default").Update(context.Background(), claim, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	tk.create(t, testPV("pvc-1", corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: dir}}))
	tk.sync(t, w, pod)
	spec, ok := tk.rt.SpecOf("app")
	if m, _ := mountAt(spec.Mounts, "/data"); !ok || m.Source != dir {
		t.Errorf("after binding: %+v", spec.Mounts)
	}
}

func TestClaimVolumeErrors(t *testing.T) {
	orCreate := corev1.HostPathDirectoryOrCreate
	hostPath := corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/unused", Type: &orCreate}}
	deleting := testClaim(corev1.ClaimBound, "pvc-1")
	deleting.DeletionTimestamp = &metav1.Time{}
	deleting.Finalizers = []string{"kubernetes.io/pvc-protection"}
	stolen := testPV("pvc-1", hostPath)
	stolen.Spec.ClaimRef.UID = "another-claim"
	for _, tc := range []struct {
		name  string
		objs  []any
		want  string
		claim bool // the claim's own error (Unable to attach or mount volumes)
	}{
		{"no claim", nil, `failed to fetch PVC from API server: persistentvolumeclaims "data" not found`, true},
		{"lost", []any{testClaim(corev1.ClaimLost, "pvc-1")}, "PVC is not bound", true},
		{"being deleted", []any{deleting, testPV("pvc-1", hostPath)}, "PVC is being deleted", true},
		{"no volume", []any{testClaim(corev1.ClaimBound, "pvc-1")}, `failed to fetch PV pvc-1 from API server: persistentvolumes "pvc-1" not found`, false},
		{"another claim's volume", []any{testClaim(corev1.ClaimBound, "pvc-1"), stolen},
			"found PV object pvc-1 but its pv.Spec.ClaimRef.UID (another-claim) does not point to claim.UID (claim-uid)", false},
		{"nfs", []any{testClaim(corev1.ClaimBound, "pvc-1"),
			testPV("pvc-1", corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{Server: "nfs", Path: "/x"}})},
			"PersistentVolume pvc-1: its volume source is unsupported by kelp", false},
		{"local path missing", []any{testClaim(corev1.ClaimBound, "pvc-1"),
			testPV("pvc-1", corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/nonexistent/kelp-test"}})},
			`local volume pvc-1: path "/nonexistent/kelp-test" is not a directory on this node`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := claimPod("web")
			tk := newTestKubelet(t, pod)
			tk.create(t, tc.objs...)
			err := tk.prepareVolumes(context.Background(), pod)
			prefix := `MountVolume.SetUp failed for volume "data" : `
			if tc.claim {
				prefix = "Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[data]: error processing PVC default/data: "
			}
			if err == nil || !strings.HasPrefix(err.Error(), prefix+tc.want) {
				t.Errorf("error %v, want %q", err, prefix+tc.want)
			}
			if _, ok := tk.claimPath(pod, "data"); ok {
				t.Error("a path was recorded")
			}
		})
	}
	// A pod already running keeps its volume while its claim is deleted
	// (the claim's protection waits for the pod), e.g. after a restart of
	// the agent.
	dir := t.TempDir()
	pod := claimPod("web")
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", ContainerID: "containerd://abc"}}
	tk := newTestKubelet(t, pod)
	tk.create(t, deleting, testPV("pvc-1", corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: dir}}))
	if err := tk.prepareVolumes(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if p, _ := tk.claimPath(pod, "data"); p != dir {
		t.Errorf("path %q", p)
	}
	tk.forget(pod.UID)
	if _, ok := tk.claimPath(pod, "data"); ok {
		t.Error("a forgotten pod's path is kept")
	}
}
