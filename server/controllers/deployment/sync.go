package deployment

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// findNewReplicaSet splits rsList into the ReplicaSet whose template matches
// d (the oldest one if several do) and the rest.
func findNewReplicaSet(d *apps.Deployment, rsList []*apps.ReplicaSet) (*apps.ReplicaSet, []*apps.ReplicaSet) {
	sorted := append([]*apps.ReplicaSet{}, rsList...)
	sortByCreation(sorted)
	var newRS *apps.ReplicaSet
	var old []*apps.ReplicaSet
	for _, rs := range sorted {
		if newRS == nil && EqualIgnoreHash(&rs.Spec.Template, &d.Spec.Template) {
			newRS = rs
			continue
		}
		old = append(old, rs)
	}
	return newRS, old
}

// getAllReplicaSetsAndSyncRevision returns the new and old ReplicaSets,
// creating the new one when create is set, and syncs revision annotations.
func (c *Controller) getAllReplicaSetsAndSyncRevision(ctx context.Context, d *apps.Deployment, rsList []*apps.ReplicaSet, create bool) (*apps.ReplicaSet, []*apps.ReplicaSet, error) {
	existing, old := findNewReplicaSet(d, rsList)
	newRS, err := c.getNewReplicaSet(ctx, d, existing, old, create)
	if err != nil {
		return nil, nil, err
	}
	return newRS, old, nil
}

func (c *Controller) getNewReplicaSet(ctx context.Context, d *apps.Deployment, existing *apps.ReplicaSet, old []*apps.ReplicaSet, create bool) (*apps.ReplicaSet, error) {
	newRevision := strconv.FormatInt(maxRevision(old)+1, 10)
	now := metav1.NewTime(c.now())

	if existing != nil {
		rsCopy := existing.DeepCopy()
		annotationsUpdated := setNewReplicaSetAnnotations(d, rsCopy, newRevision, true)
		if annotationsUpdated || rsCopy.Spec.MinReadySeconds != d.Spec.MinReadySeconds {
			rsCopy.Spec.MinReadySeconds = d.Spec.MinReadySeconds
			return c.client.AppsV1().ReplicaSets(rsCopy.Namespace).Update(ctx, rsCopy, metav1.UpdateOptions{})
		}
		needsUpdate := setDeploymentRevision(d, rsCopy.Annotations[RevisionAnnotation])
		if hasProgressDeadline(d) && getCondition(&d.Status, apps.DeploymentProgressing) == nil {
			setCondition(&d.Status, newCondition(apps.DeploymentProgressing, v1.ConditionTrue, FoundNewRSReason,
				fmt.Sprintf("Found new replica set %q", rsCopy.Name), now))
			needsUpdate = true
		}
		if needsUpdate {
			if err := c.updateStatusInPlace(ctx, d); err != nil {
				return nil, err
			}
		}
		return rsCopy, nil
	}
	if !create {
		return nil, nil
	}

	hash := ComputeHash(&d.Spec.Template, d.Status.CollisionCount)
	tmpl := d.Spec.Template.DeepCopy()
	tmpl.Labels = cloneAndAdd(d.Spec.Template.Labels, DefaultPodTemplateHashKey, hash)
	sel := d.Spec.Selector.DeepCopy()
	sel.MatchLabels = cloneAndAdd(sel.MatchLabels, DefaultPodTemplateHashKey, hash)
	newRS := &apps.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name:            d.Name + "-" + hash,
			Namespace:       d.Namespace,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, controllerKind)},
			Labels:          tmpl.Labels,
		},
		Spec: apps.ReplicaSetSpec{
			Replicas:        new(int32),
			MinReadySeconds: d.Spec.MinReadySeconds,
			Selector:        sel,
			Template:        *tmpl,
		},
	}
	allRSs := withNew(old, newRS)
	n, err := newRSNewReplicas(d, allRSs, newRS)
	if err != nil {
		return nil, err
	}
	*newRS.Spec.Replicas = n
	setNewReplicaSetAnnotations(d, newRS, newRevision, false)

	created, err := c.client.AppsV1().ReplicaSets(d.Namespace).Create(ctx, newRS, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// A live read: the cache may predate a release we just did.
		rs, getErr := c.client.AppsV1().ReplicaSets(d.Namespace).Get(ctx, newRS.Name, metav1.GetOptions{})
		if getErr != nil {
			return nil, getErr
		}
		ref := metav1.GetControllerOf(rs)
		if ref != nil && ref.UID == d.UID && EqualIgnoreHash(&d.Spec.Template, &rs.Spec.Template) {
			// Our own RS, not yet in our cache's view of the world.
			return rs, nil
		}
		// A hash collision: bump collisionCount so the next name differs.
		if d.Status.CollisionCount == nil {
			d.Status.CollisionCount = new(int32)
		}
		*d.Status.CollisionCount++
		if uErr := c.updateStatusInPlace(ctx, d); uErr != nil {
			return nil, uErr
		}
		return nil, err
	}
	if err != nil {
		if hasProgressDeadline(d) {
			msg := fmt.Sprintf("Failed to create new replica set %q: %v", newRS.Name, err)
			setCondition(&d.Status, newCondition(apps.DeploymentProgressing, v1.ConditionFalse, FailedRSCreateReason, msg, now))
			_ = c.updateStatusInPlace(ctx, d)
		}
		c.recorder.Eventf(d, v1.EventTypeWarning, FailedRSCreateReason, "Failed to create new replica set %q: %v", newRS.Name, err)
		return nil, err
	}
	if n > 0 {
		c.recorder.Eventf(d, v1.EventTypeNormal, "ScalingReplicaSet", "Scaled up replica set %s from 0 to %d", created.Name, n)
	}
	needsUpdate := setDeploymentRevision(d, newRevision)
	if hasProgressDeadline(d) {
		setCondition(&d.Status, newCondition(apps.DeploymentProgressing, v1.ConditionTrue, NewReplicaSetReason,
			fmt.Sprintf("Created new replica set %q", created.Name), now))
		needsUpdate = true
	}
	if needsUpdate {
		if err := c.updateStatusInPlace(ctx, d); err != nil {
			return nil, err
		}
	}
	return created, nil
}

func cloneAndAdd(m map[string]string, k, v string) map[string]string {
	out := make(map[string]string, len(m)+1)
	for a, b := range m {
		out[a] = b
	}
	out[k] = v
	return out
}

func setDeploymentRevision(d *apps.Deployment, rev string) bool {
	if d.Annotations[RevisionAnnotation] == rev {
		return false
	}
	if d.Annotations == nil {
		d.Annotations = map[string]string{}
	}
	d.Annotations[RevisionAnnotation] = rev
	return true
}

// updateStatusInPlace writes d's status (and metadata annotations, which the
// status subresource keeps) and refreshes d from the response.
func (c *Controller) updateStatusInPlace(ctx context.Context, d *apps.Deployment) error {
	updated, err := c.client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	*d = *updated
	return nil
}

// newRSNewReplicas is the size the new ReplicaSet should have now.
func newRSNewReplicas(d *apps.Deployment, allRSs []*apps.ReplicaSet, newRS *apps.ReplicaSet) (int32, error) {
	if !isRollingUpdate(d) {
		return dReplicas(d), nil
	}
	s, u := rollingParams(d)
	surge, _, err := ResolveFenceposts(s, u, dReplicas(d))
	if err != nil {
		return 0, err
	}
	current := podsUntilScaled(allRSs)
	maxTotal := dReplicas(d) + surge
	if current >= maxTotal {
		return replicas(newRS), nil
	}
	up := maxTotal - current
	if lim := dReplicas(d) - replicas(newRS); up > lim {
		up = lim
	}
	return replicas(newRS) + up, nil
}

// isScalingEvent reports whether an active ReplicaSet was sized for a
// different replica count than the deployment now asks for.
func (c *Controller) isScalingEvent(ctx context.Context, d *apps.Deployment, rsList []*apps.ReplicaSet) (bool, error) {
	newRS, old, err := c.getAllReplicaSetsAndSyncRevision(ctx, d, rsList, false)
	if err != nil {
		return false, err
	}
	for _, rs := range filterActive(withNew(old, newRS)) {
		if desired, ok := intAnnotation(rs, DesiredReplicasAnnotation); ok && desired != dReplicas(d) {
			return true, nil
		}
	}
	return false, nil
}

// sync handles scaling events and paused deployments: no rollout, only
// (proportional) scaling and status.
func (c *Controller) sync(ctx context.Context, d *apps.Deployment, rsList []*apps.ReplicaSet) error {
	newRS, old, err := c.getAllReplicaSetsAndSyncRevision(ctx, d, rsList, false)
	if err != nil {
		return err
	}
	if err := c.scale(ctx, d, newRS, old); err != nil {
		return err
	}
	if d.Spec.Paused {
		if err := c.cleanupDeployment(ctx, old, d); err != nil {
			return err
		}
	}
	return c.syncDeploymentStatus(ctx, withNew(old, newRS), newRS, d)
}

func findActiveOrLatest(newRS *apps.ReplicaSet, old []*apps.ReplicaSet) *apps.ReplicaSet {
	if newRS == nil && len(old) == 0 {
		return nil
	}
	sorted := append([]*apps.ReplicaSet{}, old...)
	sortByCreation(sorted)
	active := filterActive(withNew(sorted, newRS))
	switch len(active) {
	case 0:
		if newRS != nil {
			return newRS
		}
		return sorted[len(sorted)-1]
	case 1:
		return active[0]
	}
	return nil
}

func isSaturated(d *apps.Deployment, rs *apps.ReplicaSet) bool {
	if rs == nil {
		return false
	}
	desired, ok := intAnnotation(rs, DesiredReplicasAnnotation)
	return ok && desired == dReplicas(d) && replicas(rs) == dReplicas(d) && rs.Status.AvailableReplicas == dReplicas(d)
}

// scale resizes ReplicaSets after a replica count change, proportionally
// across the active ones during a rollout.
func (c *Controller) scale(ctx context.Context, d *apps.Deployment, newRS *apps.ReplicaSet, old []*apps.ReplicaSet) error {
	if rs := findActiveOrLatest(newRS, old); rs != nil {
		if replicas(rs) == dReplicas(d) {
			return nil
		}
		_, _, err := c.scaleReplicaSet(ctx, rs, dReplicas(d), d)
		return err
	}
	if isSaturated(d, newRS) {
		for _, rs := range filterActive(old) {
			if _, _, err := c.scaleReplicaSet(ctx, rs, 0, d); err != nil {
				return err
			}
		}
		return nil
	}
	if !isRollingUpdate(d) {
		return nil
	}
	all := filterActive(withNew(old, newRS))
	allowed := dReplicas(d)
	if allowed > 0 {
		allowed += MaxSurge(d)
	}
	toAdd := allowed - sumSpec(all)
	// Grow the largest (newest on ties) first; shrink the largest (oldest on ties) first.
	sort.SliceStable(all, func(i, j int) bool {
		if replicas(all[i]) != replicas(all[j]) {
			return replicas(all[i]) > replicas(all[j])
		}
		if toAdd > 0 {
			return all[j].CreationTimestamp.Before(&all[i].CreationTimestamp)
		}
		return all[i].CreationTimestamp.Before(&all[j].CreationTimestamp)
	})
	sizes := map[string]int32{}
	var added int32
	for _, rs := range all {
		if toAdd != 0 {
			p := proportion(rs, d, toAdd, added)
			sizes[rs.Name] = replicas(rs) + p
			added += p
		} else {
			sizes[rs.Name] = replicas(rs)
		}
	}
	if toAdd != 0 && len(all) > 0 {
		sizes[all[0].Name] += toAdd - added
		if sizes[all[0].Name] < 0 {
			sizes[all[0].Name] = 0
		}
	}
	for _, rs := range all {
		if _, _, err := c.scaleReplicaSet(ctx, rs, sizes[rs.Name], d); err != nil {
			return err
		}
	}
	return nil
}

func proportion(rs *apps.ReplicaSet, d *apps.Deployment, toAdd, added int32) int32 {
	if rs == nil || replicas(rs) == 0 || toAdd == 0 || toAdd == added {
		return 0
	}
	frac := fraction(rs, d)
	allowed := toAdd - added
	if toAdd > 0 {
		if frac < allowed {
			return frac
		}
		return allowed
	}
	if frac > allowed {
		return frac
	}
	return allowed
}

func fraction(rs *apps.ReplicaSet, d *apps.Deployment) int32 {
	if dReplicas(d) == 0 {
		return -replicas(rs)
	}
	total := dReplicas(d) + MaxSurge(d)
	annotated, ok := intAnnotation(rs, MaxReplicasAnnotation)
	if !ok {
		annotated = d.Status.Replicas
	}
	if annotated == 0 {
		return 0
	}
	size := float64(replicas(rs)*total) / float64(annotated)
	return int32(math.Round(size)) - replicas(rs)
}

// scaleReplicaSet sets the size and the desired/max annotations of rs and
// emits a ScalingReplicaSet event when the size changes.
func (c *Controller) scaleReplicaSet(ctx context.Context, rs *apps.ReplicaSet, newScale int32, d *apps.Deployment) (bool, *apps.ReplicaSet, error) {
	sizeChange := replicas(rs) != newScale
	rsCopy := rs.DeepCopy()
	annChange := setReplicasAnnotations(rsCopy, dReplicas(d), dReplicas(d)+MaxSurge(d))
	if !sizeChange && !annChange {
		return false, rs, nil
	}
	oldScale := replicas(rs)
	rsCopy.Spec.Replicas = &newScale
	updated, err := c.client.AppsV1().ReplicaSets(rs.Namespace).Update(ctx, rsCopy, metav1.UpdateOptions{})
	if err != nil {
		return false, nil, err
	}
	*rs = *updated // later steps in this sync see the new size
	if sizeChange {
		op := "down"
		if newScale > oldScale {
			op = "up"
		}
		c.recorder.Eventf(d, v1.EventTypeNormal, "ScalingReplicaSet", "Scaled %s replica set %s from %d to %d", op, rs.Name, oldScale, newScale)
	}
	return sizeChange, rs, nil
}

// cleanupDeployment deletes the oldest fully scaled-down ReplicaSets beyond
// revisionHistoryLimit.
func (c *Controller) cleanupDeployment(ctx context.Context, old []*apps.ReplicaSet, d *apps.Deployment) error {
	if d.Spec.RevisionHistoryLimit == nil {
		return nil
	}
	var cleanable []*apps.ReplicaSet
	for _, rs := range old {
		if rs != nil && rs.DeletionTimestamp == nil {
			cleanable = append(cleanable, rs)
		}
	}
	diff := len(cleanable) - int(*d.Spec.RevisionHistoryLimit)
	if diff <= 0 {
		return nil
	}
	sort.SliceStable(cleanable, func(i, j int) bool {
		ri, _ := Revision(cleanable[i])
		rj, _ := Revision(cleanable[j])
		if ri == rj {
			return cleanable[i].CreationTimestamp.Before(&cleanable[j].CreationTimestamp)
		}
		return ri < rj
	})
	for i := 0; i < diff; i++ {
		rs := cleanable[i]
		if rs.Status.Replicas != 0 || replicas(rs) != 0 || rs.Generation > rs.Status.ObservedGeneration || rs.DeletionTimestamp != nil {
			continue
		}
		err := c.client.AppsV1().ReplicaSets(rs.Namespace).Delete(ctx, rs.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// calculateStatus derives replica counts and the Available condition.
func (c *Controller) calculateStatus(allRSs []*apps.ReplicaSet, newRS *apps.ReplicaSet, d *apps.Deployment) apps.DeploymentStatus {
	available := availableCount(allRSs)
	unavailable := sumSpec(allRSs) - available
	if unavailable < 0 {
		unavailable = 0
	}
	var updated int32
	if newRS != nil {
		updated = newRS.Status.Replicas
	}
	s := apps.DeploymentStatus{
		ObservedGeneration:  d.Generation,
		Replicas:            actualCount(allRSs),
		UpdatedReplicas:     updated,
		ReadyReplicas:       readyCount(allRSs),
		AvailableReplicas:   available,
		UnavailableReplicas: unavailable,
		CollisionCount:      d.Status.CollisionCount,
	}
	s.Conditions = append(s.Conditions, d.Status.Conditions...)
	now := metav1.NewTime(c.now())
	if available >= dReplicas(d)-MaxUnavailable(d) {
		setCondition(&s, newCondition(apps.DeploymentAvailable, v1.ConditionTrue, MinimumReplicasAvailable, "Deployment has minimum availability.", now))
	} else {
		setCondition(&s, newCondition(apps.DeploymentAvailable, v1.ConditionFalse, MinimumReplicasUnavailable, "Deployment does not have minimum availability.", now))
	}
	return s
}

func (c *Controller) syncDeploymentStatus(ctx context.Context, allRSs []*apps.ReplicaSet, newRS *apps.ReplicaSet, d *apps.Deployment) error {
	s := c.calculateStatus(allRSs, newRS, d)
	if reflect.DeepEqual(d.Status, s) {
		return nil
	}
	d.Status = s
	return c.updateStatusInPlace(ctx, d)
}

func (c *Controller) syncStatusOnly(ctx context.Context, d *apps.Deployment, rsList []*apps.ReplicaSet) error {
	newRS, old, err := c.getAllReplicaSetsAndSyncRevision(ctx, d, rsList, false)
	if err != nil {
		return err
	}
	return c.syncDeploymentStatus(ctx, withNew(old, newRS), newRS, d)
}

// syncRolloutStatus updates the status with the Progressing condition and
// requeues the deployment for when its progress deadline would pass.
func (c *Controller) syncRolloutStatus(ctx context.Context, allRSs []*apps.ReplicaSet, newRS *apps.ReplicaSet, d *apps.Deployment) error {
	s := c.calculateStatus(allRSs, newRS, d)
	if !hasProgressDeadline(d) {
		removeCondition(&s, apps.DeploymentProgressing)
	}
	cur := getCondition(&d.Status, apps.DeploymentProgressing)
	complete := s.Replicas == s.UpdatedReplicas && cur != nil && cur.Reason == NewRSAvailableReason
	now := metav1.NewTime(c.now())
	if hasProgressDeadline(d) && !complete {
		switch {
		case deploymentComplete(d, &s):
			msg := fmt.Sprintf("Deployment %q has successfully progressed.", d.Name)
			if newRS != nil {
				msg = fmt.Sprintf("ReplicaSet %q has successfully progressed.", newRS.Name)
			}
			setCondition(&s, newCondition(apps.DeploymentProgressing, v1.ConditionTrue, NewRSAvailableReason, msg, now))
		case deploymentProgressing(d, &s):
			msg := fmt.Sprintf("Deployment %q is progressing.", d.Name)
			if newRS != nil {
				msg = fmt.Sprintf("ReplicaSet %q is progressing.", newRS.Name)
			}
			cond := newCondition(apps.DeploymentProgressing, v1.ConditionTrue, ReplicaSetUpdatedReason, msg, now)
			if cur != nil {
				if cur.Status == v1.ConditionTrue {
					cond.LastTransitionTime = cur.LastTransitionTime
				}
				removeCondition(&s, apps.DeploymentProgressing)
			}
			setCondition(&s, cond)
		case c.timedOut(d, &s):
			msg := fmt.Sprintf("Deployment %q has timed out progressing.", d.Name)
			if newRS != nil {
				msg = fmt.Sprintf("ReplicaSet %q has timed out progressing.", newRS.Name)
			}
			setCondition(&s, newCondition(apps.DeploymentProgressing, v1.ConditionFalse, TimedOutReason, msg, now))
			c.recorder.Event(d, v1.EventTypeWarning, TimedOutReason, msg)
		}
	}
	// Surface a ReplicaFailure from any ReplicaSet (e.g. quota errors).
	var failure *apps.ReplicaSetCondition
	for _, rs := range allRSs {
		if rs == nil {
			continue
		}
		for i := range rs.Status.Conditions {
			if rs.Status.Conditions[i].Type == apps.ReplicaSetReplicaFailure {
				failure = &rs.Status.Conditions[i]
			}
		}
	}
	if failure != nil {
		setCondition(&s, apps.DeploymentCondition{Type: apps.DeploymentReplicaFailure, Status: failure.Status,
			Reason: failure.Reason, Message: failure.Message, LastUpdateTime: now, LastTransitionTime: failure.LastTransitionTime})
	} else {
		removeCondition(&s, apps.DeploymentReplicaFailure)
	}

	if reflect.DeepEqual(d.Status, s) {
		c.requeueStuck(d, s)
		return nil
	}
	d.Status = s
	return c.updateStatusInPlace(ctx, d)
}

func (c *Controller) timedOut(d *apps.Deployment, s *apps.DeploymentStatus) bool {
	if !hasProgressDeadline(d) {
		return false
	}
	cond := getCondition(s, apps.DeploymentProgressing)
	if cond == nil || cond.Reason == NewRSAvailableReason {
		return false
	}
	if cond.Reason == TimedOutReason {
		return true
	}
	deadline := cond.LastUpdateTime.Add(time.Duration(*d.Spec.ProgressDeadlineSeconds) * time.Second)
	return deadline.Before(c.now())
}

// requeueStuck schedules a resync for when the progress deadline passes;
// it returns the delay (-1 when no requeue is needed).
func (c *Controller) requeueStuck(d *apps.Deployment, s apps.DeploymentStatus) time.Duration {
	cur := getCondition(&d.Status, apps.DeploymentProgressing)
	if !hasProgressDeadline(d) || cur == nil {
		return -1
	}
	if deploymentComplete(d, &s) || cur.Reason == TimedOutReason {
		return -1
	}
	after := cur.LastUpdateTime.Add(time.Duration(*d.Spec.ProgressDeadlineSeconds) * time.Second).Sub(c.now())
	if after < time.Second {
		key, err := keyOf(d)
		if err == nil {
			c.queue.AddRateLimited(key)
		}
		return 0
	}
	c.enqueueAfter(d, after+time.Second)
	return after + time.Second
}

func keyOf(d *apps.Deployment) (string, error) {
	return d.Namespace + "/" + d.Name, nil
}
