package apiservice

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	v1helper "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1/helper"
	apiregistrationclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset/typed/apiregistration/v1"
	informers "k8s.io/kube-aggregator/pkg/client/informers/externalversions/apiregistration/v1"
	listers "k8s.io/kube-aggregator/pkg/client/listers/apiregistration/v1"

	"github.com/kelp-project/kelp/server/controllers"
)

// NotProxiedReason is the reason of the Available=False condition of an
// APIService that names a service: kelp has no aggregation layer.
const NotProxiedReason = "NotProxied"

// notProxied stands where upstream's remote availability controller
// checks an extension API server's health: kelp does not proxy to
// extension API servers, so an APIService with spec.service can never be
// available, and says so in its Available condition (kubectl get
// apiservices shows "False (NotProxied)").
type notProxied struct {
	client apiregistrationclient.APIServicesGetter
	lister listers.APIServiceLister
	loop   controllers.Loop
}

func newNotProxied(apiServices informers.APIServiceInformer, client apiregistrationclient.APIServicesGetter) *notProxied {
	c := &notProxied{client: client, lister: apiServices.Lister()}
	c.loop = controllers.Loop{
		Name: "apiservice-not-proxied", Queue: controllers.NewQueue("apiservice_not_proxied"),
		Synced: []cache.InformerSynced{apiServices.Informer().HasSynced},
		Sync:   c.sync,
	}
	_, _ = apiServices.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { controllers.Enqueue(c.loop.Queue, obj) },
		UpdateFunc: func(_, obj interface{}) { controllers.Enqueue(c.loop.Queue, obj) },
	})
	return c
}

func (c *notProxied) Run(ctx context.Context, workers int) { c.loop.Run(ctx, workers) }

// notProxiedCondition is the Available condition of an APIService that
// names a service.
func notProxiedCondition(svc *apiregistrationv1.APIService) apiregistrationv1.APIServiceCondition {
	ref := svc.Spec.Service
	return apiregistrationv1.APIServiceCondition{
		Type: apiregistrationv1.Available, Status: apiregistrationv1.ConditionFalse,
		Reason: NotProxiedReason, LastTransitionTime: metav1.Now(),
		Message: fmt.Sprintf("kelp does not proxy to extension API servers: %s/%s is not served through service %s/%s",
			svc.Spec.Group, svc.Spec.Version, ref.Namespace, ref.Name),
	}
}

func (c *notProxied) sync(ctx context.Context, name string) error {
	cur, err := c.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if cur.Spec.Service == nil {
		return nil // local: upstream's local availability controller's
	}
	svc := cur.DeepCopy()
	v1helper.SetAPIServiceCondition(svc, notProxiedCondition(svc))
	if equality.Semantic.DeepEqual(cur.Status, svc.Status) {
		return nil
	}
	_, err = c.client.APIServices().UpdateStatus(ctx, svc, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // deleted or changed meanwhile: the informer brings it back
	}
	return err
}
