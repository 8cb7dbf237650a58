package controllers

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/kubectl/pkg/util/podutils"
)

// Owner is what a PodOwners controller owns pods through: a pointer to a
// cached API object (a *apps.ReplicaSet, *apps.DaemonSet, ...).
type Owner[T any] interface {
	comparable
	metav1.Object
	DeepCopy() T
}

// PodOwners is the pod side of a controller that creates pods through a
// ControllerRef and counts them with Expectations (the ReplicaSet,
// DaemonSet and StatefulSet controllers): its pod event handlers, which
// turn a pod's event into the key of the owner to sync, and the start of
// the owner's sync. The kind's own reactions stay in its controller.
type PodOwners[T Owner[T]] struct {
	Name         string // the controller's, for messages
	Queue        workqueue.TypedRateLimitingInterface[string]
	Expectations *Expectations

	// Get reads an owner from the cache.
	Get func(ns, name string) (T, error)
	// Resolve returns the cached owner ref (not nil) names, or the zero T
	// if ref is not one of this kind with that name and UID.
	Resolve func(ns string, ref *metav1.OwnerReference) T
	// List returns the cached owners of ns, Selector an owner's selector.
	List     func(ns string) ([]T, error)
	Selector func(T) *metav1.LabelSelector
	// MinReadySeconds is an owner's spec.minReadySeconds.
	MinReadySeconds func(T) int32
	// Deleting, if set, handles an update to a pod that has a deletion
	// timestamp and reports whether it did; unset, such an update is the
	// pod's deletion (DeletePod).
	Deleting func(old, cur *v1.Pod) bool
}

func (h *PodOwners[T]) resolve(ns string, ref *metav1.OwnerReference) (T, bool) {
	var zero T
	if ref == nil {
		return zero, false
	}
	o := h.Resolve(ns, ref)
	return o, o != zero
}

// EnqueueSelecting enqueues the owners of ns whose selector picks an
// object with these labels: one of them may adopt it.
func (h *PodOwners[T]) EnqueueSelecting(ns string, podLabels map[string]string) {
	all, err := h.List(ns)
	if err != nil {
		return
	}
	for _, o := range Selecting(all, h.Selector, podLabels) {
		Enqueue(h.Queue, o)
	}
}

// AddPod is the pod informer's AddFunc. A pod first seen with a deletion
// timestamp (after a restart, say) is a deletion; one with an owner is a
// creation that owner expected.
func (h *PodOwners[T]) AddPod(obj interface{}) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	if pod.DeletionTimestamp != nil {
		h.DeletePod(pod)
		return
	}
	if ref := metav1.GetControllerOf(pod); ref != nil {
		o, ok := h.resolve(pod.Namespace, ref)
		if !ok {
			return
		}
		key, _ := cache.MetaNamespaceKeyFunc(o)
		h.Expectations.CreationsObserved(key, 1)
		h.Queue.Add(key)
		return
	}
	h.EnqueueSelecting(pod.Namespace, pod.Labels)
}

// UpdatePod is the pod informer's UpdateFunc.
func (h *PodOwners[T]) UpdatePod(old, cur interface{}) {
	oldPod, ok1 := old.(*v1.Pod)
	curPod, ok2 := cur.(*v1.Pod)
	if !ok1 || !ok2 {
		return
	}
	if curPod.ResourceVersion == oldPod.ResourceVersion {
		return // periodic resync; nothing changed
	}
	// Graceful deletion started: count it as the deletion now, so the
	// owner does not wait out the grace period to replace the pod.
	if curPod.DeletionTimestamp != nil {
		if h.Deleting == nil {
			h.DeletePod(curPod)
			return
		}
		if h.Deleting(oldPod, curPod) {
			return
		}
	}
	curRef, oldRef := metav1.GetControllerOf(curPod), metav1.GetControllerOf(oldPod)
	refChanged := !apiequality.Semantic.DeepEqual(curRef, oldRef)
	if refChanged {
		// Released or moved: the old owner's count changed too.
		if o, ok := h.resolve(oldPod.Namespace, oldRef); ok {
			Enqueue(h.Queue, o)
		}
	}
	if curRef != nil {
		o, ok := h.resolve(curPod.Namespace, curRef)
		if !ok {
			return
		}
		Enqueue(h.Queue, o)
		// Available comes minReadySeconds after Ready with no event of its
		// own: look again then.
		if s := h.MinReadySeconds(o); s > 0 && !podutils.IsPodReady(oldPod) && podutils.IsPodReady(curPod) {
			key, _ := cache.MetaNamespaceKeyFunc(o)
			h.Queue.AddAfter(key, time.Duration(s)*time.Second+time.Second)
		}
		return
	}
	// An orphan whose labels changed (or that was just released) may now
	// be picked by owners that did not pick it before: no other event
	// would tell them, since adoption is done only by an owner's sync.
	if refChanged || !apiequality.Semantic.DeepEqual(curPod.Labels, oldPod.Labels) {
		h.EnqueueSelecting(curPod.Namespace, curPod.Labels)
	}
}

// DeletePod is the pod informer's DeleteFunc, and what the other handlers
// call for a pod whose deletion has begun. A pod deleted while the watch
// was down arrives as a tombstone holding its last known state; its
// ControllerRef there is still the owner that counted it, and the only way
// to find the owner whose expected deletion this is: without it that
// owner would wait out ExpectationsTimeout.
func (h *PodOwners[T]) DeletePod(obj interface{}) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	o, ok := h.resolve(pod.Namespace, metav1.GetControllerOf(pod))
	if !ok {
		return
	}
	key, _ := cache.MetaNamespaceKeyFunc(o)
	podKey, _ := cache.MetaNamespaceKeyFunc(pod)
	h.Expectations.DeletionObserved(key, podKey)
	h.Queue.Add(key)
}

// DeleteOwner is the owner informer's DeleteFunc: what was expected of a
// deleted owner will never be seen.
func (h *PodOwners[T]) DeleteOwner(obj interface{}) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	o, ok := obj.(T)
	if !ok {
		return
	}
	key, err := cache.MetaNamespaceKeyFunc(o)
	if err != nil {
		return
	}
	h.Expectations.Remove(key)
	h.Queue.Add(key)
}

// Start begins the sync of key: a copy of the cached owner (the sync's to
// change) and its parsed selector. The zero T with a nil error means there
// is nothing to sync: a bad key, an owner gone (its expectations are
// dropped), or a selector that does not parse (reported; retrying cannot
// fix it).
func (h *PodOwners[T]) Start(key string) (T, labels.Selector, error) {
	var zero T
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return zero, nil, nil
	}
	cached, err := h.Get(ns, name)
	if apierrors.IsNotFound(err) {
		h.Expectations.Remove(key)
		return zero, nil, nil
	}
	if err != nil {
		return zero, nil, err
	}
	o := cached.DeepCopy()
	sel, err := metav1.LabelSelectorAsSelector(h.Selector(o))
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("%s %s: bad selector: %w", h.Name, key, err))
		return zero, nil, nil
	}
	return o, sel, nil
}
