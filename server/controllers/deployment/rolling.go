package deployment

import (
	"context"
	"sort"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// rolloutRolling takes one RollingUpdate step: grow the new ReplicaSet
// within maxSurge, else shrink old ones within maxUnavailable.
func (c *Controller) rolloutRolling(ctx context.Context, d *apps.Deployment, rsList []*apps.ReplicaSet) error {
	newRS, old, err := c.getAllReplicaSetsAndSyncRevision(ctx, d, rsList, true)
	if err != nil {
		return err
	}
	all := withNew(old, newRS)

	scaledUp, err := c.reconcileNewReplicaSet(ctx, all, newRS, d)
	if err != nil {
		return err
	}
	if scaledUp {
		return c.syncRolloutStatus(ctx, all, newRS, d)
	}
	scaledDown, err := c.reconcileOldReplicaSets(ctx, all, filterActive(old), newRS, d)
	if err != nil {
		return err
	}
	if scaledDown {
		return c.syncRolloutStatus(ctx, all, newRS, d)
	}
	if s := c.calculateStatus(all, newRS, d); deploymentComplete(d, &s) {
		if err := c.cleanupDeployment(ctx, old, d); err != nil {
			return err
		}
	}
	return c.syncRolloutStatus(ctx, all, newRS, d)
}

func (c *Controller) reconcileNewReplicaSet(ctx context.Context, all []*apps.ReplicaSet, newRS *apps.ReplicaSet, d *apps.Deployment) (bool, error) {
	if newRS == nil || replicas(newRS) == dReplicas(d) {
		return false, nil
	}
	if replicas(newRS) > dReplicas(d) {
		scaled, _, err := c.scaleReplicaSet(ctx, newRS, dReplicas(d), d)
		return scaled, err
	}
	n, err := newRSNewReplicas(d, all, newRS)
	if err != nil {
		return false, err
	}
	scaled, _, err := c.scaleReplicaSet(ctx, newRS, n, d)
	return scaled, err
}

func (c *Controller) reconcileOldReplicaSets(ctx context.Context, all, old []*apps.ReplicaSet, newRS *apps.ReplicaSet, d *apps.Deployment) (bool, error) {
	if sumSpec(old) == 0 {
		return false, nil
	}
	minAvailable := dReplicas(d) - MaxUnavailable(d)
	var newUnavailable int32
	if newRS != nil {
		newUnavailable = replicas(newRS) - newRS.Status.AvailableReplicas
	}
	// Pods that may go: everything above minAvailable, not counting new
	// pods that are not available yet.
	maxScaledDown := sumSpec(all) - minAvailable - newUnavailable
	if maxScaledDown <= 0 {
		return false, nil
	}
	cleaned, err := c.cleanupUnhealthyReplicas(ctx, old, d, maxScaledDown)
	if err != nil {
		return false, err
	}
	scaled, err := c.scaleDownOldForRollingUpdate(ctx, withNew(old, newRS), old, d)
	if err != nil {
		return false, err
	}
	return cleaned+scaled > 0, nil
}

// cleanupUnhealthyReplicas first removes old replicas that are not available
// anyway (oldest ReplicaSets first), up to maxCleanup.
func (c *Controller) cleanupUnhealthyReplicas(ctx context.Context, old []*apps.ReplicaSet, d *apps.Deployment, maxCleanup int32) (int32, error) {
	sorted := append([]*apps.ReplicaSet{}, old...)
	sortByCreation(sorted)
	var total int32
	for _, rs := range sorted {
		if total >= maxCleanup {
			break
		}
		if replicas(rs) == 0 || replicas(rs) == rs.Status.AvailableReplicas {
			continue
		}
		down := replicas(rs) - rs.Status.AvailableReplicas
		if down < 0 {
			continue
		}
		if rest := maxCleanup - total; down > rest {
			down = rest
		}
		if _, _, err := c.scaleReplicaSet(ctx, rs, replicas(rs)-down, d); err != nil {
			return total, err
		}
		total += down
	}
	return total, nil
}

// scaleDownOldForRollingUpdate removes available old replicas while keeping
// at least replicas-maxUnavailable available.
func (c *Controller) scaleDownOldForRollingUpdate(ctx context.Context, all, old []*apps.ReplicaSet, d *apps.Deployment) (int32, error) {
	minAvailable := dReplicas(d) - MaxUnavailable(d)
	available := availableAfterScale(all)
	if available <= minAvailable {
		return 0, nil
	}
	sorted := append([]*apps.ReplicaSet{}, old...)
	sortByCreation(sorted)
	want := available - minAvailable
	var total int32
	for _, rs := range sorted {
		if total >= want {
			break
		}
		if replicas(rs) == 0 {
			continue
		}
		down := replicas(rs)
		if rest := want - total; down > rest {
			down = rest
		}
		if _, _, err := c.scaleReplicaSet(ctx, rs, replicas(rs)-down, d); err != nil {
			return total, err
		}
		total += down
	}
	return total, nil
}

// rolloutRecreate scales every old ReplicaSet to 0, waits until their pods
// are gone, then creates/scales the new ReplicaSet to full size.
func (c *Controller) rolloutRecreate(ctx context.Context, d *apps.Deployment, rsList []*apps.ReplicaSet, sel labels.Selector) error {
	newRS, old, err := c.getAllReplicaSetsAndSyncRevision(ctx, d, rsList, false)
	if err != nil {
		return err
	}
	all := withNew(old, newRS)

	scaledDown := false
	for _, rs := range filterActive(old) {
		changed, _, err := c.scaleReplicaSet(ctx, rs, 0, d)
		if err != nil {
			return err
		}
		scaledDown = scaledDown || changed
	}
	if scaledDown {
		return c.syncRolloutStatus(ctx, all, newRS, d)
	}
	running, err := c.oldPodsRunning(d, newRS, old, sel)
	if err != nil {
		return err
	}
	if running {
		return c.syncRolloutStatus(ctx, all, newRS, d)
	}
	if newRS == nil {
		newRS, old, err = c.getAllReplicaSetsAndSyncRevision(ctx, d, rsList, true)
		if err != nil {
			return err
		}
		all = withNew(old, newRS)
	}
	if _, _, err := c.scaleReplicaSet(ctx, newRS, dReplicas(d), d); err != nil {
		return err
	}
	if s := c.calculateStatus(all, newRS, d); deploymentComplete(d, &s) {
		if err := c.cleanupDeployment(ctx, old, d); err != nil {
			return err
		}
	}
	return c.syncRolloutStatus(ctx, all, newRS, d)
}

// oldPodsRunning reports whether old ReplicaSets still have pods that are
// not finished (Succeeded/Failed).
func (c *Controller) oldPodsRunning(d *apps.Deployment, newRS *apps.ReplicaSet, old []*apps.ReplicaSet, sel labels.Selector) (bool, error) {
	if actualCount(old) > 0 {
		return true, nil
	}
	oldUIDs := map[string]bool{}
	for _, rs := range old {
		oldUIDs[string(rs.UID)] = true
	}
	pods, err := c.podLister.Pods(d.Namespace).List(sel)
	if err != nil {
		return false, err
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	for _, p := range pods {
		ref := controllerRefOf(p)
		if ref == "" || !oldUIDs[ref] || (newRS != nil && string(newRS.UID) == ref) {
			continue
		}
		switch p.Status.Phase {
		case v1.PodSucceeded, v1.PodFailed:
			continue
		}
		return true, nil
	}
	return false, nil
}

func controllerRefOf(p *v1.Pod) string {
	for _, r := range p.OwnerReferences {
		if r.Controller != nil && *r.Controller {
			return string(r.UID)
		}
	}
	return ""
}
