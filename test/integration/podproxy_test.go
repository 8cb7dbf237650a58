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
}
