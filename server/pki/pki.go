// Package pki owns the cluster CA and the certificates it signs: the API
// server's serving certificate and the client certificates that carry each
// component's identity (CN = user, O = groups).
package pki

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

const (
	caValidity   = 10 * 365 * 24 * time.Hour
	certValidity = 365 * 24 * time.Hour
)

// CA is the cluster certificate authority.
type CA struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	CertPEM []byte
}

// LoadOrCreateCA reads dir/ca.crt and dir/ca.key, creating them on first start.
func LoadOrCreateCA(dir string) (*CA, error) {
	return loadOrCreateCA(dir, "ca", "kelp-ca")
}

// RequestHeaderCA is the file name (without .crt/.key) of the front
// proxy's CA, as k3s names it: it signs only the client certificate the
// aggregator presents to extension API servers (FrontProxyClient), which
// trust the X-Remote-* headers of a client it signed. It is a CA of its
// own, as kube-apiserver's --requestheader-client-ca-file: a certificate
// of the cluster CA must not be able to assert any user it likes.
const RequestHeaderCA = "request-header-ca"

// LoadOrCreateRequestHeaderCA reads dir/request-header-ca.crt and .key,
// creating them on first start; they are kept across restarts, so an
// extension API server that read the CA once keeps trusting the proxy.
func LoadOrCreateRequestHeaderCA(dir string) (*CA, error) {
	return loadOrCreateCA(dir, RequestHeaderCA, "kelp-request-header-ca")
}

func loadOrCreateCA(dir, name, cnPrefix string) (*CA, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	certFile, keyFile := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	// Only a missing certificate means a first start: a certificate
	// without its key is an error, never replaced.
	if _, err := os.Stat(certFile); err == nil {
		return loadCA(dir, name)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: fmt.Sprintf("%s@%d", cnPrefix, now.Unix())},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, _ := x509.ParseCertificate(der)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	if err := WriteFile(keyFile, keyPEM, 0o600); err != nil {
		return nil, err
	}
	if err := WriteFile(certFile, certPEM, 0o644); err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, CertPEM: certPEM}, nil
}

// LoadCA reads the CA that dir/ca.crt and dir/ca.key hold (for commands
// run beside a server, such as `kelp kubeconfig`); a missing one is
// os.ErrNotExist.
func LoadCA(dir string) (*CA, error) { return loadCA(dir, "ca") }

func loadCA(dir, name string) (*CA, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, name+".crt"))
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, name+".key"))
	if err != nil {
		return nil, err
	}
	cert, key, err := parsePair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("CA in %s: %w", dir, err)
	}
	return &CA{Cert: cert, Key: key, CertPEM: certPEM}, nil
}

// Pool returns a pool holding only this CA, for verifying peers.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// ServingCert returns dir/<name>.crt and .key, reissuing them when they are
// missing, expire within 30 days, were signed by another CA, or do not cover
// every requested name and IP (a node IP may change between starts).
func (ca *CA) ServingCert(dir, name string, dnsNames []string, ips []net.IP) (certFile, keyFile string, err error) {
	_, _, err = ca.keptPair(dir, name, func(cert *x509.Certificate) bool { return ca.covers(cert, dnsNames, ips) },
		func() ([]byte, []byte, error) {
			return ca.issue(&x509.Certificate{
				Subject:     pkix.Name{CommonName: name},
				DNSNames:    dnsNames,
				IPAddresses: ips,
				ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			})
		})
	if err != nil {
		return "", "", err
	}
	return filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key"), nil
}

func (ca *CA) covers(cert *x509.Certificate, dnsNames []string, ips []net.IP) bool {
	if cert.CheckSignatureFrom(ca.Cert) != nil || time.Until(cert.NotAfter) < 30*24*time.Hour {
		return false
	}
	for _, n := range dnsNames {
		if !slices.Contains(cert.DNSNames, n) {
			return false
		}
	}
	for _, ip := range ips {
		if !slices.ContainsFunc(cert.IPAddresses, ip.Equal) {
			return false
		}
	}
	return true
}

// ClientCertFile returns dir/<name>.crt and .key, a client certificate
// for user and groups, reissuing it when it is missing, expires within 30
// days or was signed by another CA (the aggregator's front-proxy client
// certificate, kept across restarts as kube-apiserver's
// --proxy-client-cert-file).
func (ca *CA) ClientCertFile(dir, name, user string, groups []string) (certPEM, keyPEM []byte, err error) {
	return ca.keptPair(dir, name, func(cert *x509.Certificate) bool {
		return ca.covers(cert, nil, nil) && cert.Subject.CommonName == user && slices.Equal(cert.Subject.Organization, groups)
	}, func() ([]byte, []byte, error) { return ca.ClientCert(user, groups) })
}

// keptPair returns the pair kept in dir/<name>.crt and .key if it parses
// and fits, else a pair from issue, written there (the key first, so a
// certificate on disk always has its key).
func (ca *CA) keptPair(dir, name string, fits func(*x509.Certificate) bool, issue func() (certPEM, keyPEM []byte, err error)) ([]byte, []byte, error) {
	certFile, keyFile := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if certPEM, err := os.ReadFile(certFile); err == nil {
		if keyPEM, err := os.ReadFile(keyFile); err == nil {
			if cert, _, err := parsePair(certPEM, keyPEM); err == nil && fits(cert) {
				return certPEM, keyPEM, nil
			}
		}
	}
	certPEM, keyPEM, err := issue()
	if err != nil {
		return nil, nil, err
	}
	if err := WriteFile(keyFile, keyPEM, 0o600); err != nil {
		return nil, nil, err
	}
	return certPEM, keyPEM, WriteFile(certFile, certPEM, 0o644)
}

// ClientCert issues a client certificate: the API server reads the user from
// CN and the groups from O.
func (ca *CA) ClientCert(user string, groups []string) (certPEM, keyPEM []byte, err error) {
	return ca.ClientCertFor(user, groups, certValidity)
}

// ClientCertFor is ClientCert valid for ttl instead of a year (the
// per-user kubeconfigs of `kelp kubeconfig --ttl`).
func (ca *CA) ClientCertFor(user string, groups []string, ttl time.Duration) (certPEM, keyPEM []byte, err error) {
	return ca.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: groups},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		NotAfter:    time.Now().Add(ttl),
	})
}

// SignClient signs a client certificate for a key held elsewhere (a
// joining node's, from its CSR): the key never leaves the node.
func (ca *CA) SignClient(pub crypto.PublicKey, user string, groups []string) ([]byte, error) {
	return ca.sign(pub, &x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: groups},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

// SignServing signs a serving certificate for a key held elsewhere.
func (ca *CA) SignServing(pub crypto.PublicKey, name string, dnsNames []string, ips []net.IP) ([]byte, error) {
	return ca.sign(pub, &x509.Certificate{
		Subject:     pkix.Name{CommonName: name},
		DNSNames:    dnsNames,
		IPAddresses: ips,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
}

func (ca *CA) issue(tmpl *x509.Certificate) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	if certPEM, err = ca.sign(key.Public(), tmpl); err != nil {
		return nil, nil, err
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return certPEM, keyPEM, nil
}

// sign completes tmpl (serial, validity unless tmpl sets NotAfter, key
// usage) and signs it for pub.
func (ca *CA) sign(pub crypto.PublicKey, tmpl *x509.Certificate) ([]byte, error) {
	now := time.Now()
	tmpl.SerialNumber = serial()
	tmpl.NotBefore = now.Add(-time.Hour)
	if tmpl.NotAfter.IsZero() {
		tmpl.NotAfter = now.Add(certValidity)
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, pub, ca.Key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

func parsePair(certPEM, keyPEM []byte) (*x509.Certificate, crypto.Signer, error) {
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, nil, errors.New("not PEM")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		return nil, nil, errors.New("key does not match certificate")
	}
	return cert, key, nil
}

// WriteFile replaces path atomically, so a crash never leaves half a key,
// creating its directory; a file that already holds data keeps it and
// only gets mode.
func WriteFile(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return os.Chmod(path, mode)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
