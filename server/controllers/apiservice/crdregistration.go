package apiservice

import (
	"context"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions/apiextensions/v1"
	crdlisters "k8s.io/apiextensions-apiserver/pkg/client/listers/apiextensions/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/kube-aggregator/pkg/controllers/autoregister"

	"github.com/kelp-project/kelp/server/controllers"
)

// crdRegistration is upstream's crdRegistrationController: for every
// group/version some CRD serves, the autoregister controller is told to
// keep a local APIService (continuously: it goes when no CRD serves the
// group/version any more). A built-in group/version is left to the
// built-in's APIService: the API server serves built-in names first.
type crdRegistration struct {
	crds         crdlisters.CustomResourceDefinitionLister
	registration autoregister.AutoAPIServiceRegistration
	builtin      map[schema.GroupVersion]bool
	loop         controllers.Loop
}

func newCRDRegistration(crds crdinformers.CustomResourceDefinitionInformer, registration autoregister.AutoAPIServiceRegistration, builtin map[schema.GroupVersion]bool) *crdRegistration {
	c := &crdRegistration{crds: crds.Lister(), registration: registration, builtin: builtin}
	c.loop = controllers.Loop{
		Name: "crd-apiservice-registration", Queue: controllers.NewQueue("crd_apiservice_registration"),
		Synced: []cache.InformerSynced{crds.Informer().HasSynced},
		Sync: func(_ context.Context, key string) error {
			gv, err := schema.ParseGroupVersion(key)
			if err != nil {
				return nil // not a key this controller made
			}
			c.sync(gv)
			return nil
		},
	}
	enqueue := func(obj interface{}) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition)
		if !ok {
			return
		}
		for _, v := range crd.Spec.Versions {
			c.loop.Queue.Add(schema.GroupVersion{Group: crd.Spec.Group, Version: v.Name}.String())
		}
	}
	_, _ = crds.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue,
		// Both: a version dropped from the CRD must lose its APIService.
		UpdateFunc: func(old, cur interface{}) { enqueue(old); enqueue(cur) },
		DeleteFunc: enqueue,
	})
	return c
}

// InitialSync registers every group/version the CRDs serve now, once the
// CRD cache has synced. The autoregister controller must not start before
// it: it deletes a continuously managed APIService it is not told to keep.
func (c *crdRegistration) InitialSync(ctx context.Context) bool {
	if !cache.WaitForNamedCacheSync(c.loop.Name, ctx.Done(), c.loop.Synced...) {
		return false
	}
	crds, err := c.crds.List(labels.Everything())
	if err != nil {
		return false
	}
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			c.sync(schema.GroupVersion{Group: crd.Spec.Group, Version: v.Name})
		}
	}
	return true
}

func (c *crdRegistration) Run(ctx context.Context, workers int) { c.loop.Run(ctx, workers) }

// sync tells the autoregister controller whether gv needs an APIService.
func (c *crdRegistration) sync(gv schema.GroupVersion) {
	if c.builtin[gv] {
		return
	}
	name := gv.Version + "." + gv.Group
	crds, err := c.crds.List(labels.Everything())
	if err == nil {
		for _, crd := range crds {
			if crd.Spec.Group != gv.Group {
				continue
			}
			for _, v := range crd.Spec.Versions {
				if v.Name == gv.Version && v.Served {
					c.registration.AddAPIServiceToSync(localAPIService(gv, map[schema.GroupVersion]priority{gv: crdPriority}))
					return
				}
			}
		}
	}
	c.registration.RemoveAPIServiceToSync(name)
}
