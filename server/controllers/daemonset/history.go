package daemonset

import (
	"bytes"
	"context"
	"fmt"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kelp-project/kelp/server/controllers/deployment"
	"github.com/kelp-project/kelp/server/controllers/history"
)

// revisionPatch is what a ControllerRevision of a DaemonSet holds: the
// shared template-replacing patch (history.TemplatePatch).
func revisionPatch(ds *apps.DaemonSet) ([]byte, error) {
	return history.TemplatePatch(ds)
}

// matchesRevision reports whether rev holds ds's current template.
func matchesRevision(ds *apps.DaemonSet, rev *apps.ControllerRevision) (bool, error) {
	patch, err := revisionPatch(ds)
	if err != nil {
		return false, err
	}
	return bytes.Equal(patch, rev.Data.Raw), nil
}

// revisions finds (or creates) the ControllerRevision of ds's current
// template and returns it with the old ones. The current one always gets
// the highest revision number, so an undo to an old template renumbers it
// as the newest, as kubectl's rollout history expects.
func (c *Controller) revisions(ctx context.Context, ds *apps.DaemonSet, sel labels.Selector) (cur *apps.ControllerRevision, old []*apps.ControllerRevision, err error) {
	owned, err := c.history.Owned(ctx, ds, controllerKind, sel)
	if err != nil {
		return nil, nil, err
	}
	var current []*apps.ControllerRevision
	for _, rev := range owned {
		if _, ok := rev.Labels[revisionHashLabel]; !ok {
			// Upstream labels pre-hash revisions with their name.
			fixed := rev.DeepCopy()
			if fixed.Labels == nil {
				fixed.Labels = map[string]string{}
			}
			fixed.Labels[revisionHashLabel] = fixed.Name
			if rev, err = c.client.AppsV1().ControllerRevisions(ds.Namespace).Update(ctx, fixed, metav1.UpdateOptions{}); err != nil {
				return nil, nil, err
			}
		}
		ok, err := matchesRevision(ds, rev)
		if err != nil {
			return nil, nil, err
		}
		if ok {
			current = append(current, rev)
		} else {
			old = append(old, rev)
		}
	}
	next := history.Max(old) + 1
	if len(current) == 0 {
		cur, err = c.snapshot(ctx, ds, next)
		return cur, old, err
	}
	cur, err = c.dedupRevisions(ctx, ds, current)
	if err != nil {
		return nil, nil, err
	}
	if cur.Revision < next {
		if cur, err = c.history.Renumber(ctx, cur, next); err != nil {
			return nil, nil, err
		}
	}
	return cur, old, nil
}

// dedupRevisions keeps the highest-numbered of several revisions holding
// the same template (left by a racing writer), relabels the pods of the
// others with its hash, and deletes the others.
func (c *Controller) dedupRevisions(ctx context.Context, ds *apps.DaemonSet, revs []*apps.ControllerRevision) (*apps.ControllerRevision, error) {
	if len(revs) == 1 {
		return revs[0], nil
	}
	keep := revs[0]
	for _, r := range revs[1:] {
		if r.Revision > keep.Revision {
			keep = r
		}
	}
	hash := keep.Labels[revisionHashLabel]
	pods, err := c.podLister.Pods(ds.Namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	for _, r := range revs {
		if r == keep {
			continue
		}
		for _, p := range pods {
			if ref := metav1.GetControllerOf(p); ref == nil || ref.UID != ds.UID || p.Labels[revisionHashLabel] != r.Labels[revisionHashLabel] {
				continue
			}
			patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, revisionHashLabel, hash)
			if _, err := c.client.CoreV1().Pods(ds.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return nil, err
			}
		}
		if err := c.client.AppsV1().ControllerRevisions(ds.Namespace).Delete(ctx, r.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
	}
	return keep, nil
}

// snapshot creates the revision of ds's current template, named
// <ds>-<hash of the template>. A name taken by a different template is a
// hash collision: the next collision count is tried, and the count the
// revision was made with is recorded in ds's status.collisionCount (it
// feeds the hash from then on).
func (c *Controller) snapshot(ctx context.Context, ds *apps.DaemonSet, revision int64) (*apps.ControllerRevision, error) {
	patch, err := revisionPatch(ds)
	if err != nil {
		return nil, err
	}
	rev := history.New(ds, controllerKind, ds.Spec.Template.Labels, patch, revision)
	hash := func(n *int32) string { return deployment.ComputeHash(&ds.Spec.Template, n) }
	created, collisions, err := c.history.Create(ctx, ds.Name, rev, hash, ds.Status.CollisionCount)
	if err != nil || apiequality.Semantic.DeepEqual(collisions, ds.Status.CollisionCount) {
		return created, err
	}
	fresh, err := c.client.AppsV1().DaemonSets(ds.Namespace).Get(ctx, ds.Name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if fresh.UID != ds.UID {
		return nil, fmt.Errorf("daemonset %s/%s was replaced", ds.Namespace, ds.Name)
	}
	fresh.Status.CollisionCount = collisions
	if _, err := c.client.AppsV1().DaemonSets(ds.Namespace).UpdateStatus(ctx, fresh, metav1.UpdateOptions{}); err != nil {
		return nil, err
	}
	ds.Status.CollisionCount = collisions
	return created, nil
}

// pruneRevisions deletes the oldest revisions beyond
// spec.revisionHistoryLimit, never one whose hash a live pod still has
// (it is what an OnDelete or paused rollout still runs).
func (c *Controller) pruneRevisions(ctx context.Context, ds *apps.DaemonSet, old []*apps.ControllerRevision, pods map[string][]*v1.Pod) error {
	limit := 10
	if ds.Spec.RevisionHistoryLimit != nil {
		limit = int(*ds.Spec.RevisionHistoryLimit)
	}
	live := map[string]bool{}
	for _, ps := range pods {
		for _, p := range ps {
			if h := p.Labels[revisionHashLabel]; h != "" {
				live[h] = true
			}
		}
	}
	return c.history.Prune(ctx, old, len(old)-limit, func(rev *apps.ControllerRevision) bool { return live[rev.Labels[revisionHashLabel]] })
}
