package apiserver

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
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
// path that follows marker (.../<resource>/<name>/proxy) in the request's.
func (s *Server) proxyTo(w http.ResponseWriter, r *http.Request, target *url.URL, marker string) {
	rest := ""
	if i := strings.Index(r.URL.Path, marker); i >= 0 {
		rest = r.URL.Path[i+len(marker):]
	}
	if rest == "" {
		rest = "/"
	}
	target = &url.URL{Scheme: target.Scheme, Host: target.Host, Path: rest, RawQuery: r.URL.RawQuery}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = target
			pr.Out.Host = target.Host
			// The client's credentials are for the API server, not the
			// backend.
			pr.Out.Header.Del("Authorization")
			pr.Out.Header.Del("Impersonate-User")
			pr.Out.Header.Del("Impersonate-Group")
		},
		Transport: s.podTransport(),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			s.writeError(w, r, apierrors.NewServiceUnavailable(fmt.Sprintf("error trying to reach service: %v", err)))
		},
		FlushInterval: -1,
	}
	proxy.ServeHTTP(w, r)
}

func (s *Server) podTransport() http.RoundTripper {
	s.podOnce.Do(func() { s.podRT = unverifiedTransport() })
	return s.podRT
}
