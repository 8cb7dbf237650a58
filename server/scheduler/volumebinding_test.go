package scheduler

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	volumehelper "k8s.io/component-helpers/storage/volume"
)

func makeClass(name, provisioner string, mode storagev1.VolumeBindingMode, allowedHosts ...string) *storagev1.StorageClass {
	sc := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: name},
		Provisioner:       provisioner,
		VolumeBindingMode: &mode,
	}
	if len(allowedHosts) > 0 {
		sc.AllowedTopologies = []v1.TopologySelectorTerm{{MatchLabelExpressions: []v1.TopologySelectorLabelRequirement{
			{Key: "kubernetes.io/hostname", Values: allowedHosts},
		}}}
	}
	return sc
}

func makePVC(name, class, size string) *v1.PersistentVolumeClaim {
	return &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-pvc-" + name)},
		Spec: v1.PersistentVolumeClaimSpec{
			StorageClassName: &class,
			AccessModes:      []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Resources:        v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse(size)}},
		},
		Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimPending},
	}
}

// makePV is an Available hostPath PV of class on the node with hostname host.
func makePV(name, class, size, host string) *v1.PersistentVolume {
	return &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-pv-" + name)},
		Spec: v1.PersistentVolumeSpec{
			StorageClassName:              class,
			Capacity:                      v1.ResourceList{v1.ResourceStorage: resource.MustParse(size)},
			AccessModes:                   []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: v1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/data/" + name}},
			NodeAffinity: &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
				MatchExpressions: []v1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: v1.NodeSelectorOpIn, Values: []string{host}}},
			}}}},
		},
		Status: v1.PersistentVolumeStatus{Phase: v1.VolumeAvailable},
	}
}

// boundPair returns pv and pvc as the PV controller leaves them bound.
func boundPair(pv *v1.PersistentVolume, pvc *v1.PersistentVolumeClaim) (*v1.PersistentVolume, *v1.PersistentVolumeClaim) {
	pv, pvc = pv.DeepCopy(), pvc.DeepCopy()
	pv.Spec.ClaimRef = &v1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID}
	pv.Status.Phase = v1.VolumeBound
	pvc.Spec.VolumeName = pv.Name
	metav1.SetMetaDataAnnotation(&pvc.ObjectMeta, volumehelper.AnnBindCompleted, "yes")
	pvc.Status.Phase = v1.ClaimBound
	return pv, pvc
}

func withClaim(volume, claim string) podOpt {
	return func(p *v1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: volume, VolumeSource: v1.VolumeSource{
			PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: claim},
		}})
	}
}

func threeNodes() []runtime.Object {
	return []runtime.Object{makeNode("node-a", "4", "8Gi"), makeNode("node-b", "4", "8Gi"), makeNode("node-c", "4", "8Gi")}
}

func (e *testEnv) getPV(name string) *v1.PersistentVolume {
	e.t.Helper()
	pv, err := e.client.CoreV1().PersistentVolumes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatalf("get pv %s: %v", name, err)
	}
	return pv
}

func (e *testEnv) getPVC(name string) *v1.PersistentVolumeClaim {
	e.t.Helper()
	pvc, err := e.client.CoreV1().PersistentVolumeClaims("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatalf("get pvc %s: %v", name, err)
	}
	return pvc
}

// completeBinding plays the PV controller: binds the claim to the PV whose
// claimRef the scheduler (or a provisioner) set. The claim's status is
// written last, as the controller does.
func (e *testEnv) completeBinding(pvName, pvcName string) {
	e.t.Helper()
	ctx := context.Background()
	pv, pvc := boundPair(e.getPV(pvName), e.getPVC(pvcName))
	if _, err := e.client.CoreV1().PersistentVolumes().UpdateStatus(ctx, pv, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	status := pvc.Status
	pvc.Status.Phase = v1.ClaimPending
	pvc, err := e.client.CoreV1().PersistentVolumeClaims("default").Update(ctx, pvc, metav1.UpdateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	pvc.Status = status
	if _, err := e.client.CoreV1().PersistentVolumeClaims("default").UpdateStatus(ctx, pvc, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// stillUnbound asserts the pod stays unbound for a while.
func (e *testEnv) stillUnbound(name string, d time.Duration) {
	e.t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if n := e.getPod(name).Spec.NodeName; n != "" {
			e.t.Fatalf("pod %s bound to %s before its claims were Bound", name, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestVolumeBoundClaimNodeAffinity(t *testing.T) {
	pv, pvc := boundPair(makePV("pv-b", "manual", "1Gi", "node-b"), makePVC("data", "manual", "1Gi"))
	pvZ, pvcZ := boundPair(makePV("pv-z", "manual", "1Gi", "node-z"), makePVC("elsewhere", "manual", "1Gi"))
	objs := append(threeNodes(), pv, pvc, pvZ, pvcZ, makeClass("manual", volumehelper.NotSupportedProvisioner, storagev1.VolumeBindingWaitForFirstConsumer))
	for _, name := range []string{"db-0", "db-1", "db-2"} {
		objs = append(objs, makePod(name, "100m", "", ownedBy("rs-db"), withClaim("data", "data")))
	}
	env := newTestEnv(t, objs...)
	// Spreading would put them on three nodes; the PV pins them to node-b.
	for _, name := range []string{"db-0", "db-1", "db-2"} {
		if node := env.waitBound(name, 5*time.Second); node != "node-b" {
			t.Fatalf("%s on %s, want node-b (the PV's node)", name, node)
		}
	}
	env.createPod(makePod("lost", "100m", "", withClaim("data", "elsewhere")))
	want := "0/3 nodes are available: 3 node(s) had volume node affinity conflict. " +
		"preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.."
	if got := env.waitFailed("lost", 5*time.Second); got != want {
		t.Fatalf("message:\n got %q\nwant %q", got, want)
	}
}

func TestVolumeWaitForFirstConsumerStaticPV(t *testing.T) {
	objs := append(threeNodes(),
		makeClass("manual", volumehelper.NotSupportedProvisioner, storagev1.VolumeBindingWaitForFirstConsumer),
		makePV("pv-b", "manual", "2Gi", "node-b"),
		makePV("pv-small", "manual", "100Mi", "node-a"), // too small
		makePVC("data", "manual", "1Gi"),
		makePod("app", "100m", "", withClaim("data", "data")),
	)
	env := newTestEnv(t, objs...)
	env.waitFor(5*time.Second, "pv-b's claimRef", func() bool { return env.getPV("pv-b").Spec.ClaimRef != nil })
	pv := env.getPV("pv-b")
	ref := pv.Spec.ClaimRef
	if ref.Namespace != "default" || ref.Name != "data" || ref.UID != "uid-pvc-data" {
		t.Fatalf("claimRef %+v, want default/data uid-pvc-data", ref)
	}
	if pv.Annotations[volumehelper.AnnBoundByController] != "yes" {
		t.Fatalf("annotations %v, want %s", pv.Annotations, volumehelper.AnnBoundByController)
	}
	if env.getPV("pv-small").Spec.ClaimRef != nil {
		t.Fatal("the too-small PV was bound")
	}
	// The pod waits for the PV controller, its placement held in the cache.
	env.stillUnbound("app", 300*time.Millisecond)
	if !env.sched.cache.isAccounted("uid-app") {
		t.Fatal("the assumed placement left the cache while waiting")
	}
	env.completeBinding("pv-b", "data")
	if node := env.waitBound("app", 5*time.Second); node != "node-b" {
		t.Fatalf("app on %s, want node-b", node)
	}
}

func TestVolumeTwoClaimsNeverShareAPV(t *testing.T) {
	objs := append(threeNodes(),
		makeClass("manual", volumehelper.NotSupportedProvisioner, storagev1.VolumeBindingWaitForFirstConsumer),
		makePV("pv-b1", "manual", "1Gi", "node-b"),
		makePVC("one", "manual", "1Gi"),
		makePVC("two", "manual", "1Gi"),
		makePod("pair", "100m", "", withClaim("a", "one"), withClaim("b", "two")),
	)
	env := newTestEnv(t, objs...)
	want := "0/3 nodes are available: 3 node(s) didn't find available persistent volumes to bind. " +
		"preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.."
	if got := env.waitFailed("pair", 5*time.Second); got != want {
		t.Fatalf("message:\n got %q\nwant %q", got, want)
	}
	if env.getPV("pv-b1").Spec.ClaimRef != nil {
		t.Fatal("a PV was bound although the pod did not fit")
	}
	// A second PV on node-b (a PV event) requeues the pod.
	if _, err := env.client.CoreV1().PersistentVolumes().Create(context.Background(), makePV("pv-b2", "manual", "1Gi", "node-b"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.waitFor(15*time.Second, "both claimRefs", func() bool {
		return env.getPV("pv-b1").Spec.ClaimRef != nil && env.getPV("pv-b2").Spec.ClaimRef != nil
	})
	r1, r2 := env.getPV("pv-b1").Spec.ClaimRef.Name, env.getPV("pv-b2").Spec.ClaimRef.Name
	if r1 == r2 || (r1 != "one" && r1 != "two") || (r2 != "one" && r2 != "two") {
		t.Fatalf("claimRefs %s and %s, want one PV per claim", r1, r2)
	}
	env.completeBinding("pv-b1", r1)
	env.stillUnbound("pair", 200*time.Millisecond) // one claim still unbound
	env.completeBinding("pv-b2", r2)
	if node := env.waitBound("pair", 5*time.Second); node != "node-b" {
		t.Fatalf("pair on %s, want node-b", node)
	}
}

func TestVolumeDynamicProvisioning(t *testing.T) {
	objs := append(threeNodes(),
		makeClass("local", "kelp.dev/local-path", storagev1.VolumeBindingWaitForFirstConsumer, "node-c"),
		makePVC("cache", "local", "1Gi"),
		makePod("web", "100m", "", withClaim("cache", "cache")),
	)
	env := newTestEnv(t, objs...)
	env.waitFor(5*time.Second, "selected-node annotation", func() bool {
		return env.getPVC("cache").Annotations[volumehelper.AnnSelectedNode] != ""
	})
	if sel := env.getPVC("cache").Annotations[volumehelper.AnnSelectedNode]; sel != "node-c" {
		t.Fatalf("selected node %q, want node-c (the class's allowedTopologies)", sel)
	}
	env.stillUnbound("web", 300*time.Millisecond)
	if n := env.binds.Load(); n != 0 {
		t.Fatalf("binds = %d before the claim was Bound", n)
	}
	// The provisioner creates the PV for the claim; the PV controller binds.
	pv := makePV("pvc-uid-pvc-cache", "local", "1Gi", "node-c")
	pv.Spec.ClaimRef = &v1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: "default", Name: "cache", UID: "uid-pvc-cache"}
	if _, err := env.client.CoreV1().PersistentVolumes().Create(context.Background(), pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.stillUnbound("web", 200*time.Millisecond) // PV exists, claim not Bound yet
	env.completeBinding(pv.Name, "cache")
	if node := env.waitBound("web", 5*time.Second); node != "node-c" {
		t.Fatalf("web on %s, want node-c", node)
	}
	if n := env.binds.Load(); n != 1 {
		t.Fatalf("binds = %d, want 1", n)
	}
}

func TestVolumeMissingClaimThenCreated(t *testing.T) {
	objs := append(threeNodes(),
		makeClass("manual", volumehelper.NotSupportedProvisioner, storagev1.VolumeBindingWaitForFirstConsumer),
		makePod("waiter", "100m", "", withClaim("data", "later")),
	)
	env := newTestEnv(t, objs...)
	want := `0/3 nodes are available: persistentvolumeclaim "later" not found. ` +
		"preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.."
	if got := env.waitFailed("waiter", 5*time.Second); got != want {
		t.Fatalf("message:\n got %q\nwant %q", got, want)
	}
	var cond v1.PodCondition
	env.waitFor(5*time.Second, "PodScheduled=False", func() bool {
		for _, c := range env.getPod("waiter").Status.Conditions {
			if c.Type == v1.PodScheduled {
				cond = c
				return true
			}
		}
		return false
	})
	if cond.Status != v1.ConditionFalse || cond.Reason != v1.PodReasonUnschedulable || cond.Message != want {
		t.Fatalf("condition %+v", cond)
	}
	// Creating the claim (bound to a PV on node-a) requeues the pod.
	pv, pvc := boundPair(makePV("pv-a", "manual", "1Gi", "node-a"), makePVC("later", "manual", "1Gi"))
	if _, err := env.client.CoreV1().PersistentVolumes().Create(context.Background(), pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.client.CoreV1().PersistentVolumeClaims("default").Create(context.Background(), pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if node := env.waitBound("waiter", 15*time.Second); node != "node-a" {
		t.Fatalf("waiter on %s, want node-a", node)
	}
}

func TestVolumeUnboundImmediateClaim(t *testing.T) {
	objs := append(threeNodes(),
		makeClass("fast", "example.com/fast", storagev1.VolumeBindingImmediate),
		makePV("pv-c", "fast", "1Gi", "node-c"),
		makePVC("now", "fast", "1Gi"),
		makePod("eager", "100m", "", withClaim("data", "now")),
	)
	env := newTestEnv(t, objs...)
	want := "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims. " +
		"preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.."
	if got := env.waitFailed("eager", 5*time.Second); got != want {
		t.Fatalf("message:\n got %q\nwant %q", got, want)
	}
	if env.getPV("pv-c").Spec.ClaimRef != nil {
		t.Fatal("the scheduler bound an Immediate claim's PV")
	}
	// The PV controller binds it; the claim's update requeues the pod.
	env.completeBinding("pv-c", "now")
	if node := env.waitBound("eager", 15*time.Second); node != "node-c" {
		t.Fatalf("eager on %s, want node-c", node)
	}
}

func TestVolumeBindTimeoutUnreserves(t *testing.T) {
	objs := append(threeNodes(),
		makeClass("local", "kelp.dev/local-path", storagev1.VolumeBindingWaitForFirstConsumer),
		makePVC("slow", "local", "1Gi"),
	)
	env := newTestEnv(t, objs...)
	env.sched.volumes.mu.Lock()
	env.sched.volumes.timeout = 300 * time.Millisecond
	env.sched.volumes.mu.Unlock()
	env.createPod(makePod("patient", "100m", "", withClaim("data", "slow")))
	want := `running PreBind plugin "VolumeBinding": binding volumes: context deadline exceeded`
	if got := env.waitFailed("patient", 5*time.Second); got != want {
		t.Fatalf("message:\n got %q\nwant %q", got, want)
	}
	env.waitFor(5*time.Second, "PodScheduled=False SchedulerError", func() bool {
		for _, c := range env.getPod("patient").Status.Conditions {
			if c.Type == v1.PodScheduled && c.Reason == v1.PodReasonSchedulerError && c.Message == want {
				return true
			}
		}
		return false
	})
	if n := env.getPod("patient").Spec.NodeName; n != "" {
		t.Fatalf("pod bound to %s without its volume", n)
	}
	// The retry (after backoff) waits again on the node already selected.
	sel := env.getPVC("slow").Annotations[volumehelper.AnnSelectedNode]
	env.sched.volumes.mu.Lock()
	env.sched.volumes.timeout = defaultBindTimeout
	env.sched.volumes.mu.Unlock()
	pv := makePV("pvc-slow", "local", "1Gi", sel)
	pv.Spec.ClaimRef = &v1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: "default", Name: "slow", UID: "uid-pvc-slow"}
	if _, err := env.client.CoreV1().PersistentVolumes().Create(context.Background(), pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.completeBinding(pv.Name, "slow")
	if node := env.waitBound("patient", 15*time.Second); node != sel {
		t.Fatalf("patient on %s, want %s (the selected node)", node, sel)
	}
}
