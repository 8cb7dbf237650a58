// Package resourcequota is upstream's resource quota controller
// (pkg/controller/resourcequota): each ResourceQuota's status.hard is its
// spec.hard and status.used what its namespace holds of each resource it
// limits, recomputed when the quota's spec changes, when an object it
// counts goes away (or a pod ends, a service changes type, a claim's
// allocation changes), and for every quota on a full resync every five
// minutes (--resource-quota-sync-period). Admission charges new objects
// as they come (the ResourceQuota plugin); this controller gives back
// what went. Quotas whose status lacks what they declare are recomputed
// first, from their own queue, as upstream.
package resourcequota

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	quota "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/apiserver/pkg/quota/v1/generic"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/kelp-project/kelp/server/controllers"
	kelpquota "github.com/kelp-project/kelp/server/quota"
)

// SyncPeriod is upstream's --resource-quota-sync-period default: how often
// every quota is recomputed whatever happened.
const SyncPeriod = 5 * time.Minute

// coreResources are the kinds the core evaluators measure, watched from
// the start through the shared informers.
var coreResources = []schema.GroupVersionResource{
	corev1.SchemeGroupVersion.WithResource("pods"),
	corev1.SchemeGroupVersion.WithResource("services"),
	corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims"),
	corev1.SchemeGroupVersion.WithResource("configmaps"),
	corev1.SchemeGroupVersion.WithResource("secrets"),
	corev1.SchemeGroupVersion.WithResource("replicationcontrollers"),
	corev1.SchemeGroupVersion.WithResource("resourcequotas"),
}

// Controller keeps quotas' status.
type Controller struct {
	client   kubernetes.Interface
	quotas   corelisters.ResourceQuotaLister
	registry quota.Registry
	synced   []cache.InformerSynced
	// queue is the ordinary recalculation; missing holds quotas whose
	// status lacks part of what they declare.
	queue, missing workqueue.TypedRateLimitingInterface[string]
	// SyncPeriod is the full resync's period (SyncPeriod unless a test
	// shortens it).
	SyncPeriod time.Duration

	// The objects of other resources (count/<resource>.<group>) are
	// watched, as metadata, from the first quota that names them.
	meta     metadata.Interface
	mapper   *restmapper.DeferredDiscoveryRESTMapper
	mu       sync.Mutex
	monitors map[schema.GroupResource]bool
}

// New wires the controller to the factory's informers; meta
// watches the other resources quotas count.
func New(client kubernetes.Interface, meta metadata.Interface, factory informers.SharedInformerFactory) (*Controller, error) {
	c := &Controller{
		client:     client,
		meta:       meta,
		mapper:     restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(client.Discovery())),
		monitors:   map[schema.GroupResource]bool{},
		queue:      controllers.NewQueue("resourcequota_primary"),
		missing:    controllers.NewQueue("resourcequota_priority"),
		SyncPeriod: SyncPeriod,
	}
	listers := map[schema.GroupVersionResource]cache.GenericLister{}
	for _, gvr := range coreResources {
		inf, err := factory.ForResource(gvr)
		if err != nil {
			return nil, err
		}
		listers[gvr] = inf.Lister()
		c.synced = append(c.synced, inf.Informer().HasSynced)
		if gvr.Resource == "resourcequotas" {
			continue
		}
		gr := gvr.GroupResource()
		_, _ = inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			UpdateFunc: func(old, cur any) {
				if replenishOnUpdate(gr, old, cur) {
					c.replenish(gr, cur)
				}
			},
			DeleteFunc: func(obj any) { c.replenish(gr, obj) },
		})
	}
	c.registry = generic.NewRegistry(kelpquota.NewEvaluators(func(gvr schema.GroupVersionResource) (cache.GenericLister, error) {
		return listers[gvr], nil
	}, clock.RealClock{}))
	rqInf := factory.Core().V1().ResourceQuotas()
	c.quotas = rqInf.Lister()
	_, _ = rqInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.addQuota,
		// Status changes are this controller's (or admission's) own; a
		// change of spec.hard is what asks for a recalculation.
		UpdateFunc: func(old, cur any) {
			o, n := old.(*corev1.ResourceQuota), cur.(*corev1.ResourceQuota)
			if quota.Equals(o.Spec.Hard, n.Spec.Hard) {
				return
			}
			c.addQuota(n)
		},
		DeleteFunc: func(obj any) { controllers.Enqueue(c.queue, obj) },
	})
	return c, nil
}

// replenishOnUpdate is upstream's monitor's filter of updates: a pod that
// stops being charged, a service changing its quota type, a claim whose
// allocation changed; other updates change no usage.
func replenishOnUpdate(gr schema.GroupResource, old, cur any) bool {
	switch gr.Resource {
	case "pods":
		o, ok1 := old.(*corev1.Pod)
		n, ok2 := cur.(*corev1.Pod)
		return ok1 && ok2 && kelpquota.QuotaV1Pod(o, clock.RealClock{}) && !kelpquota.QuotaV1Pod(n, clock.RealClock{})
	case "services":
		o, ok1 := old.(*corev1.Service)
		n, ok2 := cur.(*corev1.Service)
		return ok1 && ok2 && kelpquota.QuotaServiceType(o) != kelpquota.QuotaServiceType(n)
	case "persistentvolumeclaims":
		o, ok1 := old.(*corev1.PersistentVolumeClaim)
		n, ok2 := cur.(*corev1.PersistentVolumeClaim)
		return ok1 && ok2 && kelpquota.RequiresQuotaReplenish(n, o)
	}
	return false
}

// Run recomputes quotas until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	go func() {
		if !cache.WaitForNamedCacheSync("resourcequota", ctx.Done(), c.synced...) {
			return
		}
		wait.UntilWithContext(ctx, c.enqueueAll, c.SyncPeriod)
	}()
	var wg sync.WaitGroup
	for _, q := range []workqueue.TypedRateLimitingInterface[string]{c.queue, c.missing} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			loop := controllers.Loop{Name: "resourcequota", Queue: q, Synced: c.synced, Sync: c.sync}
			loop.Run(ctx, workers)
		}()
	}
	wg.Wait()
}

// enqueueAll is the full resync.
func (c *Controller) enqueueAll(context.Context) {
	rqs, err := c.quotas.List(labels.Everything())
	if err != nil {
		return
	}
	for _, rq := range rqs {
		controllers.Enqueue(c.queue, rq)
	}
}

// addQuota queues a quota, on the priority queue if its status lacks
// what its spec declares.
func (c *Controller) addQuota(obj any) {
	rq, ok := obj.(*corev1.ResourceQuota)
	if !ok {
		return
	}
	if !apiequality.Semantic.DeepEqual(rq.Spec.Hard, rq.Status.Hard) {
		controllers.Enqueue(c.missing, rq)
		return
	}
	for constraint := range rq.Status.Hard {
		if _, found := rq.Status.Used[constraint]; found {
			continue
		}
		for _, e := range c.registry.List() {
			if len(e.MatchingResources([]corev1.ResourceName{constraint})) > 0 {
				controllers.Enqueue(c.missing, rq)
				return
			}
		}
	}
	controllers.Enqueue(c.queue, rq)
}

// replenish queues the quotas of obj's namespace that track its kind.
func (c *Controller) replenish(gr schema.GroupResource, obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	acc, ok := obj.(metav1.Object)
	if !ok || acc.GetNamespace() == "" {
		return
	}
	e := c.registry.Get(gr)
	if e == nil {
		return
	}
	rqs, err := c.quotas.ResourceQuotas(acc.GetNamespace()).List(labels.Everything())
	if err != nil {
		return
	}
	for _, rq := range rqs {
		if len(e.MatchingResources(quota.ResourceNames(rq.Status.Hard))) > 0 {
			controllers.Enqueue(c.queue, rq)
		}
	}
}

func (c *Controller) sync(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	rq, err := c.quotas.ResourceQuotas(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	c.watchCounted(ctx, rq.Spec.Hard)
	return c.syncQuota(ctx, rq)
}

// syncQuota is upstream's syncResourceQuota: status.hard from spec.hard,
// status.used recomputed for what the registry can measure (the rest
// keeps its last value), written only if it changed.
func (c *Controller) syncQuota(ctx context.Context, rq *corev1.ResourceQuota) error {
	dirty := !apiequality.Semantic.DeepEqual(rq.Spec.Hard, rq.Status.Hard) || rq.Status.Hard == nil || rq.Status.Used == nil
	used := corev1.ResourceList{}
	if rq.Status.Used != nil {
		used = quota.Add(corev1.ResourceList{}, rq.Status.Used)
	}
	hard := quota.Add(corev1.ResourceList{}, rq.Spec.Hard)
	var errs []error
	newUsage, err := quota.CalculateUsage(rq.Namespace, rq.Spec.Scopes, hard, c.registry, rq.Spec.ScopeSelector)
	if err != nil {
		errs = append(errs, err)
	}
	for name, q := range newUsage {
		used[name] = q
	}
	used = quota.Mask(used, quota.ResourceNames(hard))
	usage := rq.DeepCopy()
	usage.Status = corev1.ResourceQuotaStatus{Hard: hard, Used: used}
	dirty = dirty || !quota.Equals(usage.Status.Used, rq.Status.Used)
	if dirty {
		if _, err := c.client.CoreV1().ResourceQuotas(usage.Namespace).UpdateStatus(ctx, usage, metav1.UpdateOptions{}); err != nil {
			errs = append(errs, err)
		}
	}
	return utilerrors.NewAggregate(errs)
}

// watchCounted starts watching, as metadata, the objects of each
// count/<resource>.<group> in hard that no evaluator measures yet, and
// registers an object count evaluator over them. The watches last until
// ctx, Run's (the loops hand it to sync), ends.
func (c *Controller) watchCounted(ctx context.Context, hard corev1.ResourceList) {
	for name := range hard {
		s, ok := strings.CutPrefix(string(name), "count/")
		if !ok {
			continue
		}
		gr := schema.ParseGroupResource(s)
		if _, ignored := kelpquota.IgnoredResources[gr]; ignored || c.registry.Get(gr) != nil {
			continue
		}
		c.mu.Lock()
		started := c.monitors[gr]
		c.mu.Unlock()
		if started {
			continue
		}
		gvr, err := c.mapper.ResourceFor(gr.WithVersion(""))
		if err != nil {
			// Not served (yet): a CRD created later is found on a later
			// sync.
			c.mapper.Reset()
			continue
		}
		c.watch(ctx, gr, gvr)
	}
}

func (c *Controller) watch(ctx context.Context, gr schema.GroupResource, gvr schema.GroupVersionResource) {
	c.mu.Lock()
	if c.monitors[gr] {
		c.mu.Unlock()
		return
	}
	c.monitors[gr] = true
	c.mu.Unlock()
	inf := metadatainformer.NewFilteredMetadataInformer(c.meta, gvr, metav1.NamespaceAll, 0,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}, nil).Informer()
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) { c.replenish(gr, obj) },
	})
	go inf.Run(ctx.Done())
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if !cache.WaitForCacheSync(waitCtx.Done(), inf.HasSynced) {
		logrus.Warnf("resourcequota: the watch of %s did not sync", gr)
	}
	lister := cache.NewGenericLister(inf.GetIndexer(), gr)
	c.registry.Add(generic.NewObjectCountEvaluator(gr, generic.ListResourceUsingListerFunc(func(schema.GroupVersionResource) (cache.GenericLister, error) {
		return lister, nil
	}, gvr), ""))
}
