package crd

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/typed/apiextensions/v1"
	crdinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/kelp-project/kelp/server/controllers"
)

// cleanupFinalizer is upstream's customresourcecleanup finalizer, which
// the API server puts on a CRD being deleted.
const cleanupFinalizer = "customresourcecleanup.apiextensions.k8s.io"

// cleanup is upstream's CRD finalizer (controller/finalizer) done through
// the API rather than the storage: it deletes a terminating CRD's custom
// objects, waits until they are gone (their own finalizers may hold them),
// then removes the cleanup finalizer so the CRD goes too.
type cleanup struct {
	crds   crdinformers.CustomResourceDefinitionInformer
	client crdclient.ApiextensionsV1Interface
	dyn    dynamic.Interface
	queue  workqueue.TypedRateLimitingInterface[string]
}

// held is the sync's answer while objects with finalizers of their own
// remain: not a failure, look again in a second.
type held struct{ n int }

func (h held) Error() string               { return fmt.Sprintf("%d objects still held by their finalizers", h.n) }
func (h held) RequeueDelay() time.Duration { return time.Second }

func newCleanup(crds crdinformers.CustomResourceDefinitionInformer, client crdclient.ApiextensionsV1Interface, dyn dynamic.Interface) *cleanup {
	c := &cleanup{crds: crds, client: client, dyn: dyn, queue: controllers.NewQueue("crd_finalizer")}
	enqueue := func(obj interface{}) {
		if crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition); ok && crd.DeletionTimestamp != nil &&
			apihelpers.CRDHasFinalizer(crd, cleanupFinalizer) {
			c.queue.Add(crd.Name)
		}
	}
	_, _ = crds.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj interface{}) { enqueue(obj) },
	})
	return c
}

func (c *cleanup) run(ctx context.Context) {
	(&controllers.Loop{Name: "crd_finalizer", Queue: c.queue, Synced: []cache.InformerSynced{c.crds.Informer().HasSynced}, Sync: c.sync}).Run(ctx, 1)
}

func (c *cleanup) sync(ctx context.Context, name string) error {
	crd, err := c.crds.Lister().Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if crd.DeletionTimestamp == nil || !apihelpers.CRDHasFinalizer(crd, cleanupFinalizer) {
		return nil
	}
	crd = crd.DeepCopy()
	remaining, err := c.deleteObjects(ctx, crd)
	if err != nil {
		return err
	}
	if remaining > 0 {
		return held{remaining}
	}
	// A patch, not an update: the informer's copy has no schemas
	// (Informers). The resourceVersion makes it conditional on the CRD
	// this sync read.
	apihelpers.CRDRemoveFinalizer(crd, cleanupFinalizer)
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"finalizers": crd.Finalizers, "resourceVersion": crd.ResourceVersion}})
	if err != nil {
		return err
	}
	_, err = c.client.CustomResourceDefinitions().Patch(ctx, crd.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// deleteObjects deletes every object of the CRD (through a served version:
// they are all the same objects) and returns how many are still there.
func (c *cleanup) deleteObjects(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) (int, error) {
	version := ""
	for _, v := range crd.Spec.Versions {
		if v.Served && (version == "" || v.Storage) {
			version = v.Name
		}
	}
	if version == "" || crd.Status.AcceptedNames.Plural == "" {
		return 0, nil // never served, so nothing was stored
	}
	res := c.dyn.Resource(schema.GroupVersionResource{Group: crd.Spec.Group, Version: version, Resource: crd.Status.AcceptedNames.Plural})
	list, err := res.List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("listing %s: %w", crd.Name, err)
	}
	pending := 0
	for _, item := range list.Items {
		pending++
		if item.GetDeletionTimestamp() != nil {
			continue
		}
		var err error
		if ns := item.GetNamespace(); ns != "" {
			err = res.Namespace(ns).Delete(ctx, item.GetName(), metav1.DeleteOptions{})
		} else {
			err = res.Delete(ctx, item.GetName(), metav1.DeleteOptions{})
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return 0, err
		}
	}
	if pending == 0 {
		return 0, nil
	}
	// Deletes without finalizers are immediate: count again.
	list, err = res.List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	return len(list.Items), nil
}
