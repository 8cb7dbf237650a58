package nodelifecycle

import (
	"context"
	"sort"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

var (
	unreachableNoExecute = corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}
	notReadyNoExecute    = corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute}
)

// noScheduleTaints maps node conditions to the NoSchedule taints this
// controller owns (upstream's TaintNodesByCondition).
var noScheduleTaints = []struct {
	condition corev1.NodeConditionType
	status    corev1.ConditionStatus
	key       string
}{
	{corev1.NodeReady, corev1.ConditionFalse, corev1.TaintNodeNotReady},
	{corev1.NodeReady, corev1.ConditionUnknown, corev1.TaintNodeUnreachable},
	{corev1.NodeMemoryPressure, corev1.ConditionTrue, corev1.TaintNodeMemoryPressure},
	{corev1.NodeDiskPressure, corev1.ConditionTrue, corev1.TaintNodeDiskPressure},
	{corev1.NodeNetworkUnavailable, corev1.ConditionTrue, corev1.TaintNodeNetworkUnavailable},
	{corev1.NodePIDPressure, corev1.ConditionTrue, corev1.TaintNodePIDPressure},
}

// sameTaint is upstream's MatchTaint: key and effect identify a taint.
func sameTaint(a, b *corev1.Taint) bool { return a.Key == b.Key && a.Effect == b.Effect }

func hasTaint(node *corev1.Node, t corev1.Taint) bool {
	for i := range node.Spec.Taints {
		if sameTaint(&node.Spec.Taints[i], &t) {
			return true
		}
	}
	return false
}

// applyTaints returns taints without remove and with add (NoExecute ones
// stamped with now, which eviction counts tolerationSeconds from).
func applyTaints(taints []corev1.Taint, add, remove []corev1.Taint, now time.Time) ([]corev1.Taint, bool) {
	out := make([]corev1.Taint, 0, len(taints)+len(add))
	changed := false
	for _, t := range taints {
		drop := false
		for i := range remove {
			if sameTaint(&t, &remove[i]) {
				drop = true
			}
		}
		if drop {
			changed = true
			continue
		}
		out = append(out, t)
	}
	for _, t := range add {
		present := false
		for i := range out {
			if sameTaint(&out[i], &t) {
				present = true
			}
		}
		if present {
			continue
		}
		if t.Effect == corev1.TaintEffectNoExecute {
			stamp := metav1.NewTime(now)
			t.TimeAdded = &stamp
		}
		out = append(out, t)
		changed = true
	}
	return out, changed
}

// updateTaints adds and removes taints on the node as stored in the API
// (not the cache, which may lag), retrying on conflicts. It reports
// whether it wrote anything.
func (c *Controller) updateTaints(ctx context.Context, node string, add, remove []corev1.Taint) (bool, error) {
	c.taintMu.Lock()
	defer c.taintMu.Unlock()
	wrote := false
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		n, err := c.client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		taints, changed := applyTaints(n.Spec.Taints, add, remove, c.clock.Now())
		if !changed {
			return nil
		}
		n.Spec.Taints = taints
		if _, err := c.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			return err
		}
		wrote = true
		return nil
	})
	return wrote, ignoreNotFound(err)
}

// syncNoSchedule keeps the condition NoSchedule taints (and the
// unschedulable one) in line with the node; these are not rate limited,
// since they only keep new pods away.
func (c *Controller) syncNoSchedule(ctx context.Context, node string) error {
	n, err := c.nodes.Get(node)
	if err != nil {
		return ignoreNotFound(err)
	}
	want := map[string]bool{}
	for _, m := range noScheduleTaints {
		if cond := nodeCondition(&n.Status, m.condition); cond != nil && cond.Status == m.status {
			want[m.key] = true
		}
	}
	want[corev1.TaintNodeUnschedulable] = n.Spec.Unschedulable
	var add, remove []corev1.Taint
	keys := []string{corev1.TaintNodeUnschedulable}
	for _, m := range noScheduleTaints {
		keys = append(keys, m.key)
	}
	for _, key := range keys {
		t := corev1.Taint{Key: key, Effect: corev1.TaintEffectNoSchedule}
		switch has := hasTaint(n, t); {
		case want[key] && !has:
			add = append(add, t)
		case !want[key] && has:
			remove = append(remove, t)
		}
	}
	if len(add) == 0 && len(remove) == 0 {
		return nil
	}
	_, err = c.updateTaints(ctx, node, add, remove)
	return err
}

// processTaintBaseEviction decides the NoExecute taint a node should have.
// Swapping unreachable for not-ready (or back) and removing them are
// immediate; adding one is queued for the zone's rate limiter.
func (c *Controller) processTaintBaseEviction(ctx context.Context, node *corev1.Node, ready corev1.ConditionStatus, now time.Time) {
	var want, other corev1.Taint
	switch ready {
	case corev1.ConditionTrue:
		delete(c.pending, node.Name)
		if hasTaint(node, unreachableNoExecute) || hasTaint(node, notReadyNoExecute) {
			if _, err := c.updateTaints(ctx, node.Name, nil, []corev1.Taint{unreachableNoExecute, notReadyNoExecute}); err != nil {
				logrus.WithError(err).Warnf("%s: remove NoExecute taints from node %s", name, node.Name)
			}
		}
		return
	case corev1.ConditionFalse:
		want, other = notReadyNoExecute, unreachableNoExecute
	default:
		want, other = unreachableNoExecute, notReadyNoExecute
	}
	switch {
	case hasTaint(node, want) && !hasTaint(node, other):
		delete(c.pending, node.Name)
	case hasTaint(node, other):
		// Already evicting: the new state keeps its place, no rate limit.
		delete(c.pending, node.Name)
		if _, err := c.updateTaints(ctx, node.Name, []corev1.Taint{want}, []corev1.Taint{other}); err != nil {
			logrus.WithError(err).Warnf("%s: swap NoExecute taint on node %s", name, node.Name)
		}
	default:
		if _, ok := c.pending[node.Name]; !ok {
			c.pending[node.Name] = now
		}
	}
}

// taintPending adds NoExecute taints to queued nodes, oldest first, as far
// as each zone's limiter allows; the rest wait for a later pass.
func (c *Controller) taintPending(ctx context.Context, now time.Time) {
	queued := make([]string, 0, len(c.pending))
	for n := range c.pending {
		queued = append(queued, n)
	}
	sort.Slice(queued, func(i, j int) bool {
		ti, tj := c.pending[queued[i]], c.pending[queued[j]]
		if !ti.Equal(tj) {
			return ti.Before(tj)
		}
		return queued[i] < queued[j]
	})
	for _, n := range queued {
		node, err := c.nodes.Get(n)
		if err != nil {
			delete(c.pending, n)
			continue
		}
		want := unreachableNoExecute
		if h := c.health[n]; h != nil && h.lastReady == corev1.ConditionFalse {
			want = notReadyNoExecute
		}
		ok, giveBack := c.limiters[zoneKey(node)].take(now)
		if !ok {
			continue
		}
		wrote, err := c.updateTaints(ctx, n, []corev1.Taint{want}, nil)
		if err != nil {
			logrus.WithError(err).Warnf("%s: taint node %s", name, n)
			giveBack()
			continue
		}
		if !wrote {
			giveBack() // the cache was behind; the taint was already there
		}
		delete(c.pending, n)
	}
}
