package pki

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ServiceAccountKeyFile is the service-account token signing key's file in
// the server's TLS directory, named as k3s names it.
const ServiceAccountKeyFile = "service.key"

// LoadOrCreateServiceAccountKey reads dir/service.key, creating it on first
// start. The key signs every service-account token, so it is kept across
// restarts: a new key would invalidate every token pods and Secrets hold.
// It is RSA 2048 (RS256), as k3s's and kube-apiserver's usual key: every
// OIDC consumer of the JWKS understands RS256, and an RSA signature is
// verified faster than an ECDSA one, which is what every request pays.
func LoadOrCreateServiceAccountKey(dir string) (*rsa.PrivateKey, error) {
	path := filepath.Join(dir, ServiceAccountKeyFile)
	if data, err := os.ReadFile(path); err == nil {
		return parseRSAKey(data)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	data := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	if err := WriteFile(path, data, 0o600); err != nil {
		return nil, err
	}
	return key, nil
}

// parseRSAKey reads a PKCS#1 or PKCS#8 RSA private key.
func parseRSAKey(data []byte) (*rsa.PrivateKey, error) {
	b, _ := pem.Decode(data)
	if b == nil {
		return nil, fmt.Errorf("%s: not PEM", ServiceAccountKeyFile)
	}
	if k, err := x509.ParsePKCS1PrivateKey(b.Bytes); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ServiceAccountKeyFile, err)
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: %T is not an RSA key", ServiceAccountKeyFile, k)
	}
	return rk, nil
}
