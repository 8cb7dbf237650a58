package scheduler

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestSpreadOverEqualNodes(t *testing.T) {
	objs := []runtime.Object{
		makeNode("n1", "4", "8Gi"), makeNode("n2", "4", "8Gi"), makeNode("n3", "4", "8Gi"),
	}
	for i := 0; i < 9; i++ {
		objs = append(objs, makePod(fmt.Sprintf("web-%d", i), "100m", "128Mi", ownedBy("rs-web")))
	}
	env := newTestEnv(t, objs...)
	perNode := map[string]int{}
	for i := 0; i < 9; i++ {
		name := fmt.Sprintf("web-%d", i)
		node := env.waitBound(name, 10*time.Second)
		perNode[node]++
		evs := env.recorder.eventsFor(name)
		env.waitFor(5*time.Second, "Scheduled event", func() bool {
			evs = env.recorder.eventsFor(name)
			return len(evs) > 0
		})
		if evs[0].reason != "Scheduled" || evs[0].message != fmt.Sprintf("Successfully assigned default/%s to %s", name, node) {
			t.Errorf("pod %s: unexpected event %+v", name, evs[0])
		}
	}
	for _, n := range []string{"n1", "n2", "n3"} {
		if perNode[n] != 3 {
			t.Errorf("want 3 pods per node, got %v", perNode)
			break
		}
	}
}

func TestResourceFitAndTaintMessage(t *testing.T) {
	cp := "node-role.kubernetes.io/control-plane"
	env := newTestEnv(t,
		makeNode("small", "1", "8Gi"),
		makeNode("cp1", "8", "8Gi", withTaint(cp, "", v1.TaintEffectNoSchedule)),
		makeNode("cp2", "8", "8Gi", withTaint(cp, "", v1.TaintEffectNoSchedule)),
		makePod("big", "2", "1Gi"),
	)
	want := "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }. " +
		"preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling.."
	if got := env.waitFailed("big", 5*time.Second); got != want {
		t.Fatalf("message:\n got %q\nwant %q", got, want)
	}
	var cond *v1.PodCondition
	env.waitFor(5*time.Second, "PodScheduled=False condition", func() bool {
		for _, c := range env.getPod("big").Status.Conditions {
			if c.Type == v1.PodScheduled {
				c := c
				cond = &c
				return true
			}
		}
		return false
	})
	if cond.Status != v1.ConditionFalse || cond.Reason != v1.PodReasonUnschedulable || cond.Message != want {
		t.Fatalf("unexpected condition %+v", cond)
	}
	if n := env.getPod("big").Spec.NodeName; n != "" {
		t.Fatalf("pod bound to %s", n)
	}
}

func TestInsufficientCPUAndMemoryMessage(t *testing.T) {
	env := newTestEnv(t,
		makeNode("a", "1", "1Gi"), makeNode("b", "1", "1Gi"), makeNode("c", "4", "1Gi"),
		makePod("hog", "2", "2Gi"),
	)
	want := "0/3 nodes are available: 2 Insufficient cpu, 3 Insufficient memory. " +
		"preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.."
	if got := env.waitFailed("hog", 5*time.Second); got != want {
		t.Fatalf("message:\n got %q\nwant %q", got, want)
	}
}

func TestTooManyPodsAndAccountsBoundPods(t *testing.T) {
	n := makeNode("tiny", "4", "4Gi")
	n.Status.Allocatable[v1.ResourcePods] = resource.MustParse("1")
	env := newTestEnv(t, n,
		makePod("existing", "3", "", onNode("tiny")),
		makePod("next", "2", ""),
	)
	want := "0/1 nodes are available: 1 Insufficient cpu, 1 Too many pods. " +
		"preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.."
	if got := env.waitFailed("next", 5*time.Second); got != want {
		t.Fatalf("message:\n got %q\nwant %q", got, want)
	}
}

func TestTaintsAndTolerations(t *testing.T) {
	env := newTestEnv(t,
		makeNode("gpu", "4", "8Gi", withTaint("dedicated", "gpu", v1.TaintEffectNoSchedule)),
		makeNode("notready", "4", "8Gi", withReady(v1.ConditionFalse)),
		makeNode("cordoned", "4", "8Gi", func(n *v1.Node) { n.Spec.Unschedulable = true }),
		makePod("plain", "100m", ""),
	)
	want := "0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}, " +
		"1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }, 1 node(s) were unschedulable. " +
		"preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.."
	if got := env.waitFailed("plain", 5*time.Second); got != want {
		t.Fatalf("message:\n got %q\nwant %q", got, want)
	}
	env.createPod(makePod("tolerant", "100m", "", withToleration("dedicated", "gpu", v1.TaintEffectNoSchedule)))
	if node := env.waitBound("tolerant", 5*time.Second); node != "gpu" {
		t.Fatalf("tolerant pod on %s, want gpu", node)
	}
	// A pod tolerating not-ready (like a DaemonSet pod) may use that node.
	env.createPod(makePod("ds", "100m", "", withToleration("node.kubernetes.io/not-ready", "", v1.TaintEffectNoSchedule),
		withNodeSelector("kubernetes.io/hostname", "notready")))
	if node := env.waitBound("ds", 5*time.Second); node != "notready" {
		t.Fatalf("ds pod on %s, want notready", node)
	}
	if n := env.getPod("plain").Spec.NodeName; n != "" {
		t.Fatalf("untolerating pod was bound to %s", n)
	}
}

func TestPreferNoScheduleScoring(t *testing.T) {
	env := newTestEnv(t,
		makeNode("soft", "4", "8Gi", withTaint("spot", "true", v1.TaintEffectPreferNoSchedule)),
		makeNode("clean", "4", "8Gi"),
	)
	for i := 0; i < 3; i++ { // distinct owners: no spreading pressure
		name := fmt.Sprintf("p%d", i)
		env.createPod(makePod(name, "100m", "", ownedBy("owner-"+name)))
		if node := env.waitBound(name, 5*time.Second); node != "clean" {
			t.Fatalf("pod %s on %s, want clean (PreferNoSchedule avoided)", name, node)
		}
	}
}

func TestNodeSelectorAndAffinity(t *testing.T) {
	env := newTestEnv(t,
		makeNode("hdd", "4", "8Gi", withLabel("disk", "hdd")),
		makeNode("ssd", "4", "8Gi", withLabel("disk", "ssd")),
		makePod("db", "100m", "", withNodeSelector("disk", "ssd")),
		makePod("nvme", "100m", "", withNodeSelector("disk", "nvme")),
	)
	if node := env.waitBound("db", 5*time.Second); node != "ssd" {
		t.Fatalf("db on %s, want ssd", node)
	}
	want := "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector. " +
		"preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.."
	if got := env.waitFailed("nvme", 5*time.Second); got != want {
		t.Fatalf("message:\n got %q\nwant %q", got, want)
	}
	aff := makePod("aff", "100m", "")
	aff.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
			MatchExpressions: []v1.NodeSelectorRequirement{{Key: "disk", Operator: v1.NodeSelectorOpNotIn, Values: []string{"ssd"}}},
		}}},
	}}
	env.createPod(aff)
	if node := env.waitBound("aff", 5*time.Second); node != "hdd" {
		t.Fatalf("aff on %s, want hdd", node)
	}
	pref := makePod("pref", "100m", "", ownedBy("pref-owner"))
	pref.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []v1.PreferredSchedulingTerm{{Weight: 100, Preference: v1.NodeSelectorTerm{
			MatchExpressions: []v1.NodeSelectorRequirement{{Key: "disk", Operator: v1.NodeSelectorOpIn, Values: []string{"ssd"}}},
		}}},
	}}
	env.createPod(pref)
	if node := env.waitBound("pref", 5*time.Second); node != "ssd" {
		t.Fatalf("pref on %s, want ssd", node)
	}
}

func TestHostPortConflict(t *testing.T) {
	env := newTestEnv(t,
		makeNode("n1", "4", "8Gi"), makeNode("n2", "4", "8Gi"),
		makePod("existing", "100m", "", onNode("n1"), withHostPort(8080)),
	)
	env.createPod(makePod("second", "100m", "", withHostPort(8080)))
	if node := env.waitBound("second", 5*time.Second); node != "n2" {
		t.Fatalf("second on %s, want n2", node)
	}
	env.createPod(makePod("third", "100m", "", withHostPort(8080)))
	want := "0/2 nodes are available: 2 node(s) didn't have free ports for the requested pod ports. " +
		"preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.."
	if got := env.waitFailed("third", 5*time.Second); got != want {
		t.Fatalf("message:\n got %q\nwant %q", got, want)
	}
	// A different port still fits.
	env.createPod(makePod("other", "100m", "", withHostPort(9090)))
	env.waitBound("other", 5*time.Second)
}

func TestBackoffThenSuccessWhenBigNodeAdded(t *testing.T) {
	env := newTestEnv(t, makeNode("small", "1", "1Gi"), makePod("big", "8", "16Gi"))
	env.waitFailed("big", 5*time.Second)
	failedAt := time.Now()
	env.createNode(makeNode("huge", "16", "64Gi"))
	node := env.waitBound("big", 15*time.Second)
	if node != "huge" {
		t.Fatalf("big on %s, want huge", node)
	}
	// The node event arrives right after the first failure, so the pod must
	// wait out its initial backoff (1s) before the retry.
	if d := time.Since(failedAt); d < 500*time.Millisecond {
		t.Fatalf("retried after %v, backoff not honoured", d)
	}
	if n := env.binds.Load(); n != 1 {
		t.Fatalf("binds = %d, want 1", n)
	}
}

func TestPodDeleteRetriesUnschedulable(t *testing.T) {
	env := newTestEnv(t,
		makeNode("n1", "2", "4Gi"),
		makePod("holder", "1500m", "", onNode("n1")),
		makePod("waiter", "1", ""),
	)
	env.waitFailed("waiter", 5*time.Second)
	if err := env.client.CoreV1().Pods("default").Delete(t.Context(), "holder", deleteOpts()); err != nil {
		t.Fatal(err)
	}
	if node := env.waitBound("waiter", 15*time.Second); node != "n1" {
		t.Fatalf("waiter on %s", node)
	}
}

func TestBindFailureForgetsAndRetries(t *testing.T) {
	env := newTestEnv(t, makeNode("n1", "1", "4Gi"))
	env.failMu.Lock()
	env.failBinds["flaky"] = 1
	env.failMu.Unlock()
	env.createPod(makePod("flaky", "800m", ""))
	if node := env.waitBound("flaky", 15*time.Second); node != "n1" {
		t.Fatalf("flaky on %s", node)
	}
	// The failed assumption must have been forgotten: the node accounts
	// exactly one pod, 800m.
	env.waitFor(5*time.Second, "cache to settle", func() bool {
		env.sched.cache.mu.Lock()
		defer env.sched.cache.mu.Unlock()
		ni := env.sched.cache.nodes["n1"]
		return len(ni.pods) == 1 && ni.requested.MilliCPU == 800
	})
	var failed bool
	for _, ev := range env.recorder.eventsFor("flaky") {
		if ev.reason == "FailedScheduling" {
			failed = true
		}
	}
	if !failed {
		t.Fatal("no FailedScheduling event for the bind failure")
	}
}

func TestIgnoresOtherSchedulersAndDeletingPods(t *testing.T) {
	other := makePod("other", "100m", "")
	other.Spec.SchedulerName = "my-scheduler"
	env := newTestEnv(t, makeNode("n1", "4", "8Gi"), other, makePod("mine", "100m", ""))
	env.waitBound("mine", 5*time.Second)
	time.Sleep(200 * time.Millisecond)
	if n := env.getPod("other").Spec.NodeName; n != "" {
		t.Fatalf("pod of another scheduler bound to %s", n)
	}
}

func TestNoNodes(t *testing.T) {
	env := newTestEnv(t, makePod("lonely", "100m", ""))
	if got := env.waitFailed("lonely", 5*time.Second); got != "no nodes available to schedule pods" {
		t.Fatalf("got %q", got)
	}
}

func TestNodeBecomingReadyRetries(t *testing.T) {
	env := newTestEnv(t, makeNode("n1", "4", "8Gi", withReady(v1.ConditionUnknown)), makePod("p", "100m", ""))
	want := "0/1 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/unreachable: }. " +
		"preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.."
	if got := env.waitFailed("p", 5*time.Second); got != want {
		t.Fatalf("message:\n got %q\nwant %q", got, want)
	}
	n, err := env.client.CoreV1().Nodes().Get(t.Context(), "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.Conditions[0].Status = v1.ConditionTrue
	if _, err := env.client.CoreV1().Nodes().UpdateStatus(t.Context(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if node := env.waitBound("p", 15*time.Second); node != "n1" {
		t.Fatalf("p on %s", node)
	}
}

func TestPreemptionPolicyNeverMessage(t *testing.T) {
	never := v1.PreemptNever
	p := makePod("p", "8", "")
	p.Spec.PreemptionPolicy = &never
	env := newTestEnv(t, makeNode("n1", "1", "8Gi"), p)
	want := "0/1 nodes are available: 1 Insufficient cpu. not eligible due to preemptionPolicy=Never.."
	if got := env.waitFailed("p", 5*time.Second); got != want {
		t.Fatalf("message:\n got %q\nwant %q", got, want)
	}
}

// TestMatchFieldsNodeName: the DaemonSet controller pins its pods with a
// required matchFields term on metadata.name and leaves binding to the
// scheduler, so that term must select exactly the named node.
func TestMatchFieldsNodeName(t *testing.T) {
	env := newTestEnv(t, makeNode("n1", "4", "8Gi"), makeNode("n2", "4", "8Gi"), makeNode("n3", "4", "8Gi"))
	for _, target := range []string{"n2", "n3", "n1"} {
		p := makePod("ds-"+target, "100m", "")
		p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
				MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{target}}},
			}}},
		}}
		env.createPod(p)
		if node := env.waitBound(p.Name, 5*time.Second); node != target {
			t.Errorf("%s bound to %s, want %s", p.Name, node, target)
		}
	}
}
