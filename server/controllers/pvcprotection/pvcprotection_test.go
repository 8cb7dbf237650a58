package pvcprotection

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

func claim(deleting bool, finalizers ...string) *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "default", Finalizers: finalizers}}
	if deleting {
		now := metav1.Now()
		pvc.DeletionTimestamp = &now
	}
	return pvc
}

func pod(name, node string, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: node, Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}},
		Status: corev1.PodStatus{Phase: phase}}
}

// finalizers runs one sync over a claim, with cached pods in the informer
// and live pods only in the API, and returns the claim's finalizers after.
func finalizers(t *testing.T, pvc *corev1.PersistentVolumeClaim, cached, live []*corev1.Pod) []string {
	t.Helper()
	objs := []runtime.Object{pvc}
	for _, p := range append(slices.Clone(cached), live...) {
		objs = append(objs, p)
	}
	client := fake.NewSimpleClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	c := New(client, factory)
	if err := factory.Core().V1().PersistentVolumeClaims().Informer().GetIndexer().Add(pvc); err != nil {
		t.Fatal(err)
	}
	for _, p := range cached {
		if err := factory.Core().V1().Pods().Informer().GetIndexer().Add(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.sync(context.Background(), "default/data"); err != nil {
		t.Fatal(err)
	}
	got, err := client.CoreV1().PersistentVolumeClaims("default").Get(context.Background(), "data", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got.Finalizers
}

func TestPVCProtection(t *testing.T) {
	for _, tc := range []struct {
		name         string
		pvc          *corev1.PersistentVolumeClaim
		cached, live []*corev1.Pod
		want         []string
	}{
		{name: "a claim without the finalizer gets it", pvc: claim(false), want: []string{Finalizer}},
		{name: "a claim with it keeps it", pvc: claim(false, "example.com/x", Finalizer), want: []string{"example.com/x", Finalizer}},
		{name: "deleted, unused: released", pvc: claim(true, "example.com/x", Finalizer), want: []string{"example.com/x"}},
		{name: "deleted, used by a running pod: kept", pvc: claim(true, Finalizer),
			cached: []*corev1.Pod{pod("web", "node-1", corev1.PodRunning)}, want: []string{Finalizer}},
		{name: "deleted, used by a pod only the live list has: kept", pvc: claim(true, Finalizer),
			live: []*corev1.Pod{pod("new", "node-1", corev1.PodPending)}, want: []string{Finalizer}},
		{name: "deleted, its pod ended: released", pvc: claim(true, Finalizer),
			cached: []*corev1.Pod{pod("done", "node-1", corev1.PodSucceeded), pod("failed", "node-1", corev1.PodFailed)}, want: nil},
		{name: "deleted, its pod not scheduled: released", pvc: claim(true, Finalizer),
			cached: []*corev1.Pod{pod("pending", "", corev1.PodPending)}, want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := finalizers(t, tc.pvc, tc.cached, tc.live); !slices.Equal(got, tc.want) {
				t.Errorf("finalizers %v, want %v", got, tc.want)
			}
		})
	}
}

// A pod of another namespace, or using another claim, does not hold it.
func TestPodUses(t *testing.T) {
	pvc := claim(true, Finalizer)
	other := pod("web", "node-1", corev1.PodRunning)
	other.Spec.Volumes[0].PersistentVolumeClaim.ClaimName = "logs"
	if PodUses(other, pvc) {
		t.Errorf("a pod of another claim uses it")
	}
	eph := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "pod-uid"},
		Spec: corev1.PodSpec{NodeName: "node-1", Volumes: []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{
			Ephemeral: &corev1.EphemeralVolumeSource{}}}}}}
	owned := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "web-scratch", Namespace: "default",
		OwnerReferences: []metav1.OwnerReference{{Kind: "Pod", Name: "web", UID: "pod-uid", Controller: ptr.To(true)}}}}
	if !PodUses(eph, owned) {
		t.Errorf("a pod does not use its ephemeral claim")
	}
	owned.OwnerReferences[0].UID = "another"
	if PodUses(eph, owned) {
		t.Errorf("a pod uses an ephemeral claim of another pod of its name")
	}
}
