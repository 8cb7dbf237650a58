// Package pvprotection is upstream's pv-protection controller: a volume
// being deleted keeps its kubernetes.io/pv-protection finalizer (added at
// create by the StorageObjectInUseProtection admission plugin, or here for
// a volume that lacks it) while it is Bound to a claim.
package pvprotection

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
)

// Finalizer is upstream's PV protection finalizer.
const Finalizer = claims.PVProtectionFinalizer

// Controller removes the finalizer from deleted volumes no longer Bound.
type Controller struct {
	client  kubernetes.Interface
	volumes corelisters.PersistentVolumeLister
	synced  []cache.InformerSynced
	queue   workqueue.TypedRateLimitingInterface[string]
}

// New wires the controller to the factory's PV informer.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory) *Controller {
	inf := factory.Core().V1().PersistentVolumes()
	c := &Controller{client: client, volumes: inf.Lister(), synced: []cache.InformerSynced{inf.Informer().HasSynced},
		queue: controllers.NewQueue("pvprotection")}
	_, _ = inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.volumeChanged,
		UpdateFunc: func(_, cur any) { c.volumeChanged(cur) },
	})
	return c
}

// Run processes volumes until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	loop := controllers.Loop{Name: "pvprotection", Queue: c.queue, Synced: c.synced, Sync: c.sync}
	loop.Run(ctx, workers)
}

func (c *Controller) volumeChanged(obj any) {
	if pv, ok := obj.(*corev1.PersistentVolume); ok && (needsFinalizer(pv) || isDeletionCandidate(pv)) {
		controllers.Enqueue(c.queue, pv)
	}
}

func needsFinalizer(pv *corev1.PersistentVolume) bool {
	return pv.DeletionTimestamp == nil && !slices.Contains(pv.Finalizers, Finalizer)
}

func isDeletionCandidate(pv *corev1.PersistentVolume) bool {
	return pv.DeletionTimestamp != nil && slices.Contains(pv.Finalizers, Finalizer)
}

func (c *Controller) sync(ctx context.Context, name string) error {
	pv, err := c.volumes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	clone := pv.DeepCopy()
	switch {
	case isDeletionCandidate(pv):
		// The binder's status is the truth: a Bound volume is in use.
		if pv.Status.Phase == corev1.VolumeBound {
			return nil
		}
		clone.Finalizers = slices.DeleteFunc(clone.Finalizers, func(f string) bool { return f == Finalizer })
	case needsFinalizer(pv):
		clone.Finalizers = append(clone.Finalizers, Finalizer)
	default:
		return nil
	}
	_, err = c.client.CoreV1().PersistentVolumes().Update(ctx, clone, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
