// Package server is the kubelet's HTTPS endpoint (:10250), which the API
// server proxies pods/log, pods/exec, pods/attach and pods/portforward
// to: containerLogs, exec and attach over the WebSocket channel protocol,
// and port-forward over SPDY. It finds pods and containers through the
// Pods interface, runs commands through Runtime and enters pod network
// namespaces through Network; it never sees the kubelet itself.
package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream/wsstream"

	"github.com/kelp-project/kelp/config"
	"github.com/kelp-project/kelp/runtime"
)

// APIServerClientName is the identity the API server uses towards
// kubelets (its client certificate's CN), as upstream's
// kube-apiserver-kubelet-client. The server issues it from the same
// constant.
const APIServerClientName = config.APIServerKubeletClientUser

// Pods finds what a request names among the pods this kubelet runs.
// Their errors are meant for the client, which gets them as 400 Bad
// Request, except where a NotFound API error is said to mean 404.
type Pods interface {
	// Container is the instance of a pod's container that a request
	// means: the latest, or with previous the one before it.
	Container(ctx context.Context, namespace, pod, container string, previous bool) (Container, error)
	// Sandbox is the network namespace a pod running here was given; ""
	// for a hostNetwork pod. A NotFound API error means there is no such
	// pod.
	Sandbox(namespace, pod string) (netnsPath string, err error)
}

// Container is one instance of a pod's container.
type Container struct {
	ID      string // the runtime's container ID
	LogPath string // its CRI-format log file
}

// Runtime is what the endpoint needs from the container runtime
// (*runtime.Runtime implements it).
type Runtime interface {
	Exec(ctx context.Context, id string, cmd []string, stdin io.Reader, stdout, stderr io.Writer, tty bool) (int, error)
	ContainerStatus(ctx context.Context, id string) (runtime.ContainerStatus, error)
}

// Network enters a pod's network namespace (the kubelet's Network
// implements it).
type Network interface {
	InNetNS(netnsPath string, fn func() error) error
}

// Config is the endpoint's identity and whom it trusts.
type Config struct {
	NodeName, NodeIP string // in the self-signed serving certificate
	// ClientCA is the PEM bundle client certificates are verified with
	// (the cluster CA).
	ClientCA []byte
	// ServingCertFile and ServingKeyFile, if set, are the serving
	// certificate (one the cluster CA signed at join); otherwise the
	// endpoint makes a self-signed one.
	ServingCertFile, ServingKeyFile string
}

// Server is the kubelet's HTTPS endpoint.
type Server struct {
	cfg     Config
	pods    Pods
	runtime Runtime
	network Network
}

// New builds the endpoint; Serve runs it.
func New(cfg Config, pods Pods, rt Runtime, network Network) *Server {
	return &Server{cfg: cfg, pods: pods, runtime: rt, network: network}
}

// Serve answers on ln until ctx ends. Clients must present a certificate
// of the cluster CA with the API server's identity or system:masters. The
// serving certificate is the configured one, or self-signed, as upstream's
// kubelet makes by default.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	var cert tls.Certificate
	var err error
	if s.cfg.ServingCertFile != "" {
		cert, err = tls.LoadX509KeyPair(s.cfg.ServingCertFile, s.cfg.ServingKeyFile)
	} else {
		cert, err = selfSignedCert(s.cfg.NodeName, s.cfg.NodeIP)
	}
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(s.cfg.ClientCA) {
		return fmt.Errorf("kubelet: no client CA to verify the API server with")
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux.HandleFunc("GET /containerLogs/{ns}/{pod}/{container}", authorized(s.containerLogs))
	mux.HandleFunc("/exec/{ns}/{pod}/{container}", authorized(s.exec))
	mux.HandleFunc("/portForward/{ns}/{pod}", authorized(s.portForward))
	mux.HandleFunc("/attach/{ns}/{pod}/{container}", authorized(s.attach))
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 30 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.VerifyClientCertIfGiven,
			ClientCAs: pool, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}},
	}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	err = srv.ServeTLS(ln, "", "")
	if err == http.ErrServerClosed {
		return nil
	}
	return err
}

func authorized(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		c := r.TLS.VerifiedChains[0][0]
		if c.Subject.CommonName != APIServerClientName && !slices.Contains(c.Subject.Organization, "system:masters") {
			http.Error(w, fmt.Sprintf("Forbidden (user=%s, verb=%s, path=%s)", c.Subject.CommonName, r.Method, r.URL.Path), http.StatusForbidden)
			return
		}
		h(w, r)
	}
}

func selfSignedCert(node, ip string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: node + "@" + strconv.FormatInt(time.Now().Unix(), 10)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(1, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{node},
	}
	if p := net.ParseIP(ip); p != nil {
		tmpl.IPAddresses = []net.IP{p}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// container is the instance of a container a request's path names.
func (s *Server) container(r *http.Request, previous bool) (Container, error) {
	return s.pods.Container(r.Context(), r.PathValue("ns"), r.PathValue("pod"), r.PathValue("container"), previous)
}

// exec runs a command in a container over the WebSocket channel protocol
// (openChannels).
func (s *Server) exec(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	cmd := q["command"]
	if len(cmd) == 0 {
		http.Error(w, "you must specify at least 1 command", http.StatusBadRequest)
		return
	}
	c, err := s.container(r, false)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	stdin, tty := boolParam(q, "stdin"), boolParam(q, "tty")
	ch, ok := openChannels(w, r, stdin)
	if !ok {
		return
	}
	defer ch.conn.Close()
	streams := ch.streams
	var in io.Reader
	if stdin {
		in = streams[0]
	}
	var stdout, stderr io.Writer = streams[1], streams[2]
	if tty {
		stderr = nil
	}
	code, err := s.runtime.Exec(r.Context(), c.ID, cmd, in, stdout, stderr, tty)
	status := metav1.Status{Status: metav1.StatusSuccess}
	switch {
	case err != nil:
		status = metav1.Status{Status: metav1.StatusFailure, Reason: metav1.StatusReasonInternalError, Message: err.Error()}
	case code != 0:
		status = metav1.Status{Status: metav1.StatusFailure, Reason: "NonZeroExitCode",
			Message: fmt.Sprintf("command terminated with non-zero exit code: error executing command %v, exit code %d", cmd, code),
			Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: "ExitCode", Message: strconv.Itoa(code)}}}}
	}
	ch.result(status)
}

// channels is an exec or attach stream upgraded to the WebSocket channel
// protocol: 0 stdin (when asked for), 1 stdout, 2 stderr, 3 the result,
// 4 terminal resizes, which are read and dropped (not applied).
type channels struct {
	conn     *wsstream.Conn
	streams  []io.ReadWriteCloser
	protocol string
}

// Every version of the channel protocol upstream's kubelet speaks: v4 and
// v5 (with its close signal, which wsstream handles) report the result as
// a JSON Status; the earlier ones (channel.k8s.io, which upstream's own
// WebSocket exec conformance spec asks for, and no protocol at all) report
// only a failure, as its message. The base64 forms encode each message.
var channelProtocols = map[string]struct{ binary, statusJSON bool }{
	"v5.channel.k8s.io": {true, true}, "v4.channel.k8s.io": {true, true}, "v4.base64.channel.k8s.io": {false, true},
	"channel.k8s.io": {true, false}, "base64.channel.k8s.io": {false, false}, "": {true, false},
}

func openChannels(w http.ResponseWriter, r *http.Request, stdin bool) (*channels, bool) {
	if !wsstream.IsWebSocketRequest(r) {
		http.Error(w, "kelp's kubelet speaks the WebSocket channel protocol (v5.channel.k8s.io and earlier) only; SPDY is not supported", http.StatusBadRequest)
		return nil, false
	}
	types := []wsstream.ChannelType{wsstream.ReadChannel, wsstream.WriteChannel, wsstream.WriteChannel, wsstream.WriteChannel, wsstream.ReadChannel}
	if !stdin {
		types[0] = wsstream.IgnoreChannel
	}
	protocols := map[string]wsstream.ChannelProtocolConfig{}
	for p, c := range channelProtocols {
		protocols[p] = wsstream.ChannelProtocolConfig{Binary: c.binary, Channels: types}
	}
	conn := wsstream.NewConn(protocols)
	conn.SetIdleTimeout(4 * time.Hour)
	protocol, streams, err := conn.Open(w, r)
	if err != nil {
		logrus.WithError(err).Debug("kubelet: stream upgrade")
		return nil, false
	}
	go func() { _, _ = io.Copy(io.Discard, streams[4]) }()
	return &channels{conn: conn, streams: streams, protocol: protocol}, true
}

// result writes the command's outcome on the error channel in the form
// the negotiated protocol expects.
func (c *channels) result(status metav1.Status) {
	if channelProtocols[c.protocol].statusJSON {
		b, _ := json.Marshal(status)
		_, _ = c.streams[3].Write(b)
		return
	}
	if status.Status != metav1.StatusSuccess {
		_, _ = c.streams[3].Write([]byte(status.Message))
	}
}

func boolParam(q map[string][]string, name string) bool {
	v := ""
	if l := q[name]; len(l) > 0 {
		v = strings.ToLower(l[0])
	}
	return v == "true" || v == "1"
}
