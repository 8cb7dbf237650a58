package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/kelp-project/kelp/config"
	"github.com/kelp-project/kelp/embedded/etcd"
	"github.com/kelp-project/kelp/server/apiserver"
	"github.com/kelp-project/kelp/server/apiserver/auth"
	"github.com/kelp-project/kelp/server/apiserver/storage"
	"github.com/kelp-project/kelp/server/join"
	"github.com/kelp-project/kelp/server/pki"
	"github.com/kelp-project/kelp/server/secretsencrypt"
)

// apiServing is the API server behind its HTTPS listener.
type apiServing struct {
	api      *apiserver.Server
	signer   *auth.TokenSigner // service-account tokens, also for the token controller
	join     *join.Handler
	encrypt  *secretsencrypt.Handler
	port     int // the bound one: --https-listen-port 0 picks a free port
	srv      *http.Server
	inflight atomic.Int64 // requests being served, watches included
	serveErr chan error
	stop     context.CancelFunc // ends the API server's watches
}

// startAPI listens on the bind address and serves the API server there,
// with a serving certificate for every name and address clients may use.
func startAPI(ctx context.Context, cfg Config, e *etcd.Etcd, ca *pki.CA, tokens tokens, tlsDir string, enc *secretsencrypt.Encryption) (_ *apiServing, err error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.BindAddress, strconv.Itoa(cfg.HTTPSPort)))
	if err != nil {
		return nil, fmt.Errorf("API server listen: %w", err)
	}
	// The API server's own context outlives ctx: at shutdown, watches end
	// only after the clients have stopped (see Server.shutdown).
	apiCtx, stopAPI := context.WithCancel(context.WithoutCancel(ctx))
	defer func() {
		if err != nil {
			ln.Close()
			stopAPI()
		}
	}()
	a := &apiServing{port: ln.Addr().(*net.TCPAddr).Port, serveErr: make(chan error, 1), stop: stopAPI}
	kcPEM, kkPEM, err := ca.ClientCert(config.APIServerKubeletClientUser, nil)
	if err != nil {
		return nil, err
	}
	kubeletClient, err := tls.X509KeyPair(kcPEM, kkPEM)
	if err != nil {
		return nil, err
	}
	saKey, err := pki.LoadOrCreateServiceAccountKey(tlsDir)
	if err != nil {
		return nil, fmt.Errorf("service-account key: %w", err)
	}
	issuer := config.ServiceAccountIssuer(cfg.ClusterDomain)
	if a.signer, err = auth.NewTokenSigner(issuer, saKey); err != nil {
		return nil, err
	}
	var transformers func(schema.GroupResource) storage.Transformer
	if enc != nil {
		transformers = enc.TransformerFor
	}
	a.api, err = apiserver.New(apiCtx, apiserver.Config{
		Etcd: e.Client,
		// The server secret, bare or as the full token file holds it,
		// is the admin's bearer token (see loadTokens).
		Authenticators: []auth.Authenticator{auth.TokenAuthenticator{
			tokens.server:      {Name: config.AdminUser, Groups: []string{config.MastersGroup}},
			tokens.serverToken: {Name: config.AdminUser, Groups: []string{config.MastersGroup}},
		}},
		ServiceCIDR:        cfg.ServiceCIDR,
		NodePortRange:      cfg.ServiceNodePorts,
		PublicAddress:      cfg.AdvertiseAddress,
		PublicPort:         a.port,
		CompactionInterval: cfg.CompactionInterval,

		MaxRequestsInFlight:         cfg.MaxRequestsInFlight,
		MaxMutatingRequestsInFlight: cfg.MaxMutatingRequestsInFlight,

		DefaultNotReadyTolerationSeconds:    cfg.DefaultNotReadyTolerationSeconds,
		DefaultUnreachableTolerationSeconds: cfg.DefaultUnreachableTolerationSeconds,
		KubeletClientCert:                   &kubeletClient,
		// As k3s: the issuer is the in-cluster name of the API, and the
		// API's only audience.
		ServiceAccountSigner: a.signer,
		APIAudiences:         []string{issuer},
		Transformers:         transformers,
		StorageGuard: &apiserver.StorageGuard{Dir: cfg.DataDir, MinFree: cfg.StorageMinFree,
			Statfs: etcd.HostStatfs, Etcd: e.Client},
	})
	if err != nil {
		return nil, err
	}
	if enc != nil {
		enc.SetRewriter(a.api.RewriteStored)
	}
	a.encrypt = &secretsencrypt.Handler{Encryption: enc, ServerSecret: tokens.server}
	hostname, _ := os.Hostname()
	dnsNames, ips := servingNames(cfg, hostname, hostIPs())
	certFile, keyFile, err := ca.ServingCert(tlsDir, "serving-kube-apiserver", dnsNames, ips)
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	a.join, err = newJoinHandler(cfg, ca, tokens, "https://"+net.JoinHostPort(loopbackFor(cfg.BindAddress), strconv.Itoa(a.port)))
	if err != nil {
		return nil, err
	}
	a.srv = &http.Server{
		// The join endpoints sit in front of the API server, on its port,
		// as k3s serves them; they are no API resources.
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			a.inflight.Add(1)
			defer a.inflight.Add(-1)
			if secretsencrypt.Handles(r.URL.Path) {
				a.encrypt.ServeHTTP(w, r)
				return
			}
			if join.Handles(r.URL.Path) {
				a.join.ServeHTTP(w, r)
				return
			}
			a.api.ServeHTTP(w, r)
		}),
		// kube-apiserver's: 1 MiB of headers, 32 s to read them (just
		// shy of its request timeout), idle connections closed after
		// 90 s, HTTP/1.1 and HTTP/2 alike.
		MaxHeaderBytes:    1 << 20,
		ReadHeaderTimeout: 32 * time.Second,
		IdleTimeout:       cfg.IdleConnectionTimeout,
		ErrorLog:          logrusErrorLog(),
	}
	if err := configureHTTP2(a.srv, cfg.IdleConnectionTimeout); err != nil {
		return nil, err
	}
	// The guard does the TLS handshakes, so net/http is handed
	// connections that are already TLS (see connlimit.go).
	tlsConfig := &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.VerifyClientCertIfGiven,
		ClientCAs:    ca.Pool(),
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"h2", "http/1.1"},
	}
	guard := newConnGuard(ln, tlsConfig, connBudget(fdBudget(), cfg.MaxConnections), cfg.MaxConnectionsPerIP, cfg.TLSHandshakeTimeout)
	a.srv.ConnState = guard.connState
	go func() { a.serveErr <- a.srv.Serve(guard) }()
	return a, nil
}

// configureHTTP2 sets kube-apiserver's HTTP/2 options (its
// secure_serving.go with --http2-max-streams-per-connection 0): 100
// concurrent streams per connection, what Go clients assume before the
// server's settings arrive, which also bounds how many streams a
// malicious client can open before the connection is closed (x/net's
// rapid-reset defence counts against it); frames and per-stream buffers
// of 256 KiB, enough for 99% of API objects in one frame, rather than
// 1 MiB; the connection's buffer all its streams' together. x/net's
// server, as upstream: net/http's own HTTP2Config refuses connection
// windows over 4 MiB.
func configureHTTP2(srv *http.Server, idle time.Duration) error {
	const resourceBody99Percentile = 256 * 1024
	h2 := &http2.Server{
		IdleTimeout:              idle,
		MaxConcurrentStreams:     100,
		MaxUploadBufferPerStream: resourceBody99Percentile,
		MaxReadFrameSize:         resourceBody99Percentile,
	}
	h2.MaxUploadBufferPerConnection = h2.MaxUploadBufferPerStream * int32(h2.MaxConcurrentStreams)
	return http2.ConfigureServer(srv, h2)
}

// newJoinHandler serves the join endpoints as the supervisor, an API client
// of its own: the endpoints read bootstrap tokens and keep node passwords
// through the API.
func newJoinHandler(cfg Config, ca *pki.CA, tokens tokens, url string) (*join.Handler, error) {
	rc, err := ca.RESTConfig(url, config.SupervisorUser, []string{config.MastersGroup})
	if err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	return join.New(join.Config{
		CA: ca, Client: client, ServerSecret: tokens.server, AgentSecret: tokens.agent,
		Settings: join.Settings{ClusterCIDR: cfg.ClusterCIDR, ServiceCIDR: cfg.ServiceCIDR, ClusterDNS: cfg.ClusterDNS,
			ClusterDomain: cfg.ClusterDomain, FlannelBackend: cfg.NodeNetwork},
	}), nil
}

// drain stops the API server once its clients have stopped.
func (a *apiServing) drain() {
	a.stop() // ends watches, so only real requests are left to finish
	// Shutdown stops the listener and says GOAWAY, but it also waits for
	// idle HTTP/2 connections to be closed by their clients (a second or
	// more for the in-process ones). Requests in flight are what must
	// finish; once they have, the connections are closed outright.
	go func() { _ = a.srv.Shutdown(context.Background()) }()
	for deadline := time.Now().Add(10 * time.Second); a.inflight.Load() > 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	_ = a.srv.Close()
}

// close stops the API server at once, for a failed start.
func (a *apiServing) close() {
	a.stop()
	_ = a.srv.Close()
}

// servingNames are the DNS names and IPs the serving certificate must
// cover: the in-cluster names of the kubernetes Service and its ClusterIP,
// the host and node names, every host address and the advertise address.
func servingNames(cfg Config, hostname string, hostIPs []net.IP) ([]string, []net.IP) {
	dnsNames := []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc." + cfg.ClusterDomain}
	for _, n := range []string{hostname, cfg.NodeName} {
		if n != "" && !slices.Contains(dnsNames, n) {
			dnsNames = append(dnsNames, n)
		}
	}
	ips := append(hostIPs, net.ParseIP(cfg.AdvertiseAddress), net.ParseIP(firstServiceIP(cfg.ServiceCIDR)))
	return dnsNames, ips
}

// hostIPs are the host's addresses, loopback included.
func hostIPs() []net.IP {
	out := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLinkLocalUnicast() {
			out = append(out, n.IP)
		}
	}
	return out
}

// firstServiceIP is the kubernetes Service's ClusterIP.
func firstServiceIP(cidr string) string {
	_, n, err := net.ParseCIDR(cidr)
	if err != nil {
		return ""
	}
	ip := n.IP.To4()
	if ip == nil {
		return ""
	}
	out := make(net.IP, 4)
	copy(out, ip)
	out[3]++
	return out.String()
}
