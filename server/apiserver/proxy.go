package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/proxy"

	"github.com/kelp-project/kelp/server/apiserver/admission"
	"github.com/kelp-project/kelp/server/apiserver/auth"
)

// proxied is a proxy subresource: how it locates the backend for the
// named object (its host[:port], from the port the name carries, "" if
// none; errors are the API's answer: 404, 503...), and the options it is
// admitted with as a CONNECT, which carry the path.
type proxied struct {
	locate  func(ctx context.Context, obj runtime.Object, namespace, port string) (host string, err error)
	options func(path string) runtime.Object
}

// serveProxy serves a proxy subresource (pods/proxy, services/proxy) as
// upstream's: the name may carry a scheme and a port,
// [http:|https:]name[:port]; the request is admitted as a CONNECT, the
// object and the port are turned into the backend, and the request goes
// there with the path that follows /proxy. An https backend's
// certificate is not verified, as upstream's.
func (s *Server) serveProxy(w http.ResponseWriter, r *http.Request, info requestInfo, sv *served, p proxied) {
	scheme, name, port, ok := utilnet.SplitSchemeNamePort(info.Name)
	if !ok {
		s.writeError(w, r, apierrors.NewBadRequest(fmt.Sprintf("invalid request %q", info.Name)))
		return
	}
	marker := "/" + sv.GVR.Resource + "/" + info.Name + "/proxy"
	if err := s.admitConnect(r, info, sv, p.options(proxyPath(r, marker))); err != nil {
		s.writeError(w, r, err)
		return
	}
	obj, err := sv.store.Get(r.Context(), sv.store.Key(info.Namespace, name))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	host, err := p.locate(r.Context(), obj, info.Namespace, port)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if scheme == "" {
		scheme = "http"
	}
	s.proxyTo(w, r, &url.URL{Scheme: scheme, Host: host}, marker)
}

// admitConnect admits a request to a connect subresource as upstream's
// connect handler does: a CONNECT whose object is the request's options
// (the proxies' PodProxyOptions and ServiceProxyOptions, the kubelet's
// PodExecOptions...).
func (s *Server) admitConnect(r *http.Request, info requestInfo, sv *served, opts runtime.Object) error {
	return s.admission.Connect(r.Context(), &admission.Attributes{Operation: "CONNECT", Resource: sv.GVR, Subresource: info.Subresource,
		Namespace: info.Namespace, Name: info.Name, Object: opts, User: auth.UserFrom(r.Context())})
}

// proxyPath is the path that follows marker (.../<resource>/<name>/proxy)
// in the request's: the path on the backend.
func proxyPath(r *http.Request, marker string) string {
	if i := strings.Index(r.URL.Path, marker); i >= 0 {
		return r.URL.Path[i+len(marker):]
	}
	return ""
}

// proxyTo passes the request on to target (scheme and host), with the
// path that follows marker (.../<resource>/<name>/proxy) in the request's,
// through upstream's UpgradeAwareHandler as kube-apiserver's proxy
// subresources: links in an HTML answer are rewritten to come back
// through the proxy, .../proxy is redirected to .../proxy/, upgrades
// (WebSockets) pass through.
func (s *Server) proxyTo(w http.ResponseWriter, r *http.Request, target *url.URL, marker string) {
	location := &url.URL{Scheme: target.Scheme, Host: target.Host, Path: proxyPath(r, marker), RawQuery: r.URL.RawQuery}
	// The client's credentials are for the API server, not the backend.
	out := r.Clone(r.Context())
	for _, h := range []string{"Authorization", "Impersonate-User", "Impersonate-Group", "Impersonate-Uid"} {
		out.Header.Del(h)
	}
	for h := range out.Header {
		if strings.HasPrefix(h, "Impersonate-Extra-") {
			out.Header.Del(h)
		}
	}
	handler := proxy.NewUpgradeAwareHandler(location, s.podTransport(), true, false, proxyResponder{s})
	handler.ServeHTTP(w, out)
}

// proxyResponder answers a backend that cannot be reached as upstream's
// proxy subresources do: 503.
type proxyResponder struct{ s *Server }

func (p proxyResponder) Error(w http.ResponseWriter, r *http.Request, err error) {
	p.s.writeError(w, r, apierrors.NewServiceUnavailable(fmt.Sprintf("error trying to reach service: %v", err)))
}

func (s *Server) podTransport() http.RoundTripper {
	s.podOnce.Do(func() { s.podRT = unverifiedTransport() })
	return s.podRT
}
