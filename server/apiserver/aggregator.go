package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/proxy"
	endpointproxy "k8s.io/apiserver/pkg/util/proxy"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/transport"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	v1helper "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1/helper"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
	aggregatorinformers "k8s.io/kube-aggregator/pkg/client/informers/externalversions"
	listers "k8s.io/kube-aggregator/pkg/client/listers/apiregistration/v1"
	"k8s.io/kube-aggregator/pkg/controllers/status/remote"

	"github.com/kelp-project/kelp/server/apiserver/auth"
)

// The aggregation layer's proxy, as kube-aggregator's handler_proxy.go: a
// request for /apis/<group>/<version>[/...] whose APIService
// (<version>.<group>) names a service is passed, after kelp's
// authentication, impersonation and authorization like any request, to
// that extension API server, which learns the user from the X-Remote-*
// headers of the front-proxy client certificate. An APIService without a
// service (Local) is served by kelp itself. Discovery of the remote groups
// is in remotediscovery.go.

// aggregator holds what the proxy needs; SetAggregation starts it once
// the loopback client exists, so until then no request is proxied.
type aggregator struct {
	// certPEM and keyPEM are the front-proxy client certificate
	// (system:auth-proxy, signed by the request-header CA).
	certPEM, keyPEM []byte
	apiServices     listers.APIServiceLister
	// resolver is nil until the first APIService naming a service
	// appears: the Service and EndpointSlice informers it needs are not
	// kept by a server that aggregates nothing.
	resolver   atomic.Pointer[endpointResolver]
	startOnce  sync.Once
	discovery  *remoteDiscovery
	newFactory func() informers.SharedInformerFactory
	stop       <-chan struct{}
}

// SetAggregation starts the aggregation layer: rc is the API server's
// loopback configuration (system:masters), certPEM and keyPEM the
// front-proxy client certificate presented to extension API servers.
func (s *Server) SetAggregation(ctx context.Context, rc *rest.Config, certPEM, keyPEM []byte) error {
	client, err := aggregatorclient.NewForConfig(rc)
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	factory := aggregatorinformers.NewSharedInformerFactory(client, 0)
	inf := factory.Apiregistration().V1().APIServices()
	a := &aggregator{certPEM: certPEM, keyPEM: keyPEM, apiServices: inf.Lister(), stop: ctx.Done(),
		newFactory: func() informers.SharedInformerFactory { return informers.NewSharedInformerFactory(kube, 0) }}
	a.discovery = newRemoteDiscovery(a)
	onChange := func(obj interface{}) {
		svc, ok := obj.(*apiregistrationv1.APIService)
		if !ok {
			if d, isTomb := obj.(cache.DeletedFinalStateUnknown); isTomb {
				svc, ok = d.Obj.(*apiregistrationv1.APIService)
			}
		}
		if !ok {
			return
		}
		if svc.Spec.Service != nil {
			a.startResolver()
		}
		a.discovery.enqueue(svc.Name)
	}
	_, err = inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    onChange,
		UpdateFunc: func(_, obj interface{}) { onChange(obj) },
		DeleteFunc: onChange,
	})
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	go a.discovery.run(ctx)
	s.agg.Store(a)
	return nil
}

// startResolver starts the Service and EndpointSlice informers the
// endpoint resolution reads, once.
func (a *aggregator) startResolver() {
	a.startOnce.Do(func() {
		f := a.newFactory()
		slices := f.Discovery().V1().EndpointSlices()
		getter, err := endpointproxy.NewEndpointSliceIndexerGetter(slices)
		if err != nil {
			logrus.Errorf("aggregator: endpoint slices: %v", err)
			return
		}
		r := &endpointResolver{services: f.Core().V1().Services().Lister(), slices: getter}
		services := f.Core().V1().Services().Informer()
		sliceInf := slices.Informer()
		f.Start(a.stop)
		go func() {
			if cache.WaitForCacheSync(a.stop, services.HasSynced, sliceInf.HasSynced) {
				a.resolver.Store(r)
				a.discovery.enqueueAll()
			}
		}()
	})
}

// endpointResolver resolves a service reference to one of its ready
// endpoints, as kube-apiserver with --enable-aggregator-routing: kelp's
// API server may run on a host without a node proxy (a server with
// --disable-agent), where a ClusterIP leads nowhere, while pod IPs are
// reached directly as for pods/proxy. The availability controller
// (server/controllers/apiservice) resolves the same way.
type endpointResolver struct {
	services corelisters.ServiceLister
	slices   endpointproxy.EndpointSliceGetter
}

func (r *endpointResolver) ResolveEndpoint(namespace, name string, port int32) (*url.URL, error) {
	return endpointproxy.ResolveEndpoint(r.services, r.slices, namespace, name, port)
}

// remoteFor is the APIService that names a service for the
// group/version a path under /apis/<group>/<version> is for, or nil.
func (a *aggregator) remoteFor(path string) *apiregistrationv1.APIService {
	parts := strings.SplitN(strings.TrimPrefix(path, "/"), "/", 4)
	if len(parts) < 3 || parts[0] != "apis" || parts[1] == "" || parts[2] == "" {
		return nil
	}
	svc, err := a.apiServices.Get(parts[2] + "." + parts[1])
	if err != nil || svc.Spec.Service == nil {
		return nil
	}
	return svc
}

// port is the service port an APIService names (443 when unset, as
// upstream's defaulting).
func port(svc *apiregistrationv1.APIService) int32 {
	if svc.Spec.Service.Port != nil {
		return *svc.Spec.Service.Port
	}
	return 443
}

// location resolves the APIService's service to https://<endpoint>.
func (a *aggregator) location(svc *apiregistrationv1.APIService) (*url.URL, error) {
	r := a.resolver.Load()
	if r == nil {
		return nil, fmt.Errorf("the endpoints of service %s/%s are not known yet", svc.Spec.Service.Namespace, svc.Spec.Service.Name)
	}
	return r.ResolveEndpoint(svc.Spec.Service.Namespace, svc.Spec.Service.Name, port(svc))
}

// transportFor is the TLS transport to an APIService's server: its
// certificate verified against spec.caBundle for the name
// <service>.<namespace>.svc (or not at all with insecureSkipTLSVerify),
// the front-proxy client certificate presented. It is upstream's
// transport configuration, which the availability controller uses too;
// client-go caches the transport per configuration.
func (a *aggregator) transportFor(svc *apiregistrationv1.APIService) (http.RoundTripper, error) {
	return transport.New(remote.BuildTransportConfig(nil, a.certPEM, a.keyPEM, svc))
}

// proxiedRequest is the request as the extension API server gets it: the
// client's credentials and impersonation headers are for kelp and are
// dropped (kelp has used them: the user is the impersonated one), and
// the X-Remote-* headers carry the user, replacing any the client sent.
func proxiedRequest(r *http.Request, u *auth.User) *http.Request {
	out := r.Clone(r.Context())
	out.Header.Del("Authorization")
	for h := range out.Header {
		if strings.HasPrefix(h, "Impersonate-") {
			out.Header.Del(h)
		}
	}
	transport.SetAuthProxyHeaders(out, u.Name, u.UID, u.Groups, u.Extra)
	return out
}

// serveRemote proxies a request to the APIService's server: 503 "service
// unavailable" while it is not Available or has no ready endpoint, as
// upstream's.
func (s *Server) serveRemote(w http.ResponseWriter, r *http.Request, a *aggregator, svc *apiregistrationv1.APIService) {
	unavailable := apierrors.NewServiceUnavailable("service unavailable")
	if !v1helper.IsAPIServiceConditionTrue(svc, apiregistrationv1.Available) {
		s.writeError(w, r, unavailable)
		return
	}
	loc, err := a.location(svc)
	if err != nil {
		logrus.Debugf("aggregator: %s: %v", svc.Name, err)
		s.writeError(w, r, unavailable)
		return
	}
	rt, err := a.transportFor(svc)
	if err != nil {
		s.writeError(w, r, apierrors.NewInternalError(fmt.Errorf("transport to APIService %s: %w", svc.Name, err)))
		return
	}
	u := auth.UserFrom(r.Context())
	if u == nil {
		s.writeError(w, r, apierrors.NewInternalError(fmt.Errorf("missing user")))
		return
	}
	out := proxiedRequest(r, u)
	location := &url.URL{Scheme: "https", Host: loc.Host, Path: r.URL.Path, RawQuery: r.URL.RawQuery}
	upgrade := httpstream.IsUpgradeRequest(r)
	// The round tripper sets the headers again on every request it
	// sends (a redirect followed included); an upgrade is dialled by the
	// handler itself, with out's headers.
	rt = transport.NewAuthProxyRoundTripper(u.Name, u.UID, u.Groups, u.Extra, rt)
	handler := proxy.NewUpgradeAwareHandler(location, rt, true, upgrade, proxyResponder{s})
	handler.ServeHTTP(w, out)
}
