package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/kubernetes"
)

// PodClaim is one owner's claim on pods, as upstream's
// PodControllerRefManager: the ReplicaSet, DaemonSet and StatefulSet
// controllers adopt and release pods through it.
type PodClaim struct {
	Client kubernetes.Interface
	// Owner is the (cached) owning object, Kind its kind: the
	// ControllerRef written on adoption names both.
	Owner metav1.Object
	Kind  schema.GroupVersionKind
	// Selector picks the owner's pods; Match, if set, must also accept a
	// pod for it to be the owner's (the StatefulSet's membership by name).
	Selector labels.Selector
	Match    func(*v1.Pod) bool
	// CanAdopt is called before each adoption and refuses it with an
	// error (usually RecheckOwner's).
	CanAdopt func() error
	// ReleaseWhileDeleting releases owned pods that no longer match even
	// when the owner is being deleted. Upstream's ClaimPods does not (the
	// garbage collector decides their fate); kelp's StatefulSet
	// controller always has, and keeps doing so.
	ReleaseWhileDeleting bool
}

// Claim returns the pods the owner controls and still picks, plus the
// orphans it picks, which it adopts; it releases the pods it controls but
// no longer picks. Pods of another controller and pods being deleted are
// not adopted, and nothing is adopted while the owner is being deleted:
// the garbage collector would take what it adopted. A pod gone (NotFound)
// is skipped without error, as is a release the API server rejects as
// Invalid (the pod is being deleted, or its reference already gone).
func (c *PodClaim) Claim(ctx context.Context, pods []*v1.Pod) ([]*v1.Pod, error) {
	var (
		claimed  []*v1.Pod
		errs     []error
		deleting = c.Owner.GetDeletionTimestamp() != nil
		uid      = c.Owner.GetUID()
	)
	for _, pod := range pods {
		matches := c.Selector.Matches(labels.Set(pod.Labels)) && (c.Match == nil || c.Match(pod))
		if ref := metav1.GetControllerOf(pod); ref != nil {
			if ref.UID != uid {
				continue // another controller's pod
			}
			if matches {
				claimed = append(claimed, pod)
				continue
			}
			if deleting && !c.ReleaseWhileDeleting {
				continue // don't release while being deleted
			}
			if err := c.release(ctx, pod); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsInvalid(err) {
				errs = append(errs, err)
			}
			continue
		}
		if !matches || deleting || pod.DeletionTimestamp != nil {
			continue
		}
		if err := c.CanAdopt(); err != nil {
			errs = append(errs, fmt.Errorf("can't adopt Pod %s/%s (%s): %w", pod.Namespace, pod.Name, pod.UID, err))
			continue
		}
		if err := c.adopt(ctx, pod); err != nil {
			if !apierrors.IsNotFound(err) {
				errs = append(errs, err)
			}
			continue
		}
		claimed = append(claimed, pod)
	}
	return claimed, utilerrors.NewAggregate(errs)
}

// adopt makes the owner the pod's controller; blockOwnerDeletion keeps a
// foreground deletion of the owner waiting for the pod.
func (c *PodClaim) adopt(ctx context.Context, pod *v1.Pod) error {
	return c.patchOwner(ctx, pod, map[string]interface{}{
		"apiVersion":         c.Kind.GroupVersion().String(),
		"kind":               c.Kind.Kind,
		"name":               c.Owner.GetName(),
		"uid":                c.Owner.GetUID(),
		"controller":         true,
		"blockOwnerDeletion": true,
	})
}

// release removes the owner's reference from the pod.
func (c *PodClaim) release(ctx context.Context, pod *v1.Pod) error {
	return c.patchOwner(ctx, pod, map[string]interface{}{"$patch": "delete", "uid": c.Owner.GetUID()})
}

// patchOwner adds or (with "$patch": "delete") removes an owner reference
// by a strategic merge patch, preconditioned on the pod's UID: the pod we
// looked at, so a same-named successor is untouched.
func (c *PodClaim) patchOwner(ctx context.Context, pod *v1.Pod, ref map[string]interface{}) error {
	patch := map[string]interface{}{"metadata": map[string]interface{}{
		"ownerReferences": []interface{}{ref}, "uid": pod.UID,
	}}
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	_, err = c.Client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, data, metav1.PatchOptions{})
	return err
}

// RecheckOwner returns a PodClaim's CanAdopt: before the first adoption it
// reads the owner live (get) and refuses if it is no longer this one (its
// UID changed) or is being deleted. The cache may be stale, and adopting
// into a dying owner would have its pods collected. The answer of that
// one read is kept for the rest of the claim.
func RecheckOwner(owner metav1.Object, kind string, get func() (metav1.Object, error)) func() error {
	var (
		once sync.Once
		err  error
	)
	return func() error {
		once.Do(func() {
			fresh, getErr := get()
			switch {
			case getErr != nil:
				err = getErr
			case fresh.GetUID() != owner.GetUID():
				err = fmt.Errorf("original %s %s/%s is gone: got uid %v, wanted %v", kind, owner.GetNamespace(), owner.GetName(), fresh.GetUID(), owner.GetUID())
			case fresh.GetDeletionTimestamp() != nil:
				err = fmt.Errorf("%s/%s has just been deleted at %v", owner.GetNamespace(), owner.GetName(), fresh.GetDeletionTimestamp())
			}
		})
		return err
	}
}
