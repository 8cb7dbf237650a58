package daemonset

import (
	"context"
	"fmt"
	"sort"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	intstrutil "k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/kubectl/pkg/util/podutils"
)

// surgeCount and unavailableCount resolve the rolling-update bounds
// against the number of nodes that should run a pod, rounding up as
// upstream (10% of 3 nodes is 1). Both are 0 for OnDelete.
func surgeCount(ds *apps.DaemonSet, desired int) (int, error) {
	r := ds.Spec.UpdateStrategy.RollingUpdate
	if ds.Spec.UpdateStrategy.Type != apps.RollingUpdateDaemonSetStrategyType || r == nil || r.MaxSurge == nil {
		return 0, nil
	}
	return intstrutil.GetScaledValueFromIntOrPercent(r.MaxSurge, desired, true)
}

func unavailableCount(ds *apps.DaemonSet, desired int) (int, error) {
	r := ds.Spec.UpdateStrategy.RollingUpdate
	if ds.Spec.UpdateStrategy.Type != apps.RollingUpdateDaemonSetStrategyType || r == nil || r.MaxUnavailable == nil {
		return 0, nil
	}
	return intstrutil.GetScaledValueFromIntOrPercent(r.MaxUnavailable, desired, true)
}

func allowsSurge(ds *apps.DaemonSet) bool {
	n, err := surgeCount(ds, 1)
	return err == nil && n > 0
}

// updatedAndOld splits a node's live pods into the one on the current
// template and the one on an older one; ok is false when there are more
// than one of either (manage prunes those first).
func updatedAndOld(pods []*v1.Pod, hash string, gen *int64) (updated, old *v1.Pod, ok bool) {
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil {
			continue
		}
		if isUpdated(pod, hash, gen) {
			if updated != nil {
				return nil, nil, false
			}
			updated = pod
		} else {
			if old != nil {
				return nil, nil, false
			}
			old = pod
		}
	}
	return updated, old, true
}

// rollPlan is what one rolling-update step does: old pods to delete and
// nodes to surge a new pod onto.
type rollPlan struct {
	del    []string
	create []string
}

// planRollingUpdate is upstream's rollingUpdate decision, apart from the
// API calls so it can be tested on its own.
//
// Without surge, an old pod is deleted (and manage recreates it on the
// current template) only while fewer than maxUnavailable of the nodes are
// unavailable; an old pod that is not available anyway is replaced at once.
// A pod being deleted does not count as unavailable, so a rollout goes on
// past nodes that are down.
//
// With surge, a new pod is created next to an available old one on at most
// maxSurge nodes at a time, and the old one goes once the new one is
// available: availability never drops. A node whose old pod is not
// available gets its new pod at once.
func planRollingUpdate(ds *apps.DaemonSet, nodes []*v1.Node, byNode map[string][]*v1.Pod, p placement, hash string, now metav1.Time) (rollPlan, error) {
	var plan rollPlan
	gen := templateGeneration(ds)
	// Every node that should run a pod takes part, with or without one.
	desired := 0
	pods := make(map[string][]*v1.Pod, len(byNode))
	for n, ps := range byNode {
		pods[n] = ps
	}
	nodeByName := make(map[string]*v1.Node, len(nodes))
	for _, node := range nodes {
		nodeByName[node.Name] = node
		if run, _ := p.shouldRun(node); run {
			desired++
			if _, ok := pods[node.Name]; !ok {
				pods[node.Name] = nil
			}
		}
	}
	maxSurge, err := surgeCount(ds, desired)
	if err != nil {
		return plan, fmt.Errorf("invalid maxSurge: %w", err)
	}
	maxUnavailable, err := unavailableCount(ds, desired)
	if err != nil {
		return plan, fmt.Errorf("invalid maxUnavailable: %w", err)
	}
	// Validation forbids both zero; should one slip through, upstream
	// accepts one unavailable rather than never rolling.
	if desired > 0 && maxSurge == 0 && maxUnavailable == 0 {
		maxUnavailable = 1
	}
	available := func(pod *v1.Pod) bool { return podutils.IsPodAvailable(pod, ds.Spec.MinReadySeconds, now) }

	if maxSurge == 0 {
		unavailable := 0
		var replace, candidates []string
		for _, name := range sortedKeys(pods) {
			updated, old, ok := updatedAndOld(pods[name], hash, gen)
			switch {
			case !ok, old == nil && updated == nil, old != nil && updated != nil:
				// manage's to fix; meanwhile it counts as unavailable
				unavailable++
			case updated != nil:
				if !available(updated) {
					unavailable++
				}
			case !available(old):
				replace = append(replace, old.Name)
				unavailable++
			case unavailable < maxUnavailable:
				candidates = append(candidates, old.Name)
			}
		}
		room := min(max(maxUnavailable-unavailable, 0), len(candidates))
		plan.del = append(replace, candidates[:room]...)
		return plan, nil
	}

	var notRunnable []string
	surging, availableNow := 0, 0
	var replaceOn, candidates []string
	for _, name := range sortedKeys(pods) {
		updated, old, ok := updatedAndOld(pods[name], hash, gen)
		if !ok {
			surging++
			continue
		}
		if old != nil && available(old) || old == nil && updated != nil && available(updated) {
			availableNow++
		}
		switch {
		case old == nil:
			// manage creates or keeps it
		case updated == nil:
			node := nodeByName[name]
			runnable := false
			if node != nil {
				runnable, _ = p.shouldRun(node)
			}
			switch {
			case !available(old) && !runnable:
				plan.del = append(plan.del, old.Name)
			case !available(old):
				replaceOn = append(replaceOn, name)
			case !runnable:
				notRunnable = append(notRunnable, old.Name)
			case surging < maxSurge:
				candidates = append(candidates, name)
			}
		default:
			if !available(updated) {
				surging++
				continue
			}
			plan.del = append(plan.del, old.Name)
		}
	}
	// An available pod on a node the DaemonSet left goes only once as many
	// pods are available elsewhere: 100% availability is what surge asks.
	if extra := min(availableNow-desired, len(notRunnable)); extra > 0 {
		plan.del = append(plan.del, notRunnable[:extra]...)
	}
	room := min(max(maxSurge-surging, 0), len(candidates))
	plan.create = append(replaceOn, candidates[:room]...)
	return plan, nil
}

func (c *Controller) rollingUpdate(ctx context.Context, ds *apps.DaemonSet, nodes []*v1.Node, pods map[string][]*v1.Pod, p placement, hash string) error {
	plan, err := planRollingUpdate(ds, nodes, pods, p, hash, metav1.NewTime(c.now()))
	if err != nil {
		return err
	}
	if len(plan.del) == 0 && len(plan.create) == 0 {
		return nil
	}
	return c.syncNodes(ctx, ds, plan.del, plan.create, hash)
}

// sortedKeys gives the nodes in name order: the same state always yields
// the same plan (upstream walks a map), which keeps tests and rollouts
// predictable.
func sortedKeys(m map[string][]*v1.Pod) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
