package apiserver

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// serviceProxy is services/proxy.
func (s *Server) serviceProxy() proxied {
	return proxied{locate: s.serviceHost, options: func(path string) runtime.Object {
		return &corev1.ServiceProxyOptions{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceProxyOptions"}, Path: path}
	}}
}

// serviceHost locates services/proxy as upstream's service
// ResourceLocation: the port is a service port's name or number (none:
// the unnamed port), and the request goes to a ready address, picked at
// random, of the service's Endpoints that has that port. The API server
// reaches pod IPs itself, as it does for pods/proxy.
func (s *Server) serviceHost(ctx context.Context, obj runtime.Object, namespace, port string) (string, error) {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return "", apierrors.NewInternalError(fmt.Errorf("%T is not a service", obj))
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
			return "", apierrors.NewServiceUnavailable(fmt.Sprintf("no service port %d found for service %q", n, svc.Name))
		}
	}
	endpoints := s.live().resources[schema.GroupVersionResource{Version: "v1", Resource: "endpoints"}]
	if endpoints == nil {
		return "", apierrors.NewServiceUnavailable("endpoints are not served")
	}
	noEndpoints := apierrors.NewServiceUnavailable(fmt.Sprintf("no endpoints available for service %q", svc.Name))
	eobj, err := endpoints.store.Get(ctx, endpoints.store.Key(namespace, svc.Name))
	if apierrors.IsNotFound(err) {
		return "", noEndpoints
	}
	if err != nil {
		return "", err
	}
	eps, ok := eobj.(*corev1.Endpoints)
	if !ok {
		return "", apierrors.NewInternalError(fmt.Errorf("%T is not an Endpoints", eobj))
	}
	host := endpointFor(eps, port)
	if host == "" {
		return "", noEndpoints
	}
	return host, nil
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
