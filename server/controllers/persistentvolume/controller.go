// Package persistentvolume is upstream's PersistentVolume binder
// (kube-controller-manager's persistent-volume-binder): it binds claims to
// volumes and volumes to claims, keeps their phases (Available, Bound,
// Released, Failed; Pending, Bound, Lost), hands dynamic provisioning to
// the class's external provisioner through the claim's
// storage-provisioner annotations, and reclaims volumes whose claim is
// gone. Like upstream it has no volume plugins of its own: every
// provisioner is external (kelp's local-path one runs on the nodes), so a
// volume to be deleted is either its provisioner's or Failed.
//
// The two halves, claims and volumes, each have a queue and one worker, as
// upstream. Every write carries the resourceVersion it was decided on, so a
// decision made on a stale cache fails with a conflict and is made again.
package persistentvolume

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/kelp-project/kelp/server/controllers"
)

// ResyncPeriod is how often every claim and volume is looked at again,
// upstream's --pvclaimbinder-sync-period.
const ResyncPeriod = 15 * time.Second

// Controller is the PV binder.
type Controller struct {
	client   kubernetes.Interface
	recorder record.EventRecorder

	volumes corelisters.PersistentVolumeLister
	claims  corelisters.PersistentVolumeClaimLister
	classes storagelisters.StorageClassLister
	pods    cache.Indexer
	synced  []cache.InformerSynced

	volumeQueue workqueue.TypedRateLimitingInterface[string]
	claimQueue  workqueue.TypedRateLimitingInterface[string]
	now         func() time.Time
}

// New wires the binder to the factory's PV, PVC, StorageClass and Pod
// informers.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, recorder record.EventRecorder) *Controller {
	pvInf := factory.Core().V1().PersistentVolumes()
	pvcInf := factory.Core().V1().PersistentVolumeClaims()
	classInf := factory.Storage().V1().StorageClasses()
	podInf := factory.Core().V1().Pods()
	AddPodClaimIndex(podInf.Informer())
	c := &Controller{
		client: client, recorder: recorder,
		volumes: pvInf.Lister(), claims: pvcInf.Lister(), classes: classInf.Lister(), pods: podInf.Informer().GetIndexer(),
		synced: []cache.InformerSynced{pvInf.Informer().HasSynced, pvcInf.Informer().HasSynced,
			classInf.Informer().HasSynced, podInf.Informer().HasSynced},
		volumeQueue: controllers.NewQueue("volumes"),
		claimQueue:  controllers.NewQueue("claims"),
		now:         time.Now,
	}
	_, _ = pvInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { controllers.Enqueue(c.volumeQueue, obj) },
		UpdateFunc: func(_, cur any) { controllers.Enqueue(c.volumeQueue, cur) },
		DeleteFunc: c.volumeDeleted,
	})
	_, _ = pvcInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { controllers.Enqueue(c.claimQueue, obj) },
		UpdateFunc: func(_, cur any) { controllers.Enqueue(c.claimQueue, cur) },
		DeleteFunc: c.claimDeleted,
	})
	// A new or newly default class may give waiting claims a class
	// (retroactive default) or a provisioner; the resync would find them
	// too, a little later.
	_, _ = classInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.enqueuePendingClaims() },
		UpdateFunc: func(_, _ any) { c.enqueuePendingClaims() },
	})
	return c
}

// Run runs the claim and volume workers and the periodic resync until ctx
// ends.
func (c *Controller) Run(ctx context.Context) {
	go wait.UntilWithContext(ctx, func(context.Context) { c.resync() }, ResyncPeriod)
	claims := controllers.Loop{Name: "persistentvolume-claims", Queue: c.claimQueue, Synced: c.synced, Sync: c.syncClaimKey}
	go claims.Run(ctx, 1)
	volumes := controllers.Loop{Name: "persistentvolume-volumes", Queue: c.volumeQueue, Synced: c.synced, Sync: c.syncVolumeKey}
	volumes.Run(ctx, 1)
}

// resync puts every claim and volume back on its queue.
func (c *Controller) resync() {
	if pvcs, err := c.claims.List(labels.Everything()); err == nil {
		for _, pvc := range pvcs {
			controllers.Enqueue(c.claimQueue, pvc)
		}
	}
	if pvs, err := c.volumes.List(labels.Everything()); err == nil {
		for _, pv := range pvs {
			controllers.Enqueue(c.volumeQueue, pv)
		}
	}
}

func (c *Controller) enqueuePendingClaims() {
	pvcs, err := c.claims.List(labels.Everything())
	if err != nil {
		return
	}
	for _, pvc := range pvcs {
		if pvc.Spec.VolumeName == "" {
			controllers.Enqueue(c.claimQueue, pvc)
		}
	}
}

// volumeDeleted looks at the volume's claim again: it is Lost now.
func (c *Controller) volumeDeleted(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if pv, ok := obj.(*corev1.PersistentVolume); ok && pv.Spec.ClaimRef != nil {
		c.claimQueue.Add(pv.Spec.ClaimRef.Namespace + "/" + pv.Spec.ClaimRef.Name)
	}
}

// claimDeleted looks at the claim's volume again: it is Released now.
func (c *Controller) claimDeleted(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if pvc, ok := obj.(*corev1.PersistentVolumeClaim); ok && pvc.Spec.VolumeName != "" {
		c.volumeQueue.Add(pvc.Spec.VolumeName)
	}
}
