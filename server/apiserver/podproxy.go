package apiserver

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/proxy"
)

// proxyToPod serves pods/proxy as upstream's ProxyREST: the API server
// itself connects to the pod's IP (it is on the node network, as
// kube-apiserver usually is) and passes the request on, with the path
// that follows /proxy. The name may carry a scheme and a port:
// [http:|https:]name[:port]; without a port, the first port of the
// pod's first container with one is used, else the scheme's. An https
// backend's certificate is not verified, as upstream's.
func (s *Server) proxyToPod(w http.ResponseWriter, r *http.Request, info requestInfo, sv *served) {
	scheme, name, port, ok := utilnet.SplitSchemeNamePort(info.Name)
	if !ok {
		s.writeError(w, r, apierrors.NewBadRequest(fmt.Sprintf("invalid request %q", info.Name)))
		return
	}
	obj, err := sv.store.Get(r.Context(), sv.store.Key(info.Namespace, name))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		s.writeError(w, r, apierrors.NewInternalError(fmt.Errorf("%T is not a pod", obj)))
		return
	}
	if pod.Status.PodIP == "" {
		s.writeError(w, r, apierrors.NewServiceUnavailable(fmt.Sprintf("pod %s has no IP address yet", pod.Name)))
		return
	}
	if port == "" {
		for _, c := range pod.Spec.Containers {
			if len(c.Ports) > 0 {
				port = strconv.Itoa(int(c.Ports[0].ContainerPort))
				break
			}
		}
	}
	if scheme == "" {
		scheme = "http"
	}
	host := pod.Status.PodIP
	if port != "" {
		host = net.JoinHostPort(host, port)
	} else if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	s.proxyTo(w, r, &url.URL{Scheme: scheme, Host: host}, "/pods/"+info.Name+"/proxy")
}

// proxyTo passes the request on to target (scheme and host), with the
// path that follows marker (.../<resource>/<name>/proxy) in the request's,
// through upstream's UpgradeAwareHandler as kube-apiserver's proxy
// subresources: links in an HTML answer are rewritten to come back
// through the proxy, .../proxy is redirected to .../proxy/, upgrades
// (WebSockets) pass through.
func (s *Server) proxyTo(w http.ResponseWriter, r *http.Request, target *url.URL, marker string) {
	rest := ""
	if i := strings.Index(r.URL.Path, marker); i >= 0 {
		rest = r.URL.Path[i+len(marker):]
	}
	location := &url.URL{Scheme: target.Scheme, Host: target.Host, Path: rest, RawQuery: r.URL.RawQuery}
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
