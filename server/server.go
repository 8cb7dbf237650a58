// Package server assembles `kelp server`: embedded etcd, the API server
// on HTTPS, and the admin kubeconfig. Controllers, the scheduler and the
// local agent join here as they are built, each as an API client.
package server

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/kelp-project/kelp/agent"
	"github.com/kelp-project/kelp/agent/kubelet"
	"github.com/kelp-project/kelp/embedded/etcd"
	"github.com/kelp-project/kelp/server/apiserver"
	"github.com/kelp-project/kelp/server/apiserver/auth"
	"github.com/kelp-project/kelp/server/controllers/nodelifecycle"
	"github.com/kelp-project/kelp/server/pki"
	"github.com/kelp-project/kelp/server/scheduler"
)

// Config holds the flags of `kelp server`.
type Config struct {
	DataDir            string
	BindAddress        string
	HTTPSPort          int
	AdvertiseAddress   string
	WriteKubeconfig    string
	KubeconfigMode     os.FileMode
	ClusterCIDR        string
	ServiceCIDR        string
	ServiceNodePorts   string
	ClusterDNS         string
	ClusterDomain      string
	DisableAgent       bool
	DisableScheduler   bool // as k3s: another scheduler (or none) is used
	DisableControllers bool // as k3s --disable-controller-manager
	NodeName           string
	CompactionInterval time.Duration
	// DefaultNotReadyTolerationSeconds and DefaultUnreachableTolerationSeconds
	// are the tolerations added to every pod (upstream: 300 s).
	DefaultNotReadyTolerationSeconds    int64
	DefaultUnreachableTolerationSeconds int64
	// NodeLifecycle holds the node lifecycle controller's timings and
	// eviction rates; SchedulerBackoff the scheduler's retry delays.
	NodeLifecycle    nodelifecycle.Config
	SchedulerBackoff scheduler.Backoff
	// Agent holds the local agent's own settings (paths, runtime); the
	// rest is filled in from the server's.
	Agent agent.Config
}

// Run serves until ctx is cancelled, then shuts down cleanly: in-flight
// requests finish, watches end, and etcd flushes and closes.
func Run(ctx context.Context, cfg Config) error {
	start := time.Now()
	if cfg.NodeName == "" {
		h, err := os.Hostname()
		if err != nil {
			return err
		}
		cfg.NodeName = strings.ToLower(h)
	}
	if cfg.AdvertiseAddress == "" {
		cfg.AdvertiseAddress = DefaultAddress(cfg.BindAddress)
	}
	serverDir := filepath.Join(cfg.DataDir, "server")
	tlsDir := filepath.Join(serverDir, "tls")
	ca, err := pki.LoadOrCreateCA(tlsDir)
	if err != nil {
		return fmt.Errorf("cluster CA: %w", err)
	}
	token, err := loadOrCreateToken(filepath.Join(serverDir, "token"))
	if err != nil {
		return err
	}

	e, err := etcd.Start(ctx, filepath.Join(serverDir, "db"))
	if err != nil {
		return err
	}
	defer e.Close()
	logrus.Debugf("etcd ready after %s", time.Since(start))

	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.BindAddress, strconv.Itoa(cfg.HTTPSPort)))
	if err != nil {
		return fmt.Errorf("API server listen: %w", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port

	apiCtx, stopAPI := context.WithCancel(context.WithoutCancel(ctx))
	defer stopAPI()
	kcPEM, kkPEM, err := ca.ClientCert(kubelet.APIServerClientName, nil)
	if err != nil {
		ln.Close()
		return err
	}
	kubeletClient, err := tls.X509KeyPair(kcPEM, kkPEM)
	if err != nil {
		ln.Close()
		return err
	}
	api, err := apiserver.New(apiCtx, apiserver.Config{
		Etcd:               e.Client,
		Authenticators:     []auth.Authenticator{auth.TokenAuthenticator{token: {Name: "kelp-admin", Groups: []string{"system:masters"}}}},
		ServiceCIDR:        cfg.ServiceCIDR,
		NodePortRange:      cfg.ServiceNodePorts,
		PublicAddress:      cfg.AdvertiseAddress,
		PublicPort:         port,
		CompactionInterval: cfg.CompactionInterval,

		DefaultNotReadyTolerationSeconds:    cfg.DefaultNotReadyTolerationSeconds,
		DefaultUnreachableTolerationSeconds: cfg.DefaultUnreachableTolerationSeconds,
		KubeletClientCert:                   &kubeletClient,
	})
	if err != nil {
		ln.Close()
		return err
	}

	hostname, _ := os.Hostname()
	dnsNames := []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc." + cfg.ClusterDomain}
	for _, n := range []string{hostname, cfg.NodeName} {
		if n != "" && !contains(dnsNames, n) {
			dnsNames = append(dnsNames, n)
		}
	}
	ips := append(hostIPs(), net.ParseIP(cfg.AdvertiseAddress), net.ParseIP(firstServiceIP(cfg.ServiceCIDR)))
	certFile, keyFile, err := ca.ServingCert(tlsDir, "serving-kube-apiserver", dnsNames, ips)
	if err != nil {
		ln.Close()
		return err
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		ln.Close()
		return err
	}
	var inflight atomic.Int64
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			inflight.Add(1)
			defer inflight.Add(-1)
			api.ServeHTTP(w, r)
		}),
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{cert},
			ClientAuth:   tls.VerifyClientCertIfGiven,
			ClientCAs:    ca.Pool(),
			MinVersion:   tls.VersionTLS12,
			NextProtos:   []string{"h2", "http/1.1"},
		},
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          logrusErrorLog(),
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.ServeTLS(ln, "", "") }()

	if err := api.Bootstrap(ctx); err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	certPEM, keyPEM, err := ca.ClientCert("kelp-admin", []string{"system:masters"})
	if err != nil {
		return err
	}
	server := "https://" + net.JoinHostPort(loopbackFor(cfg.BindAddress), strconv.Itoa(port))
	if err := pki.WriteKubeconfig(cfg.WriteKubeconfig, cfg.KubeconfigMode, server, ca.CertPEM, certPEM, keyPEM); err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}
	loopsCtx, stopLoops := context.WithCancel(ctx)
	defer stopLoops()
	waitLoops, err := startControlLoops(loopsCtx, cfg, ca, server)
	if err != nil {
		return fmt.Errorf("control loops: %w", err)
	}
	logrus.Infof("kelp server ready in %s: API at %s, kubeconfig %s", time.Since(start).Round(time.Millisecond), server, cfg.WriteKubeconfig)
	agentDone := make(chan struct{})
	if cfg.DisableAgent {
		close(agentDone)
	} else {
		rc, err := ca.RESTConfig(server, "system:node:"+cfg.NodeName, []string{"system:nodes"})
		if err != nil {
			return err
		}
		ac := cfg.Agent
		ac.DataDir, ac.NodeName, ac.ControlPlane = cfg.DataDir, cfg.NodeName, true
		ac.ClusterCIDR, ac.ClusterDNS, ac.ClusterDomain = cfg.ClusterCIDR, cfg.ClusterDNS, cfg.ClusterDomain
		if ac.NodeIP == "" {
			ac.NodeIP = cfg.AdvertiseAddress
		}
		go func() {
			defer close(agentDone)
			if err := agent.Run(loopsCtx, ac, rc); err != nil {
				logrus.WithError(err).Error("agent stopped")
			}
		}()
	}

	select {
	case <-ctx.Done():
	case err := <-serveErr:
		if !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	}
	logrus.Info("shutting down")
	// The loops and the agent stop first, while the API still answers, so
	// they can release their leader Leases for a standby server to take
	// over. The agent leaves containerd and the pods running.
	stopLoops()
	<-agentDone
	loopsDone := make(chan struct{})
	go func() { waitLoops(); close(loopsDone) }()
	select {
	case <-loopsDone:
	case <-time.After(3 * time.Second):
		logrus.Warn("control loops did not stop within 3s")
	}
	stopAPI() // ends watches, so only real requests are left to finish
	// Shutdown stops the listener and says GOAWAY, but it also waits for
	// idle HTTP/2 connections to be closed by their clients (a second or
	// more for the in-process ones). Requests in flight are what must
	// finish; once they have, the connections are closed outright.
	go func() { _ = srv.Shutdown(context.Background()) }()
	for deadline := time.Now().Add(10 * time.Second); inflight.Load() > 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	_ = srv.Close()
	return nil
}

func loadOrCreateToken(path string) (string, error) {
	if data, err := os.ReadFile(path); err == nil && len(strings.TrimSpace(string(data))) > 0 {
		return strings.TrimSpace(string(data)), nil
	}
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	token := hex.EncodeToString(b)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	return token, os.WriteFile(path, []byte(token+"\n"), 0o600)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// hostIPs are the addresses the serving certificate must cover.
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

// DefaultAddress picks the address advertised to clients and used as a
// node's InternalIP: the bind address if specific and routable, else the
// host's first non-loopback IPv4 address (endpoints may not point at
// loopback).
func DefaultAddress(bind string) string {
	if ip := net.ParseIP(bind); ip != nil && !ip.IsUnspecified() && !ip.IsLoopback() {
		return bind
	}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return n.IP.String()
		}
	}
	return "127.0.0.1"
}

func loopbackFor(bind string) string {
	if ip := net.ParseIP(bind); ip != nil && !ip.IsUnspecified() {
		return bind
	}
	return "127.0.0.1"
}

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
