// Package serviceaccount holds the service-account controllers. Two are
// small per-namespace ones: Controller ensures a "default" ServiceAccount
// in every active namespace, RootCAPublisher ensures the
// "kube-root-ca.crt" ConfigMap holding the cluster CA in every active
// namespace; both recreate or repair their object when it is deleted or
// edited. TokensController fills in legacy service-account token Secrets.
package serviceaccount

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/kelp-project/kelp/server/controllers"
)

// DefaultServiceAccountName is the ServiceAccount kept in every namespace.
const DefaultServiceAccountName = "default"

// ignorableCreateError is true for errors that mean "nothing to do":
// the object exists already, or the namespace is going away.
func ignorableCreateError(err error) bool {
	return apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err) ||
		controllers.NamespaceTerminating(err)
}

// Controller ensures the default ServiceAccount exists in every active
// namespace.
type Controller struct {
	*perNamespace
	client   kubernetes.Interface
	saLister corelisters.ServiceAccountLister
}

// New returns the ServiceAccount controller. The factory must be started
// by the caller.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory) *Controller {
	saInf := factory.Core().V1().ServiceAccounts()
	c := &Controller{client: client, saLister: saInf.Lister()}
	c.perNamespace = newPerNamespace("serviceaccount", factory.Core().V1().Namespaces(), saInf.Informer(), DefaultServiceAccountName, c.ensure)
	return c
}

// ensure creates the default ServiceAccount in namespace name if missing.
func (c *Controller) ensure(ctx context.Context, name string) error {
	if _, err := c.saLister.ServiceAccounts(name).Get(DefaultServiceAccountName); err == nil {
		return nil
	} else if !apierrors.IsNotFound(err) {
		return err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: DefaultServiceAccountName, Namespace: name}}
	_, err := c.client.CoreV1().ServiceAccounts(name).Create(ctx, sa, metav1.CreateOptions{})
	if err != nil && !ignorableCreateError(err) {
		return err
	}
	return nil
}
