// Package crd runs the controllers of upstream's apiextensions-apiserver
// that decide a CRD's state: the naming controller (NamesAccepted, and
// the accepted names the API server serves under) is upstream's own,
// through the generated apiextensions client and informers; the cleanup
// of a deleted CRD's objects is kelp's (cleanup.go), through the API.
// Established is set by the API server once it serves the CRD
// (server/apiserver/crdserving.go), as upstream's handler asks its
// establishing controller to.
package crd

import (
	"context"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextensionsinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions"
	"k8s.io/apiextensions-apiserver/pkg/controller/status"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// Informers is the one CRD informer of the API server's loopback
// controllers (these and the aggregator's CRD registration): a CRD decoded
// in full is tens of kilobytes, mostly its schemas and managedFields, and
// every copy of every CRD stays in memory for the life of the process.
// Their copies therefore leave out what none of them reads (summary):
// nothing may write a CRD from this cache but its status or a patch.
func Informers(rc *rest.Config) (apiextensionsinformers.SharedInformerFactory, error) {
	client, err := apiextensionsclient.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	return apiextensionsinformers.NewSharedInformerFactoryWithOptions(client, 0, apiextensionsinformers.WithTransform(summary)), nil
}

// summary drops a CRD's version schemas and managedFields from the
// controllers' copy: they read names, groups, versions, conditions and
// finalizers. A status update sent from it keeps the stored spec and
// managedFields (the /status endpoint takes the spec from the stored
// object; an update without managedFields keeps the stored ones).
func summary(obj interface{}) (interface{}, error) {
	crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition)
	if !ok {
		return obj, nil // a tombstone
	}
	crd.ManagedFields = nil
	for i := range crd.Spec.Versions {
		crd.Spec.Versions[i].Schema = nil
	}
	return crd, nil
}

// Run starts the controllers on the CRD informer of factory (from
// Informers, started by the caller); they stop with ctx. rc must be
// allowed to write CRD status and to list and delete every custom
// resource, which is why the control plane runs them as the API server's
// loopback user.
func Run(ctx context.Context, rc *rest.Config, factory apiextensionsinformers.SharedInformerFactory) error {
	client, err := apiextensionsclient.NewForConfig(rc)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return err
	}
	crds := factory.Apiextensions().V1().CustomResourceDefinitions()
	naming := status.NewNamingConditionController(klog.FromContext(ctx), crds, client.ApiextensionsV1())
	cleanup := newCleanup(crds, client.ApiextensionsV1(), dyn)
	go naming.RunWithContext(ctx)
	go cleanup.run(ctx)
	return nil
}
