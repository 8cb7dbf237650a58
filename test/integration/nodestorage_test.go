package integration

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kelp-project/kelp/config"
)

// The node's half of local storage, over HTTPS with real client
// certificates: a kubelet reads the claims of its pods and the volumes
// bound to them, and nothing else of storage; the node's local-path
// provisioner identity writes PersistentVolumes, reads claims, classes
// and nodes, and records Events, and nothing else.
func TestNodeStorageAccess(t *testing.T) {
	s := startServer(t)
	admin := s.client()
	ctx := ctxT(t)
	noClass := ""
	pv := func(name string) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + name}}}}
	}
	for _, name := range []string{"pv-a", "pv-other"} {
		if _, err := admin.CoreV1().PersistentVolumes().Create(ctx, pv(name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-a", StorageClassName: &noClass,
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	if _, err := admin.CoreV1().PersistentVolumeClaims("default").Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}, Spec: corev1.PodSpec{NodeName: "n1",
		Containers: []corev1.Container{{Name: "app", Image: "busybox", VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}},
		Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}}}
	if _, err := admin.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	n1, _ := s.nodeClient("n1")
	// The authorizer reads pods and claims from the watch caches: allowed
	// once they have seen them.
	var err error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if _, err = n1.CoreV1().PersistentVolumes().Get(ctx, "pv-a", metav1.GetOptions{}); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("n1 reading the volume bound to its pod's claim: %v", err)
	}
	if _, err := n1.CoreV1().PersistentVolumeClaims("default").Get(ctx, "data", metav1.GetOptions{}); err != nil {
		t.Errorf("n1 reading its pod's claim: %v", err)
	}
	const noRelation = "no relationship found between node 'n1' and this object"
	_, err = n1.CoreV1().PersistentVolumes().Get(ctx, "pv-other", metav1.GetOptions{})
	wantForbidden(t, "n1 reading another volume", err, noRelation)
	_, err = n1.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	wantForbidden(t, "n1 listing volumes", err, `cannot list resource "persistentvolumes"`)
	_, err = n1.CoreV1().PersistentVolumes().Create(ctx, pv("pv-n1"), metav1.CreateOptions{})
	wantForbidden(t, "n1 creating a volume", err, `cannot create resource "persistentvolumes"`)
	n2, _ := s.nodeClient("n2")
	_, err = n2.CoreV1().PersistentVolumeClaims("default").Get(ctx, "data", metav1.GetOptions{})
	wantForbidden(t, "n2 reading n1's pod's claim", err, "no relationship found between node 'n2' and this object")
	_, err = n2.CoreV1().PersistentVolumes().Get(ctx, "pv-a", metav1.GetOptions{})
	wantForbidden(t, "n2 reading n1's pod's volume", err, "no relationship found between node 'n2' and this object")

	prov, _ := s.userClient(config.LocalPathProvisionerUser)
	if _, err := prov.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("the provisioner listing claims: %v", err)
	}
	if _, err := prov.StorageV1().StorageClasses().Get(ctx, config.LocalPathStorageClass, metav1.GetOptions{}); err != nil {
		t.Errorf("the provisioner reading the default class: %v", err)
	}
	if _, err := prov.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("the provisioner listing nodes: %v", err)
	}
	if _, err := prov.CoreV1().PersistentVolumes().Create(ctx, pv("pvc-x"), metav1.CreateOptions{}); err != nil {
		t.Errorf("the provisioner creating a volume: %v", err)
	}
	if err := prov.CoreV1().PersistentVolumes().Delete(ctx, "pvc-x", metav1.DeleteOptions{}); err != nil {
		t.Errorf("the provisioner deleting a volume: %v", err)
	}
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "data.provisioning"},
		InvolvedObject: corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: "default", Name: "data"},
		Reason:         "Provisioning", Message: "test", Type: corev1.EventTypeNormal}
	if _, err := prov.CoreV1().Events("default").Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		t.Errorf("the provisioner recording an Event: %v", err)
	}
	_, err = prov.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{})
	wantForbidden(t, "the provisioner listing Secrets", err, `cannot list resource "secrets"`)
	_, err = prov.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: pod.Spec}, metav1.CreateOptions{})
	wantForbidden(t, "the provisioner creating a pod", err, `cannot create resource "pods"`)
}
