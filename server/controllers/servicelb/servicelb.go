// Package servicelb gives LoadBalancer Services an address, as k3s's
// ServiceLB does: status.loadBalancer.ingress lists the InternalIPs of the
// Ready nodes, and every node's service proxy serves the Service on them.
package servicelb

import (
	"context"
	"k8s.io/utils/ptr"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/kelp-project/kelp/server/controllers"
)

// Controller keeps LoadBalancer Services' ingress in step with the nodes.
type Controller struct {
	client   kubernetes.Interface
	services corelisters.ServiceLister
	nodes    corelisters.NodeLister
	synced   []cache.InformerSynced
	queue    workqueue.TypedRateLimitingInterface[string]
}

// New wires the controller to the factory's Service and Node informers.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory) *Controller {
	svcInf, nodeInf := factory.Core().V1().Services(), factory.Core().V1().Nodes()
	c := &Controller{client: client, services: svcInf.Lister(), nodes: nodeInf.Lister(),
		synced: []cache.InformerSynced{svcInf.Informer().HasSynced, nodeInf.Informer().HasSynced},
		queue:  controllers.NewQueue("servicelb")}
	_, _ = svcInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
	})
	// Any node change may change every LoadBalancer's addresses.
	all := func(any) {
		svcs, _ := c.services.List(labels.Everything())
		for _, s := range svcs {
			c.enqueue(s)
		}
	}
	_, _ = nodeInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: all, UpdateFunc: func(_, obj any) { all(obj) }, DeleteFunc: all,
	})
	return c
}

func (c *Controller) enqueue(obj any) {
	if s, ok := obj.(*corev1.Service); ok && s.Spec.Type == corev1.ServiceTypeLoadBalancer {
		if key, err := cache.MetaNamespaceKeyFunc(s); err == nil {
			c.queue.Add(key)
		}
	}
}

// Run processes Services until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	loop := controllers.Loop{Name: "servicelb", Queue: c.queue, Synced: c.synced, Sync: c.sync}
	loop.Run(ctx, workers)
}

func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	svc, err := c.services.Services(ns).Get(name)
	if apierrors.IsNotFound(err) || (err == nil && svc.Spec.Type != corev1.ServiceTypeLoadBalancer) {
		return nil
	}
	if err != nil {
		return err
	}
	want := c.ingress()
	if apiequality.Semantic.DeepEqual(svc.Status.LoadBalancer.Ingress, want) {
		return nil
	}
	updated := svc.DeepCopy()
	updated.Status.LoadBalancer.Ingress = want
	_, err = c.client.CoreV1().Services(ns).UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	return err
}

// ingress is the InternalIP of every Ready node, sorted.
func (c *Controller) ingress() []corev1.LoadBalancerIngress {
	nodes, _ := c.nodes.List(labels.Everything())
	var ips []string
	for _, n := range nodes {
		ready := false
		for _, cond := range n.Status.Conditions {
			ready = ready || (cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue)
		}
		if !ready {
			continue
		}
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				ips = append(ips, a.Address)
			}
		}
	}
	sort.Strings(ips)
	var out []corev1.LoadBalancerIngress
	for _, ip := range ips {
		out = append(out, corev1.LoadBalancerIngress{IP: ip, IPMode: ptr.To(corev1.LoadBalancerIPModeVIP)})
	}
	return out
}
