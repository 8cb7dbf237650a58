package nodelifecycle

import (
	"context"
	"errors"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// nodeHealth is what the monitor remembers about a node between passes.
// Its timestamps are this controller's own clock at the moment it saw a
// heartbeat change, never the kubelet's timestamps, so clock skew between
// node and control plane cannot make a node look alive or dead.
type nodeHealth struct {
	status                   *corev1.NodeStatus
	probeTimestamp           time.Time
	readyTransitionTimestamp time.Time
	lease                    *coordinationv1.Lease
	// lastReady is the Ready status the previous pass ended with; a move
	// from True to anything else is reported once as NodeNotReady.
	lastReady corev1.ConditionStatus
}

// conditionsSetUnknown are the kubelet-owned conditions that become
// Unknown when the kubelet stops reporting.
var conditionsSetUnknown = []corev1.NodeConditionType{
	corev1.NodeReady, corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure,
}

func nodeCondition(status *corev1.NodeStatus, t corev1.NodeConditionType) *corev1.NodeCondition {
	if status == nil {
		return nil
	}
	for i := range status.Conditions {
		if status.Conditions[i].Type == t {
			return &status.Conditions[i]
		}
	}
	return nil
}

// tryUpdateNodeHealth records heartbeats seen since the last pass and, if
// none came within the grace period, writes Unknown conditions. It
// returns the Ready status the node posted (observed) and the one it has
// after this pass (current).
func (c *Controller) tryUpdateNodeHealth(ctx context.Context, node *corev1.Node, now time.Time) (observed, current corev1.ConditionStatus, err error) {
	ready := nodeCondition(&node.Status, corev1.NodeReady)
	grace := c.cfg.NodeMonitorGracePeriod
	if ready == nil {
		// Never posted Ready: it gets the longer startup grace.
		observed = corev1.ConditionUnknown
		grace = c.cfg.NodeStartupGracePeriod
	} else {
		observed = ready.Status
	}
	current = observed

	h := c.health[node.Name]
	if h == nil {
		// First sight (or controller restart): a full grace period from now.
		h = &nodeHealth{probeTimestamp: now, readyTransitionTimestamp: now}
		c.health[node.Name] = h
	} else {
		saved := nodeCondition(h.status, corev1.NodeReady)
		switch {
		case saved == nil && ready != nil, saved != nil && ready == nil:
			h.probeTimestamp, h.readyTransitionTimestamp = now, now
		case saved != nil && ready != nil && !saved.LastHeartbeatTime.Equal(&ready.LastHeartbeatTime):
			h.probeTimestamp = now
			if !saved.LastTransitionTime.Equal(&ready.LastTransitionTime) {
				h.readyTransitionTimestamp = now
			}
		}
	}
	h.status = node.Status.DeepCopy()

	// A renewed Lease is a heartbeat too; it is what a healthy kubelet
	// sends most often.
	if lease, err := c.leases.Leases(leaseNamespace).Get(node.Name); err == nil && lease.Spec.RenewTime != nil {
		if h.lease == nil || h.lease.Spec.RenewTime == nil || h.lease.Spec.RenewTime.Before(lease.Spec.RenewTime) {
			h.lease = lease
			h.probeTimestamp = now
		}
	}

	if !now.After(h.probeTimestamp.Add(grace)) {
		return observed, current, nil
	}
	updated := node.DeepCopy()
	stamp := metav1.NewTime(now)
	changed := false
	for _, t := range conditionsSetUnknown {
		cond := nodeCondition(&updated.Status, t)
		switch {
		case cond == nil:
			updated.Status.Conditions = append(updated.Status.Conditions, corev1.NodeCondition{
				Type: t, Status: corev1.ConditionUnknown,
				Reason: "NodeStatusNeverUpdated", Message: "Kubelet never posted node status.",
				LastHeartbeatTime: node.CreationTimestamp, LastTransitionTime: stamp,
			})
			changed = true
		case cond.Status != corev1.ConditionUnknown:
			cond.Status = corev1.ConditionUnknown
			cond.Reason = "NodeStatusUnknown"
			cond.Message = "Kubelet stopped posting node status."
			cond.LastTransitionTime = stamp
			changed = true
		}
	}
	if changed {
		res, err := c.client.CoreV1().Nodes().UpdateStatus(ctx, updated, metav1.UpdateOptions{})
		if err != nil {
			return observed, observed, err
		}
		h.status = res.Status.DeepCopy()
		h.readyTransitionTimestamp = now
	}
	return observed, corev1.ConditionUnknown, nil
}

// markPodsNotReady sets Ready=False on every pod bound to node, so
// Services stop sending traffic to them long before they are evicted.
// Pods already not ready are left alone, which keeps this cheap to run on
// every pass.
func (c *Controller) markPodsNotReady(ctx context.Context, node string, now time.Time) error {
	pods, err := c.podsOnNode(node)
	if err != nil {
		return err
	}
	var errs []error
	for _, pod := range pods {
		if pod.Spec.NodeName != node {
			continue
		}
		i := -1
		for j, cond := range pod.Status.Conditions {
			if cond.Type == corev1.PodReady {
				i = j
			}
		}
		if i < 0 || pod.Status.Conditions[i].Status == corev1.ConditionFalse {
			continue
		}
		p := pod.DeepCopy()
		p.Status.Conditions[i].Status = corev1.ConditionFalse
		p.Status.Conditions[i].LastTransitionTime = metav1.NewTime(now)
		if _, err := c.client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			if ignoreNotFound(err) != nil {
				errs = append(errs, err)
			}
			continue
		}
		c.recorder.Eventf(pod, corev1.EventTypeWarning, "NodeNotReady", "Node is not ready")
	}
	return errors.Join(errs...)
}
