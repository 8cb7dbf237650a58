package pki

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func TestWriteKubeconfig(t *testing.T) {
	ca, _ := newCA(t)
	certPEM, keyPEM, err := ca.ClientCert("kelp-admin", []string{"system:masters"})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "etc", "kelp.yaml") // parent created
	const server = "https://127.0.0.1:6443"
	if err := WriteKubeconfig(path, 0o600, server, ca.CertPEM, certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	if m := mode(t, path); m != 0o600 {
		t.Errorf("mode %o, want 600", m)
	}
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// One cluster, user and context, all "default", as k3s writes it.
	if cfg.CurrentContext != "default" || len(cfg.Clusters) != 1 || len(cfg.AuthInfos) != 1 || len(cfg.Contexts) != 1 {
		t.Fatalf("kubeconfig: %+v", cfg)
	}
	cl, user, ctx := cfg.Clusters["default"], cfg.AuthInfos["default"], cfg.Contexts["default"]
	if cl == nil || user == nil || ctx == nil {
		t.Fatalf("missing default cluster, user or context: %+v", cfg)
	}
	if cl.Server != server || !bytes.Equal(cl.CertificateAuthorityData, ca.CertPEM) {
		t.Errorf("cluster: server %q, CA matches %v", cl.Server, bytes.Equal(cl.CertificateAuthorityData, ca.CertPEM))
	}
	if !bytes.Equal(user.ClientCertificateData, certPEM) || !bytes.Equal(user.ClientKeyData, keyPEM) {
		t.Error("user: client certificate or key differ")
	}
	if ctx.Cluster != "default" || ctx.AuthInfo != "default" {
		t.Errorf("context: %+v", ctx)
	}
	// What kubectl and client-go build from it.
	rc, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Host != server {
		t.Errorf("host %q", rc.Host)
	}
	if _, err := kubernetes.NewForConfig(rc); err != nil {
		t.Errorf("client: %v", err)
	}

	// Rewriting the same contents with another mode (--write-kubeconfig-mode
	// changed between starts) still applies the mode.
	if err := WriteKubeconfig(path, 0o644, server, ca.CertPEM, certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	if m := mode(t, path); m != 0o644 {
		t.Errorf("mode after rewrite %o, want 644", m)
	}
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("temporary file left: %v", err)
	}
}

func TestRESTConfig(t *testing.T) {
	ca, _ := newCA(t)
	rc, err := ca.RESTConfig("https://127.0.0.1:6443", "system:kube-scheduler", nil)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Host != "https://127.0.0.1:6443" || !bytes.Equal(rc.CAData, ca.CertPEM) {
		t.Errorf("host %q, CA matches %v", rc.Host, bytes.Equal(rc.CAData, ca.CertPEM))
	}
	if cn := parseCert(t, rc.CertData).Subject.CommonName; cn != "system:kube-scheduler" {
		t.Errorf("CN %q", cn)
	}
	if rc.UserAgent != "kube-scheduler" {
		t.Errorf("user agent %q", rc.UserAgent)
	}
}
