package integration

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPodProxy: pods/proxy reaches the pod's IP with the path after
// /proxy and the query, at the port the name gives or the first
// container port (the e2e specs read a pod's page this way). The "pod"
// here is a local HTTP server whose address the pod's status claims.
func TestPodProxy(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/page.html" {
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, `<html><body><a href="/rewriteme">test</a></body></html>`)
			return
		}
		fmt.Fprintf(w, "%s %s?%s auth=%q", r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Authorization"))
	}))
	defer backend.Close()
	host, portStr, _ := net.SplitHostPort(backend.Listener.Addr().String())
	var port int32
	fmt.Sscan(portStr, &port)

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.PodSpec{NodeName: "node-1",
		Containers: []corev1.Container{{Name: "c", Image: "nginx", Ports: []corev1.ContainerPort{{ContainerPort: port}}}}}}
	created, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	get := func(name, suffix string) (string, error) {
		b, err := cs.CoreV1().RESTClient().Get().Namespace("default").Resource("pods").SubResource("proxy").Name(name).
			Suffix(suffix).Param("q", "1").Do(ctx).Raw()
		return string(b), err
	}
	if _, err := get("web", "data.json"); !apierrors.IsServiceUnavailable(err) {
		t.Errorf("a pod without an IP: %v, want 503", err)
	}
	created.Status.PodIP, created.Status.PodIPs = host, []corev1.PodIP{{IP: host}}
	if _, err := cs.CoreV1().Pods("default").UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"web", "web:" + portStr, "http:web:" + portStr} {
		body, err := get(name, "data.json")
		if err != nil || body != `GET /data.json?q=1 auth=""` {
			t.Errorf("%s: %q, %v", name, body, err)
		}
	}
	if _, err := get("missing", "x"); !apierrors.IsNotFound(err) {
		t.Errorf("a missing pod: %v, want 404", err)
	}
	// kubectl reads it the same way.
	out := s.mustKubectl("get", "--raw", "/api/v1/namespaces/default/pods/web/proxy/a/b")
	if !strings.HasPrefix(out, "GET /a/b?") {
		t.Errorf("kubectl get --raw: %q", out)
	}
	// An HTML page's links are rewritten to come back through the proxy,
	// as upstream's (the conformance spec reads one).
	page, err := cs.CoreV1().RESTClient().Get().Namespace("default").Resource("pods").SubResource("proxy").Name("web").
		Suffix("page.html").Do(ctx).Raw()
	if want := `<a href="/api/v1/namespaces/default/pods/web/proxy/rewriteme">test</a>`; err != nil || !strings.Contains(string(page), want) {
		t.Errorf("an HTML page through the proxy: %q, %v; want %s", page, err, want)
	}
}

// TestServiceProxy: services/proxy reaches a ready address of the
// service's Endpoints that has the named port (a port number names the
// service port with it), with the path after /proxy and the method; a
// service with no endpoint, or no such port, is 503. The endpoint here is
// a local HTTP server, in hand-made Endpoints of a selector-less service.
func TestServiceProxy(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	// Endpoints may not name a loopback address: the backend listens on
	// this machine's own address (the traffic stays on the machine).
	ln, err := net.Listen("tcp", net.JoinHostPort(ownAddress(t), "0"))
	if err != nil {
		t.Fatal(err)
	}
	backend := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s?%s auth=%q", r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Authorization"))
	}))
	backend.Listener.Close()
	backend.Listener = ln
	backend.Start()
	defer backend.Close()
	host, portStr, _ := net.SplitHostPort(backend.Listener.Addr().String())
	var port int32
	fmt.Sscan(portStr, &port)

	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.ServiceSpec{
		Ports: []corev1.ServicePort{{Name: "http", Port: 80}, {Name: "other", Port: 81}}}}
	if _, err := cs.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	call := func(method, name, suffix string) (string, error) {
		b, err := cs.CoreV1().RESTClient().Verb(method).Namespace("default").Resource("services").SubResource("proxy").Name(name).
			Suffix(suffix).Param("q", "1").Do(ctx).Raw()
		return string(b), err
	}
	if _, err := call("GET", "web:http", "x"); !apierrors.IsServiceUnavailable(err) {
		t.Errorf("a service without endpoints: %v, want 503", err)
	}
	eps := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Subsets: []corev1.EndpointSubset{{
		Addresses: []corev1.EndpointAddress{{IP: host}},
		Ports:     []corev1.EndpointPort{{Name: "http", Port: port}},
	}}}
	if _, err := cs.CoreV1().Endpoints("default").Create(ctx, eps, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ method, name string }{{"GET", "web:http"}, {"GET", "web:80"}, {"GET", "http:web:http"}, {"POST", "web:http"}, {"DELETE", "web:80"},
		{"OPTIONS", "web:http"}, {"PUT", "web:http"}, {"PATCH", "web:http"}} {
		body, err := call(tc.method, tc.name, "data.json")
		if want := tc.method + ` /data.json?q=1 auth=""`; err != nil || body != want {
			t.Errorf("%s %s: %q, %v; want %q", tc.method, tc.name, body, err, want)
		}
	}
	for _, name := range []string{"web:other", "web:8080"} {
		if _, err := call("GET", name, "x"); !apierrors.IsServiceUnavailable(err) {
			t.Errorf("%s, a port with no endpoint: %v, want 503", name, err)
		}
	}
	if _, err := call("GET", "missing", "x"); !apierrors.IsNotFound(err) {
		t.Errorf("a missing service: %v, want 404", err)
	}
	out := s.mustKubectl("get", "--raw", "/api/v1/namespaces/default/services/web:http/proxy/a/b")
	if !strings.HasPrefix(out, "GET /a/b?") {
		t.Errorf("kubectl get --raw: %q", out)
	}
}

// ownAddress is an IPv4 address of this machine's that is not loopback
// or link-local.
func ownAddress(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	t.Fatal("this machine has no IPv4 address besides loopback")
	return ""
}
