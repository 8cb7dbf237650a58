// Package pvcprotection is upstream's pvc-protection controller: a claim
// being deleted keeps its kubernetes.io/pvc-protection finalizer (added at
// create by the StorageObjectInUseProtection admission plugin, or here for
// a claim that lacks it) while a pod uses it, so a volume is never taken
// from under a running pod.
package pvcprotection

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/kelp-project/kelp/server/claims"
	"github.com/kelp-project/kelp/server/controllers"
	"github.com/kelp-project/kelp/server/controllers/persistentvolume"
)

// Finalizer is upstream's PVC protection finalizer.
const Finalizer = claims.PVCProtectionFinalizer

// Controller removes the finalizer from deleted claims no pod uses.
type Controller struct {
	client kubernetes.Interface
	claims corelisters.PersistentVolumeClaimLister
	pods   cache.Indexer
	synced []cache.InformerSynced
	queue  workqueue.TypedRateLimitingInterface[string]
}

// New wires the controller to the factory's PVC and Pod informers.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory) *Controller {
	pvcInf := factory.Core().V1().PersistentVolumeClaims()
	podInf := factory.Core().V1().Pods()
	persistentvolume.AddPodClaimIndex(podInf.Informer())
	c := &Controller{client: client, claims: pvcInf.Lister(), pods: podInf.Informer().GetIndexer(),
		synced: []cache.InformerSynced{pvcInf.Informer().HasSynced, podInf.Informer().HasSynced},
		queue:  controllers.NewQueue("pvcprotection")}
	_, _ = pvcInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.claimChanged,
		UpdateFunc: func(_, cur any) { c.claimChanged(cur) },
	})
	// A pod that goes away, ends, or stops using a claim may free it.
	_, _ = podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.podChanged,
		UpdateFunc: func(_, cur any) { c.podChanged(cur) },
		DeleteFunc: c.podChanged,
	})
	return c
}

// Run processes claims until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	loop := controllers.Loop{Name: "pvcprotection", Queue: c.queue, Synced: c.synced, Sync: c.sync}
	loop.Run(ctx, workers)
}

func (c *Controller) claimChanged(obj any) {
	pvc, ok := obj.(*corev1.PersistentVolumeClaim)
	if ok && (needsFinalizer(pvc) || isDeletionCandidate(pvc)) {
		controllers.Enqueue(c.queue, pvc)
	}
}

func (c *Controller) podChanged(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	for _, name := range claims.OfPod(pod) {
		c.queue.Add(pod.Namespace + "/" + name)
	}
}

func needsFinalizer(pvc *corev1.PersistentVolumeClaim) bool {
	return pvc.DeletionTimestamp == nil && !slices.Contains(pvc.Finalizers, Finalizer)
}

func isDeletionCandidate(pvc *corev1.PersistentVolumeClaim) bool {
	return pvc.DeletionTimestamp != nil && slices.Contains(pvc.Finalizers, Finalizer)
}

func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pvc, err := c.claims.PersistentVolumeClaims(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	switch {
	case isDeletionCandidate(pvc):
		inUse, err := c.inUse(ctx, pvc)
		if err != nil || inUse {
			return err
		}
		clone := pvc.DeepCopy()
		clone.Finalizers = slices.DeleteFunc(clone.Finalizers, func(f string) bool { return f == Finalizer })
		_, err = c.client.CoreV1().PersistentVolumeClaims(ns).Update(ctx, clone, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	case needsFinalizer(pvc):
		clone := pvc.DeepCopy()
		clone.Finalizers = append(clone.Finalizers, Finalizer)
		_, err = c.client.CoreV1().PersistentVolumeClaims(ns).Update(ctx, clone, metav1.UpdateOptions{})
		return err
	}
	return nil
}

// inUse asks the informer first; only when it shows no pod using the claim
// is a live list made, as upstream does: a pod created a moment ago may
// not be in the cache yet, and removing the finalizer under it would lose
// its volume.
func (c *Controller) inUse(ctx context.Context, pvc *corev1.PersistentVolumeClaim) (bool, error) {
	objs, err := c.pods.ByIndex(persistentvolume.PodClaimIndex, pvc.Namespace+"/"+pvc.Name)
	if err != nil {
		return false, err
	}
	for _, obj := range objs {
		if PodUses(obj.(*corev1.Pod), pvc) {
			return true, nil
		}
	}
	pods, err := c.client.CoreV1().Pods(pvc.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	for i := range pods.Items {
		if PodUses(&pods.Items[i], pvc) {
			return true, nil
		}
	}
	return false, nil
}

// PodUses reports whether pod holds pvc: it is scheduled (the kubelet
// sees only scheduled pods, and refuses to start one whose claim is being
// deleted), has not ended, and has a volume of the claim (for a generic
// ephemeral volume, the claim the pod owns, until the pod is shut down).
func PodUses(pod *corev1.Pod, pvc *corev1.PersistentVolumeClaim) bool {
	if pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		switch {
		case v.PersistentVolumeClaim != nil:
			if v.PersistentVolumeClaim.ClaimName == pvc.Name {
				return true
			}
		case v.Ephemeral != nil:
			if claims.Name(pod, v) == pvc.Name && metav1.IsControlledBy(pvc, pod) && !shutDown(pod) {
				return true
			}
		}
	}
	return false
}

// shutDown: the kubelet is done with a pod being deleted with no grace
// left (or it was force-deleted).
func shutDown(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp != nil && pod.DeletionGracePeriodSeconds != nil && *pod.DeletionGracePeriodSeconds == 0
}
