// Package endpoints publishes the pods behind each selector Service, twice:
// as EndpointSlices (discovery.k8s.io/v1, what kube-proxy and DNS read) and
// as the legacy core/v1 Endpoints object named like the Service. Both are
// computed from the same pod list in one sync per Service key, so they
// never disagree about which pods back a Service for longer than one
// failed write.
package endpoints

import (
	"context"
	"errors"
	"k8s.io/kubectl/pkg/util/podutils"

	corev1 "k8s.io/api/core/v1"
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
)

const (
	// ControllerName is the loop's name.
	ControllerName = "endpoints"
	// ManagedBy is the endpointslice.kubernetes.io/managed-by value of the
	// slices this controller owns; it is upstream's, so tools that look
	// for the standard controller's slices find kelp's.
	ManagedBy = "endpointslice-controller.k8s.io"
	// DefaultMaxEndpointsPerSlice is upstream's default.
	DefaultMaxEndpointsPerSlice = 100
	// MaxEndpointsAddresses caps the legacy Endpoints object, as upstream.
	MaxEndpointsAddresses = 1000
	// OverCapacityAnnotation marks a truncated Endpoints object.
	OverCapacityAnnotation = "endpoints.kubernetes.io/over-capacity"
	// leaderAnnotation marks Endpoints used as leader-election locks by
	// old components; they have no Service and must survive.
	leaderAnnotation = "control-plane.alpha.kubernetes.io/leader"
)

// Option adjusts a Controller.
type Option func(*Controller)

// WithMaxEndpointsPerSlice sets how many endpoints one slice may hold.
func WithMaxEndpointsPerSlice(n int) Option {
	return func(c *Controller) {
		if n > 0 {
			c.maxPerSlice = n
		}
	}
}

// Controller keeps EndpointSlices and Endpoints for every Service that has
// a selector. Services without one (or of type ExternalName) are left to
// their users.
type Controller struct {
	loop        controllers.Loop
	client      kubernetes.Interface
	services    corelisters.ServiceLister
	pods        corelisters.PodLister
	slices      discoverylisters.EndpointSliceLister
	endpoints   corelisters.EndpointsLister
	maxPerSlice int
	// The two kinds of object are cached by different informers, so
	// their pending writes are kept apart.
	pendingSlices    *pendingWrites
	pendingEndpoints *pendingWrites
}

// New returns the controller. It only adds handlers to factory; the caller
// starts it.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, opts ...Option) *Controller {
	svcInf := factory.Core().V1().Services()
	podInf := factory.Core().V1().Pods()
	sliceInf := factory.Discovery().V1().EndpointSlices()
	epInf := factory.Core().V1().Endpoints()
	c := &Controller{
		client:           client,
		services:         svcInf.Lister(),
		pods:             podInf.Lister(),
		slices:           sliceInf.Lister(),
		endpoints:        epInf.Lister(),
		maxPerSlice:      DefaultMaxEndpointsPerSlice,
		pendingSlices:    newPendingWrites(),
		pendingEndpoints: newPendingWrites(),
	}
	for _, o := range opts {
		o(c)
	}
	c.loop = controllers.Loop{
		Name:  ControllerName,
		Queue: controllers.NewQueue(ControllerName),
		Synced: []cache.InformerSynced{svcInf.Informer().HasSynced, podInf.Informer().HasSynced,
			sliceInf.Informer().HasSynced, epInf.Informer().HasSynced},
		Sync: c.sync,
	}
	_, _ = svcInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueObject,
		UpdateFunc: func(_, o interface{}) { c.enqueueObject(o) },
		DeleteFunc: c.enqueueObject,
	})
	_, _ = podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(o interface{}) {
			if p, ok := o.(*corev1.Pod); ok {
				c.enqueuePodServices(p.Namespace, p.Labels, nil)
			}
		},
		UpdateFunc: c.podUpdated,
		DeleteFunc: func(o interface{}) {
			if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = t.Obj
			}
			if p, ok := o.(*corev1.Pod); ok {
				c.enqueuePodServices(p.Namespace, p.Labels, nil)
			}
		},
	})
	_, _ = sliceInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o interface{}) { c.sliceChanged(o, false) },
		UpdateFunc: func(_, o interface{}) { c.sliceChanged(o, false) },
		DeleteFunc: func(o interface{}) { c.sliceChanged(o, true) },
	})
	_, _ = epInf.Informer().AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		// Endpoints that were left behind while no controller ran (their
		// Service went away meanwhile) are found from the initial list
		// only: a user may create Endpoints before their Service, and
		// deleting those on every add would race them.
		AddFunc: func(o interface{}, initial bool) {
			ep, ok := o.(*corev1.Endpoints)
			switch {
			case !ok:
			case initial && ep.Annotations[leaderAnnotation] == "":
				c.enqueueObject(ep)
			default:
				c.endpointsChanged(ep, false)
			}
		},
		UpdateFunc: func(_, o interface{}) { c.endpointsChanged(o, false) },
		DeleteFunc: func(o interface{}) { c.endpointsChanged(o, true) },
	})
	return c
}

// Run runs workers until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) { c.loop.Run(ctx, workers) }

func (c *Controller) enqueueObject(o interface{}) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(o)
	if err == nil {
		c.loop.Queue.Add(key)
	}
}

// endpointsChanged repairs edits and deletions of an Endpoints object this
// controller manages; others' Endpoints are not its business.
func (c *Controller) endpointsChanged(o interface{}, deleted bool) {
	if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = t.Obj
		deleted = true
	}
	ep, ok := o.(*corev1.Endpoints)
	if !ok {
		return
	}
	if deleted {
		c.pendingEndpoints.gone(ep.Namespace+"/"+ep.Name, ep.Name)
	}
	if svc, err := c.services.Services(ep.Namespace).Get(ep.Name); err == nil && managed(svc) {
		c.loop.Queue.Add(ep.Namespace + "/" + ep.Name)
	}
}

func (c *Controller) sliceChanged(o interface{}, deleted bool) {
	if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = t.Obj
		deleted = true
	}
	s, ok := o.(*discoveryv1.EndpointSlice)
	if !ok || s.Labels[discoveryv1.LabelManagedBy] != ManagedBy {
		return
	}
	svc := s.Labels[discoveryv1.LabelServiceName]
	if svc == "" {
		return
	}
	key := s.Namespace + "/" + svc
	if deleted {
		c.pendingSlices.gone(key, s.Name)
	}
	c.loop.Queue.Add(key)
}

// podUpdated ignores status churn (container restarts, probes' timestamps)
// that cannot change any endpoint, so busy pods do not keep every Service
// in their namespace resyncing.
func (c *Controller) podUpdated(oldObj, newObj interface{}) {
	oldPod, ok1 := oldObj.(*corev1.Pod)
	newPod, ok2 := newObj.(*corev1.Pod)
	if !ok1 || !ok2 || !podEndpointChanged(oldPod, newPod) {
		return
	}
	var oldLabels map[string]string
	if !labels.Equals(oldPod.Labels, newPod.Labels) {
		oldLabels = oldPod.Labels
	}
	c.enqueuePodServices(newPod.Namespace, newPod.Labels, oldLabels)
}

func podEndpointChanged(a, b *corev1.Pod) bool {
	if !labels.Equals(a.Labels, b.Labels) ||
		a.Status.PodIP != b.Status.PodIP || !apiequality.Semantic.DeepEqual(a.Status.PodIPs, b.Status.PodIPs) ||
		podutils.IsPodReady(a) != podutils.IsPodReady(b) || (a.DeletionTimestamp == nil) != (b.DeletionTimestamp == nil) ||
		a.Status.Phase != b.Status.Phase || a.Spec.NodeName != b.Spec.NodeName ||
		a.Spec.Hostname != b.Spec.Hostname || a.Spec.Subdomain != b.Spec.Subdomain ||
		len(a.Spec.Containers) != len(b.Spec.Containers) {
		return true
	}
	for i := range a.Spec.Containers {
		if !apiequality.Semantic.DeepEqual(a.Spec.Containers[i].Ports, b.Spec.Containers[i].Ports) {
			return true
		}
	}
	return false
}

// enqueuePodServices queues every managed Service in ns whose selector
// picks either label set: a relabelled pod must leave the Services it
// stopped matching as well as join the new ones.
func (c *Controller) enqueuePodServices(ns string, newLabels, oldLabels map[string]string) {
	svcs, err := c.services.Services(ns).List(labels.Everything())
	if err != nil {
		return
	}
	for _, svc := range svcs {
		if len(svc.Spec.Selector) == 0 {
			continue
		}
		sel := labels.SelectorFromSet(svc.Spec.Selector)
		if sel.Matches(labels.Set(newLabels)) || (oldLabels != nil && sel.Matches(labels.Set(oldLabels))) {
			c.loop.Queue.Add(ns + "/" + svc.Name)
		}
	}
}

// managed reports whether this controller publishes endpoints for svc. A
// Service without a selector has its endpoints written by someone else,
// and an ExternalName Service is a DNS alias with no endpoints at all.
func managed(svc *corev1.Service) bool {
	return len(svc.Spec.Selector) > 0 && svc.Spec.Type != corev1.ServiceTypeExternalName
}

func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	// The API server publishes its own endpoints for default/kubernetes.
	if ns == metav1.NamespaceDefault && name == "kubernetes" {
		return nil
	}
	svc, err := c.services.Services(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return errors.Join(c.deleteSlices(ctx, key, ns, name), c.deleteEndpoints(ctx, ns, name))
	}
	if err != nil {
		return err
	}
	if !managed(svc) {
		// Slices carrying our managed-by label are ours even now that the
		// Service stopped selecting; the Endpoints object passes to the
		// user, who typically drops the selector to take it over.
		return c.deleteSlices(ctx, key, ns, name)
	}
	pods, err := c.pods.Pods(ns).List(labels.SelectorFromSet(svc.Spec.Selector))
	if err != nil {
		return err
	}
	included := pods[:0:0]
	for _, p := range pods {
		if podIncluded(p) {
			included = append(included, p)
		}
	}
	return errors.Join(c.syncSlices(ctx, key, svc, included), c.syncEndpoints(ctx, svc, included))
}
