package server

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"

	"k8s.io/client-go/rest"

	"github.com/kelp-project/kelp/server/pki"
)

// inProcess is the API server's handler for a component in its own
// process, called as rc's user: each request gets the TLS state rc's
// client certificate would give its loopback connection (the chain
// verified against the cluster CA, as the TLS handshake verifies it), so
// authentication, authorization, admission and everything after them are
// the ones every client gets. What it saves is the connection: no TLS
// records, no HTTP/2 stream and its goroutines, and the handler runs in
// the caller's goroutine. The garbage collector's watches use it
// (garbagecollector.NewForConfig): it watches every resource, one watch
// per CRD.
func (a *apiServing) inProcess(rc *rest.Config, ca *pki.CA) (http.Handler, error) {
	block, _ := pem.Decode(rc.TLSClientConfig.CertData)
	if block == nil {
		return nil, errors.New("in-process API: the client configuration has no certificate")
	}
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("in-process API: %w", err)
	}
	chains, err := leaf.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		return nil, fmt.Errorf("in-process API: the client certificate of %s: %w", leaf.Subject.CommonName, err)
	}
	// Only the verified chain is read (auth.CertAuthenticator).
	state := &tls.ConnectionState{Version: tls.VersionTLS13, HandshakeComplete: true,
		PeerCertificates: []*x509.Certificate{leaf}, VerifiedChains: chains}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.TLS = state
		r.RemoteAddr = "127.0.0.1:0"
		r.RequestURI = r.URL.RequestURI()
		a.srv.Handler.ServeHTTP(w, r)
	}), nil
}
