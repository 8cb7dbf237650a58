// Package apiservice keeps the apiregistration.k8s.io/v1 APIServices as
// kube-apiserver's aggregator does, through the API:
//
//   - a local APIService (no spec.service) for every built-in group/version
//     kelp serves, by upstream's autoregister controller, made once at
//     start with kube-apiserver's priorities (priorities.go);
//   - one for every group/version a CRD serves, kept while some CRD serves
//     it (crdregistration.go, kelp's copy of upstream's
//     crdRegistrationController, which lives in k8s.io/kubernetes);
//   - Available=True reason Local on local APIServices, by upstream's
//     local availability controller;
//   - Available True/False on an APIService that names a service, by
//     upstream's remote availability controller (remote.go): its Service,
//     ready endpoints and /apis/<group>/<version> answered through the
//     front-proxy client certificate.
//
// The API server serves the APIService kind itself
// (server/apiserver/registry/apiregistration.go) and proxies to the
// extension API servers (server/apiserver/aggregator.go); discovery of
// kelp's own group/versions comes from the served table, that of the
// remote ones from their servers.
package apiservice

import (
	"context"

	crdinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
	aggregatorinformers "k8s.io/kube-aggregator/pkg/client/informers/externalversions"
	"k8s.io/kube-aggregator/pkg/controllers/autoregister"
	localavailable "k8s.io/kube-aggregator/pkg/controllers/status/local"
	availabilitymetrics "k8s.io/kube-aggregator/pkg/controllers/status/metrics"
)

// Run starts the controllers; they stop with ctx. builtin are the
// group/versions the API server serves of its own (not from CRDs). rc
// must be allowed to write APIServices and their status, which is why
// the control plane runs them as the API server's loopback user, as
// kube-apiserver does. crds is the CRD controllers' informer
// (crd.Informers), started by the caller. certPEM and keyPEM are the
// front-proxy client certificate the availability checks present.
func Run(ctx context.Context, rc *rest.Config, builtin []schema.GroupVersion, crds crdinformers.CustomResourceDefinitionInformer, certPEM, keyPEM []byte) error {
	client, err := aggregatorclient.NewForConfig(rc)
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	factory := aggregatorinformers.NewSharedInformerFactory(client, 0)
	apiServices := factory.Apiregistration().V1().APIServices()

	registration := autoregister.NewAutoRegisterController(apiServices, client.ApiregistrationV1())
	builtinSet := map[schema.GroupVersion]bool{}
	for _, gv := range builtin {
		if svc := localAPIService(gv, builtinPriorities); svc != nil {
			registration.AddAPIServiceToSyncOnStart(svc)
			builtinSet[gv] = true
		}
	}
	// Metrics are kept but not registered: kelp exposes no aggregator
	// metrics.
	available, err := localavailable.New(apiServices, client.ApiregistrationV1(), availabilitymetrics.New())
	if err != nil {
		return err
	}
	crdReg := newCRDRegistration(crds, registration, builtinSet)
	remote, kubeFactory, err := newRemoteAvailability(apiServices, client.ApiregistrationV1(), kube, certPEM, keyPEM)
	if err != nil {
		return err
	}

	factory.Start(ctx.Done())
	kubeFactory.Start(ctx.Done())
	go func() {
		// As kube-apiserver's start hook: the CRDs' group/versions are
		// registered before autoregister runs, or it would delete their
		// APIServices as unwanted.
		if !crdReg.InitialSync(ctx) {
			return
		}
		go crdReg.Run(ctx, 1)
		registration.Run(1, ctx.Done())
	}()
	go available.Run(1, ctx.Done())
	go remote.Run(1, ctx.Done())
	return nil
}

// localAPIService is the APIService of a group/version this server serves
// (upstream's makeAPIService): named <version>.<group> ("v1." for the core
// group), no service, the table's priorities; nil when the table has none.
func localAPIService(gv schema.GroupVersion, priorities map[schema.GroupVersion]priority) *apiregistrationv1.APIService {
	p, ok := priorities[gv]
	if !ok {
		return nil
	}
	return &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: gv.Version + "." + gv.Group},
		Spec: apiregistrationv1.APIServiceSpec{
			Group: gv.Group, Version: gv.Version,
			GroupPriorityMinimum: p.group, VersionPriority: p.version,
		},
	}
}
