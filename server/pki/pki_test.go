package pki

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func newCA(t *testing.T) (*CA, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tls")
	ca, err := LoadOrCreateCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	return ca, dir
}

func parseCert(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode(certPEM)
	if b == nil || b.Type != "CERTIFICATE" {
		t.Fatalf("not a PEM certificate: %q", certPEM)
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func TestCACreatedThenReloaded(t *testing.T) {
	ca, dir := newCA(t)
	if !ca.Cert.IsCA || ca.Cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Errorf("CA certificate: IsCA %v, key usage %b", ca.Cert.IsCA, ca.Cert.KeyUsage)
	}
	if time.Until(ca.Cert.NotAfter) < 9*365*24*time.Hour {
		t.Errorf("CA expires %v, want about ten years", ca.Cert.NotAfter)
	}
	// The key is a secret; the certificate is handed to every client.
	if m := mode(t, filepath.Join(dir, "ca.key")); m != 0o600 {
		t.Errorf("ca.key mode %o, want 600", m)
	}
	if m := mode(t, filepath.Join(dir, "ca.crt")); m != 0o644 {
		t.Errorf("ca.crt mode %o, want 644", m)
	}
	onDisk, _ := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if !bytes.Equal(onDisk, ca.CertPEM) {
		t.Error("CertPEM differs from ca.crt")
	}

	// A restart must keep the CA: every issued certificate and kubeconfig
	// depends on it.
	again, err := LoadOrCreateCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Cert.Equal(ca.Cert) || !bytes.Equal(again.CertPEM, ca.CertPEM) {
		t.Error("reloaded CA differs from the created one")
	}
	// The reloaded key signs for the same certificate.
	certPEM, _, err := again.ClientCert("u", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := parseCert(t, certPEM).CheckSignatureFrom(ca.Cert); err != nil {
		t.Errorf("certificate issued by the reloaded CA: %v", err)
	}
}

func TestCAWithMismatchedKeyIsRefused(t *testing.T) {
	_, dir := newCA(t)
	_, other := newCA(t)
	key, err := os.ReadFile(filepath.Join(other, "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.key"), key, 0o600); err != nil {
		t.Fatal(err)
	}
	// Silently creating a new CA would invalidate every credential issued.
	if _, err := LoadOrCreateCA(dir); err == nil {
		t.Fatal("a CA whose key does not match its certificate was loaded")
	}
	if err := os.Remove(filepath.Join(dir, "ca.key")); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateCA(dir); err == nil {
		t.Fatal("a CA without its key was loaded")
	}
}

func TestServingCertSANs(t *testing.T) {
	ca, dir := newCA(t)
	names := []string{"localhost", "kubernetes.default.svc.cluster.local", "node-a"}
	ips := []net.IP{net.IPv4(127, 0, 0, 1), net.ParseIP("10.43.0.1"), net.ParseIP("192.0.2.7")}
	certFile, keyFile, err := ca.ServingCert(dir, "serving", names, ips)
	if err != nil {
		t.Fatal(err)
	}
	if certFile != filepath.Join(dir, "serving.crt") || keyFile != filepath.Join(dir, "serving.key") {
		t.Errorf("files %s, %s", certFile, keyFile)
	}
	if m := mode(t, keyFile); m != 0o600 {
		t.Errorf("key mode %o, want 600", m)
	}
	certPEM, _ := os.ReadFile(certFile)
	cert := parseCert(t, certPEM)
	if !slices.Equal(cert.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}) {
		t.Errorf("ext key usage %v, want server auth", cert.ExtKeyUsage)
	}
	for _, n := range names {
		if _, err := cert.Verify(x509.VerifyOptions{DNSName: n, Roots: ca.Pool()}); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
	for _, ip := range ips {
		if _, err := cert.Verify(x509.VerifyOptions{DNSName: ip.String(), Roots: ca.Pool()}); err != nil {
			t.Errorf("%s: %v", ip, err)
		}
	}
	if _, err := cert.Verify(x509.VerifyOptions{DNSName: "elsewhere", Roots: ca.Pool()}); err == nil {
		t.Error("certificate valid for a name it was not issued for")
	}
}

// reissued reports whether ServingCert wrote a new certificate.
func reissued(t *testing.T, ca *CA, dir string, names []string, ips []net.IP) bool {
	t.Helper()
	before, _ := os.ReadFile(filepath.Join(dir, "serving.crt"))
	if _, _, err := ca.ServingCert(dir, "serving", names, ips); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(filepath.Join(dir, "serving.crt"))
	return !bytes.Equal(before, after)
}

func TestServingCertReuseAndReissue(t *testing.T) {
	ca, dir := newCA(t)
	names, ips := []string{"localhost", "node-a"}, []net.IP{net.ParseIP("192.0.2.7")}
	if !reissued(t, ca, dir, names, ips) {
		t.Fatal("no certificate written")
	}
	if reissued(t, ca, dir, names, ips) {
		t.Error("same names: reissued")
	}
	if reissued(t, ca, dir, names[:1], nil) {
		t.Error("fewer names: reissued")
	}
	// A node IP may change between starts.
	if !reissued(t, ca, dir, names, append(ips, net.ParseIP("192.0.2.8"))) {
		t.Error("new IP: kept the old certificate")
	}
	if !reissued(t, ca, dir, append(names, "node-b"), ips) {
		t.Error("new name: kept the old certificate")
	}

	// Signed by another CA (the CA was recreated): reissued.
	other, _ := newCA(t)
	if _, _, err := other.ServingCert(dir, "serving", names, ips); err != nil {
		t.Fatal(err)
	}
	if !reissued(t, ca, dir, names, ips) {
		t.Error("certificate of another CA kept")
	}

	// Expiring within 30 days: reissued.
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "serving"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(10 * 24 * time.Hour),
		DNSNames: names, IPAddresses: ips, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, _ := encodeKey(key)
	_ = os.WriteFile(filepath.Join(dir, "serving.key"), keyPEM, 0o600)
	_ = os.WriteFile(filepath.Join(dir, "serving.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	if !reissued(t, ca, dir, names, ips) {
		t.Error("certificate expiring in 10 days kept")
	}
}

func TestClientCertIdentity(t *testing.T) {
	ca, _ := newCA(t)
	certPEM, keyPEM, err := ca.ClientCert("system:node:a", []string{"system:nodes", "extra"})
	if err != nil {
		t.Fatal(err)
	}
	cert := parseCert(t, certPEM)
	// The API server reads the user from CN and the groups from O.
	if cert.Subject.CommonName != "system:node:a" {
		t.Errorf("CN %q", cert.Subject.CommonName)
	}
	// DER sorts the values of one attribute; the set is what matters.
	if got := slices.Sorted(slices.Values(cert.Subject.Organization)); !slices.Equal(got, []string{"extra", "system:nodes"}) {
		t.Errorf("O %q", cert.Subject.Organization)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("as a client certificate: %v", err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Error("a client certificate is valid for serving")
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		t.Errorf("key pair: %v", err)
	}
	// Each certificate has its own key and serial.
	again, _, _ := ca.ClientCert("system:node:a", nil)
	c2 := parseCert(t, again)
	if c2.SerialNumber.Cmp(cert.SerialNumber) == 0 {
		t.Error("two certificates share a serial number")
	}
	if len(c2.Subject.Organization) != 0 {
		t.Errorf("no groups: O %q", c2.Subject.Organization)
	}
}

// TestHandshake checks the pieces together as the API server uses them: a
// serving certificate, and a client certificate verified if given.
func TestHandshake(t *testing.T) {
	ca, dir := newCA(t)
	certFile, keyFile, err := ca.ServingCert(dir, "serving", []string{"localhost"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	serving, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, _ := ca.ClientCert("kelp-admin", []string{"system:masters"})
	client, _ := tls.X509KeyPair(certPEM, keyPEM)

	sc, cc := net.Pipe()
	srv := tls.Server(sc, &tls.Config{Certificates: []tls.Certificate{serving}, ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: ca.Pool()})
	cli := tls.Client(cc, &tls.Config{ServerName: "localhost", RootCAs: ca.Pool(), Certificates: []tls.Certificate{client}})
	errs := make(chan error, 1)
	go func() { errs <- srv.Handshake() }()
	if err := cli.Handshake(); err != nil {
		t.Fatalf("client handshake: %v", err)
	}
	if err := <-errs; err != nil {
		t.Fatalf("server handshake: %v", err)
	}
	peers := srv.ConnectionState().PeerCertificates
	if len(peers) == 0 || peers[0].Subject.CommonName != "kelp-admin" {
		t.Errorf("server saw client %v", peers)
	}
	// The pipe is unbuffered: closing a tls.Conn would wait for the peer
	// to read its close_notify.
	_ = cc.Close()
	_ = sc.Close()
}

// The request-header CA and the front-proxy client certificate are made
// once and kept: a restart reads the same ones, and the certificate is
// the CA's, for the user asked.
func TestRequestHeaderCAAndClientCertFile(t *testing.T) {
	dir := t.TempDir()
	ca, err := LoadOrCreateRequestHeaderCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.ClientCertFile(dir, "client-auth-proxy", "system:auth-proxy", nil)
	if err != nil {
		t.Fatal(err)
	}
	again, err := LoadOrCreateRequestHeaderCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.CertPEM, ca.CertPEM) {
		t.Error("request-header CA replaced on restart")
	}
	cert2, key2, err := again.ClientCertFile(dir, "client-auth-proxy", "system:auth-proxy", nil)
	if err != nil || !bytes.Equal(cert2, certPEM) || !bytes.Equal(key2, keyPEM) {
		t.Errorf("front-proxy certificate replaced on restart (%v)", err)
	}
	cert, _, err := parsePair(certPEM, keyPEM)
	if err != nil || cert.Subject.CommonName != "system:auth-proxy" || cert.CheckSignatureFrom(ca.Cert) != nil {
		t.Errorf("certificate %v: CN %q", err, cert.Subject.CommonName)
	}
	// The cluster CA is another one.
	cluster, err := LoadOrCreateCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	if cluster.Cert.Equal(ca.Cert) || cert.CheckSignatureFrom(cluster.Cert) == nil {
		t.Error("the request-header CA is the cluster CA")
	}
	// Another user asked: reissued.
	cert3, _, err := again.ClientCertFile(dir, "client-auth-proxy", "someone-else", nil)
	if err != nil || bytes.Equal(cert3, certPEM) {
		t.Errorf("not reissued for another user (%v)", err)
	}
}
