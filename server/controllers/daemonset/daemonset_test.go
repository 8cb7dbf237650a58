package daemonset

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
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
	"k8s.io/client-go/util/flowcontrol"

	"github.com/kelp-project/kelp/server/controllers"
)

const ns = "default"

func node(name string, labels map[string]string, taints ...v1.Taint) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: v1.NodeSpec{Taints: taints}}
}

func newDS(name string) *apps.DaemonSet {
	one := intstr.FromInt32(1)
	return &apps.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name), Generation: 1,
			Annotations: map[string]string{apps.DeprecatedTemplateGeneration: "1"}},
		Spec: apps.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox:1"}}},
			},
			UpdateStrategy: apps.DaemonSetUpdateStrategy{Type: apps.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &apps.RollingUpdateDaemonSet{MaxUnavailable: &one}},
		},
	}
}

func TestShouldRun(t *testing.T) {
	ds := newDS("x")
	ds.Spec.Template.Spec.NodeSelector = map[string]string{"disk": "ssd"}
	ds.Spec.Template.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
			MatchExpressions: []v1.NodeSelectorRequirement{{Key: "zone", Operator: v1.NodeSelectorOpNotIn, Values: []string{"b"}}},
		}}}}}
	ds.Spec.Template.Spec.Tolerations = []v1.Toleration{{Key: "dedicated", Operator: v1.TolerationOpEqual, Value: "infra", Effect: v1.TaintEffectNoSchedule}}
	ssd := map[string]string{"disk": "ssd"}
	for _, tc := range []struct {
		name             string
		node             *v1.Node
		run, keepIfThere bool
	}{
		{"matching node", node("n", ssd), true, true},
		{"nodeSelector mismatch", node("n", map[string]string{"disk": "hdd"}), false, false},
		{"affinity excludes zone", node("n", map[string]string{"disk": "ssd", "zone": "b"}), false, false},
		{"tolerated NoSchedule", node("n", ssd, v1.Taint{Key: "dedicated", Value: "infra", Effect: v1.TaintEffectNoSchedule}), true, true},
		{"untolerated NoSchedule keeps a running pod", node("n", ssd, v1.Taint{Key: "gpu", Effect: v1.TaintEffectNoSchedule}), false, true},
		{"untolerated NoExecute removes it", node("n", ssd, v1.Taint{Key: "gpu", Effect: v1.TaintEffectNoExecute}), false, false},
		{"PreferNoSchedule ignored", node("n", ssd, v1.Taint{Key: "gpu", Effect: v1.TaintEffectPreferNoSchedule}), true, true},
		{"automatic: unschedulable", node("n", ssd, v1.Taint{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule}), true, true},
		{"automatic: not-ready NoExecute", node("n", ssd, v1.Taint{Key: v1.TaintNodeNotReady, Effect: v1.TaintEffectNoExecute}), true, true},
		{"automatic: unreachable NoExecute", node("n", ssd, v1.Taint{Key: v1.TaintNodeUnreachable, Effect: v1.TaintEffectNoExecute}), true, true},
		{"automatic: memory pressure", node("n", ssd, v1.Taint{Key: v1.TaintNodeMemoryPressure, Effect: v1.TaintEffectNoSchedule}), true, true},
		{"network-unavailable needs hostNetwork", node("n", ssd, v1.Taint{Key: v1.TaintNodeNetworkUnavailable, Effect: v1.TaintEffectNoSchedule}), false, true},
	} {
		run, keep := placementOf(ds).shouldRun(tc.node)
		if run != tc.run || keep != tc.keepIfThere {
			t.Errorf("%s: shouldRun=%v shouldContinue=%v, want %v %v", tc.name, run, keep, tc.run, tc.keepIfThere)
		}
	}
	hn := ds.DeepCopy()
	hn.Spec.Template.Spec.HostNetwork = true
	if run, _ := placementOf(hn).shouldRun(node("n", ssd, v1.Taint{Key: v1.TaintNodeNetworkUnavailable, Effect: v1.TaintEffectNoSchedule})); !run {
		t.Errorf("a hostNetwork daemon must tolerate network-unavailable")
	}
	named := newDS("y")
	named.Spec.Template.Spec.NodeName = "other"
	if run, keep := placementOf(named).shouldRun(node("n", nil)); run || keep {
		t.Errorf("a template naming another node must not run here")
	}
}

func TestDaemonTolerations(t *testing.T) {
	sixty := int64(60)
	spec := &v1.PodSpec{Tolerations: []v1.Toleration{
		{Key: v1.TaintNodeNotReady, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: &sixty},
		{Key: "mine", Operator: v1.TolerationOpExists},
	}}
	addDaemonTolerations(spec)
	got := map[string]v1.Toleration{}
	for _, tol := range spec.Tolerations {
		got[tol.Key+"/"+string(tol.Effect)] = tol
	}
	if len(spec.Tolerations) != 7 {
		t.Errorf("want the user's own plus 6 automatic tolerations, got %d: %+v", len(spec.Tolerations), spec.Tolerations)
	}
	for _, k := range []string{
		v1.TaintNodeNotReady + "/NoExecute", v1.TaintNodeUnreachable + "/NoExecute",
		v1.TaintNodeDiskPressure + "/NoSchedule", v1.TaintNodeMemoryPressure + "/NoSchedule",
		v1.TaintNodePIDPressure + "/NoSchedule", v1.TaintNodeUnschedulable + "/NoSchedule", "mine/",
	} {
		tol, ok := got[k]
		if !ok {
			t.Errorf("missing toleration %s", k)
			continue
		}
		if tol.TolerationSeconds != nil {
			t.Errorf("%s: tolerationSeconds %d, want none (a daemon is never evicted from its node)", k, *tol.TolerationSeconds)
		}
	}
	if _, ok := got[v1.TaintNodeNetworkUnavailable+"/NoSchedule"]; ok {
		t.Errorf("network-unavailable is for hostNetwork pods only")
	}
	hn := &v1.PodSpec{HostNetwork: true}
	addDaemonTolerations(hn)
	addDaemonTolerations(hn) // idempotent
	if len(hn.Tolerations) != 7 {
		t.Errorf("hostNetwork: want 7 tolerations once, got %d", len(hn.Tolerations))
	}
}

func TestBindToNode(t *testing.T) {
	a := &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
		NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{{Key: "a", Operator: v1.NodeSelectorOpExists}}}}}}}
	got := bindToNode(a, "n1")
	terms := got.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 1 || len(terms[0].MatchExpressions) != 0 || len(terms[0].MatchFields) != 1 ||
		terms[0].MatchFields[0].Key != "metadata.name" || terms[0].MatchFields[0].Values[0] != "n1" {
		t.Fatalf("affinity %+v", terms)
	}
	pod := &v1.Pod{Spec: v1.PodSpec{Affinity: bindToNode(nil, "n2")}}
	if n, err := targetNode(pod); err != nil || n != "n2" {
		t.Errorf("targetNode = %q, %v", n, err)
	}
	pod.Spec.NodeName = "n3"
	if n, _ := targetNode(pod); n != "n3" {
		t.Errorf("a bound pod's node is its nodeName, got %q", n)
	}
}

// daemonPod is a pod of ds on node, on the revision hash, Ready since
// readyFor ago (never Ready if negative).
func daemonPod(ds *apps.DaemonSet, name, nodeName, hash string, readyFor time.Duration) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name),
			Labels:          map[string]string{"app": ds.Name, revisionHashLabel: hash},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ds, controllerKind)}},
		Spec:   v1.PodSpec{NodeName: nodeName},
		Status: v1.PodStatus{Phase: v1.PodRunning},
	}
	if readyFor >= 0 {
		p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(time.Now().Add(-readyFor))}}
	}
	return p
}

func TestPlanRollingUpdateMaxUnavailable(t *testing.T) {
	ds := newDS("x")
	two := intstr.FromInt32(2)
	ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = &two
	var nodes []*v1.Node
	byNode := map[string][]*v1.Pod{}
	for i := range 5 {
		n := fmt.Sprintf("n%d", i)
		nodes = append(nodes, node(n, nil))
		byNode[n] = []*v1.Pod{daemonPod(ds, "old-"+n, n, "old", time.Minute)}
	}
	now := metav1.Now()
	plan, err := planRollingUpdate(ds, nodes, byNode, placementOf(ds), "new", now)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(plan.del) != "[old-n0 old-n1]" || len(plan.create) != 0 {
		t.Errorf("all available, maxUnavailable 2: plan %+v, want two old pods deleted", plan)
	}

	// n0 is on the new template but not Ready yet, n1's old pod is not
	// available: n1 is replaced regardless, and nothing else fits.
	byNode["n0"] = []*v1.Pod{daemonPod(ds, "new-n0", "n0", "new", -1)}
	byNode["n1"] = []*v1.Pod{daemonPod(ds, "old-n1", "n1", "old", -1)}
	plan, _ = planRollingUpdate(ds, nodes, byNode, placementOf(ds), "new", now)
	if fmt.Sprint(plan.del) != "[old-n1]" {
		t.Errorf("one new unavailable, one old unavailable: plan %+v, want only old-n1", plan)
	}

	// A node with no pod yet (manage will create it) counts as unavailable.
	byNode["n0"] = []*v1.Pod{daemonPod(ds, "new-n0", "n0", "new", time.Minute)}
	byNode["n1"] = nil
	delete(byNode, "n1")
	plan, _ = planRollingUpdate(ds, nodes, byNode, placementOf(ds), "new", now)
	if fmt.Sprint(plan.del) != "[old-n2]" {
		t.Errorf("one node without a pod: plan %+v, want one deletion", plan)
	}

	// minReadySeconds: Ready for 1 s of 30 is not available.
	ds.Spec.MinReadySeconds = 30
	for i := range 5 {
		n := fmt.Sprintf("n%d", i)
		byNode[n] = []*v1.Pod{daemonPod(ds, "new-"+n, n, "new", time.Second)}
	}
	byNode["n4"] = []*v1.Pod{daemonPod(ds, "old-n4", "n4", "old", time.Minute)}
	plan, _ = planRollingUpdate(ds, nodes, byNode, placementOf(ds), "new", now)
	if len(plan.del) != 0 {
		t.Errorf("four new pods not yet available past minReadySeconds: plan %+v, want nothing", plan)
	}
}

func TestPlanRollingUpdateSurge(t *testing.T) {
	ds := newDS("x")
	one, zero := intstr.FromInt32(1), intstr.FromInt32(0)
	ds.Spec.UpdateStrategy.RollingUpdate = &apps.RollingUpdateDaemonSet{MaxSurge: &one, MaxUnavailable: &zero}
	nodes := []*v1.Node{node("a", nil), node("b", nil), node("c", nil)}
	byNode := map[string][]*v1.Pod{
		"a": {daemonPod(ds, "old-a", "a", "old", time.Minute)},
		"b": {daemonPod(ds, "old-b", "b", "old", time.Minute)},
		"c": {daemonPod(ds, "old-c", "c", "old", -1)},
	}
	now := metav1.Now()
	plan, err := planRollingUpdate(ds, nodes, byNode, placementOf(ds), "new", now)
	if err != nil {
		t.Fatal(err)
	}
	// c's old pod is unavailable: its new pod at once; one surge on a.
	if fmt.Sprint(plan.create) != "[c a]" || len(plan.del) != 0 {
		t.Errorf("surge 1: plan %+v, want create on c (unavailable) and a", plan)
	}
	// a surged and its new pod is available: the old one goes.
	byNode["a"] = append(byNode["a"], daemonPod(ds, "new-a", "a", "new", time.Minute))
	byNode["c"] = []*v1.Pod{daemonPod(ds, "new-c", "c", "new", -1)}
	plan, _ = planRollingUpdate(ds, nodes, byNode, placementOf(ds), "new", now)
	// A node with only a new pod, available or not, is not surging (as
	// upstream): b may surge now.
	if fmt.Sprint(plan.del) != "[old-a]" || fmt.Sprint(plan.create) != "[b]" {
		t.Errorf("after the surge on a: plan %+v, want old-a deleted and the surge moving to b", plan)
	}
}

// TestNodeWork covers manage's per-node decision: surplus pods pruned,
// failed pods deleted with backoff, pods leaving a no-longer-eligible node.
func TestNodeWork(t *testing.T) {
	ds := newDS("x")
	c := &Controller{recorder: record.NewFakeRecorder(100), queue: controllers.NewQueue("test"), now: time.Now,
		failedBackoff: flowcontrol.NewBackOff(failedPodInitialBackoff, failedPodMaxBackoff)}
	n := node("n", nil)
	p := placementOf(ds)
	a := daemonPod(ds, "a", "n", "h", time.Minute)
	b := daemonPod(ds, "b", "n", "h", time.Minute)
	b.CreationTimestamp = metav1.NewTime(time.Now())
	if create, del := c.nodeWork(ds, n, map[string][]*v1.Pod{"n": {b, a}}, p, "h"); len(create) != 0 || fmt.Sprint(del) != "[b]" {
		t.Errorf("two pods: create %v delete %v, want the newer deleted", create, del)
	}
	if create, _ := c.nodeWork(ds, n, map[string][]*v1.Pod{}, p, "h"); fmt.Sprint(create) != "[n]" {
		t.Errorf("no pod: create %v", create)
	}
	failed := daemonPod(ds, "f", "n", "h", -1)
	failed.Status.Phase = v1.PodFailed
	if _, del := c.nodeWork(ds, n, map[string][]*v1.Pod{"n": {failed}}, p, "h"); fmt.Sprint(del) != "[f]" {
		t.Errorf("failed pod: delete %v", del)
	}
	if _, del := c.nodeWork(ds, n, map[string][]*v1.Pod{"n": {failed}}, p, "h"); len(del) != 0 {
		t.Errorf("a second failure on the node within the backoff must wait, deleted %v", del)
	}
	tainted := node("n", nil, v1.Taint{Key: "k", Effect: v1.TaintEffectNoExecute})
	if create, del := c.nodeWork(ds, tainted, map[string][]*v1.Pod{"n": {a}}, p, "h"); len(create) != 0 || fmt.Sprint(del) != "[a]" {
		t.Errorf("NoExecute taint: create %v delete %v", create, del)
	}
}

type env struct {
	client  *fake.Clientset
	factory informers.SharedInformerFactory
	ctrl    *Controller
	rec     *record.FakeRecorder
	ctx     context.Context
}

func newEnv(t *testing.T, objs ...runtime.Object) *env {
	t.Helper()
	client := fake.NewClientset(objs...)
	var n int64
	client.PrependReactor("create", "pods", func(a core.Action) (bool, runtime.Object, error) {
		pod := a.(core.CreateAction).GetObject().(*v1.Pod)
		i := atomic.AddInt64(&n, 1)
		if pod.Name == "" {
			pod.Name = fmt.Sprintf("%s%05d", pod.GenerateName, i)
		}
		pod.UID = types.UID(fmt.Sprintf("pod-uid-%d", i))
		return false, nil, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	rec := record.NewFakeRecorder(1000)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); factory.Shutdown() })
	e := &env{client: client, factory: factory, ctrl: New(client, factory, rec), rec: rec, ctx: ctx}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), e.ctrl.synced...) {
		t.Fatal("caches did not sync")
	}
	return e
}

// syncUntil runs the DaemonSet's sync until cond holds (the informer
// delivers the controller's own writes asynchronously).
func (e *env) syncUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := e.ctrl.sync(e.ctx, ns+"/x")
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out: %s (last sync: %v)", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// update writes ds and waits until the controller's cache has it. The fake
// clientset has no status subresource: a status write from a stale cache
// would undo the spec change.
func (e *env) update(t *testing.T, ds *apps.DaemonSet) {
	t.Helper()
	if _, err := e.client.AppsV1().DaemonSets(ns).Update(e.ctx, ds, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if got, err := e.ctrl.dsLister.DaemonSets(ns).Get(ds.Name); err == nil && got.Generation == ds.Generation {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cache never saw generation %d", ds.Generation)
		}
		time.Sleep(5 * time.Millisecond)
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

func (e *env) revisions(t *testing.T) []apps.ControllerRevision {
	t.Helper()
	l, err := e.client.AppsV1().ControllerRevisions(ns).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(l.Items, func(i, j int) bool { return l.Items[i].Revision < l.Items[j].Revision })
	return l.Items
}

// TestSyncCreatesPodsAndRevisions: one pod per eligible node, pinned by
// matchFields, labelled with the revision; a template change makes
// revision 2, and the revision's data patched onto the DaemonSet (what
// kubectl rollout undo does) gives back the old template.
func TestSyncCreatesPodsAndRevisions(t *testing.T) {
	ds := newDS("x")
	e := newEnv(t, ds, node("a", nil), node("b", nil),
		node("tainted", nil, v1.Taint{Key: "k", Effect: v1.TaintEffectNoSchedule}))
	e.syncUntil(t, "two pods", func() bool { return len(e.pods(t)) == 2 })
	revs := e.revisions(t)
	if len(revs) != 1 || revs[0].Revision != 1 {
		t.Fatalf("revisions %+v", revs)
	}
	hash := revs[0].Labels[revisionHashLabel]
	if revs[0].Name != "x-"+hash || metav1.GetControllerOf(&revs[0]).UID != ds.UID {
		t.Errorf("revision %s (hash %s) owner %+v", revs[0].Name, hash, revs[0].OwnerReferences)
	}
	targets := map[string]bool{}
	for _, p := range e.pods(t) {
		n, err := targetNode(&p)
		if err != nil {
			t.Fatal(err)
		}
		targets[n] = true
		if p.Spec.NodeName != "" {
			t.Errorf("%s: the controller must leave binding to the scheduler", p.Name)
		}
		if p.Labels[revisionHashLabel] != hash || p.Labels[templateGenerationLabel] != "1" {
			t.Errorf("%s: labels %v", p.Name, p.Labels)
		}
		if len(p.Spec.Tolerations) != 6 {
			t.Errorf("%s: %d tolerations, want the 6 automatic ones", p.Name, len(p.Spec.Tolerations))
		}
	}
	if !targets["a"] || !targets["b"] {
		t.Errorf("pods for %v, want a and b", targets)
	}
	e.syncUntil(t, "status", func() bool {
		got, _ := e.client.AppsV1().DaemonSets(ns).Get(e.ctx, "x", metav1.GetOptions{})
		return got.Status.DesiredNumberScheduled == 2 && got.Status.CurrentNumberScheduled == 2 &&
			got.Status.NumberUnavailable == 2 && got.Status.UpdatedNumberScheduled == 2 && got.Status.ObservedGeneration == 1
	})

	// A new template: revision 2, the old one kept.
	cur, _ := e.client.AppsV1().DaemonSets(ns).Get(e.ctx, "x", metav1.GetOptions{})
	cur.Spec.Template.Spec.Containers[0].Image = "busybox:2"
	cur.Generation = 2
	cur.Annotations[apps.DeprecatedTemplateGeneration] = "2"
	e.update(t, cur)
	e.syncUntil(t, "revision 2", func() bool { return len(e.revisions(t)) == 2 })
	revs = e.revisions(t)
	if revs[1].Revision != 2 || revs[1].Labels[revisionHashLabel] == hash {
		t.Fatalf("revisions after the change: %+v", revs)
	}

	// Undo as kubectl does: strategic-merge the old revision's data.
	orig, _ := json.Marshal(cur)
	patched, err := strategicpatch.StrategicMergePatch(orig, revs[0].Data.Raw, &apps.DaemonSet{})
	if err != nil {
		t.Fatal(err)
	}
	var undone apps.DaemonSet
	if err := json.Unmarshal(patched, &undone); err != nil {
		t.Fatal(err)
	}
	if img := undone.Spec.Template.Spec.Containers[0].Image; img != "busybox:1" {
		t.Errorf("undo gives image %q, want busybox:1", img)
	}
	if ok, _ := matchesRevision(&undone, &revs[0]); !ok {
		t.Errorf("the undone DaemonSet does not match its old revision")
	}
	// After the undo the old revision is current again, renumbered 3.
	undone.ResourceVersion = ""
	undone.Generation = 3
	e.update(t, &undone)
	e.syncUntil(t, "old revision renumbered 3", func() bool {
		r := e.revisions(t)
		return len(r) == 2 && r[1].Name == "x-"+hash && r[1].Revision == 3
	})
	if n := countEvents(e.rec, SuccessfulCreateReason); n < 2 {
		t.Errorf("%d SuccessfulCreate events, want at least 2", n)
	}
}

// TestRevisionHistoryLimit: old revisions beyond the limit go, oldest
// first, but never one a live pod still runs.
func TestRevisionHistoryLimit(t *testing.T) {
	ds := newDS("x")
	limit := int32(2)
	ds.Spec.RevisionHistoryLimit = &limit
	e := newEnv(t, ds)
	var old []*apps.ControllerRevision
	for i := int64(1); i <= 4; i++ {
		r := &apps.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("x-r%d", i), Namespace: ns,
			Labels: map[string]string{revisionHashLabel: fmt.Sprintf("r%d", i)}}, Revision: i}
		if _, err := e.client.AppsV1().ControllerRevisions(ns).Create(e.ctx, r, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		old = append(old, r)
	}
	live := map[string][]*v1.Pod{"n": {daemonPod(ds, "p", "n", "r1", 0)}}
	if err := e.ctrl.pruneRevisions(e.ctx, ds, old, live); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range e.revisions(t) {
		names = append(names, r.Name)
	}
	if fmt.Sprint(names) != "[x-r1 x-r4]" {
		t.Errorf("kept %v, want x-r1 (a pod runs it) and x-r4 (newest)", names)
	}
}

func countEvents(rec *record.FakeRecorder, reason string) int {
	n := 0
	for {
		select {
		case ev := <-rec.Events:
			if len(ev) > 0 && strings.Contains(ev, reason) {
				n++
			}
		default:
			return n
		}
	}
}

// TestOnDelete: a template change replaces no pod by itself; a pod the
// user deletes comes back on the new template.
func TestOnDelete(t *testing.T) {
	ds := newDS("x")
	ds.Spec.UpdateStrategy = apps.DaemonSetUpdateStrategy{Type: apps.OnDeleteDaemonSetStrategyType}
	e := newEnv(t, ds, node("a", nil), node("b", nil))
	e.syncUntil(t, "two pods", func() bool { return len(e.pods(t)) == 2 })
	oldHash := e.pods(t)[0].Labels[revisionHashLabel]
	cur, _ := e.client.AppsV1().DaemonSets(ns).Get(e.ctx, "x", metav1.GetOptions{})
	cur.Spec.Template.Spec.Containers[0].Image = "busybox:2"
	cur.Generation = 2
	cur.Annotations[apps.DeprecatedTemplateGeneration] = "2"
	e.update(t, cur)
	e.syncUntil(t, "revision 2 observed", func() bool {
		got, _ := e.client.AppsV1().DaemonSets(ns).Get(e.ctx, "x", metav1.GetOptions{})
		return len(e.revisions(t)) == 2 && got.Status.ObservedGeneration == 2 && got.Status.UpdatedNumberScheduled == 0
	})
	for range 5 {
		_ = e.ctrl.sync(e.ctx, ns+"/x")
	}
	pods := e.pods(t)
	if len(pods) != 2 || pods[0].Labels[revisionHashLabel] != oldHash || pods[1].Labels[revisionHashLabel] != oldHash {
		t.Fatalf("OnDelete replaced pods by itself: %d pods", len(pods))
	}
	if err := e.client.CoreV1().Pods(ns).Delete(e.ctx, pods[0].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.syncUntil(t, "the deleted pod back on the new template", func() bool {
		n := 0
		for _, p := range e.pods(t) {
			if p.Labels[revisionHashLabel] != oldHash && p.Spec.Containers[0].Image == "busybox:2" && p.Labels[templateGenerationLabel] == "2" {
				n++
			}
		}
		return n == 1 && len(e.pods(t)) == 2
	})
}

// TestNodeGone: an unscheduled pod for a node that no longer exists is
// deleted (it can never be scheduled); a node that stops matching the
// selector loses its pod; status counts it as misscheduled until then.
func TestNodeGone(t *testing.T) {
	ds := newDS("x")
	ds.Spec.Template.Spec.NodeSelector = map[string]string{"role": "edge"}
	stray := daemonPod(ds, "stray", "", "h", -1)
	stray.Spec.Affinity = bindToNode(nil, "gone")
	moved := daemonPod(ds, "moved", "a", "h", -1)
	e := newEnv(t, ds, stray, moved, node("a", nil), node("b", map[string]string{"role": "edge"}))
	st := e.ctrl.calculateStatus(ds, []*v1.Node{node("a", nil), node("b", map[string]string{"role": "edge"})},
		map[string][]*v1.Pod{"a": {moved}}, "h", true)
	if st.NumberMisscheduled != 1 || st.DesiredNumberScheduled != 1 || st.CurrentNumberScheduled != 0 || st.NumberUnavailable != 1 {
		t.Errorf("status %+v", st)
	}
	e.syncUntil(t, "only b's pod left", func() bool {
		pods := e.pods(t)
		if len(pods) != 1 {
			return false
		}
		n, _ := targetNode(&pods[0])
		return n == "b"
	})
	if n := countEvents(e.rec, SuccessfulDeleteReason); n != 2 {
		t.Errorf("%d SuccessfulDelete events, want 2", n)
	}
}
