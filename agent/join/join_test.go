package join

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/kelp-project/kelp/config"
	"github.com/kelp-project/kelp/server/join"
	"github.com/kelp-project/kelp/server/pki"
)

func TestTrustCA(t *testing.T) {
	dir := t.TempDir()
	pinned := filepath.Join(dir, caFile)
	ca, other := []byte("ca one"), []byte("ca two")
	err := trustCA(ca, join.Token{CAHash: join.CAHash(other), Secret: "s"}, pinned)
	var p permanent
	if err == nil || !errors.As(err, &p) || !strings.Contains(err.Error(), "the server's CA does not match the token's hash") {
		t.Fatalf("wrong hash: %v", err)
	}
	if _, err := os.Stat(pinned); err == nil {
		t.Error("a refused CA was written")
	}
	// A bare secret trusts the first CA, then only that one.
	if err := trustCA(ca, join.Token{Secret: "s"}, pinned); err != nil {
		t.Fatal(err)
	}
	if err := trustCA(ca, join.Token{Secret: "s"}, pinned); err != nil {
		t.Errorf("the same CA again: %v", err)
	}
	if err := trustCA(other, join.Token{Secret: "s"}, pinned); err == nil || !errors.As(err, &p) || !strings.Contains(err.Error(), "trusted on first use") {
		t.Errorf("another CA after first use: %v", err)
	}
	// A full token's hash overrides what was pinned.
	if err := trustCA(other, join.Token{CAHash: join.CAHash(other), Secret: "s"}, pinned); err != nil {
		t.Errorf("matching hash: %v", err)
	}
}

func TestRetryBacksOff(t *testing.T) {
	cfg := Config{RetryInitial: time.Millisecond, RetryMax: 4 * time.Millisecond}
	var times []time.Time
	err := retry(context.Background(), cfg, "test", func() error {
		times = append(times, time.Now())
		if len(times) < 5 {
			return errors.New("unreachable")
		}
		return nil
	})
	if err != nil || len(times) != 5 {
		t.Fatalf("%v after %d attempts", err, len(times))
	}
	// 1, 2, 4, 4 ms: doubling, capped.
	for i, min := range []time.Duration{time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond, 4 * time.Millisecond} {
		if d := times[i+1].Sub(times[i]); d < min {
			t.Errorf("wait %d: %s, want at least %s", i+1, d, min)
		}
	}
	calls := 0
	err = retry(context.Background(), cfg, "test", func() error { calls++; return permanent{errors.New("refused")} })
	if err == nil || calls != 1 {
		t.Errorf("a permanent error was retried: %v, %d calls", err, calls)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := retry(ctx, cfg, "test", func() error { return errors.New("down") }); !errors.Is(err, context.Canceled) {
		t.Errorf("after ctx ended: %v", err)
	}
}

// needCerts renews what is missing, from another CA, for another node, not
// covering the node's address, or within RenewBefore of expiry.
func TestNeedCerts(t *testing.T) {
	ca, err := pki.LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir, now := t.TempDir(), time.Now()
	if r := needCerts(dir, ca.CertPEM, "n1", nil, "192.0.2.1", now); !strings.Contains(r, "client-kubelet.crt") {
		t.Errorf("empty dir: %q", r)
	}
	write := func(name string, certPEM, keyPEM []byte) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name+".crt"), certPEM, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".key"), keyPEM, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	issue := func(node, ip string) {
		c, k, _ := ca.ClientCert("system:node:"+node, []string{"system:nodes"})
		write("client-kubelet", c, k)
		sdir := t.TempDir()
		scf, skf, err := ca.ServingCert(sdir, "serving", []string{node}, []net.IP{net.ParseIP(ip)})
		if err != nil {
			t.Fatal(err)
		}
		scp, _ := os.ReadFile(scf)
		skp, _ := os.ReadFile(skf)
		write("serving-kubelet", scp, skp)
		pc, pk, _ := ca.ClientCert("system:kube-proxy", nil)
		write("client-kube-proxy", pc, pk)
		lc, lk, _ := ca.ClientCert("system:kelp-local-path-provisioner", nil)
		write("client-local-path-provisioner", lc, lk)
	}
	issue("n1", "192.0.2.1")
	if r := needCerts(dir, ca.CertPEM, "n1", nil, "192.0.2.1", now); r != "" {
		t.Errorf("fresh certificates: %q", r)
	}
	// A node joined before the provisioner had an identity asks again.
	_ = os.Remove(filepath.Join(dir, "client-local-path-provisioner.crt"))
	if r := needCerts(dir, ca.CertPEM, "n1", nil, "192.0.2.1", now); !strings.Contains(r, "client-local-path-provisioner.crt") {
		t.Errorf("no provisioner certificate: %q", r)
	}
	issue("n1", "192.0.2.1")
	if r := needCerts(dir, ca.CertPEM, "n2", nil, "192.0.2.1", now); !strings.Contains(r, "is for system:node:n1") {
		t.Errorf("another node's: %q", r)
	}
	if r := needCerts(dir, ca.CertPEM, "n1", nil, "192.0.2.9", now); !strings.Contains(r, "does not cover") {
		t.Errorf("new node IP: %q", r)
	}
	other, _ := pki.LoadOrCreateCA(t.TempDir())
	if r := needCerts(dir, other.CertPEM, "n1", nil, "192.0.2.1", now); !strings.Contains(r, "another CA") {
		t.Errorf("another CA: %q", r)
	}
	// Certificates last a year: 300 days on, they are due for renewal.
	if r := needCerts(dir, ca.CertPEM, "n1", nil, "192.0.2.1", now.Add(300*24*time.Hour)); !strings.Contains(r, "client-kubelet.crt expires") {
		t.Errorf("within 90 days of expiry: %q", r)
	}
}

// TestRequestCerts asks the real join handler for the four certificates
// and writes them with their kubeconfigs.
func TestRequestCerts(t *testing.T) {
	ca, err := pki.LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	h := join.New(join.Config{CA: ca, Client: fake.NewClientset(), AgentSecret: "agent-secret"})
	ts := httptest.NewServer(h)
	defer ts.Close()
	c := &client{server: ts.URL, http: ts.Client(), user: join.NodeUser, pass: "agent-secret"}
	dir := t.TempDir()
	if err := requestCerts(t.Context(), c, dir, "n1", "pw", nil, "192.0.2.1"); err != nil {
		t.Fatal(err)
	}
	if r := needCerts(dir, ca.CertPEM, "n1", nil, "192.0.2.1", time.Now()); r != "" {
		t.Errorf("after the request: %q", r)
	}
	for file, cn := range map[string]string{
		kubeletCert: "system:node:n1", servingCert: "system:node:n1", proxyCert: config.ProxyUser, provisionerCert: config.LocalPathProvisionerUser,
	} {
		b, _ := os.ReadFile(filepath.Join(dir, file))
		p, _ := pem.Decode(b)
		if p == nil {
			t.Fatalf("%s: no PEM", file)
		}
		cert, err := x509.ParseCertificate(p.Bytes)
		if err != nil || cert.Subject.CommonName != cn {
			t.Errorf("%s: %v %v, want CN %s", file, cert.Subject, err, cn)
		}
	}
	rc, err := writeKubeconfig(dir, provisionerConfig, "https://192.0.2.1:6443", ca.CertPEM, provisionerCert, provisionerKey)
	if err != nil || rc.Host != "https://192.0.2.1:6443" || len(rc.CertData) == 0 && rc.CertFile == "" {
		t.Errorf("provisioner kubeconfig: %+v, %v", rc, err)
	}

	// A server older than the agent issues no provisioner certificate:
	// joining stops with a reason rather than writing an empty one.
	old := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(join.CertResponse{KubeletCert: "x", ServingCert: "x", ProxyCert: "x"})
	}))
	defer old.Close()
	c = &client{server: old.URL, http: old.Client(), user: join.NodeUser, pass: "agent-secret"}
	err = requestCerts(t.Context(), c, t.TempDir(), "n1", "pw", nil, "")
	var p permanent
	if !errors.As(err, &p) || !strings.Contains(err.Error(), "upgrade the server first") {
		t.Errorf("older server: %v", err)
	}
}
