package statefulset

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/kelp-project/kelp/server/controllers/history"
)

const ns = "default"

func newSet(replicas int32) *apps.StatefulSet {
	return &apps.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns, UID: "uid-web", Generation: 1},
		Spec: apps.StatefulSetSpec{
			Replicas:            ptr.To(replicas),
			ServiceName:         "web-svc",
			Selector:            &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			PodManagementPolicy: apps.OrderedReadyPodManagement,
			UpdateStrategy: apps.StatefulSetUpdateStrategy{Type: apps.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &apps.RollingUpdateStatefulSetStrategy{Partition: ptr.To(int32(0))}},
			RevisionHistoryLimit: ptr.To(int32(10)),
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "nginx:1"}}},
			},
		},
	}
}

func withClaims(set *apps.StatefulSet, p apps.StatefulSetPersistentVolumeClaimRetentionPolicy) *apps.StatefulSet {
	set.Spec.PersistentVolumeClaimRetentionPolicy = &p
	set.Spec.VolumeClaimTemplates = []v1.PersistentVolumeClaim{{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Labels: map[string]string{"tier": "db", "app": "overridden"}},
		Spec: v1.PersistentVolumeClaimSpec{AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}}},
	}}
	return set
}

type env struct {
	client  *fake.Clientset
	factory informers.SharedInformerFactory
	ctrl    *Controller
	rec     *record.FakeRecorder
	ctx     context.Context

	mu      sync.Mutex
	created []string // pod names in creation order
	deleted []string // pod names in deletion order
}

func newEnv(t *testing.T, objs ...runtime.Object) *env {
	t.Helper()
	client := fake.NewClientset(objs...)
	e := &env{client: client}
	var n int64
	// The API server gives a new pod its UID and the phase Pending.
	client.PrependReactor("create", "pods", func(a core.Action) (bool, runtime.Object, error) {
		pod := a.(core.CreateAction).GetObject().(*v1.Pod)
		i := atomic.AddInt64(&n, 1)
		pod.UID = types.UID(fmt.Sprintf("pod-uid-%d", i))
		if pod.Status.Phase == "" {
			pod.Status.Phase = v1.PodPending
		}
		e.mu.Lock()
		e.created = append(e.created, pod.Name)
		e.mu.Unlock()
		return false, nil, nil
	})
	client.PrependReactor("create", "persistentvolumeclaims", func(a core.Action) (bool, runtime.Object, error) {
		pvc := a.(core.CreateAction).GetObject().(*v1.PersistentVolumeClaim)
		pvc.UID = types.UID("pvc-uid-" + pvc.Name)
		return false, nil, nil
	})
	client.PrependReactor("delete", "pods", func(a core.Action) (bool, runtime.Object, error) {
		e.mu.Lock()
		e.deleted = append(e.deleted, a.(core.DeleteAction).GetName())
		e.mu.Unlock()
		return false, nil, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	rec := record.NewFakeRecorder(1000)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); factory.Shutdown() })
	e.factory, e.ctrl, e.rec, e.ctx = factory, New(client, factory, rec), rec, ctx
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), e.ctrl.synced...) {
		t.Fatal("caches did not sync")
	}
	return e
}

// syncUntil runs the set's sync until cond holds (the informers deliver
// the controller's own writes asynchronously).
func (e *env) syncUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := e.ctrl.sync(e.ctx, ns+"/web")
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out: %s (last sync: %v; pods %v)", what, err, e.podNames(t))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// settle syncs a few times, letting the caches catch up in between.
func (e *env) settle() {
	for range 5 {
		_ = e.ctrl.sync(e.ctx, ns+"/web")
		time.Sleep(20 * time.Millisecond)
	}
}

func (e *env) pods(t *testing.T) []v1.Pod {
	t.Helper()
	l, err := e.client.CoreV1().Pods(ns).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(l.Items, func(i, j int) bool { return l.Items[i].Name < l.Items[j].Name })
	return l.Items
}

func (e *env) podNames(t *testing.T) string {
	var names []string
	for _, p := range e.pods(t) {
		names = append(names, p.Name)
	}
	return strings.Join(names, ",")
}

func (e *env) set(t *testing.T) *apps.StatefulSet {
	t.Helper()
	s, err := e.client.AppsV1().StatefulSets(ns).Get(e.ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// update writes the set's spec and waits until the controller's cache has
// it (the fake has no status subresource: a status write from a stale
// cache would undo the change).
func (e *env) update(t *testing.T, change func(*apps.StatefulSet)) {
	t.Helper()
	s := e.set(t)
	change(s)
	s.Generation++
	if _, err := e.client.AppsV1().StatefulSets(ns).Update(e.ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if got, err := e.ctrl.setLister.StatefulSets(ns).Get("web"); err == nil && got.Generation == s.Generation {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cache never saw generation %d", s.Generation)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// ready plays the kubelet: the named pods Running and Ready (for a minute).
func (e *env) ready(t *testing.T, names ...string) {
	t.Helper()
	for _, name := range names {
		p, err := e.client.CoreV1().Pods(ns).Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p.Status.Phase = v1.PodRunning
		p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(time.Now().Add(-time.Minute))}}
		if _, err := e.client.CoreV1().Pods(ns).UpdateStatus(e.ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Wait for the cache: the next decisions read it.
	deadline := time.Now().Add(5 * time.Second)
	for _, name := range names {
		for {
			p, err := e.ctrl.podLister.Pods(ns).Get(name)
			if err == nil && isRunningAndReady(p) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("cache never saw %s Ready", name)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// readyAll makes every live pod Ready.
func (e *env) readyAll(t *testing.T) {
	t.Helper()
	var names []string
	for _, p := range e.pods(t) {
		if !isRunningAndReady(&p) {
			names = append(names, p.Name)
		}
	}
	e.ready(t, names...)
}

func (e *env) events() []string {
	var out []string
	for {
		select {
		case ev := <-e.rec.Events:
			out = append(out, ev)
		default:
			return out
		}
	}
}

func hasEvent(evs []string, want string) bool {
	for _, ev := range evs {
		if strings.Contains(ev, want) {
			return true
		}
	}
	return false
}

// TestOrderedCreation: OrderedReady creates web-0 first and web-1 only
// once web-0 is Running and Ready; pods carry the identity (labels,
// hostname, subdomain, controller) and the update revision.
func TestOrderedCreation(t *testing.T) {
	e := newEnv(t, newSet(3))
	e.syncUntil(t, "web-0", func() bool { return len(e.pods(t)) == 1 })
	e.settle()
	if got := e.podNames(t); got != "web-0" {
		t.Fatalf("before web-0 is Ready: pods %s, want only web-0", got)
	}
	p := e.pods(t)[0]
	st := e.set(t).Status
	if p.Labels[apps.StatefulSetPodNameLabel] != "web-0" || p.Labels[apps.PodIndexLabel] != "0" || p.Labels["app"] != "web" ||
		p.Labels[apps.StatefulSetRevisionLabel] != st.UpdateRevision || st.UpdateRevision == "" {
		t.Errorf("labels %v (update revision %q)", p.Labels, st.UpdateRevision)
	}
	if p.Spec.Hostname != "web-0" || p.Spec.Subdomain != "web-svc" {
		t.Errorf("hostname %q subdomain %q", p.Spec.Hostname, p.Spec.Subdomain)
	}
	if ref := metav1.GetControllerOf(&p); ref == nil || ref.UID != "uid-web" || ref.Kind != "StatefulSet" {
		t.Errorf("controller %+v", ref)
	}
	if st.Replicas != 1 || st.ReadyReplicas != 0 || st.ObservedGeneration != 1 || st.CurrentRevision != st.UpdateRevision {
		t.Errorf("status %+v", st)
	}
	e.ready(t, "web-0")
	e.syncUntil(t, "web-1", func() bool { return len(e.pods(t)) == 2 })
	e.settle()
	if got := e.podNames(t); got != "web-0,web-1" {
		t.Fatalf("pods %s, want web-0,web-1", got)
	}
	e.ready(t, "web-1")
	e.syncUntil(t, "web-2", func() bool { return len(e.pods(t)) == 3 })
	e.ready(t, "web-2")
	e.syncUntil(t, "all ready in status", func() bool {
		st := e.set(t).Status
		return st.ReadyReplicas == 3 && st.AvailableReplicas == 3 && st.CurrentReplicas == 3 && st.UpdatedReplicas == 3
	})
	e.mu.Lock()
	order := strings.Join(e.created, ",")
	e.mu.Unlock()
	if order != "web-0,web-1,web-2" {
		t.Errorf("creation order %s", order)
	}
	if evs := e.events(); !hasEvent(evs, "Normal SuccessfulCreate create Pod web-0 in StatefulSet web successful") {
		t.Errorf("events %v", evs)
	}
}

// TestOrdinalsStart: spec.ordinals.start shifts the names.
func TestOrdinalsStart(t *testing.T) {
	set := newSet(2)
	set.Spec.Ordinals = &apps.StatefulSetOrdinals{Start: 5}
	set.Spec.PodManagementPolicy = apps.ParallelPodManagement
	e := newEnv(t, set)
	e.syncUntil(t, "two pods", func() bool { return len(e.pods(t)) == 2 })
	if got := e.podNames(t); got != "web-5,web-6" {
		t.Errorf("pods %s, want web-5,web-6", got)
	}
}

func (e *env) upTo(t *testing.T, n int) {
	t.Helper()
	e.syncUntil(t, fmt.Sprintf("%d Ready pods", n), func() bool {
		e.readyAll(t)
		return len(e.pods(t)) == n && e.set(t).Status.ReadyReplicas == int32(n)
	})
}

// TestReverseScaleDown: scaling 3 -> 1 deletes web-2, then web-1, one at
// a time; an unhealthy pod halts the scale-down.
func TestReverseScaleDown(t *testing.T) {
	e := newEnv(t, newSet(3))
	e.upTo(t, 3)
	e.update(t, func(s *apps.StatefulSet) { s.Spec.Replicas = ptr.To(int32(1)) })
	e.syncUntil(t, "scaled to 1", func() bool { return e.podNames(t) == "web-0" })
	e.mu.Lock()
	order := strings.Join(e.deleted, ",")
	e.mu.Unlock()
	if order != "web-2,web-1" {
		t.Errorf("deletion order %s, want web-2,web-1", order)
	}
	if evs := e.events(); !hasEvent(evs, "Normal SuccessfulDelete delete Pod web-2 in StatefulSet web successful") {
		t.Errorf("events %v", evs)
	}

	// Back to 3, then web-0 becomes unready: scaling down waits.
	e.update(t, func(s *apps.StatefulSet) { s.Spec.Replicas = ptr.To(int32(3)) })
	e.upTo(t, 3)
	p, _ := e.client.CoreV1().Pods(ns).Get(e.ctx, "web-0", metav1.GetOptions{})
	p.Status.Conditions[0].Status = v1.ConditionFalse
	if _, err := e.client.CoreV1().Pods(ns).UpdateStatus(e.ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.syncUntil(t, "web-0 unready seen", func() bool { return e.set(t).Status.ReadyReplicas == 2 })
	e.update(t, func(s *apps.StatefulSet) { s.Spec.Replicas = ptr.To(int32(1)) })
	e.settle()
	if got := e.podNames(t); got != "web-0,web-1,web-2" {
		t.Errorf("with web-0 unhealthy the scale-down went on: pods %s", got)
	}
}

// TestParallel: Parallel creates and deletes all pods at once, Ready or
// not.
func TestParallel(t *testing.T) {
	set := newSet(3)
	set.Spec.PodManagementPolicy = apps.ParallelPodManagement
	e := newEnv(t, set)
	e.syncUntil(t, "3 pods at once", func() bool { return len(e.pods(t)) == 3 })
	for _, p := range e.pods(t) {
		if isRunningAndReady(&p) {
			t.Fatalf("%s Ready: the test must create all without readiness", p.Name)
		}
	}
	e.update(t, func(s *apps.StatefulSet) { s.Spec.Replicas = ptr.To(int32(0)) })
	e.syncUntil(t, "all gone", func() bool { return len(e.pods(t)) == 0 })
}

// TestFailedPodReplaced: a failed pod is deleted and made again.
func TestFailedPodReplaced(t *testing.T) {
	e := newEnv(t, newSet(1))
	e.upTo(t, 1)
	p := e.pods(t)[0]
	p.Status.Phase = v1.PodFailed
	if _, err := e.client.CoreV1().Pods(ns).UpdateStatus(e.ctx, &p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.syncUntil(t, "web-0 recreated", func() bool {
		ps := e.pods(t)
		return len(ps) == 1 && ps[0].UID != p.UID && ps[0].Status.Phase == v1.PodPending
	})
}

func (e *env) claims(t *testing.T) map[string]v1.PersistentVolumeClaim {
	t.Helper()
	l, err := e.client.CoreV1().PersistentVolumeClaims(ns).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]v1.PersistentVolumeClaim{}
	for _, c := range l.Items {
		out[c.Name] = c
	}
	return out
}

func ownerUIDs(c v1.PersistentVolumeClaim) string {
	var out []string
	for _, r := range c.OwnerReferences {
		if r.Controller == nil || !*r.Controller {
			out = append(out, "non-controller:"+string(r.UID))
			continue
		}
		out = append(out, string(r.UID))
	}
	return strings.Join(out, ",")
}

// TestClaims: a claim per template and ordinal, created before the pod,
// labelled with the template's labels and the selector's, mounted under
// the template's name; Retain leaves them without owners.
func TestClaims(t *testing.T) {
	set := withClaims(newSet(2), apps.StatefulSetPersistentVolumeClaimRetentionPolicy{})
	set.Spec.PodManagementPolicy = apps.ParallelPodManagement
	e := newEnv(t, set)
	var order []string
	var mu sync.Mutex
	e.client.PrependReactor("create", "*", func(a core.Action) (bool, runtime.Object, error) {
		mu.Lock()
		order = append(order, a.GetResource().Resource+"/"+a.(core.CreateAction).GetObject().(metav1.Object).GetName())
		mu.Unlock()
		return false, nil, nil
	})
	e.syncUntil(t, "pods and claims", func() bool { return len(e.pods(t)) == 2 && len(e.claims(t)) == 2 })
	mu.Lock()
	got := strings.Join(order, " ")
	mu.Unlock()
	if !strings.Contains(got, "persistentvolumeclaims/data-web-0 pods/web-0") || !strings.Contains(got, "persistentvolumeclaims/data-web-1 pods/web-1") {
		t.Errorf("creation order %q: each claim must come before its pod", got)
	}
	c := e.claims(t)["data-web-1"]
	if c.Labels["app"] != "web" || c.Labels["tier"] != "db" || len(c.OwnerReferences) != 0 {
		t.Errorf("claim labels %v owners %v", c.Labels, c.OwnerReferences)
	}
	if c.Spec.Resources.Requests.Storage().String() != "1Gi" {
		t.Errorf("claim spec %+v", c.Spec)
	}
	for _, p := range e.pods(t) {
		vol := p.Spec.Volumes[0]
		if len(p.Spec.Volumes) != 1 || vol.Name != "data" || vol.PersistentVolumeClaim == nil || vol.PersistentVolumeClaim.ClaimName != "data-"+p.Name {
			t.Errorf("%s volumes %+v", p.Name, p.Spec.Volumes)
		}
	}
	if evs := e.events(); !hasEvent(evs, "Normal SuccessfulCreate create Claim data-web-0 Pod web-0 in StatefulSet web success") {
		t.Errorf("events %v", evs)
	}
	// Scaled down, the claims stay (Retain).
	e.update(t, func(s *apps.StatefulSet) { s.Spec.Replicas = ptr.To(int32(0)) })
	e.syncUntil(t, "pods gone", func() bool { return len(e.pods(t)) == 0 })
	e.settle()
	if n := len(e.claims(t)); n != 2 {
		t.Errorf("%d claims after the scale-down, want both retained", n)
	}
}

// TestClaimRetentionOwners: whenDeleted=Delete makes the set the claims'
// controller; whenScaled=Delete moves a condemned ordinal's claim to its
// pod before the pod goes.
func TestClaimRetentionOwners(t *testing.T) {
	del := apps.DeletePersistentVolumeClaimRetentionPolicyType
	retain := apps.RetainPersistentVolumeClaimRetentionPolicyType
	set := withClaims(newSet(2), apps.StatefulSetPersistentVolumeClaimRetentionPolicy{WhenDeleted: del, WhenScaled: del})
	e := newEnv(t, set)
	e.upTo(t, 2)
	e.syncUntil(t, "set owns claims", func() bool {
		cs := e.claims(t)
		return len(cs) == 2 && ownerUIDs(cs["data-web-0"]) == "uid-web" && ownerUIDs(cs["data-web-1"]) == "uid-web"
	})
	var web1 v1.Pod
	for _, p := range e.pods(t) {
		if p.Name == "web-1" {
			web1 = p
		}
	}
	// Watch the claim move to the pod before the pod's deletion.
	var movedBeforeDelete atomic.Bool
	e.client.PrependReactor("delete", "pods", func(a core.Action) (bool, runtime.Object, error) {
		if a.(core.DeleteAction).GetName() == "web-1" {
			c, err := e.client.Tracker().Get(v1.SchemeGroupVersion.WithResource("persistentvolumeclaims"), ns, "data-web-1")
			if err == nil && ownerUIDs(*c.(*v1.PersistentVolumeClaim)) == string(web1.UID) {
				movedBeforeDelete.Store(true)
			}
		}
		return false, nil, nil
	})
	e.update(t, func(s *apps.StatefulSet) { s.Spec.Replicas = ptr.To(int32(1)) })
	e.syncUntil(t, "web-1 gone", func() bool { return e.podNames(t) == "web-0" })
	cs := e.claims(t)
	if got := ownerUIDs(cs["data-web-1"]); got != string(web1.UID) || !movedBeforeDelete.Load() {
		t.Errorf("condemned claim owners %q (moved before the delete: %v), want the pod %s", got, movedBeforeDelete.Load(), web1.UID)
	}
	if got := ownerUIDs(cs["data-web-0"]); got != "uid-web" {
		t.Errorf("kept claim owners %q, want the set", got)
	}

	// Policy changed to Retain/Retain: the set's reference goes.
	e.update(t, func(s *apps.StatefulSet) {
		s.Spec.PersistentVolumeClaimRetentionPolicy = &apps.StatefulSetPersistentVolumeClaimRetentionPolicy{WhenDeleted: retain, WhenScaled: retain}
	})
	e.syncUntil(t, "owners dropped", func() bool { return ownerUIDs(e.claims(t)["data-web-0"]) == "" })

	// Unit checks of the table, including someone else's controller.
	s := withClaims(newSet(1), apps.StatefulSetPersistentVolumeClaimRetentionPolicy{WhenDeleted: del, WhenScaled: retain})
	pod := newPod(s, 0, "r")
	pod.UID = "p0"
	claim := claimsOf(s, 0)[0]
	if claimOwnersUpToDate(claim, s, pod) {
		t.Error("a claim without the set's reference is up to date under whenDeleted=Delete")
	}
	setClaimOwners(claim, s, pod)
	if ownerUIDs(*claim) != "uid-web" || !claimOwnersUpToDate(claim, s, pod) {
		t.Errorf("after setClaimOwners: %v", claim.OwnerReferences)
	}
	other := claimsOf(s, 0)[0]
	other.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Thing", Name: "x", UID: "other", Controller: ptr.To(true)}}
	if !claimOwnersUpToDate(other, s, pod) {
		t.Error("a claim with another controller must be left alone")
	}
}

// TestRollingUpdatePartition: a template change replaces pods from the
// highest ordinal down to the partition, each after the previous one is
// Ready again; lowering the partition finishes the rollout and the
// update revision becomes the current one.
func TestRollingUpdatePartition(t *testing.T) {
	e := newEnv(t, newSet(3))
	e.upTo(t, 3)
	rev1 := e.set(t).Status.CurrentRevision
	e.update(t, func(s *apps.StatefulSet) {
		s.Spec.Template.Spec.Containers[0].Image = "nginx:2"
		s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To(int32(1))
	})
	image := func(name string) string {
		for _, p := range e.pods(t) {
			if p.Name == name {
				return p.Spec.Containers[0].Image
			}
		}
		return ""
	}
	e.syncUntil(t, "web-2 replaced", func() bool { return image("web-2") == "nginx:2" })
	e.settle()
	if image("web-1") != "nginx:1" {
		t.Fatalf("web-1 replaced before web-2 was Ready")
	}
	e.ready(t, "web-2")
	e.syncUntil(t, "web-1 replaced", func() bool { return image("web-1") == "nginx:2" })
	e.ready(t, "web-1")
	e.settle()
	st := e.set(t).Status
	if image("web-0") != "nginx:1" || st.CurrentRevision != rev1 || st.UpdateRevision == rev1 || st.UpdatedReplicas != 2 || st.CurrentReplicas != 1 {
		t.Fatalf("partition 1: web-0 %s, status %+v", image("web-0"), st)
	}
	// A missing pod below the partition comes back at the current revision.
	if err := e.client.CoreV1().Pods(ns).Delete(e.ctx, "web-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.syncUntil(t, "web-0 back", func() bool { return image("web-0") != "" })
	if image("web-0") != "nginx:1" {
		t.Errorf("web-0 below the partition recreated with %s", image("web-0"))
	}
	e.ready(t, "web-0")
	e.update(t, func(s *apps.StatefulSet) { s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To(int32(0)) })
	e.syncUntil(t, "web-0 replaced", func() bool { return image("web-0") == "nginx:2" })
	e.ready(t, "web-0")
	e.syncUntil(t, "rollout complete", func() bool {
		st := e.set(t).Status
		return st.CurrentRevision == st.UpdateRevision && st.CurrentReplicas == 3 && st.UpdatedReplicas == 3
	})
	e.mu.Lock()
	order := strings.Join(e.deleted, ",")
	e.mu.Unlock()
	if order != "web-2,web-1,web-0,web-0" {
		t.Errorf("deletions %s, want web-2,web-1 (rollout), web-0 (by hand), web-0 (rollout)", order)
	}
}

// TestMaxUnavailable: maxUnavailable 2 replaces two pods at a time.
func TestMaxUnavailable(t *testing.T) {
	e := newEnv(t, newSet(4))
	e.upTo(t, 4)
	two := intstrFromInt(2)
	e.update(t, func(s *apps.StatefulSet) {
		s.Spec.Template.Spec.Containers[0].Image = "nginx:2"
		s.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = &two
	})
	e.syncUntil(t, "two deleted", func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return len(e.deleted) == 2
	})
	e.settle()
	e.mu.Lock()
	order := strings.Join(e.deleted, ",")
	e.mu.Unlock()
	if order != "web-3,web-2" {
		t.Errorf("deleted %s, want web-3,web-2 and no more while they are unavailable", order)
	}
}

// TestOnDelete: nothing is replaced until deleted by hand.
func TestOnDelete(t *testing.T) {
	set := newSet(2)
	set.Spec.UpdateStrategy = apps.StatefulSetUpdateStrategy{Type: apps.OnDeleteStatefulSetStrategyType}
	e := newEnv(t, set)
	e.upTo(t, 2)
	e.update(t, func(s *apps.StatefulSet) { s.Spec.Template.Spec.Containers[0].Image = "nginx:2" })
	e.settle()
	for _, p := range e.pods(t) {
		if p.Spec.Containers[0].Image != "nginx:1" {
			t.Fatalf("OnDelete replaced %s", p.Name)
		}
	}
	if err := e.client.CoreV1().Pods(ns).Delete(e.ctx, "web-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.syncUntil(t, "web-1 on the new template", func() bool {
		for _, p := range e.pods(t) {
			if p.Name == "web-1" {
				return p.Spec.Containers[0].Image == "nginx:2"
			}
		}
		return false
	})
}

func (e *env) revisions(t *testing.T) []apps.ControllerRevision {
	t.Helper()
	l, err := e.client.AppsV1().ControllerRevisions(ns).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(l.Items, func(i, j int) bool { return l.Items[i].Revision < l.Items[j].Revision })
	return l.Items
}

// TestRevisions: the revision is named for the hash of its data, holds
// the template patch kubectl applies; an undo renumbers the old revision
// instead of making a new one; history beyond the limit goes.
func TestRevisions(t *testing.T) {
	set := newSet(1)
	set.Spec.RevisionHistoryLimit = ptr.To(int32(1))
	set.Annotations = map[string]string{"kubernetes.io/change-cause": "first"}
	e := newEnv(t, set)
	e.upTo(t, 1)
	revs := e.revisions(t)
	if len(revs) != 1 {
		t.Fatalf("%d revisions", len(revs))
	}
	patch, _ := history.TemplatePatch(set)
	zero := int32(0)
	if want := "web-" + history.HashData(patch, &zero); revs[0].Name != want || string(revs[0].Data.Raw) != string(patch) || revs[0].Revision != 1 {
		t.Errorf("revision %s (want %s) data %s", revs[0].Name, want, revs[0].Data.Raw)
	}
	if revs[0].Labels["app"] != "web" || revs[0].Annotations["kubernetes.io/change-cause"] != "first" || metav1.GetControllerOf(&revs[0]).UID != "uid-web" {
		t.Errorf("revision meta %+v", revs[0].ObjectMeta)
	}
	if e.set(t).Status.CollisionCount == nil {
		t.Error("status.collisionCount not set")
	}
	for i, img := range []string{"nginx:2", "nginx:3"} {
		e.update(t, func(s *apps.StatefulSet) { s.Spec.Template.Spec.Containers[0].Image = img })
		e.syncUntil(t, "rolled to "+img, func() bool {
			e.readyAll(t)
			st := e.set(t).Status
			ps := e.pods(t)
			return len(ps) == 1 && ps[0].Spec.Containers[0].Image == img && st.CurrentRevision == st.UpdateRevision && st.ObservedGeneration == int64(i+2)
		})
	}
	// Limit 1: revision 1 pruned, 2 kept (history), 3 live.
	e.syncUntil(t, "pruned", func() bool { return len(e.revisions(t)) == 2 })
	revs = e.revisions(t)
	if revs[0].Revision != 2 || revs[1].Revision != 3 {
		t.Fatalf("revisions %d %d, want 2 3", revs[0].Revision, revs[1].Revision)
	}
	// Undo as kubectl does: patch revision 2's data onto the set.
	cur := e.set(t)
	orig, _ := json.Marshal(cur)
	undone, err := strategicpatch.StrategicMergePatch(orig, revs[0].Data.Raw, &apps.StatefulSet{})
	if err != nil {
		t.Fatal(err)
	}
	var back apps.StatefulSet
	if err := json.Unmarshal(undone, &back); err != nil {
		t.Fatal(err)
	}
	e.update(t, func(s *apps.StatefulSet) { s.Spec.Template = back.Spec.Template })
	e.syncUntil(t, "revision 2 renumbered 4", func() bool {
		r := e.revisions(t)
		return len(r) == 2 && r[1].Name == revs[0].Name && r[1].Revision == 4
	})
	e.syncUntil(t, "undone", func() bool {
		e.readyAll(t)
		ps := e.pods(t)
		return len(ps) == 1 && ps[0].Spec.Containers[0].Image == "nginx:2" && e.set(t).Status.CurrentRevision == revs[0].Name
	})
}

func intstrFromInt(n int32) intstr.IntOrString { return intstr.FromInt32(n) }
