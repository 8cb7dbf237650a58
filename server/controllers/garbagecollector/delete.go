package garbagecollector

import (
	"context"
	"fmt"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ownerState is what a live lookup says about one ownerReference.
type ownerState int

const (
	ownerSolid    ownerState = iota // exists and is not waiting for its dependents
	ownerDangling                   // absent, or replaced by another object (other UID)
	ownerWaiting                    // being deleted in the foreground
)

// syncAttemptToDelete looks at one object whose owners may be gone, or
// that is itself being deleted in the foreground.
func (gc *GarbageCollector) syncAttemptToDelete(ctx context.Context, key string) error {
	if !gc.synced() {
		return &requeue{reason: "monitors not synced", after: notSyncedRequeue}
	}
	uid := types.UID(key)
	n, ok := gc.graph.get(uid)
	if !ok || n.virtual {
		return nil
	}
	if n.beingDeleted && !n.deletingDependents {
		return nil // already going away; nothing left for us to do
	}
	client := gc.metadata.Resource(n.resource).Namespace(n.identity.Namespace)
	latest, err := client.Get(ctx, n.identity.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil // the delete event will follow
	}
	if err != nil {
		return err
	}
	if latest.UID != uid {
		return nil // replaced; the new object has its own key
	}
	if n.deletingDependents {
		return gc.processDeletingDependents(ctx, n)
	}
	refs := latest.OwnerReferences
	if len(refs) == 0 {
		return nil
	}

	deps, _ := gc.graph.dependents(uid)
	var solid, dangling, waiting []metav1.OwnerReference
	for _, ref := range refs {
		st, err := gc.classifyOwner(ctx, n, ref)
		if err != nil {
			return err
		}
		switch st {
		case ownerSolid:
			solid = append(solid, ref)
		case ownerDangling:
			dangling = append(dangling, ref)
		case ownerWaiting:
			waiting = append(waiting, ref)
		}
	}

	switch {
	case len(solid) > 0:
		if len(dangling) == 0 && len(waiting) == 0 {
			return nil
		}
		// The object stays for its live owners; references to gone owners
		// are dropped, and so are those to foreground-deleting owners, which
		// must not wait for an object that is not going away.
		drop := map[types.UID]bool{}
		for _, r := range append(dangling, waiting...) {
			drop[r.UID] = true
		}
		logrus.Debugf("garbage collector: %s %s/%s keeps %d owner(s), removing %d reference(s)",
			n.identity.Kind, n.identity.Namespace, n.identity.Name, len(solid), len(drop))
		return gc.removeOwnerRefs(ctx, n, drop)
	case len(waiting) > 0 && len(deps) > 0:
		// An owner waits for this object: delete it in the foreground too,
		// so the owner's wait covers this object's own dependents. If one
		// of those dependents is itself deleting in the foreground, the
		// owners may be waiting on a circle (A waits for B, B for C, C for
		// A) that would never end: as upstream, this object stops blocking
		// its owners first (blockOwnerDeletion=false on its references),
		// which breaks any such circle at the cost of an owner going before
		// this object in a chain that was not one.
		for _, d := range deps {
			if d.deletingDependents {
				logrus.Debugf("garbage collector: %s %s/%s has an owner and a dependent deleting in the foreground; unblocking its owners to break a possible circle",
					n.identity.Kind, n.identity.Namespace, n.identity.Name)
				if err := gc.unblockOwnerRefs(ctx, n); err != nil {
					return err
				}
				break
			}
		}
		return gc.deleteObject(ctx, n, metav1.DeletePropagationForeground)
	default:
		// Without dependents of its own, an object whose owner waits for it
		// is deleted as its finalizers ask, else in the background, as
		// upstream.
		policy := metav1.DeletePropagationBackground
		switch {
		case hasFinalizer(latest.Finalizers, metav1.FinalizerOrphanDependents):
			policy = metav1.DeletePropagationOrphan
		case hasFinalizer(latest.Finalizers, metav1.FinalizerDeleteDependents):
			policy = metav1.DeletePropagationForeground
		}
		return gc.deleteObject(ctx, n, policy)
	}
}

// classifyOwner looks the owner up live: the caches may lag behind, and an
// owner only seen in ownerReferences may never have existed.
func (gc *GarbageCollector) classifyOwner(ctx context.Context, dep nodeInfo, ref metav1.OwnerReference) (ownerState, error) {
	gvr, namespaced, err := gc.mapping(ref.APIVersion, ref.Kind)
	if err != nil {
		logrus.WithError(err).Debugf("garbage collector: %s %s/%s: skipping, owner kind %s %s is unknown",
			dep.identity.Kind, dep.identity.Namespace, dep.identity.Name, ref.APIVersion, ref.Kind)
		return 0, &unmappableError{ref: ref, after: gc.period, err: err}
	}
	ns := ""
	if namespaced {
		if dep.identity.Namespace == "" {
			// A cluster-scoped dependent cannot have a namespaced owner: the
			// reference cannot be resolved, so it protects the dependent.
			logrus.Debugf("garbage collector: cluster-scoped %s %s has namespaced owner kind %s; ignored",
				dep.identity.Kind, dep.identity.Name, ref.Kind)
			return ownerSolid, nil
		}
		// Owners are looked up in the dependent's namespace only: an owner
		// elsewhere is absent as far as this dependent is concerned.
		ns = dep.identity.Namespace
	}
	if gc.absent.has(ref.UID, ns) {
		return ownerDangling, nil
	}
	owner, err := gc.metadata.Resource(gvr).Namespace(ns).Get(ctx, ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err), err == nil && owner.UID != ref.UID:
		gc.absent.add(ref.UID, ns)
		return ownerDangling, nil
	case err != nil:
		return 0, fmt.Errorf("get owner %s %s/%s: %w", gvr, ns, ref.Name, err)
	case owner.DeletionTimestamp != nil && hasFinalizer(owner.Finalizers, metav1.FinalizerDeleteDependents):
		return ownerWaiting, nil
	default:
		return ownerSolid, nil
	}
}

// processDeletingDependents handles an owner being deleted in the
// foreground: its dependents are deleted, and its foregroundDeletion
// finalizer goes once no dependent with blockOwnerDeletion exists any more.
func (gc *GarbageCollector) processDeletingDependents(ctx context.Context, n nodeInfo) error {
	deps, blocking := gc.graph.dependents(n.identity.UID)
	for _, d := range deps {
		if !d.beingDeleted && !d.virtual {
			gc.attemptToDelete.Add(string(d.identity.UID))
		}
	}
	if blocking > 0 {
		// Each blocking dependent's removal re-queues this owner.
		logrus.Debugf("garbage collector: %s %s/%s waits for %d blocking dependent(s)",
			n.identity.Kind, n.identity.Namespace, n.identity.Name, blocking)
		return nil
	}
	return gc.removeFinalizer(ctx, n, metav1.FinalizerDeleteDependents)
}

// deleteObject deletes the object n with the given propagation policy,
// precondition on its UID so a newer object with the same name survives.
func (gc *GarbageCollector) deleteObject(ctx context.Context, n nodeInfo, policy metav1.DeletionPropagation) error {
	uid := n.identity.UID
	logrus.Debugf("garbage collector: deleting %s %s/%s (%s)", n.identity.Kind, n.identity.Namespace, n.identity.Name, policy)
	err := gc.metadata.Resource(n.resource).Namespace(n.identity.Namespace).Delete(ctx, n.identity.Name,
		metav1.DeleteOptions{PropagationPolicy: &policy, Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone, or replaced by another object
	}
	return err
}
