// Package nodepassword forgets a node's password when its Node is
// deleted, as k3s does: `kubectl delete node X` frees the name X for
// another machine, whose join would otherwise be refused because X's
// password Secret (kube-system/X.node-password.kelp, written at join) is
// still held by the old machine.
package nodepassword

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/kelp-project/kelp/server/controllers"
	"github.com/kelp-project/kelp/server/join"
)

// Controller deletes the password Secret of each deleted Node.
//
// Only deletions are acted on, never absence: an agent writes its
// password at join, a moment before its kubelet registers the Node, so a
// password without a Node is normal. A deletion missed while the server
// was down leaves the Secret; deleting it by hand frees the name.
type Controller struct {
	client kubernetes.Interface
	nodes  corelisters.NodeLister
	synced []cache.InformerSynced
	queue  workqueue.TypedRateLimitingInterface[string]
}

// New wires the controller to the factory's Node informer.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory) *Controller {
	inf := factory.Core().V1().Nodes()
	c := &Controller{client: client, nodes: inf.Lister(), synced: []cache.InformerSynced{inf.Informer().HasSynced},
		queue: controllers.NewQueue("nodepassword")}
	_, _ = inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
				c.queue.Add(key)
			}
		},
	})
	return c
}

// Run processes deleted nodes until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	loop := controllers.Loop{Name: "nodepassword", Queue: c.queue, Synced: c.synced, Sync: c.sync}
	loop.Run(ctx, workers)
}

func (c *Controller) sync(ctx context.Context, name string) error {
	// Re-registered since (the same machine, say): its password stands.
	if _, err := c.nodes.Get(name); err == nil {
		return nil
	}
	err := c.client.CoreV1().Secrets(metav1.NamespaceSystem).Delete(ctx, join.PasswordSecretName(name), metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
