package integration

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	v1helper "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1/helper"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"

	"github.com/kelp-project/kelp/config"
	"github.com/kelp-project/kelp/server/pki"
)

// wardle is a tiny extension API server, as the sample-apiserver: HTTPS
// with its own CA, it trusts a request only from a client certificate
// signed by the request-header CA kelp publishes, with an allowed name,
// and takes the user from the X-Remote-* headers; it serves discovery of
// wardle.example.com/v1alpha1 and a list of one flunder, which echoes
// the identity it was asked by.
type wardle struct {
	mu    sync.Mutex
	users []string // X-Remote-User of each request it accepted
}

func (w *wardle) seen(user string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Contains(w.users, user)
}

func (w *wardle) handler(allowed []string) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if len(r.TLS.PeerCertificates) == 0 || !slices.Contains(allowed, r.TLS.PeerCertificates[0].Subject.CommonName) {
			http.Error(rw, "not the front proxy", http.StatusUnauthorized)
			return
		}
		user, groups := r.Header.Get("X-Remote-User"), r.Header.Values("X-Remote-Group")
		w.mu.Lock()
		w.users = append(w.users, user)
		w.mu.Unlock()
		// An upgrade (as exec's): switch protocols and say who asked on
		// the raw connection.
		if r.Header.Get("Upgrade") == "echo-user" {
			conn, buf, err := http.NewResponseController(rw).Hijack()
			if err != nil {
				return
			}
			defer conn.Close()
			_, _ = buf.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo-user\r\n\r\nuser=" + user + "\n")
			_ = buf.Flush()
			return
		}
		rw.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/apis/wardle.example.com/v1alpha1":
			_ = json.NewEncoder(rw).Encode(&metav1.APIResourceList{
				TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
				GroupVersion: "wardle.example.com/v1alpha1",
				APIResources: []metav1.APIResource{{Name: "flunders", SingularName: "flunder", Namespaced: true,
					Kind: "Flunder", Verbs: []string{"get", "list"}}},
			})
		case "/apis/wardle.example.com/v1alpha1/namespaces/default/flunders":
			_ = json.NewEncoder(rw).Encode(map[string]any{
				"apiVersion": "wardle.example.com/v1alpha1", "kind": "FlunderList", "metadata": map[string]any{"resourceVersion": "1"},
				"items": []any{map[string]any{
					"apiVersion": "wardle.example.com/v1alpha1", "kind": "Flunder",
					"metadata": map[string]any{"name": "echo", "namespace": "default", "annotations": map[string]string{
						"remote-user": user, "remote-groups": strings.Join(groups, ","),
					}},
				}},
			})
		default:
			http.Error(rw, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`, http.StatusNotFound)
		}
	})
}

// hostAddress is a non-loopback IPv4 address of this machine: EndpointSlice
// validation refuses loopback endpoints.
func hostAddress(t *testing.T) string {
	t.Helper()
	ifaces, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
				return n.IP.String()
			}
		}
	}
	t.Fatal("no non-loopback IPv4 address to serve the extension API server on")
	return ""
}

// The aggregation layer end to end: an APIService naming a selector-less
// Service whose EndpointSlice points at an extension API server becomes
// Available; requests through kelp reach it with the caller's identity
// through the front-proxy certificate; discovery lists its group; an
// unauthorized caller is stopped by kelp; without endpoints it is
// unavailable and requests are 503.
func TestAggregatedAPIServer(t *testing.T) {
	s := startServer(t)
	ctx := ctxT(t)
	kc := s.client()

	// Whom to trust: the ConfigMap kelp publishes.
	cm, err := kc.CoreV1().ConfigMaps("kube-system").Get(ctx, "extension-apiserver-authentication", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var allowed []string
	if err := json.Unmarshal([]byte(cm.Data["requestheader-allowed-names"]), &allowed); err != nil || len(allowed) == 0 {
		t.Fatalf("requestheader-allowed-names %q: %v", cm.Data["requestheader-allowed-names"], err)
	}
	for key, want := range map[string]string{"requestheader-username-headers": `["X-Remote-User"]`,
		"requestheader-group-headers": `["X-Remote-Group"]`, "requestheader-extra-headers-prefix": `["X-Remote-Extra-"]`} {
		if cm.Data[key] != want {
			t.Errorf("%s = %q", key, cm.Data[key])
		}
	}
	if !strings.Contains(cm.Data["client-ca-file"], "BEGIN CERTIFICATE") {
		t.Errorf("client-ca-file %q", cm.Data["client-ca-file"])
	}
	requestHeaderCA := x509.NewCertPool()
	if !requestHeaderCA.AppendCertsFromPEM([]byte(cm.Data["requestheader-client-ca-file"])) {
		t.Fatalf("requestheader-client-ca-file %q", cm.Data["requestheader-client-ca-file"])
	}

	// The extension server, with a serving certificate of its own CA for
	// api.wardle.svc.
	serverCA, err := pki.LoadOrCreateCA(filepath.Join(t.TempDir(), "wardle"))
	if err != nil {
		t.Fatal(err)
	}
	certDir := t.TempDir()
	certFile, keyFile, err := serverCA.ServingCert(certDir, "wardle", []string{"api.wardle.svc"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "0.0.0.0:0", &tls.Config{Certificates: []tls.Certificate{cert},
		ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: requestHeaderCA})
	if err != nil {
		t.Fatal(err)
	}
	ext := &wardle{}
	srv := &http.Server{Handler: ext.handler(allowed)}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	port := int32(ln.Addr().(*net.TCPAddr).Port)
	ip := hostAddress(t)

	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "wardle"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kc.CoreV1().Services("wardle").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "api"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromInt32(port)}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ready, portName := true, "https"
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "api-manual", Labels: map[string]string{discoveryv1.LabelServiceName: "api"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port}},
	}
	if _, err := kc.DiscoveryV1().EndpointSlices("wardle").Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ac, err := aggregatorclient.NewForConfig(s.config)
	if err != nil {
		t.Fatal(err)
	}
	apis := ac.ApiregistrationV1().APIServices()
	if _, err := apis.Create(ctx, &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: "v1alpha1.wardle.example.com"},
		Spec: apiregistrationv1.APIServiceSpec{Group: "wardle.example.com", Version: "v1alpha1",
			Service:              &apiregistrationv1.ServiceReference{Namespace: "wardle", Name: "api"},
			CABundle:             serverCA.CertPEM,
			GroupPriorityMinimum: 2000, VersionPriority: 200},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	condition := func() *apiregistrationv1.APIServiceCondition {
		svc, err := apis.Get(ctx, "v1alpha1.wardle.example.com", metav1.GetOptions{})
		if err != nil {
			return nil
		}
		return v1helper.GetAPIServiceConditionByType(svc, apiregistrationv1.Available)
	}
	waitFor(t, "the APIService Available", func() bool {
		c := condition()
		return c != nil && c.Status == apiregistrationv1.ConditionTrue && c.Reason == "Passed"
	})

	// A user RBAC allows: the request reaches the extension server as
	// that user, with its groups.
	if _, err := kc.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "flunder-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"wardle.example.com"}, Resources: []string{"flunders"}, Verbs: []string{"get", "list"}}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kc.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "flunder-readers"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "flunder-reader"},
		Subjects: []rbacv1.Subject{{Kind: "Group", APIGroup: "rbac.authorization.k8s.io", Name: "wardle-readers"}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	flunders := schema.GroupVersionResource{Group: "wardle.example.com", Version: "v1alpha1", Resource: "flunders"}
	dave, err := dynamic.NewForConfig(s.userConfig("dave", "wardle-readers"))
	if err != nil {
		t.Fatal(err)
	}
	var echoed map[string]string
	waitFor(t, "dave's list through kelp", func() bool {
		list, err := dave.Resource(flunders).Namespace("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Logf("list: %v", err)
			return false
		}
		if len(list.Items) != 1 {
			t.Fatalf("list of %d", len(list.Items))
		}
		echoed = list.Items[0].GetAnnotations()
		return true
	})
	if echoed["remote-user"] != "dave" || echoed["remote-groups"] != "wardle-readers,system:authenticated" {
		t.Errorf("the extension server saw %v, want dave in wardle-readers,system:authenticated", echoed)
	}
	// kubectl too.
	if out := s.mustKubectl("get", "flunders.wardle.example.com", "-n", "default", "-o", "jsonpath={.items[0].metadata.annotations.remote-user}"); out != config.AdminUser {
		t.Errorf("kubectl get flunders: remote user %q", out)
	}

	// Headers a client forges are not what the extension server sees.
	forger := s.userConfig("dave", "wardle-readers")
	forger.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			r.Header.Set("X-Remote-User", "system:admin")
			r.Header.Add("X-Remote-Group", "system:masters")
			return rt.RoundTrip(r)
		})
	}
	forged, err := dynamic.NewForConfig(forger)
	if err != nil {
		t.Fatal(err)
	}
	list, err := forged.Resource(flunders).Namespace("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a := list.Items[0].GetAnnotations(); a["remote-user"] != "dave" || a["remote-groups"] != "wardle-readers,system:authenticated" {
		t.Errorf("forged headers passed on: the extension server saw %v", a)
	}

	// An upgrade request passes through, as the caller.
	upgradeThrough(t, s, "/apis/wardle.example.com/v1alpha1/namespaces/default/flunders/echo/attach", "user="+config.AdminUser)

	// A user RBAC does not allow: 403 from kelp, the server never asked.
	eve, err := dynamic.NewForConfig(s.userConfig("eve"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = eve.Resource(flunders).Namespace("default").List(ctx, metav1.ListOptions{})
	wantForbidden(t, "eve's list", err, `cannot list resource "flunders" in API group "wardle.example.com"`)
	if ext.seen("eve") {
		t.Error("an unauthorized request reached the extension server")
	}

	// Discovery: aggregated (client-go's first choice) and legacy.
	waitFor(t, "wardle.example.com/v1alpha1 in discovery", func() bool {
		_, lists, err := kc.Discovery().ServerGroupsAndResources()
		if err != nil {
			return false
		}
		for _, l := range lists {
			if l.GroupVersion == "wardle.example.com/v1alpha1" && len(l.APIResources) == 1 && l.APIResources[0].Name == "flunders" && l.APIResources[0].Namespaced {
				return true
			}
		}
		return false
	})
	var groups metav1.APIGroupList
	raw, err := kc.Discovery().RESTClient().Get().AbsPath("/apis").SetHeader("Accept", "application/json").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &groups); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(groups.Groups, func(g metav1.APIGroup) bool {
		return g.Name == "wardle.example.com" && g.PreferredVersion.GroupVersion == "wardle.example.com/v1alpha1"
	}) {
		t.Errorf("/apis lacks wardle.example.com: %s", raw)
	}
	if out := s.mustKubectl("api-resources", "--api-group=wardle.example.com", "--no-headers"); !strings.Contains(out, "flunders") {
		t.Errorf("kubectl api-resources: %q", out)
	}

	// Without endpoints: unavailable, and requests are 503.
	if err := kc.DiscoveryV1().EndpointSlices("wardle").Delete(ctx, "api-manual", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the APIService unavailable without endpoints", func() bool {
		c := condition()
		return c != nil && c.Status == apiregistrationv1.ConditionFalse
	})
	// Upstream's reason and message for a service without EndpointSlices.
	if c := condition(); c.Reason != "EndpointsNotFound" || c.Message != `cannot find endpointslices for service/api in "wardle"` {
		t.Errorf("reason %q (%s), want EndpointsNotFound", c.Reason, c.Message)
	}
	_, err = dave.Resource(flunders).Namespace("default").List(ctx, metav1.ListOptions{})
	if !apierrors.IsServiceUnavailable(err) {
		t.Errorf("list without endpoints: %v, want 503", err)
	}
	waitFor(t, "wardle.example.com gone from discovery", func() bool {
		_, lists, _ := kc.Discovery().ServerGroupsAndResources()
		for _, l := range lists {
			if l.GroupVersion == "wardle.example.com/v1alpha1" {
				return false
			}
		}
		return true
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// upgradeThrough sends an Upgrade request to kelp as the admin, on a raw
// HTTP/1.1 connection, and wants 101 and then want on the connection.
func upgradeThrough(t *testing.T, s *testServer, path, want string) {
	t.Helper()
	tlsConfig, err := rest.TLSConfigFor(s.config)
	if err != nil {
		t.Fatal(err)
	}
	tlsConfig.NextProtos = []string{"http/1.1"}
	u, err := url.Parse(s.config.Host)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := tls.Dial("tcp", u.Host, tlsConfig)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\nUpgrade: echo-user\r\n\r\n", path, u.Host)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("upgrade: %s %s", resp.Status, b)
	}
	line, err := br.ReadString('\n')
	if err != nil || strings.TrimSpace(line) != want {
		t.Errorf("after the upgrade: %q, %v; want %q", line, err, want)
	}
}

// The front-proxy identity is made once: a restart publishes the same
// request-header CA, so extension servers that read it keep trusting kelp.
func TestFrontProxyKeptAcrossRestarts(t *testing.T) {
	s := startServer(t)
	ctx := ctxT(t)
	read := func() map[string]string {
		cm, err := s.client().CoreV1().ConfigMaps("kube-system").Get(ctx, "extension-apiserver-authentication", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return cm.Data
	}
	before := read()
	if !strings.Contains(before["requestheader-client-ca-file"], "BEGIN CERTIFICATE") || before["requestheader-client-ca-file"] == before["client-ca-file"] {
		t.Fatalf("request-header CA %q (must be its own, not the client CA)", before["requestheader-client-ca-file"])
	}
	s.restart()
	after := read()
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s changed across a restart", k)
		}
	}
}
