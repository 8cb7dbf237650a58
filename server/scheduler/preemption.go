package scheduler

import (
	"context"
	"fmt"
	"math"
	"sort"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
)

// Preemption is the basics of upstream's DefaultPreemption PostFilter. A
// pod no node fits, whose preemptionPolicy is not Never, looks for nodes
// where removing pods of lower priority would make it fit (only nodes whose
// failure preemption can resolve); on each it keeps back as many of those
// pods as still let it fit, the most important first (higher priority,
// then earlier start), and the rest are the node's victims. Of the
// candidate nodes the one whose most important victim has the lowest
// priority wins, then the lowest sum of victims' priorities, then the
// fewest victims, then the name. The victims get the DisruptionTarget
// condition (PreemptionByScheduler) and are deleted, and the pod's
// status.nominatedNodeName names the node; the pod is retried when they
// are gone. While a victim of its preemption is still terminating on its
// nominated node, a pod does not preempt again.
//
// A nominated pod's claim on its node holds against pods of no higher
// priority: they see the node with it (cache.withNominatedLocked).
//
// The pods of lower priority nominated to the node lose their nomination
// (the room is the preemptor's now), as upstream's prepareCandidate.
//
// Not implemented: PodDisruptionBudgets in the choice of victims, trying
// the nominated node first.

const (
	reasonPreempted            = "Preempted"
	preemptionByScheduler      = "PreemptionByScheduler"
	preemptionTerminatingMsg   = "not eligible due to a terminating pod on the nominated node."
	disruptionTargetMsgPattern = "%s: preempting to accommodate a higher priority pod"
)

// preemption is a chosen node and the pods to delete there.
type preemption struct {
	node    string
	victims []*v1.Pod
}

// eligibleToPreempt is upstream's PodEligibleToPreemptOthers: the
// message is why not ("" when eligible).
func eligibleToPreempt(pod *v1.Pod, nodes map[string]*nodeInfo, fe *fitError) string {
	if p := pod.Spec.PreemptionPolicy; p != nil && *p == v1.PreemptNever {
		return preemptionPolicyNever
	}
	nom := pod.Status.NominatedNodeName
	if nom == "" {
		return ""
	}
	if st := fe.statuses[nom]; st != nil && st.unresolvable {
		return ""
	}
	if ni := nodes[nom]; ni != nil {
		prio := corev1helpers.PodPriority(pod)
		for _, p := range ni.pods {
			if corev1helpers.PodPriority(p.pod) < prio && terminatingByPreemption(p.pod) {
				return preemptionTerminatingMsg
			}
		}
	}
	return ""
}

func terminatingByPreemption(pod *v1.Pod) bool {
	if pod.DeletionTimestamp == nil {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.DisruptionTarget && c.Status == v1.ConditionTrue && c.Reason == preemptionByScheduler {
			return true
		}
	}
	return false
}

// findPreemption looks for a node where victims make room for ps's pod.
// Called with the cache lock held, over the nodes that failed the filters.
func findPreemption(ps *podState, nodes []*nodeInfo, fe *fitError, withNominated func(*nodeInfo, *v1.Pod) *nodeInfo) *preemption {
	prio := corev1helpers.PodPriority(ps.info.pod)
	var best *preemption
	var bestKey [3]int64
	for _, ni := range nodes {
		st := fe.statuses[ni.node.Name]
		if st == nil || st.unresolvable {
			continue
		}
		victims := victimsOn(ps, ni, withNominated(ni, ps.info.pod), prio)
		if victims == nil {
			continue
		}
		highest, sum := int64(math.MinInt32), int64(0)
		for _, v := range victims {
			p := int64(corev1helpers.PodPriority(v))
			sum += p
			highest = max(highest, p)
		}
		key := [3]int64{highest, sum, int64(len(victims))}
		if best == nil || less3(key, bestKey) || (key == bestKey && ni.node.Name < best.node) {
			best, bestKey = &preemption{node: ni.node.Name, victims: victims}, key
		}
	}
	return best
}

func less3(a, b [3]int64) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// victimsOn is upstream's selectVictimsOnNode without budgets: nil when
// even removing every lower-priority pod leaves no room. seen is ni as
// the pod sees it (with the pods nominated there before it); victims are
// only ever pods placed on ni.
func victimsOn(ps *podState, ni, seen *nodeInfo, prio int32) []*v1.Pod {
	var lower []*podInfo
	sim := newNodeInfo()
	sim.setNode(ni.node)
	for uid, p := range seen.pods {
		if _, placed := ni.pods[uid]; !placed {
			sim.addPod(p) // nominated: not a victim
			continue
		}
		if corev1helpers.PodPriority(p.pod) < prio {
			lower = append(lower, p)
			continue
		}
		sim.addPod(p)
	}
	if len(lower) == 0 || runFilters(ps, sim) != nil {
		return nil
	}
	// The most important first: they are the first kept back.
	sort.Slice(lower, func(i, j int) bool { return moreImportant(lower[i].pod, lower[j].pod) })
	var victims []*v1.Pod
	for _, p := range lower {
		sim.addPod(p)
		if runFilters(ps, sim) != nil {
			sim.removePod(p.pod.UID)
			victims = append(victims, p.pod)
		}
	}
	if len(victims) == 0 {
		return nil // fits without removing anything: not a preemption
	}
	return victims
}

// moreImportant is upstream's MoreImportantPod: higher priority, then the
// earlier start.
func moreImportant(a, b *v1.Pod) bool {
	pa, pb := corev1helpers.PodPriority(a), corev1helpers.PodPriority(b)
	if pa != pb {
		return pa > pb
	}
	ta, tb := a.Status.StartTime, b.Status.StartTime
	switch {
	case ta == nil:
		return false
	case tb == nil:
		return true
	}
	return ta.Before(tb)
}

// preempt evicts the victims for pod: the DisruptionTarget condition, an
// event, then the delete. It reports whether every victim is gone or
// going.
func (s *Scheduler) preempt(ctx context.Context, pod *v1.Pod, pr *preemption) bool {
	ok := true
	for _, victim := range pr.victims {
		v := victim.DeepCopy()
		cond := v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: preemptionByScheduler,
			Message: fmt.Sprintf(disruptionTargetMsgPattern, SchedulerName), LastTransitionTime: metav1.Now()}
		replaced := false
		for i := range v.Status.Conditions {
			if v.Status.Conditions[i].Type == v1.DisruptionTarget {
				v.Status.Conditions[i], replaced = cond, true
			}
		}
		if !replaced {
			v.Status.Conditions = append(v.Status.Conditions, cond)
		}
		if _, err := s.client.CoreV1().Pods(v.Namespace).UpdateStatus(ctx, v, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			klog.V(2).InfoS("adding the DisruptionTarget condition failed", "pod", klog.KObj(v), "err", err)
		}
		err := s.client.CoreV1().Pods(v.Namespace).Delete(ctx, v.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &v.UID}})
		if err != nil && !apierrors.IsNotFound(err) {
			klog.V(2).InfoS("deleting a preemption victim failed", "pod", klog.KObj(v), "err", err)
			ok = false
			continue
		}
		if s.recorder != nil {
			s.recorder.Eventf(victim, v1.EventTypeNormal, reasonPreempted, "Preempted by pod %v on node %v", pod.UID, pr.node)
		}
	}
	return ok
}

// clearNominations takes the nomination to node from the pending pods of
// lower priority than pod's.
func (s *Scheduler) clearNominations(ctx context.Context, pod *v1.Pod, node string) {
	for _, p := range s.cache.nominatedBelow(node, corev1helpers.PodPriority(pod)) {
		cur, err := s.podLister.Pods(p.Namespace).Get(p.Name)
		if err != nil || cur.UID != p.UID || cur.Status.NominatedNodeName != node {
			continue
		}
		upd := cur.DeepCopy()
		upd.Status.NominatedNodeName = ""
		if _, err := s.client.CoreV1().Pods(upd.Namespace).UpdateStatus(ctx, upd, metav1.UpdateOptions{}); err != nil {
			klog.V(2).InfoS("clearing a nomination failed", "pod", klog.KObj(upd), "err", err)
		}
	}
}
