package daemonset

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kelp-project/kelp/server/controllers/deployment"
)

// revisionPatch is what a ControllerRevision of a DaemonSet holds, as
// upstream's getPatch: a strategic merge patch that replaces the whole
// template. kubectl's rollout undo applies exactly this to the DaemonSet,
// and rollout history applies it to show a revision's template, so its
// shape is part of the wire contract.
func revisionPatch(ds *apps.DaemonSet) ([]byte, error) {
	b, err := json.Marshal(ds)
	if err != nil {
		return nil, err
	}
	var raw map[string]interface{}
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, err
	}
	spec, _ := raw["spec"].(map[string]interface{})
	template, _ := spec["template"].(map[string]interface{})
	if template == nil {
		return nil, fmt.Errorf("daemonset %s/%s has no template", ds.Namespace, ds.Name)
	}
	template["$patch"] = "replace"
	return json.Marshal(map[string]interface{}{"spec": map[string]interface{}{"template": template}})
}

// matchesRevision reports whether rev holds ds's current template.
func matchesRevision(ds *apps.DaemonSet, rev *apps.ControllerRevision) (bool, error) {
	patch, err := revisionPatch(ds)
	if err != nil {
		return false, err
	}
	return bytes.Equal(patch, rev.Data.Raw), nil
}

func maxRevision(revs []*apps.ControllerRevision) int64 {
	var m int64
	for _, r := range revs {
		m = max(m, r.Revision)
	}
	return m
}

// ownedRevisions returns the ControllerRevisions ds controls, adopting
// orphans its selector picks (as upstream's controlledHistories) so a
// DaemonSet deleted with --cascade=orphan and recreated keeps its history.
func (c *Controller) ownedRevisions(ctx context.Context, ds *apps.DaemonSet, sel labels.Selector) ([]*apps.ControllerRevision, error) {
	all, err := c.revLister.ControllerRevisions(ds.Namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	var out []*apps.ControllerRevision
	for _, rev := range all {
		ref := metav1.GetControllerOf(rev)
		switch {
		case ref != nil && ref.UID == ds.UID:
			out = append(out, rev)
		case ref == nil && ds.DeletionTimestamp == nil && sel.Matches(labels.Set(rev.Labels)):
			adopted := rev.DeepCopy()
			adopted.OwnerReferences = append(adopted.OwnerReferences, *metav1.NewControllerRef(ds, controllerKind))
			updated, err := c.client.AppsV1().ControllerRevisions(ds.Namespace).Update(ctx, adopted, metav1.UpdateOptions{})
			if err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				return nil, err
			}
			out = append(out, updated)
		}
	}
	return out, nil
}

// revisions finds (or creates) the ControllerRevision of ds's current
// template and returns it with the old ones. The current one always gets
// the highest revision number, so an undo to an old template renumbers it
// as the newest, as kubectl's rollout history expects.
func (c *Controller) revisions(ctx context.Context, ds *apps.DaemonSet, sel labels.Selector) (cur *apps.ControllerRevision, old []*apps.ControllerRevision, err error) {
	owned, err := c.ownedRevisions(ctx, ds, sel)
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
	next := maxRevision(old) + 1
	if len(current) == 0 {
		cur, err = c.snapshot(ctx, ds, next)
		return cur, old, err
	}
	cur, err = c.dedupRevisions(ctx, ds, current)
	if err != nil {
		return nil, nil, err
	}
	if cur.Revision < next {
		bumped := cur.DeepCopy()
		bumped.Revision = next
		if cur, err = c.client.AppsV1().ControllerRevisions(ds.Namespace).Update(ctx, bumped, metav1.UpdateOptions{}); err != nil {
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
// <ds>-<hash>. A name taken by a different template is a hash collision:
// status.collisionCount goes up (it feeds the hash) and the sync retries.
func (c *Controller) snapshot(ctx context.Context, ds *apps.DaemonSet, revision int64) (*apps.ControllerRevision, error) {
	patch, err := revisionPatch(ds)
	if err != nil {
		return nil, err
	}
	hash := deployment.ComputeHash(&ds.Spec.Template, ds.Status.CollisionCount)
	revLabels := make(map[string]string, len(ds.Spec.Template.Labels)+1)
	for k, v := range ds.Spec.Template.Labels {
		revLabels[k] = v
	}
	revLabels[revisionHashLabel] = hash
	rev := &apps.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name:            ds.Name + "-" + hash,
			Namespace:       ds.Namespace,
			Labels:          revLabels,
			Annotations:     ds.Annotations,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ds, controllerKind)},
		},
		Data:     runtime.RawExtension{Raw: patch},
		Revision: revision,
	}
	created, err := c.client.AppsV1().ControllerRevisions(ds.Namespace).Create(ctx, rev, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		return created, err
	}
	existing, getErr := c.client.AppsV1().ControllerRevisions(ds.Namespace).Get(ctx, rev.Name, metav1.GetOptions{})
	if getErr != nil {
		return nil, getErr
	}
	if ok, mErr := matchesRevision(ds, existing); mErr != nil || ok {
		return existing, mErr
	}
	fresh, getErr := c.client.AppsV1().DaemonSets(ds.Namespace).Get(ctx, ds.Name, metav1.GetOptions{})
	if getErr != nil {
		return nil, getErr
	}
	if !apiequality.Semantic.DeepEqual(fresh.Status.CollisionCount, ds.Status.CollisionCount) {
		return nil, fmt.Errorf("daemonset %s/%s: stale collisionCount, retrying", ds.Namespace, ds.Name)
	}
	n := int32(0)
	if fresh.Status.CollisionCount != nil {
		n = *fresh.Status.CollisionCount
	}
	n++
	fresh.Status.CollisionCount = &n
	if _, err := c.client.AppsV1().DaemonSets(ds.Namespace).UpdateStatus(ctx, fresh, metav1.UpdateOptions{}); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("daemonset %s/%s: hash collision on revision %s, collisionCount now %d", ds.Namespace, ds.Name, rev.Name, n)
}

// pruneRevisions deletes the oldest revisions beyond
// spec.revisionHistoryLimit, never one whose hash a live pod still has
// (it is what an OnDelete or paused rollout still runs).
func (c *Controller) pruneRevisions(ctx context.Context, ds *apps.DaemonSet, old []*apps.ControllerRevision, pods map[string][]*v1.Pod) error {
	limit := 10
	if ds.Spec.RevisionHistoryLimit != nil {
		limit = int(*ds.Spec.RevisionHistoryLimit)
	}
	excess := len(old) - limit
	if excess <= 0 {
		return nil
	}
	live := map[string]bool{}
	for _, ps := range pods {
		for _, p := range ps {
			if h := p.Labels[revisionHashLabel]; h != "" {
				live[h] = true
			}
		}
	}
	sorted := append([]*apps.ControllerRevision(nil), old...)
	sort.Slice(sorted, func(i, j int) bool {
		if sorted[i].Revision != sorted[j].Revision {
			return sorted[i].Revision < sorted[j].Revision
		}
		return sorted[i].Name < sorted[j].Name
	})
	for _, rev := range sorted {
		if excess <= 0 {
			break
		}
		if live[rev.Labels[revisionHashLabel]] {
			continue
		}
		if err := c.client.AppsV1().ControllerRevisions(ds.Namespace).Delete(ctx, rev.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		excess--
	}
	return nil
}
