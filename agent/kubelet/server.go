package kubelet

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
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream/wsstream"

	"github.com/kelp-project/kelp/config"
)

// APIServerClientName is the identity the API server uses towards
// kubelets (its client certificate's CN), as upstream's
// kube-apiserver-kubelet-client. The server issues it from the same
// constant.
const APIServerClientName = config.APIServerKubeletClientUser

// serve runs the kubelet's HTTPS endpoint: containerLogs and exec, which
// the API server proxies for `kubectl logs` and `kubectl exec`. Clients
// must present a certificate of the cluster CA with the API server's
// identity or system:masters. The serving certificate is self-signed, as
// upstream's kubelet makes by default.
func (k *Kubelet) serve(ctx context.Context, ln net.Listener) error {
	cert, err := selfSignedCert(k.cfg.NodeName, k.cfg.NodeIP)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(k.cfg.ClientCA) {
		return fmt.Errorf("kubelet: no client CA to verify the API server with")
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux.HandleFunc("GET /containerLogs/{ns}/{pod}/{container}", k.authorized(k.containerLogs))
	mux.HandleFunc("/exec/{ns}/{pod}/{container}", k.authorized(k.exec))
	mux.HandleFunc("/portForward/{ns}/{pod}", k.authorized(k.portForward))
	mux.HandleFunc("/attach/{ns}/{pod}/{container}", k.authorized(k.attach))
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

func (k *Kubelet) authorized(h http.HandlerFunc) http.HandlerFunc {
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

// podContainer finds the pod and the instance of its container that a
// request means (the latest, or the one before with previous=true).
func (k *Kubelet) podContainer(r *http.Request, previous bool) (*corev1.Pod, string, int, error) {
	ns, name, container := r.PathValue("ns"), r.PathValue("pod"), r.PathValue("container")
	pod, err := k.podLister.Pods(ns).Get(name)
	if err != nil {
		return nil, "", 0, fmt.Errorf("pod %q not found", name)
	}
	w := k.worker(pod)
	if w == nil {
		return nil, "", 0, fmt.Errorf("pod %q is not running on this node", name)
	}
	inst, err := w.instances(r.Context())
	if err != nil {
		return nil, "", 0, err
	}
	l := inst[container]
	if previous {
		if len(l) < 2 {
			return nil, "", 0, fmt.Errorf("previous terminated container %q in pod %q not found", container, name)
		}
		c := l[len(l)-2]
		return pod, c.ID, attempt(c), nil
	}
	if len(l) == 0 {
		return nil, "", 0, fmt.Errorf("container %q in pod %q is waiting to start", container, name)
	}
	c := l[len(l)-1]
	return pod, c.ID, attempt(c), nil
}

func (k *Kubelet) worker(pod *corev1.Pod) *podWorker {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.workers[pod.UID]
}

// exec runs a command in a container over the WebSocket channel protocol
// (openChannels).
func (k *Kubelet) exec(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	cmd := q["command"]
	if len(cmd) == 0 {
		http.Error(w, "you must specify at least 1 command", http.StatusBadRequest)
		return
	}
	_, id, _, err := k.podContainer(r, false)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	stdin, tty := boolParam(q, "stdin"), boolParam(q, "tty")
	conn, streams, ok := openChannels(w, r, stdin)
	if !ok {
		return
	}
	defer conn.Close()
	var in io.Reader
	if stdin {
		in = streams[0]
	}
	var stdout, stderr io.Writer = streams[1], streams[2]
	if tty {
		stderr = nil
	}
	code, err := k.runtime.Exec(r.Context(), id, cmd, in, stdout, stderr, tty)
	status := metav1.Status{Status: metav1.StatusSuccess}
	switch {
	case err != nil:
		status = metav1.Status{Status: metav1.StatusFailure, Reason: metav1.StatusReasonInternalError, Message: err.Error()}
	case code != 0:
		status = metav1.Status{Status: metav1.StatusFailure, Reason: "NonZeroExitCode",
			Message: fmt.Sprintf("command terminated with non-zero exit code: error executing command %v, exit code %d", cmd, code),
			Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: "ExitCode", Message: strconv.Itoa(code)}}}}
	}
	b, _ := json.Marshal(status)
	_, _ = streams[3].Write(b)
}

// openChannels upgrades an exec or attach request to the WebSocket channel
// protocol (v5.channel.k8s.io and earlier): 0 stdin (when asked for), 1
// stdout, 2 stderr, 3 the result as a Status, 4 terminal resizes, which
// are read and dropped (not applied).
func openChannels(w http.ResponseWriter, r *http.Request, stdin bool) (*wsstream.Conn, []io.ReadWriteCloser, bool) {
	if !wsstream.IsWebSocketRequest(r) {
		http.Error(w, "kelp's kubelet speaks the WebSocket channel protocol (v5.channel.k8s.io) only; SPDY is not supported", http.StatusBadRequest)
		return nil, nil, false
	}
	channels := []wsstream.ChannelType{wsstream.ReadChannel, wsstream.WriteChannel, wsstream.WriteChannel, wsstream.WriteChannel, wsstream.ReadChannel}
	if !stdin {
		channels[0] = wsstream.IgnoreChannel
	}
	protocols := map[string]wsstream.ChannelProtocolConfig{}
	for _, p := range []string{"v5.channel.k8s.io", "v4.channel.k8s.io"} {
		protocols[p] = wsstream.ChannelProtocolConfig{Binary: true, Channels: channels}
	}
	conn := wsstream.NewConn(protocols)
	conn.SetIdleTimeout(4 * time.Hour)
	_, streams, err := conn.Open(w, r)
	if err != nil {
		logrus.WithError(err).Debug("kubelet: stream upgrade")
		return nil, nil, false
	}
	go func() { _, _ = io.Copy(io.Discard, streams[4]) }()
	return conn, streams, true
}

func boolParam(q map[string][]string, name string) bool {
	v := ""
	if l := q[name]; len(l) > 0 {
		v = strings.ToLower(l[0])
	}
	return v == "true" || v == "1"
}
