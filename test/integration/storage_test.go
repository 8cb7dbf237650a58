package integration

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	volumehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/utils/ptr"

	"github.com/kelp-project/kelp/test/simkubelet"
)

func staticVolume(name string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName:              "manual",
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/kelp-" + name}},
		},
	}
}

func newClaim(name string, class *string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("500Mi")}},
			StorageClassName: class,
		},
	}
}

// storage is the objects of these tests, read through one client.
type storage struct {
	t  *testing.T
	cs kubernetes.Interface
}

func (s storage) pv(name string) (*corev1.PersistentVolume, error) {
	return s.cs.CoreV1().PersistentVolumes().Get(context.Background(), name, metav1.GetOptions{})
}

func (s storage) pvc(name string) (*corev1.PersistentVolumeClaim, error) {
	return s.cs.CoreV1().PersistentVolumeClaims("default").Get(context.Background(), name, metav1.GetOptions{})
}

// bindStatic creates a static volume and a claim of class manual and waits
// until they are bound both ways, with the binder's annotations and the
// claim's status from the volume.
func (s storage) bindStatic(pvName, pvcName string) {
	t := s.t
	t.Helper()
	ctx := context.Background()
	if _, err := s.cs.CoreV1().PersistentVolumes().Create(ctx, staticVolume(pvName), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, pvName+" Available", func() bool {
		pv, err := s.pv(pvName)
		return err == nil && pv.Status.Phase == corev1.VolumeAvailable
	})
	if pv, _ := s.pv(pvName); !slices.Contains(pv.Finalizers, "kubernetes.io/pv-protection") {
		t.Errorf("volume finalizers %v lack kubernetes.io/pv-protection", pv.Finalizers)
	}
	if _, err := s.cs.CoreV1().PersistentVolumeClaims("default").Create(ctx, newClaim(pvcName, ptr.To("manual")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pv *corev1.PersistentVolume
	var pvc *corev1.PersistentVolumeClaim
	waitFor(t, pvName+" and "+pvcName+" Bound", func() bool {
		var err1, err2 error
		pv, err1 = s.pv(pvName)
		pvc, err2 = s.pvc(pvcName)
		return err1 == nil && err2 == nil && pv.Status.Phase == corev1.VolumeBound && pvc.Status.Phase == corev1.ClaimBound
	})
	if ref := pv.Spec.ClaimRef; ref == nil || ref.Name != pvcName || ref.Namespace != "default" || ref.UID != pvc.UID {
		t.Errorf("volume claimRef %+v, want default/%s uid %s", ref, pvcName, pvc.UID)
	}
	if pv.Annotations[volumehelpers.AnnBoundByController] != "yes" {
		t.Errorf("volume annotations %v, want bound-by-controller", pv.Annotations)
	}
	if pvc.Spec.VolumeName != pvName || pvc.Annotations[volumehelpers.AnnBindCompleted] != "yes" || pvc.Annotations[volumehelpers.AnnBoundByController] != "yes" {
		t.Errorf("claim volumeName %q annotations %v, want %s, bind-completed, bound-by-controller", pvc.Spec.VolumeName, pvc.Annotations, pvName)
	}
	if got := pvc.Status.Capacity[corev1.ResourceStorage]; got.String() != "1Gi" || !slices.Equal(pvc.Status.AccessModes, pv.Spec.AccessModes) {
		t.Errorf("claim status capacity %s accessModes %v, want the volume's 1Gi %v", got.String(), pvc.Status.AccessModes, pv.Spec.AccessModes)
	}
	if !slices.Contains(pvc.Finalizers, "kubernetes.io/pvc-protection") {
		t.Errorf("claim finalizers %v lack kubernetes.io/pvc-protection", pvc.Finalizers)
	}
}

// stays asserts cond holds throughout d.
func stays(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if !cond() {
			t.Fatalf("%s no longer holds", what)
		}
	}
}

func (s storage) waitEvent(object, reason, message string) {
	s.t.Helper()
	waitWithin(s.t, 30*time.Second, "event "+reason+" on "+object, func() bool {
		evs, err := s.cs.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{
			FieldSelector: "involvedObject.name=" + object})
		if err != nil {
			return false
		}
		for _, e := range evs.Items {
			if e.Reason == reason && strings.Contains(e.Message, message) {
				return true
			}
		}
		return false
	})
}

// Storage as a user meets it: the default class local-path, claims
// getting it, static volumes bound both ways, Released and retained, and
// claims and volumes in use protected from deletion.
func TestStorage(t *testing.T) {
	srv := startServer(t)
	cs := srv.client()
	ctx := ctxT(t)
	s := storage{t: t, cs: cs}
	simkubelet.Start(t, cs, "node-1")

	t.Run("local-path is the default class", func(t *testing.T) {
		sc, err := cs.StorageV1().StorageClasses().Get(ctx, "local-path", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sc.Provisioner != "kelp.dev/local-path" || ptr.Deref(sc.VolumeBindingMode, "") != storagev1.VolumeBindingWaitForFirstConsumer ||
			ptr.Deref(sc.ReclaimPolicy, "") != corev1.PersistentVolumeReclaimDelete || sc.Annotations["storageclass.kubernetes.io/is-default-class"] != "true" {
			t.Errorf("local-path: %+v", sc)
		}
		if out := srv.mustKubectl("get", "storageclass"); !strings.Contains(out, "local-path (default)") {
			t.Errorf("kubectl get storageclass:\n%s", out)
		}
	})

	t.Run("a claim without a class gets local-path and waits for a consumer", func(t *testing.T) {
		pvc, err := cs.CoreV1().PersistentVolumeClaims("default").Create(ctx, newClaim("plain", nil), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ptr.Deref(pvc.Spec.StorageClassName, "<nil>") != "local-path" {
			t.Errorf("storageClassName %v, want local-path", ptr.Deref(pvc.Spec.StorageClassName, "<nil>"))
		}
		if !slices.Contains(pvc.Finalizers, "kubernetes.io/pvc-protection") {
			t.Errorf("finalizers %v lack kubernetes.io/pvc-protection", pvc.Finalizers)
		}
		s.waitEvent("plain", "WaitForFirstConsumer", "waiting for first consumer to be created before binding")
		if pvc, _ = s.pvc("plain"); pvc.Status.Phase != corev1.ClaimPending || pvc.Annotations[volumehelpers.AnnStorageProvisioner] != "" {
			t.Errorf("a claim without a consumer is %s with annotations %v", pvc.Status.Phase, pvc.Annotations)
		}
	})

	t.Run("a selected node hands the claim to the provisioner", func(t *testing.T) {
		c := newClaim("selected", ptr.To("local-path"))
		c.Annotations = map[string]string{volumehelpers.AnnSelectedNode: "node-1"}
		if _, err := cs.CoreV1().PersistentVolumeClaims("default").Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the storage-provisioner annotations", func() bool {
			pvc, err := s.pvc("selected")
			return err == nil && pvc.Annotations[volumehelpers.AnnStorageProvisioner] == "kelp.dev/local-path" &&
				pvc.Annotations[volumehelpers.AnnBetaStorageProvisioner] == "kelp.dev/local-path"
		})
		s.waitEvent("selected", "ExternalProvisioning", "Waiting for a volume to be created either by the external provisioner 'kelp.dev/local-path'")
	})

	t.Run("the scheduler's choice of a static volume is bound", func(t *testing.T) {
		wfc := storagev1.VolumeBindingWaitForFirstConsumer
		if _, err := cs.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "local-static"},
			Provisioner: "kubernetes.io/no-provisioner", VolumeBindingMode: &wfc}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pv := staticVolume("chosen")
		pv.Spec.StorageClassName = "local-static"
		if _, err := cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CoreV1().PersistentVolumeClaims("default").Create(ctx, newClaim("chooser", ptr.To("local-static")), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		s.waitEvent("chooser", "WaitForFirstConsumer", "waiting for first consumer")
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "chooser"}, Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "chooser"}}}},
		}}
		if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitWithin(t, 60*time.Second, "the claim Bound to the chosen volume and the pod scheduled", func() bool {
			pvc, err1 := s.pvc("chooser")
			p, err2 := cs.CoreV1().Pods("default").Get(ctx, "chooser", metav1.GetOptions{})
			return err1 == nil && err2 == nil && pvc.Status.Phase == corev1.ClaimBound && pvc.Spec.VolumeName == "chosen" && p.Spec.NodeName == "node-1"
		})
		if pv, err := s.pv("chosen"); err != nil || pv.Status.Phase != corev1.VolumeBound {
			t.Errorf("chosen volume: %v %v", pv.Status.Phase, err)
		}
	})

	t.Run("a deleted claim releases its volume, which is retained", func(t *testing.T) {
		s.bindStatic("retained", "retained-claim")
		if err := cs.CoreV1().PersistentVolumeClaims("default").Delete(ctx, "retained-claim", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the claim gone", func() bool {
			_, err := s.pvc("retained-claim")
			return apierrors.IsNotFound(err)
		})
		waitFor(t, "the volume Released", func() bool {
			pv, err := s.pv("retained")
			return err == nil && pv.Status.Phase == corev1.VolumeReleased
		})
		stays(t, 2*time.Second, "the Released volume", func() bool {
			pv, err := s.pv("retained")
			return err == nil && pv.Status.Phase == corev1.VolumeReleased && pv.Spec.ClaimRef != nil && pv.DeletionTimestamp == nil
		})
	})

	t.Run("a claim and volume in use wait for their pod", func(t *testing.T) {
		s.bindStatic("used", "used-claim")
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "user"}, Spec: corev1.PodSpec{
			NodeName:   "node-1",
			Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "used-claim"}}}},
		}}
		if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the pod Running", func() bool {
			p, err := cs.CoreV1().Pods("default").Get(ctx, "user", metav1.GetOptions{})
			return err == nil && p.Status.Phase == corev1.PodRunning
		})
		if err := cs.CoreV1().PersistentVolumeClaims("default").Delete(ctx, "used-claim", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := cs.CoreV1().PersistentVolumes().Delete(ctx, "used", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		stays(t, 3*time.Second, "the claim Terminating with its finalizer, the volume Bound", func() bool {
			pvc, err1 := s.pvc("used-claim")
			pv, err2 := s.pv("used")
			return err1 == nil && err2 == nil && pvc.DeletionTimestamp != nil && slices.Contains(pvc.Finalizers, "kubernetes.io/pvc-protection") &&
				pv.DeletionTimestamp != nil && pv.Status.Phase == corev1.VolumeBound && slices.Contains(pv.Finalizers, "kubernetes.io/pv-protection")
		})
		if out := srv.mustKubectl("get", "pvc", "used-claim"); !strings.Contains(out, "Terminating") {
			t.Errorf("kubectl get pvc:\n%s", out)
		}
		if err := cs.CoreV1().Pods("default").Delete(ctx, "user", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitWithin(t, 60*time.Second, "the claim and then its volume gone", func() bool {
			_, err1 := s.pvc("used-claim")
			_, err2 := s.pv("used")
			return apierrors.IsNotFound(err1) && apierrors.IsNotFound(err2)
		})
	})
}
