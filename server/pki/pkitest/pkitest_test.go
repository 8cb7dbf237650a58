package pkitest

import (
	"crypto/x509"
	"encoding/pem"
	"testing"
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
