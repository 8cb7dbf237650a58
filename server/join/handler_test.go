package join

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kelp-project/kelp/server/pki"
)

func newTestHandler(t *testing.T, now time.Time) (*Handler, *fake.Clientset) {
	t.Helper()
	ca, err := pki.LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset(
		NewBootstrapSecret("abcdef", "0123456789abcdef", "", time.Hour, now.Add(-2*time.Hour)), // expired
		NewBootstrapSecret("ghijkl", "0123456789abcdef", "", time.Hour, now),                   // live
	)
	return New(Config{CA: ca, Client: client, ServerSecret: "server-secret", AgentSecret: "agent-secret",
		Settings: Settings{ClusterCIDR: "10.42.0.0/16", FlannelBackend: "vxlan"}, Now: func() time.Time { return now }}), client
}

func call(h http.Handler, method, path, password string, body any) *httptest.ResponseRecorder {
	var b bytes.Buffer
	if body != nil {
		_ = json.NewEncoder(&b).Encode(body)
	}
	r := httptest.NewRequest(method, path, &b)
	if password != "" {
		r.SetBasicAuth("node", password)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestHandlerAuthentication(t *testing.T) {
	h, _ := newTestHandler(t, time.Now())
	if w := call(h, "GET", CACertsPath, "", nil); w.Code != 200 || !bytes.Equal(w.Body.Bytes(), h.cfg.CA.CertPEM) {
		t.Errorf("/cacerts: %d %q", w.Code, w.Body)
	}
	for _, c := range []struct {
		password string
		code     int
		body     string
	}{
		{"server-secret", 200, `"flannelBackend":"vxlan"`},
		{"agent-secret", 200, `"clusterCIDR":"10.42.0.0/16"`},
		{"ghijkl.0123456789abcdef", 200, "vxlan"},
		{"", 401, "not valid"},
		{"wrong", 401, "not valid"},
		{"ghijkl.0123456789abcdee", 401, "not valid"}, // wrong secret for a live id
		{"zzzzzz.0123456789abcdef", 401, "not valid"}, // no such token
		{"abcdef.0123456789abcdef", 401, "bootstrap token abcdef expired at"},
	} {
		w := call(h, "GET", ConfigPath, c.password, nil)
		if w.Code != c.code || !strings.Contains(w.Body.String(), c.body) {
			t.Errorf("password %q: %d %q, want %d with %q", c.password, w.Code, w.Body, c.code, c.body)
		}
	}
	if w := call(h, "GET", PathPrefix+"nope", "server-secret", nil); w.Code != 404 {
		t.Errorf("unknown endpoint: %d", w.Code)
	}
}

func csr(t *testing.T) string {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	// The subject asked for is ignored: the server names the certificate.
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:masters"}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))
}

func parseCert(t *testing.T, s string) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode([]byte(s))
	if b == nil {
		t.Fatalf("not PEM: %q", s)
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestHandlerCerts(t *testing.T) {
	h, client := newTestHandler(t, time.Now())
	req := CertRequest{NodeName: "node-2", NodePassword: "pw-a", Hostnames: []string{"host-2"}, Addresses: []string{"192.0.2.2"},
		KubeletCSR: csr(t), ServingCSR: csr(t), ProxyCSR: csr(t), ProvisionerCSR: csr(t)}
	w := call(h, "POST", CertsPath, "agent-secret", req)
	if w.Code != 200 {
		t.Fatalf("certs: %d %s", w.Code, w.Body)
	}
	var resp CertResponse
	if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil {
		t.Fatal(err)
	}
	kubelet, serving, proxy := parseCert(t, resp.KubeletCert), parseCert(t, resp.ServingCert), parseCert(t, resp.ProxyCert)
	if kubelet.Subject.CommonName != "system:node:node-2" || len(kubelet.Subject.Organization) != 1 || kubelet.Subject.Organization[0] != "system:nodes" {
		t.Errorf("kubelet cert subject %v", kubelet.Subject)
	}
	if d := time.Until(kubelet.NotAfter); d < 364*24*time.Hour || d > 366*24*time.Hour {
		t.Errorf("kubelet cert valid for %s, want a year", d)
	}
	if proxy.Subject.CommonName != "system:kube-proxy" || len(proxy.Subject.Organization) != 0 {
		t.Errorf("proxy cert subject %v", proxy.Subject)
	}
	provisioner := parseCert(t, resp.ProvisionerCert)
	if provisioner.Subject.CommonName != "system:kelp-local-path-provisioner" || len(provisioner.Subject.Organization) != 0 {
		t.Errorf("provisioner cert subject %v", provisioner.Subject)
	}
	if strings.Join(serving.DNSNames, ",") != "node-2,host-2" || len(serving.IPAddresses) != 1 || serving.IPAddresses[0].String() != "192.0.2.2" ||
		serving.ExtKeyUsage[0] != x509.ExtKeyUsageServerAuth {
		t.Errorf("serving cert %v %v %v", serving.DNSNames, serving.IPAddresses, serving.ExtKeyUsage)
	}
	for _, c := range []*x509.Certificate{kubelet, serving, proxy, provisioner} {
		if err := c.CheckSignatureFrom(h.cfg.CA.Cert); err != nil {
			t.Errorf("%s: %v", c.Subject, err)
		}
	}
	s, err := client.CoreV1().Secrets("kube-system").Get(t.Context(), "node-2.node-password.kelp", metav1.GetOptions{})
	if err != nil || !CheckPassword(string(s.Data["hash"]), "pw-a") || strings.Contains(string(s.Data["hash"]), "pw-a") {
		t.Fatalf("password secret %v, %v", s, err)
	}
	// The same machine again (renewal) is fine; another one is refused.
	if w := call(h, "POST", CertsPath, "agent-secret", req); w.Code != 200 {
		t.Errorf("renewal: %d %s", w.Code, w.Body)
	}
	req.NodePassword = "pw-b"
	if w := call(h, "POST", CertsPath, "agent-secret", req); w.Code != 409 || !strings.Contains(w.Body.String(), "node name node-2 is already taken by another machine") {
		t.Errorf("taken name: %d %s", w.Code, w.Body)
	}
	for name, mutate := range map[string]func(*CertRequest){
		"bad node name":       func(r *CertRequest) { r.NodeName = "Node_2" },
		"no password":         func(r *CertRequest) { r.NodeName, r.NodePassword = "node-3", "" },
		"bad address":         func(r *CertRequest) { r.NodeName, r.Addresses = "node-3", []string{"nope"} },
		"bad CSR":             func(r *CertRequest) { r.NodeName, r.ProxyCSR = "node-3", "junk" },
		"bad provisioner CSR": func(r *CertRequest) { r.NodeName, r.ProvisionerCSR = "node-3", "junk" },
	} {
		r := req
		r.NodePassword = "pw-c"
		mutate(&r)
		if w := call(h, "POST", CertsPath, "agent-secret", r); w.Code != 400 {
			t.Errorf("%s: %d %s", name, w.Code, w.Body)
		}
	}
	if w := call(h, "POST", CertsPath, "wrong", req); w.Code != 401 {
		t.Errorf("certs with a wrong secret: %d", w.Code)
	}
	// An agent older than the server asks for no provisioner certificate
	// and gets the other three.
	old := CertRequest{NodeName: "node-4", NodePassword: "pw-d", KubeletCSR: csr(t), ServingCSR: csr(t), ProxyCSR: csr(t)}
	w = call(h, "POST", CertsPath, "agent-secret", old)
	if w.Code != 200 {
		t.Fatalf("certs for an older agent: %d %s", w.Code, w.Body)
	}
	var oldResp CertResponse
	if err := json.Unmarshal(w.Body.Bytes(), &oldResp); err != nil {
		t.Fatal(err)
	}
	if oldResp.ProvisionerCert != "" || strings.Contains(w.Body.String(), "provisionerCert") || parseCert(t, oldResp.ProxyCert) == nil {
		t.Errorf("older agent's answer: %s", w.Body)
	}
}
