package apiservice

import (
	"net/url"

	endpointproxy "k8s.io/apiserver/pkg/util/proxy"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	apiregistrationclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset/typed/apiregistration/v1"
	informers "k8s.io/kube-aggregator/pkg/client/informers/externalversions/apiregistration/v1"
	availabilitymetrics "k8s.io/kube-aggregator/pkg/controllers/status/metrics"
	remoteavailable "k8s.io/kube-aggregator/pkg/controllers/status/remote"
)

// endpointResolver resolves a service reference to one of its ready
// endpoints (https://<endpoint IP>:<target port>), as kube-apiserver with
// --enable-aggregator-routing and as kelp's proxy
// (server/apiserver/aggregator.go): the server may run without a node
// proxy, so a ClusterIP may lead nowhere from it.
type endpointResolver struct {
	services corelisters.ServiceLister
	slices   endpointproxy.EndpointSliceGetter
}

func (r *endpointResolver) ResolveEndpoint(namespace, name string, port int32) (*url.URL, error) {
	return endpointproxy.ResolveEndpoint(r.services, r.slices, namespace, name, port)
}

// newRemoteAvailability is upstream's remote availability controller:
// for an APIService naming a service it checks the Service, its ready
// endpoints, and GETs /apis/<group>/<version> from a resolved endpoint
// with the front-proxy client certificate, setting Available True
// ("Passed") or False with upstream's reasons (ServiceNotFound,
// ServicePortError, EndpointsNotFound, MissingEndpoints,
// FailedDiscoveryCheck). The Service and EndpointSlice informers come
// from factory, which the caller starts.
func newRemoteAvailability(apiServices informers.APIServiceInformer, client apiregistrationclient.APIServicesGetter,
	kube kubernetes.Interface, certPEM, keyPEM []byte) (*remoteavailable.AvailableConditionController, kubeinformers.SharedInformerFactory, error) {
	factory := kubeinformers.NewSharedInformerFactory(kube, 0)
	services := factory.Core().V1().Services()
	slices := factory.Discovery().V1().EndpointSlices()
	getter, err := endpointproxy.NewEndpointSliceIndexerGetter(slices)
	if err != nil {
		return nil, nil, err
	}
	resolver := &endpointResolver{services: services.Lister(), slices: getter}
	c, err := remoteavailable.New(apiServices, services, slices, client, nil,
		func() ([]byte, []byte) { return certPEM, keyPEM }, resolver, availabilitymetrics.New())
	if err != nil {
		return nil, nil, err
	}
	return c, factory, nil
}
