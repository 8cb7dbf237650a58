package deployment

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
)

const ns = "default"

type env struct {
	t       *testing.T
	ctx     context.Context
	client  *fake.Clientset
	factory informers.SharedInformerFactory
	c       *Controller
	rec     *record.FakeRecorder

	mu    sync.Mutex
	clock time.Time
	seq   int
}

func newEnv(t *testing.T, objs ...runtime.Object) *env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	e := &env{t: t, ctx: ctx, clock: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	e.client = fake.NewSimpleClientset(objs...)
	// Play the API server's part: UIDs and creation timestamps on create.
	e.client.PrependReactor("create", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ca, ok := a.(k8stesting.CreateAction)
		if !ok {
			return false, nil, nil
		}
		m, err := meta.Accessor(ca.GetObject())
		if err != nil {
			return false, nil, nil
		}
		e.mu.Lock()
		e.seq++
		if m.GetUID() == "" {
			m.SetUID(types.UID(fmt.Sprintf("uid-%d", e.seq)))
		}
		if ts := m.GetCreationTimestamp(); ts.IsZero() {
			m.SetCreationTimestamp(metav1.NewTime(e.clock.Add(time.Duration(e.seq) * time.Second)))
		}
		e.mu.Unlock()
		return false, nil, nil
	})
	e.factory = informers.NewSharedInformerFactory(e.client, 0)
	e.rec = record.NewFakeRecorder(1000)
	e.c = New(e.client, e.factory, e.rec)
	e.c.now = func() time.Time { e.mu.Lock(); defer e.mu.Unlock(); return e.clock }
	e.factory.Start(ctx.Done())
	e.factory.WaitForCacheSync(ctx.Done())
	t.Cleanup(func() {
		cancel()
		e.c.queue.ShutDown()
		e.factory.Shutdown()
	})
	return e
}

func (e *env) advance(d time.Duration) {
	e.mu.Lock()
	e.clock = e.clock.Add(d)
	e.mu.Unlock()
}

func newDeployment(name string, n int32, image string) *apps.Deployment {
	pds := int32(600)
	return &apps.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("d-" + name), Generation: 1},
		Spec: apps.DeploymentSpec{
			Replicas: &n,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: image}}},
			},
			Strategy:                apps.DeploymentStrategy{Type: apps.RollingUpdateDeploymentStrategyType},
			ProgressDeadlineSeconds: &pds,
		},
	}
}

func rolling(d *apps.Deployment, surge, unavailable intstr.IntOrString) *apps.Deployment {
	d.Spec.Strategy.RollingUpdate = &apps.RollingUpdateDeployment{MaxSurge: &surge, MaxUnavailable: &unavailable}
	return d
}

// settle waits until the informer caches show what the fake API holds.
func (e *env) settle() {
	e.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if e.cachesMatch() {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	e.t.Fatal("informer caches did not catch up with the fake API")
}

func (e *env) cachesMatch() bool {
	rsAPI, _ := e.client.AppsV1().ReplicaSets(ns).List(e.ctx, metav1.ListOptions{})
	rsCache, _ := e.c.rsLister.ReplicaSets(ns).List(labels.Everything())
	if len(rsAPI.Items) != len(rsCache) {
		return false
	}
	for _, rs := range rsCache {
		found := false
		for i := range rsAPI.Items {
			if rsAPI.Items[i].Name == rs.Name {
				found = apiequality.Semantic.DeepEqual(&rsAPI.Items[i], rs)
			}
		}
		if !found {
			return false
		}
	}
	dAPI, _ := e.client.AppsV1().Deployments(ns).List(e.ctx, metav1.ListOptions{})
	for i := range dAPI.Items {
		got, err := e.c.dLister.Deployments(ns).Get(dAPI.Items[i].Name)
		if err != nil || !apiequality.Semantic.DeepEqual(&dAPI.Items[i], got) {
			return false
		}
	}
	pAPI, _ := e.client.CoreV1().Pods(ns).List(e.ctx, metav1.ListOptions{})
	pCache, _ := e.c.podLister.Pods(ns).List(labels.Everything())
	return len(pAPI.Items) == len(pCache)
}

func writes(c *fake.Clientset) int {
	n := 0
	for _, a := range c.Actions() {
		switch a.GetVerb() {
		case "create", "update", "delete", "patch":
			n++
		}
	}
	return n
}

// step runs one reconcile of the deployment and waits for the caches.
func (e *env) step(name string) {
	e.t.Helper()
	e.settle()
	if err := e.c.syncDeployment(e.ctx, ns+"/"+name); err != nil {
		e.t.Fatalf("sync %s: %v", name, err)
	}
	e.settle()
}

// stabilize reconciles until a pass writes nothing; check runs after each pass.
func (e *env) stabilize(name string, check func()) {
	e.t.Helper()
	for i := 0; i < 30; i++ {
		before := writes(e.client)
		e.step(name)
		if check != nil {
			check()
		}
		if writes(e.client) == before {
			return
		}
	}
	e.t.Fatal("deployment did not stabilize")
}

func (e *env) deployment(name string) *apps.Deployment {
	e.t.Helper()
	d, err := e.client.AppsV1().Deployments(ns).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return d
}

func (e *env) updateDeployment(name string, mutate func(d *apps.Deployment)) {
	e.t.Helper()
	d := e.deployment(name)
	mutate(d)
	d.Generation++
	if _, err := e.client.AppsV1().Deployments(ns).Update(e.ctx, d, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// replicaSets returns the RSs sorted oldest first.
func (e *env) replicaSets() []apps.ReplicaSet {
	e.t.Helper()
	l, err := e.client.AppsV1().ReplicaSets(ns).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	sort.Slice(l.Items, func(i, j int) bool {
		return l.Items[i].CreationTimestamp.Before(&l.Items[j].CreationTimestamp)
	})
	return l.Items
}

func (e *env) rsForImage(image string) *apps.ReplicaSet {
	for _, rs := range e.replicaSets() {
		if rs.Spec.Template.Spec.Containers[0].Image == image {
			rs := rs
			return &rs
		}
	}
	return nil
}

// simulateRSController plays a ReplicaSet controller whose pods are
// instantly Ready and available: status follows spec.
func (e *env) simulateRSController() {
	e.t.Helper()
	for _, rs := range e.replicaSets() {
		n := *rs.Spec.Replicas
		if rs.Status.Replicas == n && rs.Status.AvailableReplicas == n {
			continue
		}
		rs.Status.Replicas, rs.Status.ReadyReplicas, rs.Status.AvailableReplicas = n, n, n
		rs.Status.ObservedGeneration = rs.Generation
		if _, err := e.client.AppsV1().ReplicaSets(ns).UpdateStatus(e.ctx, &rs, metav1.UpdateOptions{}); err != nil {
			e.t.Fatal(err)
		}
	}
	e.settle()
}

// counts returns total desired pods and pods that are really available
// (a RS scaled below its available count has fewer available pods).
func (e *env) counts() (total, available int32) {
	for _, rs := range e.replicaSets() {
		total += *rs.Spec.Replicas
		a := rs.Status.AvailableReplicas
		if *rs.Spec.Replicas < a {
			a = *rs.Spec.Replicas
		}
		available += a
	}
	return
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
	for _, e := range evs {
		if e == want {
			return true
		}
	}
	return false
}

func cond(d *apps.Deployment, t apps.DeploymentConditionType) *apps.DeploymentCondition {
	return getCondition(&d.Status, t)
}

func wantCond(t *testing.T, d *apps.Deployment, ct apps.DeploymentConditionType, status v1.ConditionStatus, reason string) {
	t.Helper()
	c := cond(d, ct)
	if c == nil {
		t.Fatalf("no %s condition; status %+v", ct, d.Status)
	}
	if c.Status != status || c.Reason != reason {
		t.Fatalf("%s condition = %s/%s (%s), want %s/%s", ct, c.Status, c.Reason, c.Message, status, reason)
	}
}

// rolloutToReady creates d and drives it to a complete rollout.
func (e *env) rolloutToReady(d *apps.Deployment) {
	e.t.Helper()
	if _, err := e.client.AppsV1().Deployments(ns).Create(e.ctx, d, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.stabilize(d.Name, nil)
	for i := 0; i < 20; i++ {
		e.simulateRSController()
		before := writes(e.client)
		e.stabilize(d.Name, nil)
		if writes(e.client) == before {
			break
		}
	}
	got := e.deployment(d.Name)
	if !deploymentComplete(got, &got.Status) {
		e.t.Fatalf("rollout of %s not complete: %+v", d.Name, got.Status)
	}
}

func TestNewDeploymentCreatesReplicaSet(t *testing.T) {
	e := newEnv(t)
	d := newDeployment("web", 3, "web:1")
	d.Annotations = map[string]string{ChangeCauseAnnotation: "first"}
	if _, err := e.client.AppsV1().Deployments(ns).Create(e.ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.step("web")

	rss := e.replicaSets()
	if len(rss) != 1 {
		t.Fatalf("got %d replica sets, want 1", len(rss))
	}
	rs := rss[0]
	hash := ComputeHash(&d.Spec.Template, nil)
	if rs.Name != "web-"+hash {
		t.Fatalf("rs name %q, want web-%s", rs.Name, hash)
	}
	if *rs.Spec.Replicas != 3 {
		t.Fatalf("rs replicas %d, want 3", *rs.Spec.Replicas)
	}
	if rs.Labels[DefaultPodTemplateHashKey] != hash || rs.Spec.Template.Labels[DefaultPodTemplateHashKey] != hash ||
		rs.Spec.Selector.MatchLabels[DefaultPodTemplateHashKey] != hash || rs.Spec.Selector.MatchLabels["app"] != "web" {
		t.Fatalf("hash label missing: labels %v template %v selector %v", rs.Labels, rs.Spec.Template.Labels, rs.Spec.Selector.MatchLabels)
	}
	ref := metav1.GetControllerOf(&rs)
	if ref == nil || ref.UID != d.UID || ref.Kind != "Deployment" || ref.APIVersion != "apps/v1" {
		t.Fatalf("controller ref %+v", ref)
	}
	for k, v := range map[string]string{RevisionAnnotation: "1", DesiredReplicasAnnotation: "3", MaxReplicasAnnotation: "4", ChangeCauseAnnotation: "first"} {
		if rs.Annotations[k] != v {
			t.Errorf("rs annotation %s = %q, want %q", k, rs.Annotations[k], v)
		}
	}
	if evs := e.events(); !hasEvent(evs, "Normal ScalingReplicaSet Scaled up replica set "+rs.Name+" from 0 to 3") {
		t.Fatalf("events %q", evs)
	}
	got := e.deployment("web")
	wantCond(t, got, apps.DeploymentProgressing, v1.ConditionTrue, NewReplicaSetReason)
	if got.Annotations[RevisionAnnotation] != "1" {
		t.Fatalf("deployment revision %q", got.Annotations[RevisionAnnotation])
	}
	e.stabilize("web", nil)
	got = e.deployment("web")
	wantCond(t, got, apps.DeploymentAvailable, v1.ConditionFalse, MinimumReplicasUnavailable)
	if got.Status.UnavailableReplicas != 3 || got.Status.ObservedGeneration != 1 {
		t.Fatalf("status %+v", got.Status)
	}

	e.simulateRSController()
	e.stabilize("web", nil)
	got = e.deployment("web")
	s := got.Status
	if s.Replicas != 3 || s.UpdatedReplicas != 3 || s.ReadyReplicas != 3 || s.AvailableReplicas != 3 || s.UnavailableReplicas != 0 || s.ObservedGeneration != 1 {
		t.Fatalf("status %+v", s)
	}
	wantCond(t, got, apps.DeploymentAvailable, v1.ConditionTrue, MinimumReplicasAvailable)
	wantCond(t, got, apps.DeploymentProgressing, v1.ConditionTrue, NewRSAvailableReason)
	if len(e.replicaSets()) != 1 {
		t.Fatal("extra replica sets created")
	}
}

func TestComputeHashStable(t *testing.T) {
	d := newDeployment("web", 1, "web:1")
	h1 := ComputeHash(&d.Spec.Template, nil)
	if h1 != ComputeHash(d.Spec.Template.DeepCopy(), nil) {
		t.Fatal("hash not deterministic")
	}
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	for _, r := range h1 {
		if !strings.ContainsRune(alphabet, r) {
			t.Fatalf("hash %q has %q outside SafeEncodeString alphabet", h1, r)
		}
	}
	one := int32(1)
	if ComputeHash(&d.Spec.Template, &one) == h1 {
		t.Fatal("collisionCount does not change the hash")
	}
	d2 := newDeployment("web", 1, "web:2")
	if ComputeHash(&d2.Spec.Template, nil) == h1 {
		t.Fatal("different templates share a hash")
	}
}

func TestResolveFenceposts(t *testing.T) {
	pct := intstr.FromString("25%")
	for _, tc := range []struct {
		replicas, surge, unavailable int32
	}{{3, 1, 0}, {4, 1, 1}, {5, 2, 1}, {10, 3, 2}, {1, 1, 0}} {
		s, u, err := ResolveFenceposts(&pct, &pct, tc.replicas)
		if err != nil || s != tc.surge || u != tc.unavailable {
			t.Errorf("replicas %d: surge %d unavailable %d (%v), want %d %d", tc.replicas, s, u, err, tc.surge, tc.unavailable)
		}
	}
	zero := intstr.FromInt32(0)
	if s, u, _ := ResolveFenceposts(&zero, &zero, 3); s != 0 || u != 1 {
		t.Errorf("0/0 resolved to %d/%d, want 0/1", s, u)
	}
}

// runRollout drives a template change through to the end, checking after
// every controller pass and every simulated RS-controller pass that the
// pod total never exceeds replicas+surge and availability never drops
// below replicas-unavailable.
func runRollout(t *testing.T, n int32, surge, unavailable intstr.IntOrString, wantSurge, wantUnavailable int32) {
	e := newEnv(t)
	e.rolloutToReady(rolling(newDeployment("web", n, "web:1"), surge, unavailable))
	oldRS := e.rsForImage("web:1")

	e.updateDeployment("web", func(d *apps.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "web:2" })
	check := func() {
		total, avail := e.counts()
		if total > n+wantSurge {
			t.Fatalf("%d pods desired, limit %d", total, n+wantSurge)
		}
		if avail < n-wantUnavailable {
			t.Fatalf("%d pods available, minimum %d", avail, n-wantUnavailable)
		}
	}
	// First pass: create the new RS at maxSurge and, because the old pods
	// are all available, shrink the old RS by maxUnavailable.
	e.step("web")
	newRS := e.rsForImage("web:2")
	if newRS == nil {
		t.Fatal("no new replica set")
	}
	if *newRS.Spec.Replicas != wantSurge || *e.rsForImage("web:1").Spec.Replicas != n-wantUnavailable {
		t.Fatalf("after first pass new=%d old=%d, want %d %d", *newRS.Spec.Replicas, *e.rsForImage("web:1").Spec.Replicas, wantSurge, n-wantUnavailable)
	}
	check()
	// Second pass, new pods not ready yet: the old RS may not shrink further;
	// with maxUnavailable 0 nothing may move at all.
	before := len(e.client.Actions())
	e.step("web")
	if *e.rsForImage("web:1").Spec.Replicas != n-wantUnavailable {
		t.Fatal("old replica set shrank while new pods were unavailable")
	}
	if wantUnavailable == 0 {
		for _, a := range e.client.Actions()[before:] {
			if a.GetResource().Resource == "replicasets" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
				t.Fatalf("unexpected replica set %s", a.GetVerb())
			}
		}
	}
	check()
	for i := 0; i < 50; i++ {
		e.stabilize("web", check)
		e.simulateRSController()
		check()
		d := e.deployment("web")
		if *e.rsForImage("web:2").Spec.Replicas == n && *e.rsForImage("web:1").Spec.Replicas == 0 && deploymentComplete(d, &d.Status) {
			break
		}
	}
	e.stabilize("web", check)
	d := e.deployment("web")
	if *e.rsForImage("web:2").Spec.Replicas != n || *e.rsForImage("web:1").Spec.Replicas != 0 {
		t.Fatalf("rollout did not finish: new=%d old=%d", *e.rsForImage("web:2").Spec.Replicas, *e.rsForImage("web:1").Spec.Replicas)
	}
	if d.Status.UpdatedReplicas != n || d.Status.AvailableReplicas != n || d.Status.Replicas != n || d.Status.ObservedGeneration != d.Generation {
		t.Fatalf("final status %+v", d.Status)
	}
	wantCond(t, d, apps.DeploymentProgressing, v1.ConditionTrue, NewRSAvailableReason)
	wantCond(t, d, apps.DeploymentAvailable, v1.ConditionTrue, MinimumReplicasAvailable)
	if got := e.rsForImage("web:2").Annotations[RevisionAnnotation]; got != "2" {
		t.Fatalf("new rs revision %q", got)
	}
	if got := e.rsForImage("web:1").Annotations[RevisionAnnotation]; got != "1" {
		t.Fatalf("old rs revision %q", got)
	}
	if d.Annotations[RevisionAnnotation] != "2" {
		t.Fatalf("deployment revision %q", d.Annotations[RevisionAnnotation])
	}
	evs := e.events()
	if !hasEvent(evs, fmt.Sprintf("Normal ScalingReplicaSet Scaled down replica set %s from %d to %d", oldRS.Name, n, n-wantUnavailable)) &&
		!hasEvent(evs, fmt.Sprintf("Normal ScalingReplicaSet Scaled down replica set %s from %d to %d", oldRS.Name, n, n-1)) {
		t.Fatalf("no scale-down event for %s in %q", oldRS.Name, evs)
	}
}

func TestRollingUpdateSurge1Unavailable0(t *testing.T) {
	runRollout(t, 3, intstr.FromInt32(1), intstr.FromInt32(0), 1, 0)
}

func TestRollingUpdatePercent(t *testing.T) {
	pct := intstr.FromString("25%")
	for _, tc := range []struct{ n, surge, unavailable int32 }{{4, 1, 1}, {5, 2, 1}, {3, 1, 0}} {
		t.Run(fmt.Sprint(tc.n), func(t *testing.T) { runRollout(t, tc.n, pct, pct, tc.surge, tc.unavailable) })
	}
}

func TestRecreate(t *testing.T) {
	e := newEnv(t)
	d := newDeployment("web", 3, "web:1")
	d.Spec.Strategy = apps.DeploymentStrategy{Type: apps.RecreateDeploymentStrategyType}
	e.rolloutToReady(d)
	oldRS := e.rsForImage("web:1")
	isController := true
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-old-1", Namespace: ns, Labels: oldRS.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: oldRS.Name, UID: oldRS.UID, Controller: &isController}}},
		Status: v1.PodStatus{Phase: v1.PodRunning},
	}
	if _, err := e.client.CoreV1().Pods(ns).Create(e.ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.updateDeployment("web", func(d *apps.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "web:2" })

	e.stabilize("web", nil)
	if got := *e.rsForImage("web:1").Spec.Replicas; got != 0 {
		t.Fatalf("old rs replicas %d, want 0", got)
	}
	if e.rsForImage("web:2") != nil {
		t.Fatal("new rs created while old pods are still counted")
	}
	e.simulateRSController() // old RS status -> 0, but its pod object remains
	e.stabilize("web", nil)
	if e.rsForImage("web:2") != nil {
		t.Fatal("new rs created while an old pod is still running")
	}
	if err := e.client.CoreV1().Pods(ns).Delete(e.ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.stabilize("web", nil)
	newRS := e.rsForImage("web:2")
	if newRS == nil || *newRS.Spec.Replicas != 3 {
		t.Fatalf("new rs %+v, want 3 replicas", newRS)
	}
	if !hasEvent(e.events(), "Normal ScalingReplicaSet Scaled up replica set "+newRS.Name+" from 0 to 3") {
		t.Fatal("no scale-up event")
	}
	e.simulateRSController()
	e.stabilize("web", nil)
	got := e.deployment("web")
	if !deploymentComplete(got, &got.Status) {
		t.Fatalf("status %+v", got.Status)
	}
	wantCond(t, got, apps.DeploymentProgressing, v1.ConditionTrue, NewRSAvailableReason)
}

func TestRevisionHistoryCleanupAndRollback(t *testing.T) {
	e := newEnv(t)
	d := newDeployment("web", 2, "web:1")
	limit := int32(1)
	d.Spec.RevisionHistoryLimit = &limit
	e.rolloutToReady(d)
	finish := func() {
		for i := 0; i < 20; i++ {
			e.stabilize("web", nil)
			e.simulateRSController()
			d := e.deployment("web")
			if deploymentComplete(d, &d.Status) && getCondition(&d.Status, apps.DeploymentProgressing).Reason == NewRSAvailableReason {
				break
			}
		}
		e.stabilize("web", nil)
	}
	e.updateDeployment("web", func(d *apps.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "web:2" })
	finish()
	v2Template := e.deployment("web").Spec.Template.DeepCopy()
	e.updateDeployment("web", func(d *apps.Deployment) {
		d.Spec.Template.Spec.Containers[0].Image = "web:3"
		d.Annotations = map[string]string{ChangeCauseAnnotation: "kubectl set image web:3"}
	})
	finish()

	if e.rsForImage("web:1") != nil {
		t.Fatal("revision 1 replica set not cleaned up with revisionHistoryLimit 1")
	}
	v2, v3 := e.rsForImage("web:2"), e.rsForImage("web:3")
	if v2 == nil || v3 == nil {
		t.Fatalf("want revisions 2 and 3 kept, have %d replica sets", len(e.replicaSets()))
	}
	if v2.Annotations[RevisionAnnotation] != "2" || v3.Annotations[RevisionAnnotation] != "3" {
		t.Fatalf("revisions %q %q", v2.Annotations[RevisionAnnotation], v3.Annotations[RevisionAnnotation])
	}
	if v3.Annotations[ChangeCauseAnnotation] != "kubectl set image web:3" {
		t.Fatalf("change-cause not copied: %v", v3.Annotations)
	}

	// kubectl rollout undo: the template goes back to revision 2's.
	e.updateDeployment("web", func(d *apps.Deployment) { d.Spec.Template = *v2Template })
	finish()
	rss := e.replicaSets()
	if len(rss) != 2 {
		t.Fatalf("%d replica sets after rollback, want 2 (reused)", len(rss))
	}
	v2 = e.rsForImage("web:2")
	if v2.Annotations[RevisionAnnotation] != "4" || v2.Annotations[RevisionHistoryAnnotation] != "2" {
		t.Fatalf("rolled-back rs annotations %v", v2.Annotations)
	}
	if *v2.Spec.Replicas != 2 || *e.rsForImage("web:3").Spec.Replicas != 0 {
		t.Fatal("rollback did not move replicas back to revision 2's replica set")
	}
	if got := e.deployment("web").Annotations[RevisionAnnotation]; got != "4" {
		t.Fatalf("deployment revision %q, want 4", got)
	}
}

func TestPausedOnlyScales(t *testing.T) {
	e := newEnv(t)
	e.rolloutToReady(newDeployment("web", 3, "web:1"))
	e.updateDeployment("web", func(d *apps.Deployment) {
		d.Spec.Paused = true
		d.Spec.Template.Spec.Containers[0].Image = "web:2"
		*d.Spec.Replicas = 5
	})
	e.stabilize("web", nil)
	if len(e.replicaSets()) != 1 {
		t.Fatal("paused deployment rolled out a new replica set")
	}
	if got := *e.rsForImage("web:1").Spec.Replicas; got != 5 {
		t.Fatalf("paused deployment not scaled: %d", got)
	}
	d := e.deployment("web")
	wantCond(t, d, apps.DeploymentProgressing, v1.ConditionUnknown, PausedDeployReason)
	if d.Status.ObservedGeneration != d.Generation {
		t.Fatalf("observedGeneration %d, generation %d", d.Status.ObservedGeneration, d.Generation)
	}

	e.updateDeployment("web", func(d *apps.Deployment) { d.Spec.Paused = false })
	e.step("web")
	if e.rsForImage("web:2") == nil {
		t.Fatal("resumed deployment did not start the rollout")
	}
	e.stabilize("web", nil)
	if c := cond(e.deployment("web"), apps.DeploymentProgressing); c == nil || c.Reason == PausedDeployReason {
		t.Fatalf("progressing condition after resume: %+v", c)
	}
}

func TestScalingEventIsProportional(t *testing.T) {
	e := newEnv(t)
	e.rolloutToReady(rolling(newDeployment("web", 10, "web:1"), intstr.FromInt32(3), intstr.FromInt32(2)))
	e.updateDeployment("web", func(d *apps.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "web:2" })
	e.step("web") // new RS created at 3 (surge), old RS down by 2 -> 8
	if *e.rsForImage("web:2").Spec.Replicas != 3 || *e.rsForImage("web:1").Spec.Replicas != 8 {
		t.Fatalf("mid-rollout sizes new=%d old=%d", *e.rsForImage("web:2").Spec.Replicas, *e.rsForImage("web:1").Spec.Replicas)
	}
	e.updateDeployment("web", func(d *apps.Deployment) { *d.Spec.Replicas = 15 })
	e.step("web")
	newN, oldN := *e.rsForImage("web:2").Spec.Replicas, *e.rsForImage("web:1").Spec.Replicas
	// 11 pods sized for max 13 become max 18: +7. Proportions round(8*18/13)-8=3
	// and round(3*18/13)-3=1; the leftover 3 goes to the largest RS.
	if newN != 4 || oldN != 14 {
		t.Fatalf("after scale to 15: new=%d old=%d, want 4 and 14", newN, oldN)
	}
	for _, name := range []string{e.rsForImage("web:1").Name, e.rsForImage("web:2").Name} {
		rs, _ := e.client.AppsV1().ReplicaSets(ns).Get(e.ctx, name, metav1.GetOptions{})
		if rs.Annotations[DesiredReplicasAnnotation] != "15" || rs.Annotations[MaxReplicasAnnotation] != "18" {
			t.Fatalf("%s annotations %v", name, rs.Annotations)
		}
	}
}

func TestProgressDeadlineExceeded(t *testing.T) {
	e := newEnv(t)
	d := newDeployment("web", 2, "web:1")
	pds := int32(5)
	d.Spec.ProgressDeadlineSeconds = &pds
	if _, err := e.client.AppsV1().Deployments(ns).Create(e.ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.stabilize("web", nil)
	got := e.deployment("web")
	wantCond(t, got, apps.DeploymentProgressing, v1.ConditionTrue, NewReplicaSetReason)

	// Nothing changes before the deadline; the controller asks to be woken
	// up when it passes.
	e.advance(2 * time.Second)
	e.stabilize("web", nil)
	got = e.deployment("web")
	wantCond(t, got, apps.DeploymentProgressing, v1.ConditionTrue, NewReplicaSetReason)
	if after := e.c.requeueStuck(got, got.Status); after != 4*time.Second {
		t.Fatalf("requeue after %v, want 4s (3s left + 1s)", after)
	}

	e.advance(4 * time.Second)
	e.stabilize("web", nil)
	got = e.deployment("web")
	wantCond(t, got, apps.DeploymentProgressing, v1.ConditionFalse, TimedOutReason)
	if !hasEvent(e.events(), `Warning ProgressDeadlineExceeded ReplicaSet "`+e.replicaSets()[0].Name+`" has timed out progressing.`) {
		t.Fatal("no ProgressDeadlineExceeded event")
	}
	if after := e.c.requeueStuck(got, got.Status); after != -1 {
		t.Fatalf("timed-out deployment requeued after %v", after)
	}

	// Pods becoming available later completes the rollout.
	e.simulateRSController()
	e.stabilize("web", nil)
	got = e.deployment("web")
	wantCond(t, got, apps.DeploymentProgressing, v1.ConditionTrue, NewRSAvailableReason)
}

func TestAdoptsOrphanReplicaSet(t *testing.T) {
	d := newDeployment("web", 2, "web:1")
	hash := ComputeHash(&d.Spec.Template, nil)
	two := int32(2)
	orphan := &apps.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web-" + hash, Namespace: ns, UID: "orphan",
			Labels: map[string]string{"app": "web", DefaultPodTemplateHashKey: hash}},
		Spec: apps.ReplicaSetSpec{Replicas: &two,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", DefaultPodTemplateHashKey: hash}},
			Template: *d.Spec.Template.DeepCopy()},
	}
	orphan.Spec.Template.Labels = map[string]string{"app": "web", DefaultPodTemplateHashKey: hash}
	e := newEnv(t, orphan, d)
	e.stabilize("web", nil)
	rss := e.replicaSets()
	if len(rss) != 1 {
		t.Fatalf("%d replica sets, want the orphan adopted", len(rss))
	}
	if ref := metav1.GetControllerOf(&rss[0]); ref == nil || ref.UID != d.UID {
		t.Fatalf("orphan not adopted: %+v", rss[0].OwnerReferences)
	}
	if rss[0].Annotations[RevisionAnnotation] != "1" {
		t.Fatalf("adopted rs annotations %v", rss[0].Annotations)
	}
}

func TestRunReconcilesFromEvents(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan struct{})
	go func() { e.c.Run(ctx, 2); close(done) }()
	defer func() { cancel(); <-done }()

	d := newDeployment("api", 2, "api:1")
	if _, err := e.client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := "api-" + ComputeHash(&d.Spec.Template, nil)
	waitFor(t, func() bool {
		rs, err := e.client.AppsV1().ReplicaSets(ns).Get(ctx, want, metav1.GetOptions{})
		return err == nil && *rs.Spec.Replicas == 2
	})
	// RS status changes (the ReplicaSet controller's work) drive the status.
	e.simulateRSController()
	waitFor(t, func() bool {
		got, err := e.client.AppsV1().Deployments(ns).Get(ctx, "api", metav1.GetOptions{})
		return err == nil && got.Status.AvailableReplicas == 2 && deploymentComplete(got, &got.Status)
	})
	// Scaling goes through the watch too.
	e.updateDeployment("api", func(d *apps.Deployment) { *d.Spec.Replicas = 4 })
	waitFor(t, func() bool {
		rs, err := e.client.AppsV1().ReplicaSets(ns).Get(ctx, want, metav1.GetOptions{})
		return err == nil && *rs.Spec.Replicas == 4
	})
}

func waitFor(t *testing.T, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if f() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("condition not reached")
}

func TestEmptySelectorIsRefused(t *testing.T) {
	d := newDeployment("all", 1, "x:1")
	d.Spec.Selector = &metav1.LabelSelector{}
	e := newEnv(t, d)
	e.step("all")
	if n := len(e.replicaSets()); n != 0 {
		t.Fatalf("%d replica sets for a select-all deployment", n)
	}
	if got := e.deployment("all"); got.Status.ObservedGeneration != 1 {
		t.Fatalf("observedGeneration %d", got.Status.ObservedGeneration)
	}
	if evs := e.events(); len(evs) != 1 || !strings.HasPrefix(evs[0], "Warning SelectingAll") {
		t.Fatalf("events %q", evs)
	}
	d2 := newDeployment("nil", 1, "x:1")
	d2.Spec.Selector = nil
	if _, err := e.client.AppsV1().Deployments(ns).Create(e.ctx, d2, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.step("nil")
	if n := len(e.replicaSets()); n != 0 {
		t.Fatalf("%d replica sets for a deployment without selector", n)
	}
}

func TestReleasesReplicaSetThatNoLongerMatches(t *testing.T) {
	e := newEnv(t)
	e.rolloutToReady(newDeployment("web", 1, "web:1"))
	rs := e.replicaSets()[0]
	rs.Labels = map[string]string{"app": "other"}
	if _, err := e.client.AppsV1().ReplicaSets(ns).Update(e.ctx, &rs, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The released RS still holds the name web-<hash>, so creating the
	// replacement collides: the pass fails and bumps collisionCount.
	e.settle()
	if err := e.c.syncDeployment(e.ctx, ns+"/web"); err == nil {
		t.Fatal("expected the name collision to fail this pass")
	}
	e.settle()
	got, err := e.client.AppsV1().ReplicaSets(ns).Get(e.ctx, rs.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if metav1.GetControllerOf(got) != nil {
		t.Fatalf("replica set with foreign labels still owned: %+v", got.OwnerReferences)
	}
	d := e.deployment("web")
	if d.Status.CollisionCount == nil || *d.Status.CollisionCount != 1 {
		t.Fatalf("collisionCount %v, want 1", d.Status.CollisionCount)
	}
	e.stabilize("web", nil)
	rss := e.replicaSets()
	if len(rss) != 2 {
		t.Fatalf("%d replica sets, want released + replacement", len(rss))
	}
	want := "web-" + ComputeHash(&d.Spec.Template, d.Status.CollisionCount)
	repl, err := e.client.AppsV1().ReplicaSets(ns).Get(e.ctx, want, metav1.GetOptions{})
	if err != nil || *repl.Spec.Replicas != 1 {
		t.Fatalf("replacement %s: %v", want, err)
	}
}
