// Package serviceaccount holds two small per-namespace controllers:
// Controller ensures a "default" ServiceAccount in every active namespace,
// RootCAPublisher ensures the "kube-root-ca.crt" ConfigMap holding the
// cluster CA in every active namespace. Both recreate or repair their
// object when it is deleted or edited.
package serviceaccount

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kelp-project/kelp/server/controllers"
)

// DefaultServiceAccountName is the ServiceAccount kept in every namespace.
const DefaultServiceAccountName = "default"

// namespaceActive reports whether objects should be ensured in ns.
func namespaceActive(ns *corev1.Namespace) bool {
	return ns.DeletionTimestamp == nil && ns.Status.Phase != corev1.NamespaceTerminating
}

// ignorableCreateError is true for errors that mean "nothing to do":
// the object exists already, or the namespace is going away.
func ignorableCreateError(err error) bool {
	return apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err) ||
		(apierrors.IsForbidden(err) && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause))
}

// Controller ensures the default ServiceAccount exists in every active
// namespace.
type Controller struct {
	loop     controllers.Loop
	client   kubernetes.Interface
	nsLister corelisters.NamespaceLister
	saLister corelisters.ServiceAccountLister
}

// New returns the ServiceAccount controller. The factory must be started
// by the caller.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory) *Controller {
	nsInf := factory.Core().V1().Namespaces()
	saInf := factory.Core().V1().ServiceAccounts()
	c := &Controller{
		loop:     controllers.Loop{Name: "serviceaccount", Queue: controllers.NewQueue("serviceaccount")},
		client:   client,
		nsLister: nsInf.Lister(),
		saLister: saInf.Lister(),
	}
	c.loop.Synced = []cache.InformerSynced{nsInf.Informer().HasSynced, saInf.Informer().HasSynced}
	c.loop.Sync = c.sync
	_, _ = nsInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueNamespace,
		UpdateFunc: func(_, obj interface{}) { c.enqueueNamespace(obj) },
	})
	_, _ = saInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj interface{}) { c.enqueueObject(obj) },
		DeleteFunc: c.enqueueObject,
	})
	return c
}

// Run runs workers until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) { c.loop.Run(ctx, workers) }

func (c *Controller) enqueueNamespace(obj interface{}) {
	if ns, ok := obj.(*corev1.Namespace); ok {
		c.loop.Queue.Add(ns.Name)
	}
}

func (c *Controller) enqueueObject(obj interface{}) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	sa, ok := obj.(*corev1.ServiceAccount)
	if !ok || sa.Name != DefaultServiceAccountName {
		return
	}
	c.loop.Queue.Add(sa.Namespace)
}

func (c *Controller) sync(ctx context.Context, name string) error {
	ns, err := c.nsLister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !namespaceActive(ns) {
		return nil
	}
	if _, err := c.saLister.ServiceAccounts(name).Get(DefaultServiceAccountName); err == nil {
		return nil
	} else if !apierrors.IsNotFound(err) {
		return err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: DefaultServiceAccountName, Namespace: name}}
	_, err = c.client.CoreV1().ServiceAccounts(name).Create(ctx, sa, metav1.CreateOptions{})
	if err != nil && !ignorableCreateError(err) {
		return err
	}
	return nil
}
