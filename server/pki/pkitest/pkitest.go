// Package pkitest makes certificates for tests.
package pkitest

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"
)

// SelfSignedPEM is a fresh self-signed certificate for cn, a CA or not,
// PEM-encoded (a ClusterTrustBundle's content, for instance).
func SelfSignedPEM(t testing.TB, cn string, ca bool) string {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, IsCA: ca, BasicConstraintsValid: true}
	return createPEM(t, tmpl, pub, priv)
}

// IssuedPEM is a certificate for cn and pub, valid from notBefore for
// lifetime, signed by a fresh key that nothing else knows, PEM-encoded:
// what a signer answers a certificate request with (a
// PodCertificateRequest's chain, for instance).
func IssuedPEM(t testing.TB, cn string, pub crypto.PublicKey, notBefore time.Time, lifetime time.Duration) string {
	t.Helper()
	_, signer, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(notBefore.UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: notBefore, NotAfter: notBefore.Add(lifetime)}
	return createPEM(t, tmpl, pub, signer)
}

func createPEM(t testing.TB, tmpl *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer) string {
	t.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, signer)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}
