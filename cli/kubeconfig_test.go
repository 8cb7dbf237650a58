package cli

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/kelp-project/kelp/server/pki"
)

func TestUserKubeconfig(t *testing.T) {
	dataDir := t.TempDir()
	ca, err := pki.LoadOrCreateCA(filepath.Join(dataDir, "server", "tls"))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := userKubeconfig(&out, dataDir, "https://192.0.2.1:6443", "bob", []string{"devs", "ops"}, 48*time.Hour); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.Load(out.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	cl := cfg.Clusters[cfg.Contexts[cfg.CurrentContext].Cluster]
	if cl.Server != "https://192.0.2.1:6443" || !bytes.Equal(cl.CertificateAuthorityData, ca.CertPEM) {
		t.Errorf("cluster %+v", cl)
	}
	b, _ := pem.Decode(cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo].ClientCertificateData)
	if b == nil {
		t.Fatal("no client certificate")
	}
	cert, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if cert.Subject.CommonName != "bob" || !slices.Equal(slices.Sorted(slices.Values(cert.Subject.Organization)), []string{"devs", "ops"}) {
		t.Errorf("subject %v", cert.Subject)
	}
	if left := time.Until(cert.NotAfter); left > 48*time.Hour || left < 47*time.Hour {
		t.Errorf("valid for %s more, want 48h", left)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("not signed by the cluster CA: %v", err)
	}

	if err := userKubeconfig(&out, dataDir, "https://x", "", nil, time.Hour); err == nil {
		t.Error("no --user: no error")
	}
	if err := userKubeconfig(&out, t.TempDir(), "https://x", "bob", nil, time.Hour); err == nil {
		t.Error("no CA: no error")
	}
}
