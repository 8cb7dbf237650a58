// Package endpointslicemirroring mirrors the Endpoints objects users write
// for Services without a selector into EndpointSlices, as upstream's
// endpointslicemirroring controller does: kube-proxy and DNS read only
// slices, so a selectorless Service would otherwise have no backends.
package endpointslicemirroring

import (
	"context"
	"errors"
	"sort"

	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kelp-project/kelp/server/controllers"
	endpointsctl "github.com/kelp-project/kelp/server/controllers/endpoints"
)

// ControllerName is the loop's name.
const ControllerName = "endpointslicemirroring"

// Controller keeps the mirrored slices of every Endpoints object. Its key
// is namespace/name, shared by the Endpoints, its Service and (through the
// service-name label) its slices.
type Controller struct {
	loop      controllers.Loop
	client    kubernetes.Interface
	endpoints corelisters.EndpointsLister
	services  corelisters.ServiceLister
	slices    discoverylisters.EndpointSliceLister
	maxPer    int
}

// New returns the controller. It only adds handlers to factory; the caller
// starts it.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory) *Controller {
	epInf := factory.Core().V1().Endpoints()
	svcInf := factory.Core().V1().Services()
	sliceInf := factory.Discovery().V1().EndpointSlices()
	c := &Controller{
		client:    client,
		endpoints: epInf.Lister(),
		services:  svcInf.Lister(),
		slices:    sliceInf.Lister(),
		maxPer:    MaxEndpointsPerSubset,
	}
	c.loop = controllers.Loop{
		Name:   ControllerName,
		Queue:  controllers.NewQueue(ControllerName),
		Synced: []cache.InformerSynced{epInf.Informer().HasSynced, svcInf.Informer().HasSynced, sliceInf.Informer().HasSynced},
		Sync:   c.sync,
	}
	enqueue := func(o interface{}) { controllers.Enqueue(c.loop.Queue, o) }
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, o interface{}) { enqueue(o) },
		DeleteFunc: enqueue,
	}
	_, _ = epInf.Informer().AddEventHandler(handler)
	_, _ = svcInf.Informer().AddEventHandler(handler)
	_, _ = sliceInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.sliceChanged,
		UpdateFunc: func(_, o interface{}) { c.sliceChanged(o) },
		DeleteFunc: c.sliceChanged,
	})
	return c
}

// Run runs workers until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) { c.loop.Run(ctx, workers) }

// sliceChanged repairs edits and deletions of the slices this controller
// owns; others' slices are not its business.
func (c *Controller) sliceChanged(o interface{}) {
	if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = t.Obj
	}
	s, ok := o.(*discoveryv1.EndpointSlice)
	if !ok || s.Labels[discoveryv1.LabelManagedBy] != ManagedBy || s.Labels[discoveryv1.LabelServiceName] == "" {
		return
	}
	c.loop.Queue.Add(s.Namespace + "/" + s.Labels[discoveryv1.LabelServiceName])
}

func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	ep, err := c.endpoints.Endpoints(ns).Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	svc, err := c.services.Services(ns).Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	existing, err := endpointsctl.ManagedSlices(c.slices, ns, name, ManagedBy)
	if err != nil {
		return err
	}
	var want []*discoveryv1.EndpointSlice
	if ShouldMirror(ep, svc) {
		want = Desired(ep, c.maxPer)
	}
	return c.reconcile(ctx, want, existing)
}

// reconcile writes want over existing: a slice of the same address type
// and ports is updated in place (if it differs), one nobody wants is
// reused for a wanted slice of its address type (addressType is
// immutable) or deleted, and the rest are created. Creates and updates go
// before deletes so that no address is missing from every slice.
func (c *Controller) reconcile(ctx context.Context, want, existing []*discoveryv1.EndpointSlice) error {
	byKey := map[sliceKey]*discoveryv1.EndpointSlice{}
	var spare []*discoveryv1.EndpointSlice
	for _, s := range existing {
		k := keyOf(s)
		if byKey[k] == nil {
			byKey[k] = s
		} else {
			spare = append(spare, s)
		}
	}
	var creates, updates []*discoveryv1.EndpointSlice
	used := map[sliceKey]bool{}
	for _, w := range want {
		k := keyOf(w)
		if cur := byKey[k]; cur != nil {
			used[k] = true
			if !sameContent(cur, w) {
				updates = append(updates, overwrite(cur, w))
			}
			continue
		}
		creates = append(creates, w)
	}
	for k, s := range byKey {
		if !used[k] {
			spare = append(spare, s)
		}
	}
	sort.Slice(spare, func(i, j int) bool { return spare[i].Name < spare[j].Name })
	var toCreate []*discoveryv1.EndpointSlice
	for _, w := range creates {
		i := indexOf(spare, w.AddressType)
		if i < 0 {
			toCreate = append(toCreate, w)
			continue
		}
		updates = append(updates, overwrite(spare[i], w))
		spare = append(spare[:i], spare[i+1:]...)
	}

	var errs []error
	for _, s := range toCreate {
		_, err := c.client.DiscoveryV1().EndpointSlices(s.Namespace).Create(ctx, s, metav1.CreateOptions{})
		if err != nil && !controllers.NamespaceTerminating(err) {
			errs = append(errs, err)
		}
	}
	for _, s := range updates {
		if _, err := c.client.DiscoveryV1().EndpointSlices(s.Namespace).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for _, s := range spare {
		err := c.client.DiscoveryV1().EndpointSlices(s.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func indexOf(list []*discoveryv1.EndpointSlice, at discoveryv1.AddressType) int {
	for i, s := range list {
		if s.AddressType == at {
			return i
		}
	}
	return -1
}

// overwrite is cur (name, resourceVersion) carrying w's content.
func overwrite(cur, w *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	s := cur.DeepCopy()
	s.Labels, s.Annotations, s.OwnerReferences = w.Labels, w.Annotations, w.OwnerReferences
	s.Ports, s.Endpoints = w.Ports, w.Endpoints
	return s
}

func sameContent(a, b *discoveryv1.EndpointSlice) bool {
	return a.AddressType == b.AddressType && labels.Equals(a.Labels, b.Labels) &&
		labels.Equals(a.Annotations, b.Annotations) &&
		apiequality.Semantic.DeepEqual(a.OwnerReferences, b.OwnerReferences) &&
		apiequality.Semantic.DeepEqual(a.Ports, b.Ports) &&
		apiequality.Semantic.DeepEqual(a.Endpoints, b.Endpoints)
}
