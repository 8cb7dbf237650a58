package apiserver

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	endpointproxy "k8s.io/apiserver/pkg/util/proxy"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	listers "k8s.io/kube-aggregator/pkg/client/listers/apiregistration/v1"

	"github.com/kelp-project/kelp/server/apiserver/auth"
	"github.com/kelp-project/kelp/server/pki"
)

// The request an extension API server gets: the caller's identity in
// X-Remote-* (each group, extras escaped as upstream), whatever X-Remote-*
// or credentials the client sent dropped.
func TestProxiedRequestHeaders(t *testing.T) {
	r := httptest.NewRequest("GET", "/apis/wardle.example.com/v1alpha1/flunders", nil)
	r.Header.Set("Authorization", "Bearer secret")
	r.Header.Set("Impersonate-User", "someone")
	r.Header.Set("Impersonate-Extra-Scopes", "x")
	r.Header.Set("X-Remote-User", "forged")
	r.Header.Add("X-Remote-Group", "system:masters")
	r.Header.Set("X-Remote-Extra-Forged", "1")
	r.Header.Set("Accept", "application/json")
	u := &auth.User{Name: "alice", UID: "u-1", Groups: []string{"dev", "system:authenticated"},
		Extra: map[string][]string{"example.com/key": {"a", "b"}}}
	out := proxiedRequest(r, u)
	h := out.Header
	if h.Get("X-Remote-User") != "alice" || h.Get("X-Remote-Uid") != "u-1" {
		t.Errorf("user headers %q %q", h.Get("X-Remote-User"), h.Get("X-Remote-Uid"))
	}
	if g := h.Values("X-Remote-Group"); !slices.Equal(g, []string{"dev", "system:authenticated"}) {
		t.Errorf("groups %q", g)
	}
	if e := h.Values("X-Remote-Extra-Example.com%2fkey"); !slices.Equal(e, []string{"a", "b"}) {
		t.Errorf("extra %q (headers %v)", e, h)
	}
	for _, gone := range []string{"Authorization", "Impersonate-User", "Impersonate-Extra-Scopes", "X-Remote-Extra-Forged"} {
		if h.Get(gone) != "" {
			t.Errorf("%s passed on: %q", gone, h.Get(gone))
		}
	}
	if h.Get("Accept") != "application/json" {
		t.Error("other headers dropped")
	}
	// The client's request is left as it was.
	if r.Header.Get("X-Remote-User") != "forged" {
		t.Error("the incoming request was changed")
	}
}

func apiServiceLister(t *testing.T, svcs ...*apiregistrationv1.APIService) listers.APIServiceLister {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, s := range svcs {
		if err := idx.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	return listers.NewAPIServiceLister(idx)
}

// Only an APIService naming a service takes a path from kelp.
func TestRemoteFor(t *testing.T) {
	remote := &apiregistrationv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: "v1alpha1.wardle.example.com"},
		Spec: apiregistrationv1.APIServiceSpec{Group: "wardle.example.com", Version: "v1alpha1",
			Service: &apiregistrationv1.ServiceReference{Namespace: "w", Name: "api"}}}
	local := &apiregistrationv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: "v1.apps"},
		Spec: apiregistrationv1.APIServiceSpec{Group: "apps", Version: "v1"}}
	a := &aggregator{apiServices: apiServiceLister(t, remote, local)}
	for path, want := range map[string]bool{
		"/apis/wardle.example.com/v1alpha1":                          true,
		"/apis/wardle.example.com/v1alpha1/":                         true,
		"/apis/wardle.example.com/v1alpha1/namespaces/x/flunders/f1": true,
		"/apis/wardle.example.com":                                   false, // the group: kelp answers
		"/apis/wardle.example.com/v1":                                false,
		"/apis/apps/v1/deployments":                                  false, // local
		"/api/v1/pods":                                               false,
	} {
		if got := a.remoteFor(path) != nil; got != want {
			t.Errorf("%s: proxied %v, want %v", path, got, want)
		}
	}
}

// The transport verifies the extension server against spec.caBundle for
// <service>.<namespace>.svc and presents the front-proxy certificate;
// insecureSkipTLSVerify skips the verification.
func TestAggregatorTransport(t *testing.T) {
	dir := t.TempDir()
	serverCA, err := pki.LoadOrCreateCA(dir + "/server")
	if err != nil {
		t.Fatal(err)
	}
	proxyCA, err := pki.LoadOrCreateRequestHeaderCA(dir + "/proxy")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := proxyCA.ClientCertFile(dir+"/proxy", "client-auth-proxy", "system:auth-proxy", nil)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := serverCA.ServingCert(dir+"/server", "api", []string{"api.wardle.svc"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TLS.PeerCertificates) == 0 {
			http.Error(w, "no client certificate", http.StatusUnauthorized)
			return
		}
		_, _ = io.WriteString(w, r.TLS.PeerCertificates[0].Subject.CommonName)
	}))
	pool := x509.NewCertPool()
	pool.AddCert(proxyCA.Cert)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	srv.StartTLS()
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())

	a := &aggregator{certPEM: certPEM, keyPEM: keyPEM}
	get := func(svc *apiregistrationv1.APIService) (string, error) {
		rt, err := a.transportFor(svc)
		if err != nil {
			return "", err
		}
		req, _ := http.NewRequest("GET", "https://127.0.0.1:"+port+"/", nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b), nil
	}
	apiService := func(ns string, caBundle []byte, insecure bool) *apiregistrationv1.APIService {
		return &apiregistrationv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: "v1alpha1.wardle.example.com"},
			Spec: apiregistrationv1.APIServiceSpec{Group: "wardle.example.com", Version: "v1alpha1",
				Service:  &apiregistrationv1.ServiceReference{Namespace: ns, Name: "api"},
				CABundle: caBundle, InsecureSkipTLSVerify: insecure}}
	}
	if got, err := get(apiService("wardle", serverCA.CertPEM, false)); err != nil || got != "system:auth-proxy" {
		t.Errorf("verified against caBundle: %q, %v (want the front-proxy identity)", got, err)
	}
	// Another service name than the certificate's: refused.
	if _, err := get(apiService("other", serverCA.CertPEM, false)); err == nil {
		t.Error("a certificate for api.wardle.svc accepted for api.other.svc")
	}
	// Another CA: refused.
	if _, err := get(apiService("wardle", proxyCA.CertPEM, false)); err == nil {
		t.Error("a certificate not signed by caBundle accepted")
	}
	if got, err := get(apiService("other", nil, true)); err != nil || got != "system:auth-proxy" {
		t.Errorf("insecureSkipTLSVerify: %q, %v", got, err)
	}
}

// Remote versions are ordered as upstream's discovery: groups by
// priority, versions by versionPriority then Kubernetes version order.
func TestSortRemoteVersions(t *testing.T) {
	vs := []*remoteVersion{
		{group: "b.example.com", version: "v1", groupPriority: 100, versionPriority: 10},
		{group: "a.example.com", version: "v1beta1", groupPriority: 100, versionPriority: 10},
		{group: "a.example.com", version: "v1", groupPriority: 100, versionPriority: 10},
		{group: "z.example.com", version: "v1", groupPriority: 1000, versionPriority: 10},
		{group: "a.example.com", version: "v1alpha1", groupPriority: 100, versionPriority: 20},
	}
	sortRemoteVersions(vs)
	var got []string
	for _, v := range vs {
		got = append(got, v.group+"/"+v.version)
	}
	want := []string{"z.example.com/v1", "a.example.com/v1alpha1", "a.example.com/v1", "a.example.com/v1beta1", "b.example.com/v1"}
	if !slices.Equal(got, want) {
		t.Errorf("order %q, want %q", got, want)
	}
	if g := remoteGroup(vs, "a.example.com"); g == nil || g.PreferredVersion.Version != "v1alpha1" || len(g.Versions) != 3 {
		t.Errorf("group %+v", g)
	}
	if names := remoteGroupNames(vs); !slices.Equal(names, []string{"z.example.com", "a.example.com", "b.example.com"}) {
		t.Errorf("groups %q", names)
	}
}

// A remote server's legacy resource list nests into the aggregated form;
// a stale version says so.
func TestRemoteAggregatedVersion(t *testing.T) {
	v := &remoteVersion{group: "wardle.example.com", version: "v1alpha1", stale: true, resources: resourcesDiscovery([]metav1.APIResource{
		{Name: "flunders", SingularName: "flunder", Namespaced: true, Kind: "Flunder", Verbs: []string{"get", "list"}},
		{Name: "flunders/status", Namespaced: true, Kind: "Flunder", Verbs: []string{"get"}},
		{Name: "fischers", Kind: "Fischer", Verbs: []string{"get"}},
	})}
	d := v.aggregatedVersion()
	if d.Freshness != "Stale" || len(d.Resources) != 2 {
		t.Fatalf("%+v", d)
	}
	f := d.Resources[0]
	if f.Resource != "flunders" || f.Scope != "Namespaced" || f.ResponseKind.Kind != "Flunder" || len(f.Subresources) != 1 || f.Subresources[0].Subresource != "status" {
		t.Errorf("flunders %+v", f)
	}
	if d.Resources[1].Scope != "Cluster" {
		t.Errorf("fischers %+v", d.Resources[1])
	}
}

// The remote versions join the documents after kelp's own groups, a
// remote version of a served group joins that group, and a new snapshot
// rebuilds the aggregated document.
func TestRemoteVersionsInDiscovery(t *testing.T) {
	s := discoveryServer()
	a := &aggregator{}
	a.discovery = newRemoteDiscovery(a)
	s.agg.Store(a)
	before, _ := aggregated(t, s, "/apis")
	a.discovery.set("v1alpha1.wardle.example.com", &remoteVersion{group: "wardle.example.com", version: "v1alpha1",
		groupPriority: 100, versionPriority: 10, resources: resourcesDiscovery([]metav1.APIResource{{Name: "flunders", Namespaced: true, Kind: "Flunder", Verbs: []string{"get"}}})})
	a.discovery.set("v9.apps", &remoteVersion{group: "apps", version: "v9", groupPriority: 100, versionPriority: 1})

	after, _ := aggregated(t, s, "/apis")
	if len(after.Items) != len(before.Items)+1 {
		t.Fatalf("%d groups after, %d before", len(after.Items), len(before.Items))
	}
	last := after.Items[len(after.Items)-1]
	if last.Name != "wardle.example.com" || len(last.Versions) != 1 || last.Versions[0].Resources[0].Resource != "flunders" {
		t.Errorf("last group %+v", last)
	}
	for _, g := range after.Items {
		if g.Name == "apps" && g.Versions[len(g.Versions)-1].Version != "v9" {
			t.Errorf("apps versions %+v", g.Versions)
		}
	}
	var list metav1.APIGroupList
	w := getDiscovery(s, "/apis", map[string]string{"Accept": "application/json"})
	if err := json.Unmarshal(w.Body.Bytes(), &list); err != nil {
		t.Fatal(err)
	}
	if g := list.Groups[len(list.Groups)-1]; g.Name != "wardle.example.com" || g.PreferredVersion.Version != "v1alpha1" {
		t.Errorf("legacy /apis last group %+v", g)
	}
	var group metav1.APIGroup
	w = getDiscovery(s, "/apis/wardle.example.com", map[string]string{"Accept": "application/json"})
	if err := json.Unmarshal(w.Body.Bytes(), &group); err != nil || w.Code != http.StatusOK || group.Name != "wardle.example.com" {
		t.Errorf("/apis/wardle.example.com: %d %s", w.Code, w.Body)
	}
	// Gone again: out of the documents.
	a.discovery.set("v1alpha1.wardle.example.com", nil)
	a.discovery.set("v9.apps", nil)
	if again, _ := aggregated(t, s, "/apis"); len(again.Items) != len(before.Items) {
		t.Errorf("%d groups after removal, want %d", len(again.Items), len(before.Items))
	}
	if w := getDiscovery(s, "/apis/wardle.example.com", nil); w.Code != http.StatusNotFound {
		t.Errorf("/apis/wardle.example.com after removal: %d", w.Code)
	}
}

// Not Available, or no endpoint known: 503 "service unavailable", as
// upstream's proxy, and nothing is dialled.
func TestServeRemoteUnavailable(t *testing.T) {
	s := discoveryServer()
	svc := &apiregistrationv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: "v1alpha1.wardle.example.com"},
		Spec: apiregistrationv1.APIServiceSpec{Group: "wardle.example.com", Version: "v1alpha1",
			Service: &apiregistrationv1.ServiceReference{Namespace: "w", Name: "api"}}}
	a := &aggregator{}
	for _, available := range []apiregistrationv1.ConditionStatus{apiregistrationv1.ConditionFalse, apiregistrationv1.ConditionTrue} {
		svc.Status.Conditions = []apiregistrationv1.APIServiceCondition{{Type: apiregistrationv1.Available, Status: available}}
		r := httptest.NewRequest("GET", "/apis/wardle.example.com/v1alpha1/flunders", nil)
		r = r.WithContext(auth.WithUser(r.Context(), &auth.User{Name: "alice"}))
		w := httptest.NewRecorder()
		s.serveRemote(w, r, a, svc)
		var st metav1.Status
		if err := json.Unmarshal(w.Body.Bytes(), &st); err != nil || w.Code != http.StatusServiceUnavailable ||
			st.Kind != "Status" || st.Message != "service unavailable" || st.Reason != metav1.StatusReasonServiceUnavailable {
			t.Errorf("Available=%s: %d %s", available, w.Code, w.Body)
		}
	}
}

// Discovery of a remote version: the server's aggregated /apis document
// when it serves one, its legacy /apis/<group>/<version> otherwise; a
// server that stops answering leaves its version Stale; an APIService no
// longer Available is left out.
func TestRemoteDiscoverySync(t *testing.T) {
	dir := t.TempDir()
	serverCA, err := pki.LoadOrCreateCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := serverCA.ServingCert(dir, "api", []string{"api.wardle.svc"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	aggregatedForm := true
	var asked []string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = append(asked, r.URL.Path+" as "+r.Header.Get("X-Remote-User"))
		switch {
		case r.URL.Path == "/apis" && aggregatedForm:
			w.Header().Set("Content-Type", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
			_, _ = io.WriteString(w, `{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/v2","items":[{"metadata":{"name":"wardle.example.com"},"versions":[{"version":"v1alpha1","resources":[{"resource":"fischers","scope":"Cluster","verbs":["get"]}]}]}]}`)
		case r.URL.Path == "/apis/wardle.example.com/v1alpha1":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"kind":"APIResourceList","groupVersion":"wardle.example.com/v1alpha1","resources":[{"name":"flunders","namespaced":true,"kind":"Flunder","verbs":["get"]}]}`)
		default:
			http.NotFound(w, r)
		}
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	addr := srv.Listener.Addr().(*net.TCPAddr)
	port := int32(addr.Port)

	services := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	_ = services.Add(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "wardle", Name: "api"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.43.0.9",
			Ports: []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromInt32(port)}}}})
	slices := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	ready, name := true, "https"
	_ = slices.Add(&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "wardle", Name: "api-1",
		Labels: map[string]string{discoveryv1.LabelServiceName: "api"}}, AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"127.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports:     []discoveryv1.EndpointPort{{Name: &name, Port: &port}}})
	getter, err := endpointproxy.NewEndpointSliceListerGetter(discoverylisters.NewEndpointSliceLister(slices))
	if err != nil {
		t.Fatal(err)
	}
	svc := &apiregistrationv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: "v1alpha1.wardle.example.com"},
		Spec: apiregistrationv1.APIServiceSpec{Group: "wardle.example.com", Version: "v1alpha1", CABundle: serverCA.CertPEM,
			Service: &apiregistrationv1.ServiceReference{Namespace: "wardle", Name: "api"}},
		Status: apiregistrationv1.APIServiceStatus{Conditions: []apiregistrationv1.APIServiceCondition{
			{Type: apiregistrationv1.Available, Status: apiregistrationv1.ConditionTrue}}}}
	apiServices := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	_ = apiServices.Add(svc)
	a := &aggregator{apiServices: listers.NewAPIServiceLister(apiServices)}
	a.resolver.Store(&endpointResolver{services: corelisters.NewServiceLister(services), slices: getter})
	a.discovery = newRemoteDiscovery(a)
	d := a.discovery
	resources := func() (string, bool) {
		snap := *d.snapshot.Load()
		if len(snap) != 1 {
			return "", false
		}
		var names []string
		for _, r := range snap[0].resources {
			names = append(names, r.Resource)
		}
		return strings.Join(names, ","), snap[0].stale
	}

	if err := d.sync(t.Context(), svc.Name); err != nil {
		t.Fatal(err)
	}
	if got, stale := resources(); got != "fischers" || stale {
		t.Errorf("from the aggregated document: %q stale=%v", got, stale)
	}
	if len(asked) == 0 || asked[0] != "/apis as system:kube-aggregator" {
		t.Errorf("asked %q", asked)
	}
	aggregatedForm = false
	if err := d.sync(t.Context(), svc.Name); err != nil {
		t.Fatal(err)
	}
	if got, stale := resources(); got != "flunders" || stale {
		t.Errorf("from the legacy document: %q stale=%v", got, stale)
	}
	srv.Close()
	if err := d.sync(t.Context(), svc.Name); err == nil {
		t.Error("a closed server answered")
	}
	if got, stale := resources(); got != "flunders" || !stale {
		t.Errorf("after the server stopped: %q stale=%v", got, stale)
	}
	svc.Status.Conditions[0].Status = apiregistrationv1.ConditionFalse
	_ = apiServices.Update(svc)
	if err := d.sync(t.Context(), svc.Name); err != nil {
		t.Fatal(err)
	}
	if _, ok := resources(); len(*d.snapshot.Load()) != 0 {
		t.Errorf("an unavailable APIService still listed (%v)", ok)
	}
}
