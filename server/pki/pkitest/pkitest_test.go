package pkitest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"
)

// The PEM holds one certificate, self-signed, with the asked common name
// and CA flag; two calls give different certificates.
func TestSelfSignedPEM(t *testing.T) {
	for _, ca := range []bool{true, false} {
		s := SelfSignedPEM(t, "test-cn", ca)
		block, rest := pem.Decode([]byte(s))
		if block == nil || block.Type != "CERTIFICATE" || len(rest) != 0 {
			t.Fatalf("not one CERTIFICATE block: %q", s)
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if cert.Subject.CommonName != "test-cn" || cert.IsCA != ca {
			t.Errorf("subject %q, IsCA %v; want test-cn, %v", cert.Subject.CommonName, cert.IsCA, ca)
		}
		if err := cert.CheckSignatureFrom(cert); ca && err != nil {
			t.Errorf("a CA certificate not self-signed: %v", err)
		}
	}
	if SelfSignedPEM(t, "a", true) == SelfSignedPEM(t, "a", true) {
		t.Error("two calls gave the same certificate")
	}
}

// IssuedPEM certifies the given key for the given window, under another
// key.
func TestIssuedPEM(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	notBefore := time.Now().Truncate(time.Second)
	block, _ := pem.Decode([]byte(IssuedPEM(t, "leaf", &key.PublicKey, notBefore, time.Hour)))
	if block == nil {
		t.Fatal("no PEM block")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if !key.PublicKey.Equal(cert.PublicKey) || cert.Subject.CommonName != "leaf" ||
		!cert.NotBefore.Equal(notBefore) || !cert.NotAfter.Equal(notBefore.Add(time.Hour)) {
		t.Errorf("certificate %v for %v, %v–%v", cert.Subject, cert.PublicKey, cert.NotBefore, cert.NotAfter)
	}
	if cert.CheckSignature(cert.SignatureAlgorithm, cert.RawTBSCertificate, cert.Signature) == nil {
		t.Error("signed by the key it certifies")
	}
}
