// Package prober runs a pod's startup, liveness and readiness probes and
// the checks behind its postStart and preStop hooks: exec in the
// container, HTTP GET, TCP connect and gRPC health checks against the
// pod's IP. It knows the
// container runtime only through the small interfaces below, and the pod
// worker only through the callback it is built with.
package prober

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Execer runs a command in a container (*runtime.Runtime implements it).
type Execer interface {
	Exec(ctx context.Context, id string, cmd []string, stdin io.Reader, stdout, stderr io.Writer, tty bool) (int, error)
}

// Target is the container instance a check runs against.
type Target struct {
	Container *corev1.Container // its ports resolve a probe's named port
	ID        string            // the runtime's container ID, for exec
	PodIP     string            // where httpGet and tcpSocket go when they name no host
}

// Check runs one check of a probe's handler against the container: nil
// means success. ctx carries the probe's timeout.
func Check(ctx context.Context, rt Execer, t Target, h corev1.ProbeHandler) error {
	switch {
	case h.Exec != nil:
		return execCheck(ctx, rt, t.ID, h.Exec.Command)
	case h.HTTPGet != nil:
		return httpGet(ctx, t, h.HTTPGet)
	case h.TCPSocket != nil:
		host := t.host(h.TCPSocket.Host)
		port, err := resolvePort(h.TCPSocket.Port, t.Container)
		if err != nil {
			return err
		}
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return fmt.Errorf("dial tcp %s:%d: %v", host, port, err)
		}
		return conn.Close()
	case h.GRPC != nil:
		return grpcCheck(ctx, t, h.GRPC.Port, h.GRPC.Service)
	}
	return fmt.Errorf("probe has no handler")
}

// RunHook runs a postStart or preStop handler: exec, httpGet, or sleep.
// ctx bounds it (a preStop hook ends at the pod's grace deadline).
func RunHook(ctx context.Context, rt Execer, t Target, h *corev1.LifecycleHandler) error {
	switch {
	case h.Sleep != nil:
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(h.Sleep.Seconds) * time.Second):
			return nil
		}
	case h.Exec != nil:
		return execCheck(ctx, rt, t.ID, h.Exec.Command)
	case h.HTTPGet != nil:
		return httpGet(ctx, t, h.HTTPGet)
	case h.TCPSocket != nil:
		return fmt.Errorf("tcpSocket lifecycle handlers are deprecated and not supported")
	}
	return nil
}

// GracePeriod is how long a pod's containers get between their stop
// signal and SIGKILL: the deletion's grace period, else the spec's, else
// upstream's 30 s.
func GracePeriod(pod *corev1.Pod) time.Duration {
	if pod.DeletionGracePeriodSeconds != nil {
		return time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	}
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		return time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return 30 * time.Second
}

// execCheck runs an exec probe or hook: success is exit code 0; the
// output goes into the error message. stdout and stderr are written
// concurrently, so they share one locked buffer.
func execCheck(ctx context.Context, rt Execer, id string, cmd []string) error {
	var out lockedBuffer
	code, err := rt.Exec(ctx, id, cmd, nil, &out, &out, false)
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("command %q exited with %d: %s", cmd, code, bytes.TrimSpace(out.Bytes()))
	}
	return nil
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Bytes()
}

func (t Target) host(h string) string {
	if h != "" {
		return h
	}
	return t.PodIP
}

// probeClient never follows redirects to other hosts' pages and never
// reuses connections, as upstream's prober; an HTTPS probe does not verify
// the container's certificate (upstream's InsecureSkipVerify: pods serve
// certificates of their own CAs, as admission webhooks do).
var probeClient = &http.Client{
	Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
	CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) >= 10 {
			return http.ErrUseLastResponse
		}
		return nil
	},
}

func httpGet(ctx context.Context, t Target, g *corev1.HTTPGetAction) error {
	port, err := resolvePort(g.Port, t.Container)
	if err != nil {
		return err
	}
	scheme := "http"
	if g.Scheme == corev1.URISchemeHTTPS {
		scheme = "https"
	}
	path := g.Path
	if path == "" || path[0] != '/' {
		path = "/" + path
	}
	url := fmt.Sprintf("%s://%s%s", scheme, net.JoinHostPort(t.host(g.Host), strconv.Itoa(port)), path)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", "kube-probe/1.37")
	for _, h := range g.HTTPHeaders {
		req.Header.Add(h.Name, h.Value)
	}
	resp, err := probeClient.Do(req)
	if err != nil {
		return fmt.Errorf("Get %q: %v", url, err)
	}
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("HTTP probe failed with statuscode: %d", resp.StatusCode)
	}
	return nil
}

// resolvePort turns a probe's port (a number or a container port name)
// into a number.
func resolvePort(p intstr.IntOrString, c *corev1.Container) (int, error) {
	if p.Type == intstr.Int {
		return p.IntValue(), nil
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	if n, err := strconv.Atoi(p.StrVal); err == nil {
		return n, nil
	}
	return 0, fmt.Errorf("couldn't find port %q in container %q", p.StrVal, c.Name)
}
