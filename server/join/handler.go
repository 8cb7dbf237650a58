package join

import (
	"context"
	"crypto/subtle"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"

	"github.com/kelp-project/kelp/config"
	"github.com/kelp-project/kelp/server/pki"
)

// The endpoints, on the API port in front of the API server. /cacerts is
// unauthenticated: a joining agent has nothing yet to verify the server
// with, and checks what it gets against its token's CA hash instead.
const (
	CACertsPath = "/cacerts"
	PathPrefix  = "/v1-kelp/"
	ConfigPath  = PathPrefix + "config" // GET: Settings
	CertsPath   = PathPrefix + "certs"  // POST CertRequest: CertResponse
)

// Handles reports whether path is one of the join endpoints.
func Handles(path string) bool {
	return path == CACertsPath || strings.HasPrefix(path, PathPrefix)
}

// Settings are the cluster settings every agent must share with the
// server, so that agents repeat no server flags.
type Settings struct {
	ClusterCIDR   string `json:"clusterCIDR"`
	ServiceCIDR   string `json:"serviceCIDR"`
	ClusterDNS    string `json:"clusterDNS"`
	ClusterDomain string `json:"clusterDomain"`
	// FlannelBackend names the node-network backend (--flannel-backend).
	FlannelBackend string `json:"flannelBackend"`
}

// CertRequest asks for a node's certificates. The CSRs carry only the
// agent's public keys: the server sets every name itself, from NodeName,
// Hostnames and Addresses.
type CertRequest struct {
	NodeName     string   `json:"nodeName"`
	NodePassword string   `json:"nodePassword"`
	Hostnames    []string `json:"hostnames,omitempty"` // the kubelet serving certificate's DNS names, besides NodeName
	Addresses    []string `json:"addresses,omitempty"` // its IPs
	// PEM certificate requests: the kubelet's client key, its serving
	// key, the service proxy's client key and the local-path
	// provisioner's client key. ProvisionerCSR is optional: an agent
	// older than the server (servers are upgraded first) sends none and
	// gets no provisioner certificate.
	KubeletCSR     string `json:"kubeletCSR"`
	ServingCSR     string `json:"servingCSR"`
	ProxyCSR       string `json:"proxyCSR"`
	ProvisionerCSR string `json:"provisionerCSR,omitempty"`
}

// CertResponse holds the signed certificates, PEM.
type CertResponse struct {
	KubeletCert string `json:"kubeletCert"` // CN system:node:<name>, O system:nodes
	ServingCert string `json:"servingCert"`
	ProxyCert   string `json:"proxyCert"` // CN system:kube-proxy
	// ProvisionerCert is CN system:kelp-local-path-provisioner, the
	// node's local-path provisioner (only if asked for).
	ProvisionerCert string `json:"provisionerCert,omitempty"`
}

// Config is what the join endpoints need.
type Config struct {
	CA *pki.CA
	// Client is the server's own API client: bootstrap tokens and node
	// passwords are Secrets in kube-system, read and written through the
	// API like any other component's state.
	Client kubernetes.Interface
	// ServerSecret and AgentSecret admit a node; so does any valid
	// bootstrap token.
	ServerSecret, AgentSecret string
	Settings                  Settings
	Now                       func() time.Time // default time.Now
}

// Handler serves the join endpoints.
type Handler struct {
	cfg Config
	mux *http.ServeMux
}

// New builds the handler.
func New(cfg Config) *Handler {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	h := &Handler{cfg: cfg, mux: http.NewServeMux()}
	h.mux.HandleFunc("GET "+CACertsPath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/x-pem-file")
		_, _ = w.Write(cfg.CA.CertPEM)
	})
	h.mux.HandleFunc("GET "+ConfigPath, h.authenticated(h.config))
	h.mux.HandleFunc("POST "+CertsPath, h.authenticated(h.certs))
	h.mux.HandleFunc(PathPrefix, func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, fmt.Sprintf("%s %s: no such join endpoint", r.Method, r.URL.Path), http.StatusNotFound)
	})
	return h
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// httpError is an error with the status and message the agent gets.
type httpError struct {
	code int
	msg  string
}

func (e *httpError) Error() string { return e.msg }

// errBadToken says as little as upstream's 401: which part of a wrong
// token was wrong is not the client's business.
var errBadToken = &httpError{http.StatusUnauthorized, "the token is not valid for this server"}

func writeError(w http.ResponseWriter, err error) {
	var he *httpError
	if !errors.As(err, &he) {
		logrus.WithError(err).Warn("join")
		he = &httpError{http.StatusServiceUnavailable, "the server cannot admit nodes right now: " + err.Error()}
	}
	http.Error(w, he.msg, he.code)
}

// authenticated admits requests whose basic-auth password is the server
// secret, the agent secret or a live bootstrap token. The user name is
// what the token carries (k3s's "server" or "node"); it grants nothing
// on its own.
func (h *Handler) authenticated(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, password, ok := r.BasicAuth()
		if !ok || password == "" {
			w.Header().Set("WWW-Authenticate", `Basic realm="kelp"`)
			writeError(w, errBadToken)
			return
		}
		if err := h.checkToken(r.Context(), password); err != nil {
			writeError(w, err)
			return
		}
		next(w, r)
	}
}

func (h *Handler) checkToken(ctx context.Context, password string) error {
	for _, s := range []string{h.cfg.ServerSecret, h.cfg.AgentSecret} {
		if s != "" && subtle.ConstantTimeCompare([]byte(s), []byte(password)) == 1 {
			return nil
		}
	}
	id, secret, ok := SplitBootstrapToken(password)
	if !ok {
		return errBadToken
	}
	s, err := h.cfg.Client.CoreV1().Secrets(metav1.NamespaceSystem).Get(ctx, BootstrapTokenSecretPrefix+id, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return errBadToken
	} else if err != nil {
		return fmt.Errorf("reading bootstrap token %s: %w", id, err)
	}
	b, err := ParseBootstrapSecret(s)
	if err != nil || subtle.ConstantTimeCompare([]byte(b.Secret), []byte(secret)) != 1 {
		return errBadToken
	}
	// Only a holder of the secret learns that it expired, and that is
	// what they need to know to get a new one.
	if b.Expired(h.cfg.Now()) {
		return &httpError{http.StatusUnauthorized, fmt.Sprintf("bootstrap token %s expired at %s; create a new one with `kelp token create`",
			id, b.Expires.UTC().Format(time.RFC3339))}
	}
	return nil
}

func (h *Handler) config(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(h.cfg.Settings)
}

func (h *Handler) certs(w http.ResponseWriter, r *http.Request) {
	var req CertRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
		writeError(w, &httpError{http.StatusBadRequest, "bad certificate request: " + err.Error()})
		return
	}
	resp, err := h.issue(r.Context(), req)
	if err != nil {
		writeError(w, err)
		return
	}
	logrus.Infof("join: issued certificates to node %s (%s)", req.NodeName, strings.Join(req.Addresses, ", "))
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

func badRequest(format string, args ...any) error {
	return &httpError{http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

// issue checks the request and the node password, then signs the
// certificates: the kubelet's client and serving ones, the proxy's, and
// the local-path provisioner's if the agent asked for it.
func (h *Handler) issue(ctx context.Context, req CertRequest) (*CertResponse, error) {
	// The password Secret's name, longer, must be a valid name too.
	if req.NodeName == "" || len(validation.IsDNS1123Subdomain(req.NodeName)) > 0 ||
		len(validation.IsDNS1123Subdomain(PasswordSecretName(req.NodeName))) > 0 {
		return nil, badRequest("node name %q is not a valid node name (a lower-case DNS subdomain)", req.NodeName)
	}
	if req.NodePassword == "" {
		return nil, badRequest("no node password")
	}
	dnsNames := []string{req.NodeName}
	for _, n := range req.Hostnames {
		if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
			return nil, badRequest("hostname %q: %s", n, strings.Join(errs, "; "))
		}
		if n != req.NodeName {
			dnsNames = append(dnsNames, n)
		}
	}
	var ips []net.IP
	for _, a := range req.Addresses {
		ip := net.ParseIP(a)
		if ip == nil {
			return nil, badRequest("address %q is not an IP", a)
		}
		ips = append(ips, ip)
	}
	keys := make([]any, 4)
	for i, csr := range []string{req.KubeletCSR, req.ServingCSR, req.ProxyCSR, req.ProvisionerCSR} {
		if i == 3 && csr == "" {
			break
		}
		var err error
		if keys[i], err = publicKey(csr); err != nil {
			return nil, badRequest("certificate request %d: %v", i+1, err)
		}
	}
	if err := h.checkPassword(ctx, req.NodeName, req.NodePassword); err != nil {
		return nil, err
	}
	kubelet, err := h.cfg.CA.SignClient(keys[0], config.NodeUser(req.NodeName), []string{config.NodesGroup})
	if err != nil {
		return nil, err
	}
	serving, err := h.cfg.CA.SignServing(keys[1], config.NodeUser(req.NodeName), dnsNames, ips)
	if err != nil {
		return nil, err
	}
	proxy, err := h.cfg.CA.SignClient(keys[2], config.ProxyUser, nil)
	if err != nil {
		return nil, err
	}
	resp := &CertResponse{KubeletCert: string(kubelet), ServingCert: string(serving), ProxyCert: string(proxy)}
	if keys[3] != nil {
		provisioner, err := h.cfg.CA.SignClient(keys[3], config.LocalPathProvisionerUser, nil)
		if err != nil {
			return nil, err
		}
		resp.ProvisionerCert = string(provisioner)
	}
	return resp, nil
}

// publicKey is the key of a PEM certificate request whose signature
// proves its sender holds the private key.
func publicKey(csrPEM string) (any, error) {
	b, _ := pem.Decode([]byte(csrPEM))
	if b == nil || b.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New("not a PEM CERTIFICATE REQUEST")
	}
	csr, err := x509.ParseCertificateRequest(b.Bytes)
	if err != nil {
		return nil, err
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, err
	}
	return csr.PublicKey, nil
}

// ClaimNodeName ties node to password as a certificate request does: the
// server claims its local agent's name with it, so that no agent joins
// under that name.
func (h *Handler) ClaimNodeName(ctx context.Context, node, password string) error {
	return h.checkPassword(ctx, node, password)
}

// checkPassword ties node to the first machine that asks for it: its
// password's hash is stored on first use, and a later request for the same
// name must bring the same password.
func (h *Handler) checkPassword(ctx context.Context, node, password string) error {
	secrets := h.cfg.Client.CoreV1().Secrets(metav1.NamespaceSystem)
	name := PasswordSecretName(node)
	// Twice at most: a create that lost a race reads the winner's hash.
	for range 2 {
		s, err := secrets.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			hash, err := HashPassword(password)
			if err != nil {
				return err
			}
			_, err = secrets.Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceSystem},
				Type:       PasswordSecretType,
				Data:       map[string][]byte{PasswordHashKey: []byte(hash)},
			}, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				continue
			}
			return err
		} else if err != nil {
			return fmt.Errorf("reading the node password of %s: %w", node, err)
		}
		if !CheckPassword(string(s.Data[PasswordHashKey]), password) {
			return &httpError{http.StatusConflict, fmt.Sprintf("node name %s is already taken by another machine "+
				"(its node password differs; if the old machine is gone, delete Secret %s/%s to free the name)", node, metav1.NamespaceSystem, name)}
		}
		return nil
	}
	return fmt.Errorf("node password of %s: created and deleted concurrently", node)
}
