package persistentvolume

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	volumehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/utils/ptr"
)

type harness struct {
	t        *testing.T
	c        *Controller
	client   *fake.Clientset
	recorder *record.FakeRecorder
}

// newHarness is a binder whose informers hold objs (and whose API has
// them too); syncs are called directly.
func newHarness(t *testing.T, objs ...runtime.Object) *harness {
	t.Helper()
	client := fake.NewSimpleClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	rec := record.NewFakeRecorder(100)
	c := New(client, factory, rec)
	c.now = func() time.Time { return time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC) }
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *corev1.PersistentVolume:
			err = factory.Core().V1().PersistentVolumes().Informer().GetIndexer().Add(o)
		case *corev1.PersistentVolumeClaim:
			err = factory.Core().V1().PersistentVolumeClaims().Informer().GetIndexer().Add(o)
		case *storagev1.StorageClass:
			err = factory.Storage().V1().StorageClasses().Informer().GetIndexer().Add(o)
		case *corev1.Pod:
			err = factory.Core().V1().Pods().Informer().GetIndexer().Add(o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return &harness{t: t, c: c, client: client, recorder: rec}
}

func (h *harness) syncClaim(name string) {
	h.t.Helper()
	if err := h.c.syncClaimKey(context.Background(), "default/"+name); err != nil {
		h.t.Fatalf("sync claim %s: %v", name, err)
	}
}

func (h *harness) syncVolume(name string) {
	h.t.Helper()
	if err := h.c.syncVolumeKey(context.Background(), name); err != nil {
		h.t.Fatalf("sync volume %s: %v", name, err)
	}
}

func (h *harness) pv(name string) *corev1.PersistentVolume {
	h.t.Helper()
	pv, err := h.client.CoreV1().PersistentVolumes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return pv
}

func (h *harness) pvc(name string) *corev1.PersistentVolumeClaim {
	h.t.Helper()
	pvc, err := h.client.CoreV1().PersistentVolumeClaims("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return pvc
}

func (h *harness) events() []string {
	var out []string
	for {
		select {
		case e := <-h.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func (h *harness) wantEvent(prefix string) {
	h.t.Helper()
	events := h.events()
	for _, e := range events {
		if strings.HasPrefix(e, prefix) {
			return
		}
	}
	h.t.Errorf("no event %q among %q", prefix, events)
}

func (h *harness) writes() int {
	n := 0
	for _, a := range h.client.Actions() {
		if v := a.GetVerb(); v != "get" && v != "list" && v != "watch" {
			n++
		}
	}
	return n
}

func volume(name, size, class string, modes ...corev1.PersistentVolumeAccessMode) *corev1.PersistentVolume {
	if len(modes) == 0 {
		modes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	}
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
			AccessModes:                   modes,
			StorageClassName:              class,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			VolumeMode:                    ptr.To(corev1.PersistentVolumeFilesystem),
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/srv/" + name}},
		},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeAvailable},
	}
}

func claim(name, size string, class *string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name), ResourceVersion: "1"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
			StorageClassName: class,
			VolumeMode:       ptr.To(corev1.PersistentVolumeFilesystem),
		},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending},
	}
}

func storageClass(name, provisioner string, mode storagev1.VolumeBindingMode, isDefault bool) *storagev1.StorageClass {
	c := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: provisioner, VolumeBindingMode: &mode}
	if isDefault {
		c.Annotations = map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}
	}
	return c
}

// boundByController binds volume to claim as the binder would have.
func boundByController(pv *corev1.PersistentVolume, pvc *corev1.PersistentVolumeClaim) {
	pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID}
	pv.Annotations = map[string]string{volumehelpers.AnnBoundByController: "yes"}
	pv.Status.Phase = corev1.VolumeBound
	pvc.Spec.VolumeName = pv.Name
	pvc.Annotations = map[string]string{volumehelpers.AnnBindCompleted: "yes", volumehelpers.AnnBoundByController: "yes"}
	pvc.Status.Phase = corev1.ClaimBound
}

// checkBound asserts pv and pvc are bound to each other, with the
// annotations of who bound them.
func (h *harness) checkBound(pvName, pvcName string, pvByController, pvcByController bool) {
	h.t.Helper()
	pv, pvc := h.pv(pvName), h.pvc(pvcName)
	if ref := pv.Spec.ClaimRef; ref == nil || ref.Name != pvcName || ref.Namespace != "default" || ref.UID != pvc.UID {
		h.t.Errorf("volume %s claimRef %+v, want default/%s uid %s", pvName, ref, pvcName, pvc.UID)
	}
	if pv.Status.Phase != corev1.VolumeBound {
		h.t.Errorf("volume %s phase %s, want Bound", pvName, pv.Status.Phase)
	}
	if pv.Status.LastPhaseTransitionTime == nil {
		h.t.Errorf("volume %s has no lastPhaseTransitionTime", pvName)
	}
	if got := metav1.HasAnnotation(pv.ObjectMeta, volumehelpers.AnnBoundByController); got != pvByController {
		h.t.Errorf("volume %s bound-by-controller %v, want %v", pvName, got, pvByController)
	}
	if pvc.Spec.VolumeName != pvName {
		h.t.Errorf("claim %s volumeName %q, want %s", pvcName, pvc.Spec.VolumeName, pvName)
	}
	if pvc.Annotations[volumehelpers.AnnBindCompleted] != "yes" {
		h.t.Errorf("claim %s annotations %v lack bind-completed", pvcName, pvc.Annotations)
	}
	if got := metav1.HasAnnotation(pvc.ObjectMeta, volumehelpers.AnnBoundByController); got != pvcByController {
		h.t.Errorf("claim %s bound-by-controller %v, want %v", pvcName, got, pvcByController)
	}
	if pvc.Status.Phase != corev1.ClaimBound {
		h.t.Errorf("claim %s phase %s, want Bound", pvcName, pvc.Status.Phase)
	}
	want := pv.Spec.Capacity[corev1.ResourceStorage]
	if got := pvc.Status.Capacity[corev1.ResourceStorage]; got.Cmp(want) != 0 {
		h.t.Errorf("claim %s capacity %s, want the volume's %s", pvcName, got.String(), want.String())
	}
	if len(pvc.Status.AccessModes) != len(pv.Spec.AccessModes) || pvc.Status.AccessModes[0] != pv.Spec.AccessModes[0] {
		h.t.Errorf("claim %s accessModes %v, want the volume's %v", pvcName, pvc.Status.AccessModes, pv.Spec.AccessModes)
	}
}

// The smallest volume of the claim's class that is large enough and
// offers its access modes is bound, from the group with the fewest modes.
func TestStaticBindBySizeClassAndAccessModes(t *testing.T) {
	h := newHarness(t,
		volume("small", "1Gi", "manual"),
		volume("big", "10Gi", "manual"),
		volume("right", "5Gi", "manual"),
		volume("more-modes", "4Gi", "manual", corev1.ReadWriteOnce, corev1.ReadWriteMany),
		volume("other-class", "3Gi", "fast"),
		volume("read-only", "3Gi", "manual", corev1.ReadOnlyMany),
		claim("data", "3Gi", ptr.To("manual")))
	h.syncClaim("data")
	h.checkBound("right", "data", true, true)
	for _, name := range []string{"small", "big", "more-modes", "other-class", "read-only"} {
		if ref := h.pv(name).Spec.ClaimRef; ref != nil {
			t.Errorf("volume %s claimed too: %+v", name, ref)
		}
	}
	// Synced again, nothing changes.
	h2 := newHarness(t, h.pv("right"), h.pvc("data"))
	h2.syncClaim("data")
	h2.syncVolume("right")
	if n := h2.writes(); n != 0 {
		t.Errorf("a bound pair synced again wrote %d times: %v", n, h2.client.Actions())
	}
}

// A volume a user pre-bound (claimRef without UID) goes to its claim,
// even when a better fit exists, and is not marked bound by the
// controller; a claim naming its volume gets it.
func TestPreBound(t *testing.T) {
	pre := volume("reserved", "10Gi", "manual")
	pre.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "default", Name: "data"}
	h := newHarness(t, pre, volume("fits", "3Gi", "manual"), claim("data", "3Gi", ptr.To("manual")))
	h.syncVolume("reserved")
	if p := h.pv("reserved").Status.Phase; p != corev1.VolumeAvailable {
		t.Errorf("pre-bound volume waiting for its claim is %s, want Available", p)
	}
	h.syncClaim("data")
	h.checkBound("reserved", "data", false, true)

	named := claim("named", "1Gi", ptr.To("manual"))
	named.Spec.VolumeName = "chosen"
	h = newHarness(t, volume("chosen", "2Gi", "manual"), volume("smaller", "1Gi", "manual"), named)
	h.syncClaim("named")
	h.checkBound("chosen", "named", true, false)

	tooSmall := claim("big", "5Gi", ptr.To("manual"))
	tooSmall.Spec.VolumeName = "chosen"
	h = newHarness(t, volume("chosen", "2Gi", "manual"), tooSmall)
	h.syncClaim("big")
	h.wantEvent("Warning VolumeMismatch requested PV is too small")
	if pvc := h.pvc("big"); pvc.Status.Phase != corev1.ClaimPending || h.pv("chosen").Spec.ClaimRef != nil {
		t.Errorf("a volume too small was bound: claim %s", pvc.Status.Phase)
	}
}

// A WaitForFirstConsumer claim is left to the scheduler until it names a
// selected node; then its class's provisioner is asked for a volume.
func TestWaitForFirstConsumerThenProvisioning(t *testing.T) {
	class := storageClass("local-path", "kelp.dev/local-path", storagev1.VolumeBindingWaitForFirstConsumer, true)
	h := newHarness(t, class, volume("static", "5Gi", "local-path"), claim("data", "1Gi", ptr.To("local-path")))
	h.syncClaim("data")
	h.wantEvent("Normal WaitForFirstConsumer waiting for first consumer to be created before binding")
	pvc := h.pvc("data")
	if pvc.Spec.VolumeName != "" || h.pv("static").Spec.ClaimRef != nil {
		t.Fatalf("a WaitForFirstConsumer claim was bound by the binder")
	}
	if _, ok := pvc.Annotations[volumehelpers.AnnStorageProvisioner]; ok {
		t.Fatalf("provisioning asked before a node was selected: %v", pvc.Annotations)
	}

	// A pod waits for it: the event names the pod.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}, Spec: corev1.PodSpec{Volumes: []corev1.Volume{{
		Name: "v", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}}}
	h = newHarness(t, class, claim("data", "1Gi", ptr.To("local-path")), pod)
	h.syncClaim("data")
	h.wantEvent("Normal WaitForPodScheduled waiting for pod web to be scheduled")

	selected := claim("data", "1Gi", ptr.To("local-path"))
	selected.Annotations = map[string]string{volumehelpers.AnnSelectedNode: "node-1"}
	h = newHarness(t, class, selected)
	h.syncClaim("data")
	pvc = h.pvc("data")
	if pvc.Annotations[volumehelpers.AnnStorageProvisioner] != "kelp.dev/local-path" || pvc.Annotations[volumehelpers.AnnBetaStorageProvisioner] != "kelp.dev/local-path" {
		t.Errorf("claim annotations %v, want both storage-provisioner annotations", pvc.Annotations)
	}
	h.wantEvent("Normal ExternalProvisioning Waiting for a volume to be created either by the external provisioner 'kelp.dev/local-path' " +
		"or manually by the system administrator. If volume creation is delayed, please verify that the provisioner is running and correctly registered.")
}

// An Immediate claim with no volume is provisioned at once; one without a
// class and no volume just waits, saying why.
func TestImmediateProvisioningAndNoClass(t *testing.T) {
	h := newHarness(t, storageClass("fast", "example.com/fast", storagev1.VolumeBindingImmediate, false), claim("data", "1Gi", ptr.To("fast")))
	h.syncClaim("data")
	if got := h.pvc("data").Annotations[volumehelpers.AnnStorageProvisioner]; got != "example.com/fast" {
		t.Errorf("storage-provisioner %q, want example.com/fast", got)
	}
	h.wantEvent("Normal ExternalProvisioning")

	h = newHarness(t, storageClass("intree", "kubernetes.io/aws-ebs", storagev1.VolumeBindingImmediate, false), claim("data", "1Gi", ptr.To("intree")))
	if err := h.c.syncClaimKey(context.Background(), "default/data"); err == nil {
		t.Errorf("an in-tree provisioner kelp lacks did not fail")
	}
	h.wantEvent("Warning ProvisioningFailed no volume plugin matched name: kubernetes.io/aws-ebs")

	h = newHarness(t, claim("data", "1Gi", ptr.To("")))
	h.syncClaim("data")
	h.wantEvent("Normal FailedBinding no persistent volumes available for this claim and no storage class is set")
	if p := h.pvc("data").Status.Phase; p != corev1.ClaimPending {
		t.Errorf("phase %s, want Pending", p)
	}
}

// A claim created without a class gets the default once one exists; one
// that asked for class "" does not.
func TestRetroactiveDefaultClass(t *testing.T) {
	old := storageClass("old", "example.com/a", storagev1.VolumeBindingImmediate, true)
	old.CreationTimestamp = metav1.NewTime(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	newer := storageClass("newer", "example.com/b", storagev1.VolumeBindingImmediate, true)
	newer.CreationTimestamp = metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	h := newHarness(t, old, newer, claim("data", "1Gi", nil), claim("none", "1Gi", ptr.To("")))
	h.syncClaim("data")
	if got := h.pvc("data").Spec.StorageClassName; got == nil || *got != "newer" {
		t.Errorf("storageClassName %v, want the newest default", got)
	}
	h.syncClaim("none")
	if got := h.pvc("none").Spec.StorageClassName; got == nil || *got != "" {
		t.Errorf(`a claim asking for class "" got %v`, got)
	}
}

// A volume whose claim is gone is Released: Retain keeps it; Delete of an
// external provisioner's volume is left to it; Delete of a static volume
// fails, as upstream without a deleter plugin.
func TestReclaim(t *testing.T) {
	gone := claim("gone", "1Gi", ptr.To("manual"))

	retained := volume("retained", "1Gi", "manual")
	boundByController(retained, gone.DeepCopy())
	h := newHarness(t, retained)
	h.syncVolume("retained")
	pv := h.pv("retained")
	if pv.Status.Phase != corev1.VolumeReleased || pv.Spec.ClaimRef == nil {
		t.Errorf("retained volume %s with claimRef %v, want Released and still naming its claim", pv.Status.Phase, pv.Spec.ClaimRef)
	}
	h.syncVolume("retained")
	if p := h.pv("retained").Status.Phase; p != corev1.VolumeReleased {
		t.Errorf("retained volume synced again is %s", p)
	}

	provisioned := volume("pvc-uid-gone", "1Gi", "local-path")
	boundByController(provisioned, gone.DeepCopy())
	provisioned.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
	provisioned.Annotations[volumehelpers.AnnDynamicallyProvisioned] = "kelp.dev/local-path"
	h = newHarness(t, provisioned)
	h.syncVolume("pvc-uid-gone")
	if p := h.pv("pvc-uid-gone").Status.Phase; p != corev1.VolumeReleased {
		t.Errorf("provisioned volume %s, want Released for its provisioner", p)
	}
	for _, a := range h.client.Actions() {
		if a.GetVerb() == "delete" {
			t.Errorf("the binder deleted an external provisioner's volume")
		}
	}

	static := volume("static", "1Gi", "manual")
	boundByController(static, gone.DeepCopy())
	static.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
	h = newHarness(t, static)
	h.syncVolume("static")
	pv = h.pv("static")
	msg := `error getting deleter volume plugin for volume "static": no deletable volume plugin matched`
	if pv.Status.Phase != corev1.VolumeFailed || pv.Status.Message != msg {
		t.Errorf("static Delete volume %s %q, want Failed %q", pv.Status.Phase, pv.Status.Message, msg)
	}
	h.wantEvent("Warning VolumeFailedDelete " + msg)

	// A claim of the same name but another UID is not the volume's.
	retained2 := volume("retained", "1Gi", "manual")
	boundByController(retained2, gone.DeepCopy())
	again := claim("gone", "1Gi", ptr.To("manual"))
	again.UID = "uid-new"
	h = newHarness(t, retained2, again)
	h.syncVolume("retained")
	if p := h.pv("retained").Status.Phase; p != corev1.VolumeReleased {
		t.Errorf("volume of a claim deleted and created again is %s, want Released", p)
	}
}

// A bound claim whose volume is gone, or whose volume names another claim,
// is Lost.
func TestLost(t *testing.T) {
	pvc := claim("data", "1Gi", ptr.To("manual"))
	boundByController(volume("vanished", "1Gi", "manual"), pvc)
	h := newHarness(t, pvc)
	h.syncClaim("data")
	got := h.pvc("data")
	if got.Status.Phase != corev1.ClaimLost || got.Status.Capacity != nil {
		t.Errorf("claim %s capacity %v, want Lost without capacity", got.Status.Phase, got.Status.Capacity)
	}
	h.wantEvent("Warning ClaimLost Bound claim has lost its PersistentVolume. Data on the volume is lost!")

	pvc = claim("data", "1Gi", ptr.To("manual"))
	pv := volume("shared", "1Gi", "manual")
	boundByController(pv, pvc)
	pv.Spec.ClaimRef.UID = "uid-someone-else"
	h = newHarness(t, pvc, pv)
	h.syncClaim("data")
	if p := h.pvc("data").Status.Phase; p != corev1.ClaimLost {
		t.Errorf("misbound claim %s, want Lost", p)
	}
	h.wantEvent("Warning ClaimMisbound")
}

// A volume the controller bound to a claim that got another volume is
// unbound and Available again; a user's pre-binding is kept by name.
func TestUnbindVolumeOfClaimBoundElsewhere(t *testing.T) {
	pvc := claim("data", "1Gi", ptr.To("manual"))
	boundByController(volume("winner", "1Gi", "manual"), pvc)
	loser := volume("loser", "1Gi", "manual")
	boundByController(loser, pvc.DeepCopy())
	h := newHarness(t, pvc, loser)
	h.syncVolume("loser")
	pv := h.pv("loser")
	if pv.Spec.ClaimRef != nil || pv.Status.Phase != corev1.VolumeAvailable || metav1.HasAnnotation(pv.ObjectMeta, volumehelpers.AnnBoundByController) {
		t.Errorf("loser volume: claimRef %v phase %s annotations %v, want unbound and Available", pv.Spec.ClaimRef, pv.Status.Phase, pv.Annotations)
	}

	user := volume("user", "1Gi", "manual")
	boundByController(user, pvc.DeepCopy())
	delete(user.Annotations, volumehelpers.AnnBoundByController)
	h = newHarness(t, pvc, user)
	h.syncVolume("user")
	pv = h.pv("user")
	if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.Name != "data" || pv.Spec.ClaimRef.UID != "" || pv.Status.Phase != corev1.VolumeAvailable {
		t.Errorf("user-bound volume: claimRef %+v phase %s, want pre-bound to data without UID and Available", pv.Spec.ClaimRef, pv.Status.Phase)
	}
}
