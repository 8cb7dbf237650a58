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

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextensionsinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions"
	"k8s.io/apiextensions-apiserver/pkg/controller/status"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// Run starts the controllers; they stop with ctx. rc must be allowed to
// write CRD status and to list and delete every custom resource, which is
// why the control plane runs them as the API server's loopback user.
func Run(ctx context.Context, rc *rest.Config) error {
	client, err := apiextensionsclient.NewForConfig(rc)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return err
	}
	factory := apiextensionsinformers.NewSharedInformerFactory(client, 0)
	crds := factory.Apiextensions().V1().CustomResourceDefinitions()
	naming := status.NewNamingConditionController(klog.FromContext(ctx), crds, client.ApiextensionsV1())
	cleanup := newCleanup(crds, client.ApiextensionsV1(), dyn)
	factory.Start(ctx.Done())
	go naming.RunWithContext(ctx)
	go cleanup.run(ctx)
	return nil
}
