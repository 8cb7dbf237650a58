package garbagecollector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

// syncAttemptToOrphan handles an owner deleted with propagationPolicy
// Orphan: its dependents lose their references to it, then the orphan
// finalizer goes and the API server can remove the owner.
func (gc *GarbageCollector) syncAttemptToOrphan(ctx context.Context, key string) error {
	if !gc.synced() {
		return &requeue{reason: "monitors not synced", after: notSyncedRequeue}
	}
	uid := types.UID(key)
	n, ok := gc.graph.get(uid)
	if !ok || n.virtual {
		return nil
	}
	owner, err := gc.metadata.Resource(n.resource).Namespace(n.identity.Namespace).Get(ctx, n.identity.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if owner.UID != uid || owner.DeletionTimestamp == nil || !hasFinalizer(owner.Finalizers, metav1.FinalizerOrphanDependents) {
		return nil
	}
	deps, _ := gc.graph.dependents(uid)
	var errs []error
	for _, d := range deps {
		if d.virtual {
			continue
		}
		if err := gc.removeOwnerRefs(ctx, d, map[types.UID]bool{uid: true}); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	logrus.Debugf("garbage collector: orphaned %d dependent(s) of %s %s/%s", len(deps), n.identity.Kind, n.identity.Namespace, n.identity.Name)
	return gc.removeFinalizer(ctx, n, metav1.FinalizerOrphanDependents)
}

// metadataPatch is a JSON merge patch of metadata. The UID makes the patch
// fail rather than touch a newer object of the same name, and the
// resourceVersion makes a concurrent change a 409 so that the lists, which
// replace the server's wholesale, are recomputed from a fresh read.
type metadataPatch struct {
	Metadata struct {
		UID             types.UID                `json:"uid"`
		ResourceVersion string                   `json:"resourceVersion,omitempty"`
		OwnerReferences *[]metav1.OwnerReference `json:"ownerReferences,omitempty"`
		Finalizers      *[]string                `json:"finalizers,omitempty"`
	} `json:"metadata"`
}

// removeOwnerRefs removes the ownerReferences whose UID is in drop from the
// live object n.
func (gc *GarbageCollector) removeOwnerRefs(ctx context.Context, n nodeInfo, drop map[types.UID]bool) error {
	return gc.patchMetadata(ctx, n, func(cur *metav1.PartialObjectMetadata, p *metadataPatch) bool {
		var kept []metav1.OwnerReference
		for _, r := range cur.OwnerReferences {
			if !drop[r.UID] {
				kept = append(kept, r)
			}
		}
		if len(kept) == len(cur.OwnerReferences) {
			return false
		}
		p.Metadata.OwnerReferences = &kept
		return true
	})
}

// unblockOwnerRefs sets blockOwnerDeletion=false on every reference of
// the live object n that has it true, so no owner waits for n any more.
func (gc *GarbageCollector) unblockOwnerRefs(ctx context.Context, n nodeInfo) error {
	return gc.patchMetadata(ctx, n, func(cur *metav1.PartialObjectMetadata, p *metadataPatch) bool {
		refs := append([]metav1.OwnerReference(nil), cur.OwnerReferences...)
		changed := false
		for i := range refs {
			if isTrue(refs[i].BlockOwnerDeletion) {
				refs[i].BlockOwnerDeletion = ptr.To(false)
				changed = true
			}
		}
		p.Metadata.OwnerReferences = &refs
		return changed
	})
}

// removeFinalizer removes finalizer f from the live object n, keeping all
// other finalizers.
func (gc *GarbageCollector) removeFinalizer(ctx context.Context, n nodeInfo, f string) error {
	logrus.Debugf("garbage collector: removing finalizer %s from %s %s/%s", f, n.identity.Kind, n.identity.Namespace, n.identity.Name)
	return gc.patchMetadata(ctx, n, func(cur *metav1.PartialObjectMetadata, p *metadataPatch) bool {
		var kept []string
		for _, x := range cur.Finalizers {
			if x != f {
				kept = append(kept, x)
			}
		}
		if len(kept) == len(cur.Finalizers) {
			return false
		}
		p.Metadata.Finalizers = &kept
		return true
	})
}

// patchMetadata reads n live and, if edit reports a change, sends it as a
// merge patch, re-reading on conflict. An object that is gone or replaced
// is left alone.
func (gc *GarbageCollector) patchMetadata(ctx context.Context, n nodeInfo, edit func(*metav1.PartialObjectMetadata, *metadataPatch) bool) error {
	client := gc.metadata.Resource(n.resource).Namespace(n.identity.Namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := client.Get(ctx, n.identity.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.UID != n.identity.UID {
			return nil
		}
		var p metadataPatch
		p.Metadata.UID = cur.UID
		p.Metadata.ResourceVersion = cur.ResourceVersion
		if !edit(cur, &p) {
			return nil
		}
		data, err := json.Marshal(&p)
		if err != nil {
			return err
		}
		_, err = client.Patch(ctx, n.identity.Name, types.MergePatchType, data, metav1.PatchOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("patch %s %s/%s: %w", n.resource, n.identity.Namespace, n.identity.Name, err)
	}
	return nil
}
