// Package history is the ControllerRevision bookkeeping the DaemonSet and
// StatefulSet controllers share (upstream's pkg/controller/history): a
// revision's data is a strategic merge patch that puts a template back
// (what kubectl's rollout history shows and rollout undo applies), its
// name is <owner>-<hash>, orphans the owner's selector picks are adopted,
// a name taken by another template is a collision that moves the hash on,
// and history beyond the owner's limit is pruned oldest first.
package history

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"

	apps "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
)

// HashLabel is the label carrying a revision's hash (on revisions, and on
// the pods of a DaemonSet or StatefulSet).
const HashLabel = apps.ControllerRevisionHashLabelKey

// TemplatePatch is what a revision of obj (a DaemonSet or StatefulSet,
// anything with spec.template) holds, as upstream's getPatch: a strategic
// merge patch {"spec":{"template":{...,"$patch":"replace"}}} that replaces
// the whole template. kubectl's rollout undo applies exactly this, and
// rollout history applies it to show a revision, so its shape is part of
// the wire contract. Keys come out sorted, so equal templates give equal
// bytes.
func TemplatePatch(obj interface{}) ([]byte, error) {
	b, err := json.Marshal(obj)
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
		return nil, fmt.Errorf("%T has no spec.template", obj)
	}
	template["$patch"] = "replace"
	return json.Marshal(map[string]interface{}{"spec": map[string]interface{}{"template": template}})
}

// HashData is the hash of a revision's data and collision count, as
// upstream's HashControllerRevision (FNV-32 of the data, then the count
// in decimal, safe-encoded): a StatefulSet's revision names come from it.
func HashData(data []byte, collisionCount *int32) string {
	h := fnv.New32()
	h.Write(data)
	if collisionCount != nil {
		h.Write([]byte(strconv.FormatInt(int64(*collisionCount), 10)))
	}
	return rand.SafeEncodeString(strconv.FormatUint(uint64(h.Sum32()), 10))
}

// Name is a revision's name: the owner's (cut to leave room, as
// upstream) and the hash.
func Name(prefix, hash string) string {
	if len(prefix) > 223 {
		prefix = prefix[:223]
	}
	return prefix + "-" + hash
}

// Max is the highest revision number among revs (0 for none).
func Max(revs []*apps.ControllerRevision) int64 {
	var m int64
	for _, r := range revs {
		m = max(m, r.Revision)
	}
	return m
}

// Sort orders revs oldest first: by revision number, then creation, then
// name.
func Sort(revs []*apps.ControllerRevision) {
	sort.SliceStable(revs, func(i, j int) bool {
		a, b := revs[i], revs[j]
		if a.Revision != b.Revision {
			return a.Revision < b.Revision
		}
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	})
}

// Store reads revisions from the informer's cache and writes them through
// the API.
type Store struct {
	Client kubernetes.Interface
	Lister appslisters.ControllerRevisionLister
}

// Owned returns the revisions owner controls, adopting the orphans its
// selector picks (as upstream's controlledHistories), so an owner deleted
// with --cascade=orphan and recreated keeps its history. An owner being
// deleted adopts nothing.
func (s Store) Owned(ctx context.Context, owner metav1.Object, kind schema.GroupVersionKind, sel labels.Selector) ([]*apps.ControllerRevision, error) {
	all, err := s.Lister.ControllerRevisions(owner.GetNamespace()).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	var out []*apps.ControllerRevision
	for _, rev := range all {
		ref := metav1.GetControllerOf(rev)
		switch {
		case ref != nil && ref.UID == owner.GetUID():
			out = append(out, rev)
		case ref == nil && owner.GetDeletionTimestamp() == nil && !sel.Empty() && sel.Matches(labels.Set(rev.Labels)):
			adopted := rev.DeepCopy()
			adopted.OwnerReferences = append(adopted.OwnerReferences, *metav1.NewControllerRef(owner, kind))
			updated, err := s.Client.AppsV1().ControllerRevisions(rev.Namespace).Update(ctx, adopted, metav1.UpdateOptions{})
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

// New is the revision of an owner's template: a copy of the template's
// labels (Create adds the hash label to it), the owner's annotations, the
// owner as controller, the patch as data, and its number.
func New(owner metav1.Object, kind schema.GroupVersionKind, templateLabels map[string]string, patch []byte, revision int64) *apps.ControllerRevision {
	revLabels := make(map[string]string, len(templateLabels)+1)
	for k, v := range templateLabels {
		revLabels[k] = v
	}
	return &apps.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       owner.GetNamespace(),
			Labels:          revLabels,
			Annotations:     owner.GetAnnotations(),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(owner, kind)},
		},
		Data:     runtime.RawExtension{Raw: patch},
		Revision: revision,
	}
}

// Create writes rev (its data, labels, owner and number filled in) under
// the name Name(prefix, hash(collisionCount)), also setting HashLabel. A
// name already taken by a revision with the same data is that revision; a
// name taken by other data is a hash collision: the count goes up and the
// next name is tried, as upstream. It returns the revision and the
// collision count it ended on, which the owner records in its status.
func (s Store) Create(ctx context.Context, prefix string, rev *apps.ControllerRevision, hash func(collisionCount *int32) string, collisionCount *int32) (*apps.ControllerRevision, *int32, error) {
	var count *int32
	if collisionCount != nil {
		n := *collisionCount
		count = &n
	}
	for range 100 {
		h := hash(count)
		try := rev.DeepCopy()
		try.Name = Name(prefix, h)
		if try.Labels == nil {
			try.Labels = map[string]string{}
		}
		try.Labels[HashLabel] = h
		created, err := s.Client.AppsV1().ControllerRevisions(rev.Namespace).Create(ctx, try, metav1.CreateOptions{})
		if err == nil {
			return created, count, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, count, err
		}
		existing, err := s.Client.AppsV1().ControllerRevisions(rev.Namespace).Get(ctx, try.Name, metav1.GetOptions{})
		if err != nil {
			return nil, count, err
		}
		if bytes.Equal(existing.Data.Raw, try.Data.Raw) {
			return existing, count, nil
		}
		n := int32(0)
		if count != nil {
			n = *count
		}
		n++
		count = &n
	}
	return nil, count, fmt.Errorf("revision %s/%s: no free name after 100 hash collisions", rev.Namespace, prefix)
}

// Renumber gives rev the revision number n (an undo to an old template
// makes it the newest again, as kubectl's rollout history expects).
func (s Store) Renumber(ctx context.Context, rev *apps.ControllerRevision, n int64) (*apps.ControllerRevision, error) {
	if rev.Revision == n {
		return rev, nil
	}
	bumped := rev.DeepCopy()
	bumped.Revision = n
	return s.Client.AppsV1().ControllerRevisions(rev.Namespace).Update(ctx, bumped, metav1.UpdateOptions{})
}

// Prune deletes up to excess of revs, oldest first, skipping those live
// says are still in use (by a pod, or as the owner's current or update
// revision).
func (s Store) Prune(ctx context.Context, revs []*apps.ControllerRevision, excess int, live func(*apps.ControllerRevision) bool) error {
	if excess <= 0 {
		return nil
	}
	sorted := append([]*apps.ControllerRevision(nil), revs...)
	Sort(sorted)
	for _, rev := range sorted {
		if excess <= 0 {
			break
		}
		if live(rev) {
			continue
		}
		if err := s.Client.AppsV1().ControllerRevisions(rev.Namespace).Delete(ctx, rev.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		excess--
	}
	return nil
}
