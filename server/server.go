// Package server assembles the control plane of `kelp server`: embedded
// etcd, the API server on HTTPS, the admin kubeconfig, and the control
// loops (controllers and scheduler), each an API client. The local node
// agent is not part of it: the CLI starts it on the Server that Start
// returns, with the node credentials the Server hands out, so server never
// depends on the agent.
package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kelp-project/kelp/config"
	"github.com/kelp-project/kelp/embedded/etcd"
	"github.com/kelp-project/kelp/server/apiserver"
	"github.com/kelp-project/kelp/server/bootstrappolicy"
	"github.com/kelp-project/kelp/server/controllers/apfconfig"
	"github.com/kelp-project/kelp/server/controllers/nodelifecycle"
	"github.com/kelp-project/kelp/server/controllers/podgc"
	"github.com/kelp-project/kelp/server/pki"
	"github.com/kelp-project/kelp/server/scheduler"
	"github.com/kelp-project/kelp/server/secretsencrypt"
)

// Config holds the flags of `kelp server` that concern the control plane.
type Config struct {
	DataDir            string
	BindAddress        string
	HTTPSPort          int
	AdvertiseAddress   string // default: config.DefaultAddress(BindAddress)
	WriteKubeconfig    string
	KubeconfigMode     os.FileMode
	ClusterCIDR        string
	ServiceCIDR        string
	ServiceNodePorts   string
	ClusterDNS         string
	ClusterDomain      string
	DisableScheduler   bool   // as k3s: another scheduler (or none) is used
	DisableControllers bool   // as k3s --disable-controller-manager
	NodeName           string // default: the hostname
	// Token and AgentToken are the join secrets (--token, --agent-token;
	// a full K10 token or a bare secret). Empty keeps the ones in the
	// token files, or makes new ones (see loadTokens).
	Token, AgentToken string
	// NodeNetwork is the node-network backend joining agents are told to
	// use (--flannel-backend).
	NodeNetwork        string
	CompactionInterval time.Duration
	// MaxRequestsInFlight and MaxMutatingRequestsInFlight are
	// kube-apiserver's max-in-flight limits (0: none).
	MaxRequestsInFlight         int
	MaxMutatingRequestsInFlight int
	// IdleConnectionTimeout, TLSHandshakeTimeout and MaxConnectionsPerIP
	// guard the HTTPS listener (https.go, connlimit.go).
	IdleConnectionTimeout time.Duration
	TLSHandshakeTimeout   time.Duration
	MaxConnectionsPerIP   int
	// MaxConnections caps the open connections (0: the fd budget alone).
	MaxConnections int
	// DefaultNotReadyTolerationSeconds and DefaultUnreachableTolerationSeconds
	// are the tolerations added to every pod (upstream: 300 s).
	DefaultNotReadyTolerationSeconds    int64
	DefaultUnreachableTolerationSeconds int64
	// NodeLifecycle holds the node lifecycle controller's timings and
	// eviction rates; SchedulerBackoff the scheduler's retry delays.
	NodeLifecycle    nodelifecycle.Config
	SchedulerBackoff scheduler.Backoff
	// PodGC holds the pod garbage collector's threshold and quarantine.
	PodGC podgc.Config
	// SecretsEncryption encrypts Secrets at rest with the configuration
	// in <data-dir>/server/cred (k3s's --secrets-encryption).
	SecretsEncryption bool
	// StorageMinFree is the free space of the data dir's filesystem below
	// which the API server refuses writes (--storage-min-free).
	StorageMinFree apiserver.MinFree
	// Disable names packaged manifests not to deploy (--disable), as
	// k3s: local-storage.
	Disable []string
}

// Server is a running control plane.
type Server struct {
	// URL reaches the API server over loopback, as the admin kubeconfig
	// and every in-process client do.
	URL string
	CA  *pki.CA
	// NodeName and AdvertiseAddress are the configured ones, or their
	// defaults.
	NodeName, AdvertiseAddress string
	// NodeConfig carries this node's identity (system:node:<name>), for a
	// local agent.
	NodeConfig *rest.Config
	// ProxyConfig is the local service proxy's and DNS's identity
	// (system:kube-proxy).
	ProxyConfig *rest.Config
	// ProvisionerConfig is the local node's local-path provisioner's
	// identity (config.LocalPathProvisionerUser).
	ProvisionerConfig *rest.Config

	done context.Context // Start's: its end starts the shutdown
	// clients is the context of the API clients (the control loops and
	// those started by Go): it ends first at shutdown.
	clients     context.Context
	stopClients context.CancelFunc
	goClients   sync.WaitGroup
	waitLoops   func()
	api         *apiServing
	etcd        *etcd.Etcd
	etcdFailed  <-chan error
}

// Start brings the control plane up, step by step: credentials, etcd, the
// API server, bootstrap and the admin kubeconfig, the control loops. It
// returns once all of them run; the control plane shuts down when ctx
// ends, and Wait waits for that. If a step fails, what had started is
// stopped again.
func Start(ctx context.Context, cfg Config) (_ *Server, err error) {
	start := time.Now()
	if cfg, err = withDefaults(cfg); err != nil {
		return nil, err
	}
	s := &Server{NodeName: cfg.NodeName, AdvertiseAddress: cfg.AdvertiseAddress, done: ctx}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	serverDir := filepath.Join(cfg.DataDir, "server")
	tlsDir := filepath.Join(serverDir, "tls")
	// Before anything is written: a disk too small for etcd is one clear
	// error, not a half-made data dir and a panic.
	if err = etcd.CheckSpace(filepath.Join(serverDir, "db"), etcd.HostStatfs); err != nil {
		return nil, err
	}
	var tokens tokens
	if s.CA, tokens, err = loadCredentials(cfg, serverDir, tlsDir); err != nil {
		return nil, err
	}
	fp, err := loadFrontProxy(tlsDir)
	if err != nil {
		return nil, err
	}
	// The encryption configuration is read before etcd starts: a bad
	// file stops the server before anything could be written in the
	// clear.
	var enc *secretsencrypt.Encryption
	if cfg.SecretsEncryption {
		if enc, err = secretsencrypt.Setup(filepath.Join(serverDir, "cred")); err != nil {
			return nil, fmt.Errorf("secrets encryption: %w", err)
		}
	}
	if s.etcd, err = etcd.Start(ctx, filepath.Join(serverDir, "db")); err != nil {
		return nil, err
	}
	s.etcdFailed = s.etcd.Failed()
	logrus.Debugf("etcd ready after %s", time.Since(start))
	if s.api, err = startAPI(ctx, cfg, s.etcd, s.CA, tokens, tlsDir, enc); err != nil {
		return nil, err
	}
	s.URL = "https://" + net.JoinHostPort(loopbackFor(cfg.BindAddress), strconv.Itoa(s.api.port))
	if err = bootstrap(ctx, s.api.api, cfg, s.CA, fp, s.URL); err != nil {
		return nil, err
	}
	s.clients, s.stopClients = context.WithCancel(ctx)
	// The manifests' first pass comes before the kubeconfig, which tells
	// scripts and tests that the cluster is up: the packaged add-ons (the
	// default StorageClass) are in the API by then, as they were when
	// bootstrap made them.
	waitManifests, err := startManifests(s.clients, cfg, serverDir, s.CA, s.URL)
	if err != nil {
		return nil, fmt.Errorf("manifests: %w", err)
	}
	if err = writeAdminKubeconfig(cfg, s.CA, s.URL); err != nil {
		return nil, err
	}
	waitLoops, err := startControlLoops(s.clients, cfg, s.CA, fp, s.URL, s.api)
	if err != nil {
		return nil, fmt.Errorf("control loops: %w", err)
	}
	s.waitLoops = func() { waitLoops(); waitManifests() }
	if s.NodeConfig, err = s.CA.RESTConfig(s.URL, config.NodeUser(cfg.NodeName), []string{config.NodesGroup}); err != nil {
		return nil, err
	}
	if s.ProxyConfig, err = s.CA.RESTConfig(s.URL, config.ProxyUser, nil); err != nil {
		return nil, err
	}
	if s.ProvisionerConfig, err = s.CA.RESTConfig(s.URL, config.LocalPathProvisionerUser, nil); err != nil {
		return nil, err
	}
	logrus.Infof("kelp server ready in %s: API at %s, kubeconfig %s", time.Since(start).Round(time.Millisecond), s.URL, cfg.WriteKubeconfig)
	return s, nil
}

// ClaimNode ties the server's node name to password, the local agent's
// node password, as a joining agent's request would: from then on no other
// machine can join under this name.
func (s *Server) ClaimNode(ctx context.Context, password string) error {
	if err := s.api.join.ClaimNodeName(ctx, s.NodeName, password); err != nil {
		return fmt.Errorf("local node %s: %w", s.NodeName, err)
	}
	return nil
}

// Go runs f, an API client such as the local node agent, for the server's
// lifetime. Its ctx ends at shutdown together with the control loops', while
// the API still answers, and Wait lets the API stop only once f has
// returned. An error from f is logged; the control plane keeps running.
func (s *Server) Go(name string, f func(ctx context.Context) error) {
	s.goClients.Add(1)
	go func() {
		defer s.goClients.Done()
		if err := f(s.clients); err != nil {
			logrus.WithError(err).Errorf("%s stopped", name)
		}
	}()
}

// Wait serves until Start's ctx ends, then shuts down cleanly (see
// shutdown). If the listener or etcd fails instead, it stops everything
// without waiting for the clients and returns the error.
func (s *Server) Wait() error {
	select {
	case <-s.done.Done():
	case err := <-s.api.serveErr:
		if !errors.Is(err, http.ErrServerClosed) {
			s.close()
			return err
		}
	case err := <-s.etcdFailed:
		// Without etcd no request can be answered; stopping with the
		// reason beats serving 500s (an init system restarts kelp).
		s.close()
		return fmt.Errorf("embedded etcd stopped: %w", err)
	}
	logrus.Info("shutting down")
	s.shutdown()
	return nil
}

// shutdown stops the clients, then the API, then etcd: in-flight requests
// finish, watches end, and etcd flushes and closes.
func (s *Server) shutdown() {
	// The loops and the clients (the agent) stop first, while the API
	// still answers, so they can release their leader Leases for a standby
	// server to take over. The agent leaves containerd and the pods
	// running.
	s.stopClients()
	s.goClients.Wait()
	loopsDone := make(chan struct{})
	go func() { s.waitLoops(); close(loopsDone) }()
	select {
	case <-loopsDone:
	case <-time.After(3 * time.Second):
		logrus.Warn("control loops did not stop within 3s")
	}
	s.api.drain()
	s.etcd.Close()
}

// close stops whatever Start got to, in reverse order, without waiting:
// for a failed start or a failed listener.
func (s *Server) close() {
	if s.stopClients != nil {
		s.stopClients()
	}
	if s.api != nil {
		s.api.close()
	}
	if s.etcd != nil {
		s.etcd.Close()
	}
}

// withDefaults fills in the node name, the advertise address and the
// connection timeouts.
func withDefaults(cfg Config) (Config, error) {
	name, err := config.NodeName(cfg.NodeName)
	if err != nil {
		return cfg, err
	}
	cfg.NodeName = name
	if cfg.AdvertiseAddress == "" {
		cfg.AdvertiseAddress = config.DefaultAddress(cfg.BindAddress)
	}
	// Connections without either timeout would stay forever.
	if cfg.IdleConnectionTimeout <= 0 {
		cfg.IdleConnectionTimeout = config.IdleConnectionTimeout
	}
	if cfg.TLSHandshakeTimeout <= 0 {
		cfg.TLSHandshakeTimeout = config.TLSHandshakeTimeout
	}
	return cfg, nil
}

// loadCredentials loads the cluster CA from tlsDir and the join tokens
// from serverDir, creating them on first start.
func loadCredentials(cfg Config, serverDir, tlsDir string) (*pki.CA, tokens, error) {
	ca, err := pki.LoadOrCreateCA(tlsDir)
	if err != nil {
		return nil, tokens{}, fmt.Errorf("cluster CA: %w", err)
	}
	t, err := loadTokens(serverDir, ca.CertPEM, cfg.Token, cfg.AgentToken)
	if err != nil {
		return nil, tokens{}, fmt.Errorf("tokens: %w", err)
	}
	return ca, t, nil
}

// bootstrap creates the cluster's initial objects and the RBAC policy.
func bootstrap(ctx context.Context, api *apiserver.Server, cfg Config, ca *pki.CA, fp *frontProxy, url string) error {
	if err := api.Bootstrap(ctx); err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	// The RBAC bootstrap policy, before any component or kubeconfig user
	// needs it (kube-apiserver's rbac/bootstrap-roles post-start hook).
	rc, err := ca.RESTConfig(url, config.APIServerUser, []string{config.MastersGroup})
	if err != nil {
		return err
	}
	loopback, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return err
	}
	api.SetLoopback(loopback, dyn)
	if err := bootstrappolicy.Reconcile(ctx, loopback); err != nil {
		return fmt.Errorf("rbac bootstrap policy: %w", err)
	}
	// API Priority and Fairness's mandatory and suggested configuration
	// (kube-apiserver's priority-and-fairness-config-producer hook).
	if err := apfconfig.Ensure(ctx, loopback.FlowcontrolV1()); err != nil {
		return fmt.Errorf("flowcontrol configuration: %w", err)
	}
	// The aggregation layer: whom extension API servers trust
	// (kube-apiserver's cluster-authentication-trust controller), and the
	// proxy to them.
	if err := publishAuthentication(ctx, loopback, ca.CertPEM, fp); err != nil {
		return fmt.Errorf("%s ConfigMap: %w", AuthenticationConfigMap, err)
	}
	if err := api.SetAggregation(ctx, rc, fp.certPEM, fp.keyPEM); err != nil {
		return fmt.Errorf("aggregation layer: %w", err)
	}
	return nil
}

// writeAdminKubeconfig writes the admin kubeconfig: its appearance tells
// scripts and tests that the API serves a bootstrapped cluster.
func writeAdminKubeconfig(cfg Config, ca *pki.CA, url string) error {
	certPEM, keyPEM, err := ca.ClientCert(config.AdminUser, []string{config.MastersGroup})
	if err != nil {
		return err
	}
	if err := pki.WriteKubeconfig(cfg.WriteKubeconfig, cfg.KubeconfigMode, url, ca.CertPEM, certPEM, keyPEM); err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}
	return nil
}

// loopbackFor is the address in-process clients dial: the bind address if
// specific, else loopback.
func loopbackFor(bind string) string {
	if ip := net.ParseIP(bind); ip != nil && !ip.IsUnspecified() {
		return bind
	}
	return "127.0.0.1"
}
