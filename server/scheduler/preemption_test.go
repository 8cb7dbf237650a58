package scheduler

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stesting "k8s.io/client-go/testing"
)

func withPriority(p int32) podOpt { return func(pod *v1.Pod) { pod.Spec.Priority = &p } }

func (e *testEnv) gone(name string) func() bool {
	return func() bool {
		_, err := e.client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}
}

// A higher-priority pod that fits nowhere deletes just enough
// lower-priority pods on one node, the least important ones, each marked
// with the DisruptionTarget condition first, is nominated to that node
// and bound there once they are gone.
func TestPreemptionEvictsLowestPriorityVictims(t *testing.T) {
	env := newTestEnv(t, makeNode("n1", "2", "8Gi"),
		makePod("low", "1", "", onNode("n1"), withPriority(1)),
		makePod("mid", "1", "", onNode("n1"), withPriority(5)),
	)
	env.createPod(makePod("preemptor", "1", "", withPriority(10)))
	env.waitFor(5*time.Second, "low deleted", env.gone("low"))
	if node := env.waitBound("preemptor", 5*time.Second); node != "n1" {
		t.Fatalf("preemptor on %s", node)
	}
	if p := env.getPod("preemptor"); p.Status.NominatedNodeName != "n1" {
		t.Errorf("nominatedNodeName %q, want n1", p.Status.NominatedNodeName)
	}
	if env.gone("mid")() {
		t.Errorf("mid was preempted too: removing low was enough")
	}
	// The victim got the condition before its deletion, and an event.
	var cond *v1.PodCondition
	for _, a := range env.client.Actions() {
		if u, ok := a.(k8stesting.UpdateAction); ok && a.GetSubresource() == "status" {
			if p := u.GetObject().(*v1.Pod); p.Name == "low" {
				for _, c := range p.Status.Conditions {
					if c.Type == v1.DisruptionTarget {
						c := c
						cond = &c
					}
				}
			}
		}
	}
	if cond == nil || cond.Status != v1.ConditionTrue || cond.Reason != "PreemptionByScheduler" ||
		cond.Message != "default-scheduler: preempting to accommodate a higher priority pod" {
		t.Errorf("DisruptionTarget condition of the victim: %+v", cond)
	}
	found := false
	for _, ev := range env.recorder.eventsFor("low") {
		found = found || (ev.reason == "Preempted" && ev.message == "Preempted by pod uid-preemptor on node n1")
	}
	if !found {
		t.Errorf("no Preempted event: %+v", env.recorder.eventsFor("low"))
	}
}

// Of two nodes the one whose victims matter least is chosen; pods of
// equal or higher priority are never victims.
func TestPreemptionChoosesTheLeastImportantVictims(t *testing.T) {
	env := newTestEnv(t, makeNode("a", "1", "8Gi"), makeNode("b", "1", "8Gi"), makeNode("c", "1", "8Gi"),
		makePod("on-a", "1", "", onNode("a"), withPriority(3)),
		makePod("on-b", "1", "", onNode("b"), withPriority(2)),
		makePod("on-c", "1", "", onNode("c"), withPriority(10)),
	)
	env.createPod(makePod("preemptor", "1", "", withPriority(10)))
	if node := env.waitBound("preemptor", 5*time.Second); node != "b" {
		t.Fatalf("preemptor on %s, want b", node)
	}
	if !env.gone("on-b")() || env.gone("on-a")() || env.gone("on-c")() {
		t.Errorf("victims: on-a gone %v, on-b gone %v, on-c gone %v", env.gone("on-a")(), env.gone("on-b")(), env.gone("on-c")())
	}
}

// Without lower-priority pods, or when removing them all would not make
// room, nothing is preempted and the message is upstream's.
func TestPreemptionWithoutVictims(t *testing.T) {
	env := newTestEnv(t, makeNode("n1", "2", "8Gi"),
		makePod("equal", "1", "", onNode("n1"), withPriority(10)),
		makePod("low", "500m", "", onNode("n1"), withPriority(1)),
	)
	env.createPod(makePod("preemptor", "2", "", withPriority(10)))
	want := "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.."
	if got := env.waitFailed("preemptor", 5*time.Second); got != want {
		t.Fatalf("message:\n got %q\nwant %q", got, want)
	}
	if env.gone("low")() {
		t.Errorf("low deleted although its room would not be enough")
	}
}

// A pod whose victims are still terminating on its nominated node waits
// for them instead of preempting more.
func TestPreemptionWaitsForTerminatingVictims(t *testing.T) {
	now := metav1.Now()
	victim := makePod("leaving", "1", "", onNode("n1"), withPriority(1))
	victim.DeletionTimestamp = &now
	victim.Finalizers = []string{"test/hold"}
	victim.Status.Conditions = []v1.PodCondition{{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: "PreemptionByScheduler"}}
	preemptor := makePod("preemptor", "1", "", withPriority(10))
	preemptor.Status.NominatedNodeName = "n1"
	env := newTestEnv(t, makeNode("n1", "2", "8Gi"), victim,
		makePod("other", "1", "", onNode("n1"), withPriority(1)), preemptor)
	want := "0/1 nodes are available: 1 Insufficient cpu. not eligible due to a terminating pod on the nominated node.."
	if got := env.waitFailed("preemptor", 5*time.Second); got != want {
		t.Fatalf("message:\n got %q\nwant %q", got, want)
	}
	if env.gone("other")() {
		t.Errorf("other preempted while a victim is still terminating")
	}
}

// The room a nominated pod was promised is its own against pods of lower
// priority, not against higher ones.
func TestNominatedPodHoldsItsRoom(t *testing.T) {
	nominee := makePod("nominee", "1", "", withPriority(10), withNodeSelector("never", "matches"))
	nominee.Status.NominatedNodeName = "n1"
	env := newTestEnv(t, makeNode("n1", "1", "8Gi"), nominee)
	env.createPod(makePod("small", "1", "", withPriority(1)))
	want := "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.."
	if got := env.waitFailed("small", 5*time.Second); got != want {
		t.Fatalf("message:\n got %q\nwant %q", got, want)
	}
	env.createPod(makePod("urgent", "1", "", withPriority(20)))
	if node := env.waitBound("urgent", 5*time.Second); node != "n1" {
		t.Fatalf("urgent on %s", node)
	}
	if n := env.getPod("small").Spec.NodeName; n != "" {
		t.Errorf("small bound to %s", n)
	}
}

// A preemptor takes the nomination to its node from pending pods of lower
// priority: the room it made is its own.
func TestPreemptionClearsLowerNominations(t *testing.T) {
	waiting := makePod("waiting", "1", "", withPriority(5), withNodeSelector("never", "matches"))
	waiting.Status.NominatedNodeName = "n1"
	env := newTestEnv(t, makeNode("n1", "1", "8Gi"), waiting,
		makePod("low", "1", "", onNode("n1"), withPriority(1)))
	env.createPod(makePod("preemptor", "1", "", withPriority(10)))
	if node := env.waitBound("preemptor", 5*time.Second); node != "n1" {
		t.Fatalf("preemptor on %s", node)
	}
	// The fake clientset has no resourceVersion checks, so a later status
	// write of waiting's own failure from an older copy may restore the
	// field there (the API server would refuse it): the write that clears
	// it is what is checked.
	env.waitFor(5*time.Second, "waiting's nomination cleared", func() bool {
		for _, a := range env.client.Actions() {
			if u, ok := a.(k8stesting.UpdateAction); ok && a.GetSubresource() == "status" {
				if p := u.GetObject().(*v1.Pod); p.Name == "waiting" && p.Status.NominatedNodeName == "" {
					return true
				}
			}
		}
		return false
	})
}

// The cache keeps nominations by node: a pod sees only those on the node
// it looks at, a moved nomination holds only on its new node, and a
// dropped one is gone.
func TestNominationsByNode(t *testing.T) {
	c := newCache()
	c.addOrUpdateNode(makeNode("n1", "4", "8Gi"))
	c.addOrUpdateNode(makeNode("n2", "4", "8Gi"))
	nominee := makePod("nominee", "1", "", withPriority(10))
	c.nominate(nominee, "n1")
	c.nominate(nominee, "n2")
	seen := func(node string) int {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.withNominatedLocked(c.nodes[node], makePod("other", "1", "")).pods)
	}
	if n1, n2 := seen("n1"), seen("n2"); n1 != 0 || n2 != 1 {
		t.Fatalf("pods seen on n1 %d, n2 %d; want 0 and 1", n1, n2)
	}
	if got := c.nominatedBelow("n1", 20); len(got) != 0 {
		t.Fatalf("nominated below on n1: %v", got)
	}
	if got := c.nominatedBelow("n2", 20); len(got) != 1 || seen("n2") != 0 {
		t.Fatalf("nominated below on n2: %v, then %d seen", got, seen("n2"))
	}
	c.nominate(nominee, "n1")
	c.nominate(nominee, "")
	if seen("n1") != 0 || len(c.nominated) != 0 || len(c.nominatedOn) != 0 {
		t.Fatalf("dropped nomination kept: %v %v", c.nominated, c.nominatedOn)
	}
}
