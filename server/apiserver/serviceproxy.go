package apiserver

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// proxyToService serves services/proxy as upstream's service
// ResourceLocation: the name may carry a scheme and a port,
// [http:|https:]name[:port], the port a service port's name or number
// (none: the unnamed port); the request goes to a ready address, picked
// at random, of the service's Endpoints that has that port, with the
// path that follows /proxy. The API server reaches pod IPs itself, as it
// does for pods/proxy.
func (s *Server) proxyToService(w http.ResponseWriter, r *http.Request, info requestInfo, sv *served) {
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
	svc, ok := obj.(*corev1.Service)
	if !ok {
		s.writeError(w, r, apierrors.NewInternalError(fmt.Errorf("%T is not a service", obj)))
		return
	}
	// A port number names the service port with that number.
	if n, err := strconv.Atoi(port); err == nil {
		found := false
		for _, p := range svc.Spec.Ports {
			if int(p.Port) == n {
				port, found = p.Name, true
				break
			}
		}
		if !found {
			s.writeError(w, r, apierrors.NewServiceUnavailable(fmt.Sprintf("no service port %d found for service %q", n, name)))
			return
		}
	}
	endpoints := s.live().resources[schema.GroupVersionResource{Version: "v1", Resource: "endpoints"}]
	if endpoints == nil {
		s.writeError(w, r, apierrors.NewServiceUnavailable("endpoints are not served"))
		return
	}
	eobj, err := endpoints.store.Get(r.Context(), endpoints.store.Key(info.Namespace, name))
	if apierrors.IsNotFound(err) {
		s.writeError(w, r, apierrors.NewServiceUnavailable(fmt.Sprintf("no endpoints available for service %q", name)))
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	host := endpointFor(eobj.(*corev1.Endpoints), port)
	if host == "" {
		s.writeError(w, r, apierrors.NewServiceUnavailable(fmt.Sprintf("no endpoints available for service %q", info.Name)))
		return
	}
	if scheme == "" {
		scheme = "http"
	}
	s.proxyTo(w, r, &url.URL{Scheme: scheme, Host: host}, "/services/"+info.Name+"/proxy")
}

// endpointFor is host:port of a ready address, picked at random, of a
// subset that has the port named portName; "" if there is none.
func endpointFor(eps *corev1.Endpoints, portName string) string {
	var candidates []string
	for _, ss := range eps.Subsets {
		for _, p := range ss.Ports {
			if p.Name != portName {
				continue
			}
			for _, a := range ss.Addresses {
				candidates = append(candidates, net.JoinHostPort(a.IP, strconv.Itoa(int(p.Port))))
			}
		}
	}
	if len(candidates) == 0 {
		return ""
	}
	return candidates[rand.IntN(len(candidates))]
}
