// Package join is the agent side of adding a node (`kelp agent --server
// URL --token T`): it fetches and checks the cluster CA, requests the
// node's certificates and the cluster settings from the server's join
// endpoints (server/join), keeps them under <data-dir>/agent, and hands
// back the kubelet's, the proxy's and the local-path provisioner's client
// configurations.
package join

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kelp-project/kelp/config"
	"github.com/kelp-project/kelp/server/join"
	"github.com/kelp-project/kelp/server/pki"
)

// RenewBefore is how long before expiry certificates are renewed, at start
// (design.md: node certificates last a year, renewed within 90 days).
const RenewBefore = 90 * 24 * time.Hour

// Config is what joining needs.
type Config struct {
	Server   string // the API server, https://host:port
	Token    string // a full K10 token, a bare secret, or a bootstrap token
	DataDir  string // <data-dir>: everything goes to <data-dir>/agent
	NodeName string
	NodeIP   string
	// RetryInitial and RetryMax bound the backoff while the server cannot
	// be reached (defaults 1 s and 30 s).
	RetryInitial, RetryMax time.Duration
}

// Result is a joined node's identity and the cluster's settings.
type Result struct {
	Node, Proxy *rest.Config // system:node:<name>, system:kube-proxy
	Provisioner *rest.Config // config.LocalPathProvisionerUser
	Settings    join.Settings
	CAPEM       []byte
	// ServingCertFile and ServingKeyFile are the kubelet's serving
	// certificate, signed by the cluster CA.
	ServingCertFile, ServingKeyFile string
}

// The files under <data-dir>/agent, named as k3s names them.
const (
	caFile            = "server-ca.crt"
	kubeletCert       = "client-kubelet.crt"
	kubeletKey        = "client-kubelet.key"
	servingCert       = "serving-kubelet.crt"
	servingKey        = "serving-kubelet.key"
	proxyCert         = "client-kube-proxy.crt"
	proxyKey          = "client-kube-proxy.key"
	provisionerCert   = "client-local-path-provisioner.crt"
	provisionerKey    = "client-local-path-provisioner.key"
	kubeletConfig     = "kubelet.kubeconfig"
	proxyConfig       = "kubeproxy.kubeconfig"
	provisionerConfig = "local-path-provisioner.kubeconfig"
	PasswordFile      = "node-password"
	maxResponseBytes  = 1 << 20
)

// permanent marks an error retrying cannot fix: a wrong token, a CA that
// does not match, a taken node name.
type permanent struct{ error }

func (p permanent) Unwrap() error { return p.error }

// Join joins the cluster, or renews what an earlier join left, retrying
// while the server cannot be reached, until ctx ends. It fails at once for
// what retrying cannot fix.
func Join(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.RetryInitial == 0 {
		cfg.RetryInitial = time.Second
	}
	if cfg.RetryMax == 0 {
		cfg.RetryMax = 30 * time.Second
	}
	token, err := join.ParseToken(cfg.Token)
	if err != nil {
		return nil, fmt.Errorf("--token: %w", err)
	}
	server := strings.TrimSuffix(cfg.Server, "/")
	if !strings.HasPrefix(server, "https://") {
		return nil, fmt.Errorf("--server %q: not an https:// URL", cfg.Server)
	}
	dir := filepath.Join(cfg.DataDir, "agent")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	var caPEM []byte
	if err := retry(ctx, cfg, "fetching the cluster CA from "+server, func() (err error) {
		caPEM, err = fetchCA(ctx, server)
		return err
	}); err != nil {
		return nil, err
	}
	if err := trustCA(caPEM, token, filepath.Join(dir, caFile)); err != nil {
		return nil, err
	}
	c, err := newClient(server, caPEM, token)
	if err != nil {
		return nil, err
	}
	res := &Result{CAPEM: caPEM, ServingCertFile: filepath.Join(dir, servingCert), ServingKeyFile: filepath.Join(dir, servingKey)}
	if err := retry(ctx, cfg, "fetching the cluster settings", func() error {
		return c.do(ctx, http.MethodGet, join.ConfigPath, nil, &res.Settings)
	}); err != nil {
		return nil, err
	}
	password, err := join.LoadOrCreatePassword(filepath.Join(dir, PasswordFile))
	if err != nil {
		return nil, fmt.Errorf("node password: %w", err)
	}
	hostnames := hostnames(cfg.NodeName)
	if reason := needCerts(dir, caPEM, cfg.NodeName, hostnames, cfg.NodeIP, time.Now()); reason != "" {
		logrus.Infof("join: requesting certificates for node %s from %s: %s", cfg.NodeName, server, reason)
		if err := retry(ctx, cfg, "requesting certificates", func() error {
			return requestCerts(ctx, c, dir, cfg.NodeName, password, hostnames, cfg.NodeIP)
		}); err != nil {
			return nil, err
		}
	}
	if res.Node, err = writeKubeconfig(dir, kubeletConfig, server, caPEM, kubeletCert, kubeletKey); err != nil {
		return nil, err
	}
	if res.Proxy, err = writeKubeconfig(dir, proxyConfig, server, caPEM, proxyCert, proxyKey); err != nil {
		return nil, err
	}
	if res.Provisioner, err = writeKubeconfig(dir, provisionerConfig, server, caPEM, provisionerCert, provisionerKey); err != nil {
		return nil, err
	}
	return res, nil
}

// retry runs f until it succeeds, fails permanently or ctx ends, waiting
// RetryInitial, doubling up to RetryMax, between attempts.
func retry(ctx context.Context, cfg Config, what string, f func() error) error {
	delay := cfg.RetryInitial
	for attempt := 1; ; attempt++ {
		err := f()
		var p permanent
		if err == nil || errors.As(err, &p) {
			return err
		}
		logrus.Warnf("join: %s (attempt %d): %v; retrying in %s", what, attempt, err, delay)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last error: %v)", what, ctx.Err(), err)
		case <-time.After(delay):
		}
		delay = min(2*delay, cfg.RetryMax)
	}
}

// fetchCA downloads /cacerts without verifying the server: nothing can be
// verified yet. What it returns is checked by trustCA before any secret
// is sent.
func fetchCA(ctx context.Context, server string) ([]byte, error) {
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}}} // #nosec: checked by trustCA
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, server+join.CACertsPath, nil)
	if err != nil {
		return nil, permanent{err}
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", join.CACertsPath, resp.Status)
	}
	if !x509.NewCertPool().AppendCertsFromPEM(body) {
		return nil, permanent{fmt.Errorf("%s%s serves no PEM certificate: is it a kelp server?", server, join.CACertsPath)}
	}
	return body, nil
}

// trustCA decides whether to trust the CA the server sent: a full token's
// hash must match it; a bare secret trusts it on first use, and from then
// on only the same CA.
func trustCA(caPEM []byte, token join.Token, pinned string) error {
	got := join.CAHash(caPEM)
	if token.CAHash != "" {
		if got != token.CAHash {
			return permanent{fmt.Errorf("the server's CA does not match the token's hash (token %s, server's CA %s): "+
				"this is not the server the token belongs to, or someone is in between", short(token.CAHash), short(got))}
		}
		return pki.WriteFile(pinned, caPEM, 0o644)
	}
	if old, err := os.ReadFile(pinned); err == nil {
		if !bytes.Equal(old, caPEM) {
			return permanent{fmt.Errorf("the server's CA (%s) differs from the one trusted on first use in %s (%s)",
				short(got), pinned, short(join.CAHash(old)))}
		}
		return nil
	}
	logrus.Warnf("join: the token has no CA hash; trusting the server's CA on first use (sha256 %s). "+
		"Use the full token from <data-dir>/server/node-token on the server to have it checked", got)
	return pki.WriteFile(pinned, caPEM, 0o644)
}

func short(hash string) string { return hash[:min(12, len(hash))] + "…" }

// client calls the join endpoints, verifying the server with the CA and
// sending the token's secret as basic auth, as k3s's agent does.
type client struct {
	server     string
	http       *http.Client
	user, pass string
}

func newClient(server string, caPEM []byte, token join.Token) (*client, error) {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	user := token.User
	if user == "" {
		user = join.NodeUser
	}
	return &client{server: server, user: user, pass: token.Secret, http: &http.Client{Timeout: 30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}}, nil
}

// do sends in (if any) as JSON and decodes the answer into out. Refusals
// (4xx) are permanent and carry the server's message.
func (c *client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return permanent{err}
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.server+path, body)
	if err != nil {
		return permanent{err}
	}
	req.SetBasicAuth(c.user, c.pass)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return err
	}
	msg := strings.TrimSpace(string(data))
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		return permanent{fmt.Errorf("the server refused the token: %s", msg)}
	case resp.StatusCode == http.StatusConflict || resp.StatusCode == http.StatusForbidden:
		return permanent{errors.New(msg)}
	case resp.StatusCode >= 400 && resp.StatusCode < 500:
		return permanent{fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, msg)}
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, msg)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	return nil
}

// hostnames are the kubelet serving certificate's DNS names besides the
// node name: the host's name, if it is a different valid one.
func hostnames(node string) []string {
	h, err := os.Hostname()
	if h = strings.ToLower(h); err != nil || h == node || h == "" {
		return nil
	}
	return []string{h}
}

// needCerts says why the certificates in dir must be (re)issued, or "" if
// they are all there, from this CA, for this node, and valid for more than
// RenewBefore.
func needCerts(dir string, caPEM []byte, node string, hostnames []string, nodeIP string, now time.Time) string {
	b, _ := pem.Decode(caPEM)
	if b == nil {
		return "no CA"
	}
	ca, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return "no CA"
	}
	for _, p := range [][2]string{{kubeletCert, kubeletKey}, {servingCert, servingKey}, {proxyCert, proxyKey}, {provisionerCert, provisionerKey}} {
		cert, err := loadPair(filepath.Join(dir, p[0]), filepath.Join(dir, p[1]))
		switch {
		case err != nil:
			return fmt.Sprintf("%s: %v", p[0], err)
		case cert.CheckSignatureFrom(ca) != nil:
			return p[0] + " is from another CA"
		case cert.NotAfter.Sub(now) < RenewBefore:
			return fmt.Sprintf("%s expires %s", p[0], cert.NotAfter.Format(time.DateOnly))
		case p[0] == kubeletCert && cert.Subject.CommonName != config.NodeUser(node):
			return p[0] + " is for " + cert.Subject.CommonName
		case p[0] == servingCert && !covers(cert, append([]string{node}, hostnames...), nodeIP):
			return p[0] + " does not cover the node's names and address"
		}
	}
	return ""
}

func covers(cert *x509.Certificate, names []string, ip string) bool {
	for _, n := range names {
		if !slices.Contains(cert.DNSNames, n) {
			return false
		}
	}
	if p := net.ParseIP(ip); p != nil && !slices.ContainsFunc(cert.IPAddresses, p.Equal) {
		return false
	}
	return true
}

func loadPair(certFile, keyFile string) (*x509.Certificate, error) {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	return x509.ParseCertificate(pair.Certificate[0])
}

// requestCerts makes four new keys, sends their CSRs, and writes the
// keys and the certificates the server signed.
func requestCerts(ctx context.Context, c *client, dir, node, password string, hostnames []string, nodeIP string) error {
	req := join.CertRequest{NodeName: node, NodePassword: password, Hostnames: hostnames}
	if nodeIP != "" {
		req.Addresses = []string{nodeIP}
	}
	csrs := []*string{&req.KubeletCSR, &req.ServingCSR, &req.ProxyCSR, &req.ProvisionerCSR}
	keys := make([][]byte, len(csrs))
	for i := range keys {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return permanent{err}
		}
		der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
		if err != nil {
			return permanent{err}
		}
		*csrs[i] = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))
		kd, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return permanent{err}
		}
		keys[i] = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd})
	}
	var resp join.CertResponse
	if err := c.do(ctx, http.MethodPost, join.CertsPath, req, &resp); err != nil {
		return err
	}
	if resp.ProvisionerCert == "" {
		// A server older than the agent: it has no local-path provisioner
		// identity (nor its role) to give. As with k3s, servers go first.
		return permanent{errors.New("the server issued no certificate for the node's local-path provisioner: " +
			"it is older than this agent; upgrade the server first")}
	}
	for i, f := range []struct{ cert, key, pem string }{
		{kubeletCert, kubeletKey, resp.KubeletCert}, {servingCert, servingKey, resp.ServingCert}, {proxyCert, proxyKey, resp.ProxyCert},
		{provisionerCert, provisionerKey, resp.ProvisionerCert},
	} {
		if err := pki.WriteFile(filepath.Join(dir, f.key), keys[i], 0o600); err != nil {
			return permanent{err}
		}
		if err := pki.WriteFile(filepath.Join(dir, f.cert), []byte(f.pem), 0o644); err != nil {
			return permanent{err}
		}
	}
	return nil
}

// writeKubeconfig writes the kubeconfig for one identity (so that kubectl
// can act as the node for debugging, as with k3s) and returns its client
// configuration.
func writeKubeconfig(dir, name, server string, caPEM []byte, certFile, keyFile string) (*rest.Config, error) {
	cert, err := os.ReadFile(filepath.Join(dir, certFile))
	if err != nil {
		return nil, err
	}
	key, err := os.ReadFile(filepath.Join(dir, keyFile))
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, name)
	if err := pki.WriteKubeconfig(path, 0o600, server, caPEM, cert, key); err != nil {
		return nil, err
	}
	return clientcmd.BuildConfigFromFlags("", path)
}
