package replicaset

import (
	"k8s.io/kubectl/pkg/util/podutils"
	"sort"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
)

// podDeletionCostAnnotation lets users rank pods for scale-down; lower cost
// is deleted first (as upstream).
const podDeletionCostAnnotation = "controller.kubernetes.io/pod-deletion-cost"

func isPodActive(p *v1.Pod) bool {
	return p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed && p.DeletionTimestamp == nil
}

func isPodTerminating(p *v1.Pod) bool {
	return p.DeletionTimestamp != nil && p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed
}

func podReadyCondition(p *v1.Pod) *v1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == v1.PodReady {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func podReadyTime(p *v1.Pod) time.Time {
	if c := podReadyCondition(p); c != nil && c.Status == v1.ConditionTrue {
		return c.LastTransitionTime.Time
	}
	return time.Time{}
}

func maxContainerRestarts(p *v1.Pod) int32 {
	var m int32
	for _, cs := range p.Status.ContainerStatuses {
		if cs.RestartCount > m {
			m = cs.RestartCount
		}
	}
	return m
}

func podDeletionCost(p *v1.Pod) int64 {
	v, ok := p.Annotations[podDeletionCostAnnotation]
	if !ok {
		return 0
	}
	c, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0
	}
	return c
}

func phaseOrdinal(ph v1.PodPhase) int {
	switch ph {
	case v1.PodPending:
		return 0
	case v1.PodUnknown:
		return 1
	case v1.PodRunning:
		return 2
	}
	return 3
}

// rankedPods sorts pods so that the ones to delete first come first:
// unassigned < assigned; Pending < Unknown < Running; not ready < ready;
// lower deletion cost < higher; more pods on the same node < fewer;
// recently ready < ready longer; more restarts < fewer; newer < older.
type rankedPods struct {
	pods []*v1.Pod
	rank []int
}

func (r rankedPods) Len() int { return len(r.pods) }
func (r rankedPods) Swap(i, j int) {
	r.pods[i], r.pods[j] = r.pods[j], r.pods[i]
	r.rank[i], r.rank[j] = r.rank[j], r.rank[i]
}

func (r rankedPods) Less(i, j int) bool {
	a, b := r.pods[i], r.pods[j]
	if (a.Spec.NodeName == "") != (b.Spec.NodeName == "") {
		return a.Spec.NodeName == ""
	}
	if pa, pb := phaseOrdinal(a.Status.Phase), phaseOrdinal(b.Status.Phase); pa != pb {
		return pa < pb
	}
	if ra, rb := podutils.IsPodReady(a), podutils.IsPodReady(b); ra != rb {
		return !ra
	}
	if ca, cb := podDeletionCost(a), podDeletionCost(b); ca != cb {
		return ca < cb
	}
	if r.rank[i] != r.rank[j] {
		return r.rank[i] > r.rank[j]
	}
	if podutils.IsPodReady(a) && podutils.IsPodReady(b) {
		ta, tb := podReadyTime(a), podReadyTime(b)
		if !ta.Equal(tb) {
			return afterOrZero(ta, tb)
		}
	}
	if ma, mb := maxContainerRestarts(a), maxContainerRestarts(b); ma != mb {
		return ma > mb
	}
	ta, tb := a.CreationTimestamp.Time, b.CreationTimestamp.Time
	if !ta.Equal(tb) {
		return afterOrZero(ta, tb)
	}
	return a.Name < b.Name
}

// afterOrZero: a zero time counts as "newest".
func afterOrZero(a, b time.Time) bool {
	if a.IsZero() || b.IsZero() {
		return a.IsZero()
	}
	return a.After(b)
}

// podsToDelete returns the n pods to delete first. Rank is the number of
// the ReplicaSet's active pods on the same node, so that scale-down spreads.
func podsToDelete(pods []*v1.Pod, n int) []*v1.Pod {
	if n >= len(pods) {
		n = len(pods)
	}
	perNode := map[string]int{}
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			perNode[p.Spec.NodeName]++
		}
	}
	r := rankedPods{pods: append([]*v1.Pod(nil), pods...), rank: make([]int, len(pods))}
	for i, p := range r.pods {
		if p.Spec.NodeName != "" {
			r.rank[i] = perNode[p.Spec.NodeName]
		}
	}
	sort.Sort(r)
	return r.pods[:n]
}
