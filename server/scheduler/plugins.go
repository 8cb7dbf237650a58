package scheduler

import (
	"fmt"
	"math"

	v1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// Filter failure reasons, verbatim from upstream plugins.
const (
	reasonUnschedulable = "node(s) were unschedulable"
	reasonNodeName      = "node(s) didn't match the requested node name"
	reasonNodeAffinity  = "node(s) didn't match Pod's node affinity/selector"
	reasonNodePorts     = "node(s) didn't have free ports for the requested pod ports"
	reasonTooManyPods   = "Too many pods"

	taintNodeUnschedulable = "node.kubernetes.io/unschedulable"
	taintNodeNotReady      = "node.kubernetes.io/not-ready"
	taintNodeUnreachable   = "node.kubernetes.io/unreachable"

	maxNodeScore = 100
)

// Score weights of upstream's default profile.
const (
	weightLeastAllocated = 1
	weightBalanced       = 1
	weightTaint          = 3
	weightNodeAffinity   = 2
	weightSpread         = 2
)

// filterStatus is the outcome of the filters on one node. unresolvable
// marks UnschedulableAndUnresolvable failures (preemption cannot help).
type filterStatus struct {
	reasons      []string
	unresolvable bool
}

// podState is per-attempt precomputed pod data.
type podState struct {
	info             *podInfo
	requiredAffinity nodeaffinity.RequiredNodeAffinity
	preferred        *nodeaffinity.PreferredSchedulingTerms
	volumes          *podVolumes // nil: the pod names no claims
}

func newPodState(pi *podInfo) *podState {
	ps := &podState{info: pi, requiredAffinity: nodeaffinity.GetRequiredNodeAffinity(pi.pod)}
	if a := pi.pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && len(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0 {
		if p, err := nodeaffinity.NewPreferredSchedulingTerms(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution); err == nil {
			ps.preferred = p
		}
	}
	return ps
}

// effectiveTaints returns the node's taints plus the NoSchedule taint the
// node lifecycle controller would add for a NotReady/Unknown Ready
// condition (upstream's scheduler only looks at taints; kelp adds the
// condition taint here so a not-ready node is skipped even before any
// controller taints it). A node without a Ready condition is not tainted.
func effectiveTaints(node *v1.Node) []v1.Taint {
	var key string
	for _, c := range node.Status.Conditions {
		if c.Type != v1.NodeReady {
			continue
		}
		switch c.Status {
		case v1.ConditionFalse:
			key = taintNodeNotReady
		case v1.ConditionUnknown:
			key = taintNodeUnreachable
		}
	}
	if key == "" {
		return node.Spec.Taints
	}
	for _, t := range node.Spec.Taints {
		if t.Key == key && t.Effect == v1.TaintEffectNoSchedule {
			return node.Spec.Taints
		}
	}
	out := make([]v1.Taint, 0, len(node.Spec.Taints)+1)
	out = append(out, node.Spec.Taints...)
	return append(out, v1.Taint{Key: key, Effect: v1.TaintEffectNoSchedule})
}

func tolerates(tolerations []v1.Toleration, taint *v1.Taint) bool {
	return corev1helpers.TolerationsTolerateTaint(klog.Background(), tolerations, taint, false)
}

// runFilters applies the filters in upstream's default order and stops at
// the first failing one. nil means the node fits.
func runFilters(ps *podState, ni *nodeInfo) *filterStatus {
	pod, node := ps.info.pod, ni.node

	// NodeUnschedulable
	if node.Spec.Unschedulable && !tolerates(pod.Spec.Tolerations, &v1.Taint{Key: taintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule}) {
		return &filterStatus{reasons: []string{reasonUnschedulable}, unresolvable: true}
	}
	// NodeName
	if pod.Spec.NodeName != "" && pod.Spec.NodeName != node.Name {
		return &filterStatus{reasons: []string{reasonNodeName}, unresolvable: true}
	}
	// TaintToleration (NoSchedule, NoExecute)
	if taint, bad := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), effectiveTaints(node), pod.Spec.Tolerations, func(t *v1.Taint) bool {
		return t.Effect == v1.TaintEffectNoSchedule || t.Effect == v1.TaintEffectNoExecute
	}, false); bad {
		return &filterStatus{reasons: []string{fmt.Sprintf("node(s) had untolerated taint {%s: %s}", taint.Key, taint.Value)}, unresolvable: true}
	}
	// NodeAffinity (nodeSelector + required affinity)
	if ok, err := ps.requiredAffinity.Match(node); err != nil || !ok {
		return &filterStatus{reasons: []string{reasonNodeAffinity}, unresolvable: true}
	}
	// NodePorts
	if !ni.usedPorts.Fits(ps.info.ports) {
		return &filterStatus{reasons: []string{reasonNodePorts}}
	}
	// NodeResourcesFit
	if reasons := fitResources(ps.info, ni); len(reasons) > 0 {
		return &filterStatus{reasons: reasons}
	}
	// VolumeBinding
	if ps.volumes != nil {
		if st := ps.volumes.filter(node); st != nil {
			return st
		}
	}
	return nil
}

func fitResources(pi *podInfo, ni *nodeInfo) []string {
	var reasons []string
	if int64(len(ni.pods))+1 > ni.allowedPods {
		reasons = append(reasons, reasonTooManyPods)
	}
	req, alloc, used := &pi.request, &ni.allocatable, &ni.requested
	if req.MilliCPU > 0 && req.MilliCPU > alloc.MilliCPU-used.MilliCPU {
		reasons = append(reasons, "Insufficient cpu")
	}
	if req.Memory > 0 && req.Memory > alloc.Memory-used.Memory {
		reasons = append(reasons, "Insufficient memory")
	}
	if req.EphemeralStorage > 0 && req.EphemeralStorage > alloc.EphemeralStorage-used.EphemeralStorage {
		reasons = append(reasons, "Insufficient ephemeral-storage")
	}
	for name, v := range req.Scalar {
		if v > 0 && v > alloc.Scalar[name]-used.Scalar[name] {
			reasons = append(reasons, fmt.Sprintf("Insufficient %v", name))
		}
	}
	return reasons
}

// scoreNodes returns the weighted total score of each feasible node.
func scoreNodes(ps *podState, nodes []*nodeInfo) []int64 {
	n := len(nodes)
	total := make([]int64, n)
	taintCounts := make([]int64, n)
	affinity := make([]int64, n)
	spread := make([]int64, n)
	owner := ps.info.ownerUID
	for i, ni := range nodes {
		total[i] += weightLeastAllocated*leastAllocated(ps.info, ni) + weightBalanced*balancedAllocation(ps.info, ni)
		for j := range ni.node.Spec.Taints {
			t := &ni.node.Spec.Taints[j]
			if t.Effect == v1.TaintEffectPreferNoSchedule && !toleratesPrefer(ps.info.pod.Spec.Tolerations, t) {
				taintCounts[i]++
			}
		}
		if ps.preferred != nil {
			affinity[i] = ps.preferred.Score(ni.node)
		}
		if owner != "" {
			spread[i] = int64(ni.ownerCount[owner])
		}
	}
	normalize(taintCounts, true)
	if ps.preferred != nil {
		normalize(affinity, false)
	}
	spreadScores(spread, owner != "")
	for i := range total {
		total[i] += weightTaint*taintCounts[i] + weightSpread*spread[i]
		if ps.preferred != nil {
			total[i] += weightNodeAffinity * affinity[i]
		}
	}
	return total
}

// toleratesPrefer: only tolerations with effect PreferNoSchedule or empty
// count for scoring, as upstream.
func toleratesPrefer(tolerations []v1.Toleration, t *v1.Taint) bool {
	for i := range tolerations {
		tol := &tolerations[i]
		if tol.Effect != "" && tol.Effect != v1.TaintEffectPreferNoSchedule {
			continue
		}
		if tol.ToleratesTaint(klog.Background(), t, false) {
			return true
		}
	}
	return false
}

// normalize scales scores to [0, maxNodeScore] by the maximum; reverse
// flips them (fewer is better).
func normalize(scores []int64, reverse bool) {
	var max int64
	for _, s := range scores {
		if s > max {
			max = s
		}
	}
	for i := range scores {
		if max == 0 {
			if reverse {
				scores[i] = maxNodeScore
			}
			continue
		}
		s := maxNodeScore * scores[i] / max
		if reverse {
			s = maxNodeScore - s
		}
		scores[i] = s
	}
}

// spreadScores turns per-node counts of pods with the same controller into
// scores: fewer matching pods score higher (upstream PodTopologySpread's
// normalization: 100*(max+min-count)/max).
func spreadScores(counts []int64, active bool) {
	if !active {
		for i := range counts {
			counts[i] = maxNodeScore
		}
		return
	}
	var max int64
	min := int64(math.MaxInt64)
	for _, c := range counts {
		if c > max {
			max = c
		}
		if c < min {
			min = c
		}
	}
	for i, c := range counts {
		if max == 0 {
			counts[i] = maxNodeScore
			continue
		}
		counts[i] = maxNodeScore * (max + min - c) / max
	}
}

func leastAllocated(pi *podInfo, ni *nodeInfo) int64 {
	cpu := leastScore(ni.nonZeroReq.MilliCPU+pi.nonZero.MilliCPU, ni.allocatable.MilliCPU)
	mem := leastScore(ni.nonZeroReq.Memory+pi.nonZero.Memory, ni.allocatable.Memory)
	return (cpu + mem) / 2
}

func leastScore(requested, capacity int64) int64 {
	if capacity == 0 || requested > capacity {
		return 0
	}
	return (capacity - requested) * maxNodeScore / capacity
}

func balancedAllocation(pi *podInfo, ni *nodeInfo) int64 {
	frac := func(req, alloc int64) float64 {
		if alloc == 0 {
			return 1
		}
		f := float64(req) / float64(alloc)
		if f > 1 {
			f = 1
		}
		return f
	}
	cpu := frac(ni.nonZeroReq.MilliCPU+pi.nonZero.MilliCPU, ni.allocatable.MilliCPU)
	mem := frac(ni.nonZeroReq.Memory+pi.nonZero.Memory, ni.allocatable.Memory)
	std := math.Abs(cpu-mem) / 2
	return int64((1 - std) * maxNodeScore)
}
