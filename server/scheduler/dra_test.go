package scheduler

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// TestPodWithResourceClaimsStaysPending: kelp allocates no DRA claims, so
// a pod naming one is never bound, and says why in its event and its
// PodScheduled condition; a pod beside it without claims is scheduled.
func TestPodWithResourceClaimsStaysPending(t *testing.T) {
	claim := "gpu-claim"
	withClaim := func(p *v1.Pod) {
		p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &claim}}
		p.Spec.Containers[0].Resources.Claims = []v1.ResourceClaim{{Name: "gpu"}}
	}
	env := newTestEnv(t, makeNode("n1", "4", "8Gi"), makePod("dra", "100m", "", withClaim), makePod("plain", "100m", ""))
	if node := env.waitBound("plain", 5*time.Second); node != "n1" {
		t.Fatalf("plain pod on %q", node)
	}
	want := "0/1 nodes are available: pod uses resource claims (gpu), and kelp does not allocate dynamic resources (DRA). " +
		"preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.."
	if got := env.waitFailed("dra", 5*time.Second); got != want {
		t.Fatalf("message:\n got %q\nwant %q", got, want)
	}
	var cond v1.PodCondition
	env.waitFor(5*time.Second, "PodScheduled=False", func() bool {
		for _, c := range env.getPod("dra").Status.Conditions {
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
	events := env.recorder.eventsFor("dra")
	if len(events) == 0 || events[0].reason != reasonFailedScheduling || events[0].message != want {
		t.Fatalf("events %+v", events)
	}
	if n := env.getPod("dra").Spec.NodeName; n != "" {
		t.Fatalf("pod with claims bound to %s", n)
	}
}

func TestDynamicResourcesPreFilterIgnoresPodsWithoutClaims(t *testing.T) {
	if msg := dynamicResourcesPreFilter(makePod("p", "1", "")); msg != "" {
		t.Fatalf("pod without claims rejected: %q", msg)
	}
}
