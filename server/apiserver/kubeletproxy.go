package apiserver

import (
	"crypto/tls"
	"errors"
	"fmt"
	"github.com/sirupsen/logrus"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/httpstream/wsstream"
)

// Pod subresources answered by the pod's kubelet: the API server checks
// the request and the pod, then proxies it to the node's kubelet endpoint
// (node InternalIP, status.daemonEndpoints.kubeletEndpoint.port) with its
// own client certificate. exec and attach are WebSocket upgrades that the
// reverse proxy passes through.
var kubeletPaths = map[string]string{"log": "containerLogs", "exec": "exec", "attach": "attach", "portforward": "portForward"}

func (s *Server) proxyToKubelet(w http.ResponseWriter, r *http.Request, info requestInfo, sv *served) {
	obj, err := sv.store.Get(r.Context(), sv.store.Key(info.Namespace, info.Name))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		s.writeError(w, r, apierrors.NewInternalError(fmt.Errorf("%T is not a pod", obj)))
		return
	}
	container := ""
	if info.Subresource == "portforward" {
		// kubectl tries a WebSocket tunnel first and falls back to SPDY
		// when the upgrade is refused; kelp's kubelets speak SPDY here.
		if wsstream.IsWebSocketRequest(r) {
			s.writeError(w, r, apierrors.NewBadRequest("port forwarding is served over SPDY (portforward.k8s.io); the WebSocket tunnel is not supported"))
			return
		}
	} else {
		container, err = podContainerName(pod, r.URL.Query().Get("container"), info.Subresource)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	if opts := kubeletConnectOptions(r, info, container); opts != nil {
		if err := s.admitConnect(r, info, sv, opts); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	if pod.Spec.NodeName == "" {
		s.writeError(w, r, apierrors.NewBadRequest(fmt.Sprintf("pod %s does not have a host assigned", pod.Name)))
		return
	}
	nodes := s.live().resources[schema.GroupVersionResource{Version: "v1", Resource: "nodes"}]
	nobj, err := nodes.store.Get(r.Context(), nodes.store.Key("", pod.Spec.NodeName))
	if err != nil {
		s.writeError(w, r, apierrors.NewBadRequest(fmt.Sprintf("node %s of pod %s: %v", pod.Spec.NodeName, pod.Name, err)))
		return
	}
	host, port := kubeletAddress(nobj.(*corev1.Node))
	if host == "" || port == 0 {
		s.writeError(w, r, apierrors.NewServiceUnavailable(fmt.Sprintf("node %s reports no kubelet endpoint", pod.Spec.NodeName)))
		return
	}
	if s.cfg.KubeletClientCert == nil {
		s.writeError(w, r, apierrors.NewServiceUnavailable("this API server has no client certificate for kubelets"))
		return
	}
	q := r.URL.Query()
	q.Del("container")
	target := &url.URL{Scheme: "https", Host: net.JoinHostPort(host, strconv.Itoa(port)),
		Path:     strings.TrimSuffix("/"+kubeletPaths[info.Subresource]+"/"+pod.Namespace+"/"+pod.Name+"/"+container, "/"),
		RawQuery: q.Encode()}
	if info.Subresource == "log" && wsstream.IsWebSocketRequest(r) {
		s.logOverWebSocket(w, r, target, pod.Name)
		return
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = target
			pr.Out.Host = target.Host
			pr.Out.Header.Del("Authorization")
		},
		Transport: s.kubeletTransport(),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			var ke *kubeletError
			if errors.As(err, &ke) {
				s.writeError(w, r, apierrors.NewGenericServerResponse(ke.code, r.Method, corev1.Resource("pods"), pod.Name, ke.msg, 0, false))
				return
			}
			s.writeError(w, r, apierrors.NewInternalError(fmt.Errorf("error dialing backend: %v", err)))
		},
		FlushInterval: -1, // logs -f: every write goes out at once
		// The kubelet answers errors in plain text; clients expect a Status.
		ModifyResponse: func(resp *http.Response) error {
			if resp.StatusCode < 400 || strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
				return nil
			}
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			return &kubeletError{code: resp.StatusCode, msg: strings.TrimSpace(string(b))}
		},
	}
	proxy.ServeHTTP(w, r)
}

// logOverWebSocket serves a container's log to a WebSocket client (the
// binary.k8s.io or base64.binary.k8s.io protocol), as upstream's API
// server streams any stream-valued read: the kubelet is asked with a
// plain GET, and its body is copied into WebSocket messages.
func (s *Server) logOverWebSocket(w http.ResponseWriter, r *http.Request, target *url.URL, pod string) {
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, target.String(), nil)
	if err != nil {
		s.writeError(w, r, apierrors.NewInternalError(err))
		return
	}
	resp, err := s.kubeletTransport().RoundTrip(req)
	if err != nil {
		s.writeError(w, r, apierrors.NewInternalError(fmt.Errorf("error dialing backend: %v", err)))
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		s.writeError(w, r, apierrors.NewGenericServerResponse(resp.StatusCode, r.Method, corev1.Resource("pods"), pod, strings.TrimSpace(string(b)), 0, false))
		return
	}
	if err := wsstream.NewReader(resp.Body, true, wsstream.NewDefaultReaderProtocols()).Copy(w, r); err != nil {
		logrus.Debugf("pod %s log over WebSocket: %v", pod, err)
	}
}

// kubeletConnectOptions is what exec, attach and port-forward are
// admitted with (admitConnect): the request's PodExecOptions,
// PodAttachOptions or PodPortForwardOptions; nil for logs, a read, not a
// CONNECT.
func kubeletConnectOptions(r *http.Request, info requestInfo, container string) runtime.Object {
	q := r.URL.Query()
	flag := func(k string) bool { v := q.Get(k); return v == "true" || v == "1" }
	var opts runtime.Object
	switch info.Subresource {
	case "exec":
		opts = &corev1.PodExecOptions{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodExecOptions"}, Stdin: flag("stdin"),
			Stdout: flag("stdout"), Stderr: flag("stderr"), TTY: flag("tty"), Container: container, Command: q["command"]}
	case "attach":
		opts = &corev1.PodAttachOptions{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodAttachOptions"}, Stdin: flag("stdin"),
			Stdout: flag("stdout"), Stderr: flag("stderr"), TTY: flag("tty"), Container: container}
	case "portforward":
		pf := &corev1.PodPortForwardOptions{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodPortForwardOptions"}}
		for _, v := range q["ports"] {
			for _, p := range strings.Split(v, ",") {
				if n, err := strconv.ParseInt(strings.TrimSpace(p), 10, 32); err == nil {
					pf.Ports = append(pf.Ports, int32(n))
				}
			}
		}
		opts = pf
	}
	return opts
}

type kubeletError struct {
	code int
	msg  string
}

func (e *kubeletError) Error() string { return e.msg }

func (s *Server) kubeletTransport() http.RoundTripper {
	// Kubelets serve self-signed certificates, as upstream's do by
	// default; the API server authenticates itself to them.
	s.kubeletOnce.Do(func() { s.kubeletRT = unverifiedTransport(*s.cfg.KubeletClientCert) })
	return s.kubeletRT
}

// unverifiedTransport is the API server's client to kubelets and pods:
// HTTPS without checking the server's certificate (self-signed on both,
// as upstream's), presenting certs, and never through an HTTP proxy.
func unverifiedTransport(certs ...tls.Certificate) *http.Transport {
	return &http.Transport{TLSClientConfig: &tls.Config{Certificates: certs, InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}}
}

func kubeletAddress(n *corev1.Node) (string, int) {
	port := int(n.Status.DaemonEndpoints.KubeletEndpoint.Port)
	for _, t := range []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP, corev1.NodeHostName} {
		for _, a := range n.Status.Addresses {
			if a.Type == t && a.Address != "" {
				return a.Address, port
			}
		}
	}
	return "", port
}

// podContainerName picks the container a log/exec/attach request means,
// with upstream's messages when it is missing or wrong.
func podContainerName(pod *corev1.Pod, name, sub string) (string, error) {
	var all []string
	for _, c := range pod.Spec.InitContainers {
		all = append(all, c.Name)
	}
	for _, c := range pod.Spec.Containers {
		all = append(all, c.Name)
	}
	for _, c := range pod.Spec.EphemeralContainers {
		all = append(all, c.Name)
	}
	if name == "" {
		if len(pod.Spec.Containers) == 1 {
			return pod.Spec.Containers[0].Name, nil
		}
		if ann := pod.Annotations["kubectl.kubernetes.io/default-container"]; ann != "" {
			return ann, nil
		}
		names := make([]string, 0, len(pod.Spec.Containers))
		for _, c := range pod.Spec.Containers {
			names = append(names, c.Name)
		}
		return "", apierrors.NewBadRequest(fmt.Sprintf("a container name must be specified for pod %s, choose one of: [%s]", pod.Name, strings.Join(names, " ")))
	}
	for _, c := range all {
		if c == name {
			return name, nil
		}
	}
	return "", apierrors.NewBadRequest(fmt.Sprintf("container %s is not valid for pod %s", name, pod.Name))
}
