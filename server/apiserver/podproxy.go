package apiserver

import (
	"context"
	"fmt"
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// podProxy is pods/proxy.
var podProxy = proxied{locate: podHost, options: func(path string) runtime.Object {
	return &corev1.PodProxyOptions{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodProxyOptions"}, Path: path}
}}

// podHost locates pods/proxy as upstream's ProxyREST: the API server
// itself connects to the pod's IP (it is on the node network, as
// kube-apiserver usually is), at the port the name gives or else the
// first port of the pod's first container with one, else the scheme's.
func podHost(_ context.Context, obj runtime.Object, _, port string) (string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return "", apierrors.NewInternalError(fmt.Errorf("%T is not a pod", obj))
	}
	if pod.Status.PodIP == "" {
		return "", apierrors.NewServiceUnavailable(fmt.Sprintf("pod %s has no IP address yet", pod.Name))
	}
	if port == "" {
		for _, c := range pod.Spec.Containers {
			if len(c.Ports) > 0 {
				port = strconv.Itoa(int(c.Ports[0].ContainerPort))
				break
			}
		}
	}
	if port == "" {
		// url.URL wants an IPv6 host bracketed even without a port.
		if ip := net.ParseIP(pod.Status.PodIP); ip != nil && ip.To4() == nil {
			return "[" + pod.Status.PodIP + "]", nil
		}
		return pod.Status.PodIP, nil
	}
	return net.JoinHostPort(pod.Status.PodIP, port), nil
}
