package integration

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	volumehelper "k8s.io/component-helpers/storage/volume"
	"k8s.io/utils/ptr"

	"github.com/kelp-project/kelp/test/simkubelet"
)

func podWithClaim(name, claim string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: "busybox", VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim},
			}}},
		},
	}
}

// TestSchedulerVolumeBindingStaticPV: a WaitForFirstConsumer claim of a
// no-provisioner class and a hostPath PV pinned to sim-b. The scheduler
// puts the claim's pod on sim-b, writes the PV's claimRef, waits for the
// PV binder to bind the claim, and only then binds the pod.
func TestSchedulerVolumeBindingStaticPV(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	simkubelet.Start(t, cs, "sim-a", "sim-b", "sim-c")
	waitFor(t, "3 nodes", func() bool {
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		return err == nil && len(nodes.Items) == 3
	})

	class := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: "manual"},
		Provisioner:       volumehelper.NotSupportedProvisioner,
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
	}
	if _, err := cs.StorageV1().StorageClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-sim-b"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName:              "manual",
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/kelp-pv-sim-b"}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{"sim-b"}}},
			}}}},
		},
	}
	if _, err := cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("500Mi")}},
			StorageClassName: ptr.To("manual"),
		},
	}
	claim, err := cs.CoreV1().PersistentVolumeClaims("default").Create(ctx, claim, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, podWithClaim("app", "data"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The scheduler's part: the PV's claimRef names the claim.
	var got *corev1.PersistentVolume
	waitFor(t, "the PV's claimRef", func() bool {
		got, err = cs.CoreV1().PersistentVolumes().Get(ctx, "pv-sim-b", metav1.GetOptions{})
		return err == nil && got.Spec.ClaimRef != nil
	})
	if ref := got.Spec.ClaimRef; ref.Namespace != "default" || ref.Name != "data" || ref.UID != claim.UID {
		t.Fatalf("claimRef %+v, want default/data %s", ref, claim.UID)
	}
	if got.Annotations[volumehelper.AnnBoundByController] != "yes" {
		t.Errorf("PV annotations %v lack %s", got.Annotations, volumehelper.AnnBoundByController)
	}

	// The pod is bound to sim-b, and never before its claim is Bound.
	var pod *corev1.Pod
	waitFor(t, "app bound", func() bool {
		pod, err = cs.CoreV1().Pods("default").Get(ctx, "app", metav1.GetOptions{})
		return err == nil && pod.Spec.NodeName != ""
	})
	pvc, err := cs.CoreV1().PersistentVolumeClaims("default").Get(ctx, "data", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName != "pv-sim-b" {
		t.Fatalf("pod bound while its claim is %s to %q", pvc.Status.Phase, pvc.Spec.VolumeName)
	}
	if pod.Spec.NodeName != "sim-b" {
		t.Fatalf("app on %s, want sim-b (the PV's node)", pod.Spec.NodeName)
	}
	waitFor(t, "Scheduled event", func() bool {
		return hasPodEvent(ctx, cs, "app", "Scheduled", "Successfully assigned default/app to sim-b")
	})

	// A pod naming a missing claim is unschedulable with upstream's message.
	if _, err := cs.CoreV1().Pods("default").Create(ctx, podWithClaim("orphan", "nope"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := `0/3 nodes are available: persistentvolumeclaim "nope" not found. ` +
		"preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.."
	waitFor(t, "FailedScheduling for orphan", func() bool {
		return hasPodEvent(ctx, cs, "orphan", "FailedScheduling", want)
	})
}

func hasPodEvent(ctx context.Context, cs kubernetes.Interface, pod, reason, message string) bool {
	evs, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod})
	if err != nil {
		return false
	}
	for _, ev := range evs.Items {
		if ev.Reason == reason && ev.Message == message {
			return true
		}
	}
	return false
}
