package server

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gorilla/websocket"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/kelp-project/kelp/runtime"
	"github.com/kelp-project/kelp/server/pki"
)

// fakePods has one pod, default/web, whose container c has two instances.
type fakePods struct{ dir string }

func (p *fakePods) Container(_ context.Context, ns, pod, container string, previous bool) (Container, error) {
	if ns != "default" || pod != "web" || container != "c" {
		return Container{}, fmt.Errorf("pod %q not found", pod)
	}
	if previous {
		return Container{ID: "c-0", LogPath: filepath.Join(p.dir, "0.log")}, nil
	}
	return Container{ID: "c-1", LogPath: filepath.Join(p.dir, "1.log")}, nil
}

func (p *fakePods) Sandbox(ns, pod string) (string, error) {
	if ns != "default" || pod != "web" {
		return "", apierrors.NewNotFound(corev1.Resource("pods"), pod)
	}
	return "", fmt.Errorf("pod %q has no running sandbox on this node", pod)
}

// fakeRuntime: every container has exited, so logs are never followed.
type fakeRuntime struct{}

// Exec echoes its command's arguments; "false" exits 1.
func (fakeRuntime) Exec(_ context.Context, _ string, cmd []string, _ io.Reader, stdout, _ io.Writer, _ bool) (int, error) {
	if len(cmd) > 0 && cmd[0] == "false" {
		return 1, nil
	}
	_, _ = io.WriteString(stdout, strings.Join(cmd[1:], " "))
	return 0, nil
}

func (fakeRuntime) ContainerStatus(_ context.Context, id string) (runtime.ContainerStatus, error) {
	return runtime.ContainerStatus{ID: id, State: runtime.StateExited}, nil
}

type noNetwork struct{}

func (noNetwork) InNetNS(string, func() error) error {
	return fmt.Errorf("no network namespaces in unit tests")
}

// endpoint serves a Server trusting ca on a loopback port and returns its
// base URL.
func endpoint(t *testing.T, ca *pki.CA, pods Pods) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- New(Config{NodeName: "node-1", NodeIP: "127.0.0.1", ClientCA: ca.CertPEM}, pods, fakeRuntime{}, noNetwork{}).Serve(ctx, ln)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return "https://" + ln.Addr().String()
}

func newCA(t *testing.T) *pki.CA {
	t.Helper()
	ca, err := pki.LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// client presents a certificate for user and groups issued by ca (none
// when ca is nil). The serving certificate is self-signed, so the client
// does not verify it, as the API server does not.
func client(t *testing.T, ca *pki.CA, user string, groups ...string) *http.Client {
	t.Helper()
	cfg := &tls.Config{InsecureSkipVerify: true}
	if ca != nil {
		certPEM, keyPEM, err := ca.ClientCert(user, groups)
		if err != nil {
			t.Fatal(err)
		}
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	tr := &http.Transport{TLSClientConfig: cfg}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func get(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func writeLog(t *testing.T, path string, lines ...string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestAuthentication(t *testing.T) {
	ca, other := newCA(t), newCA(t)
	pods := &fakePods{dir: t.TempDir()}
	writeLog(t, filepath.Join(pods.dir, "1.log"), "2026-01-02T03:04:05.000000001Z stdout F hello")
	base := endpoint(t, ca, pods)
	logs := base + "/containerLogs/default/web/c"

	if _, err := client(t, other, APIServerClientName).Get(logs); err == nil {
		t.Fatal("a client certificate of another CA was accepted")
	}
	if code, _ := get(t, client(t, nil, ""), logs); code != http.StatusUnauthorized {
		t.Fatalf("no client certificate: %d, want 401", code)
	}
	if code, body := get(t, client(t, ca, "alice", "developers"), logs); code != http.StatusForbidden || !strings.Contains(body, "user=alice") {
		t.Fatalf("another user of the CA: %d %q, want 403", code, body)
	}
	if code, body := get(t, client(t, ca, APIServerClientName), logs); code != http.StatusOK || body != "hello\n" {
		t.Fatalf("the API server: %d %q", code, body)
	}
	if code, _ := get(t, client(t, ca, "admin", "system:masters"), logs); code != http.StatusOK {
		t.Fatalf("system:masters: %d, want 200", code)
	}
	if code, body := get(t, client(t, nil, ""), base+"/healthz"); code != http.StatusOK || body != "ok" {
		t.Fatalf("healthz: %d %q", code, body)
	}
}

func TestContainerLogs(t *testing.T) {
	ca := newCA(t)
	pods := &fakePods{dir: t.TempDir()}
	writeLog(t, filepath.Join(pods.dir, "1.log"),
		"2026-01-02T03:04:05.000000001Z stdout F one",
		"2026-01-02T03:04:06.000000001Z stderr P tw",
		"2026-01-02T03:04:06.500000001Z stderr F o",
		"not a CRI line",
		"2026-01-02T03:04:07.000000001Z stdout F three")
	writeLog(t, filepath.Join(pods.dir, "0.log"), "2026-01-01T00:00:00Z stdout F before the restart")
	base := endpoint(t, ca, pods)
	c := client(t, ca, APIServerClientName)
	logs := base + "/containerLogs/default/web/c"

	for _, tc := range []struct{ query, want string }{
		{"", "one\ntwo\nthree\n"},
		{"?tailLines=2", "two\nthree\n"},
		{"?tailLines=0", ""},
		{"?limitBytes=5", "one\nt"},
		{"?sinceTime=2026-01-02T03:04:06Z", "two\nthree\n"},
		{"?timestamps=true&tailLines=1", "2026-01-02T03:04:07.000000001Z three\n"},
		{"?previous=true", "before the restart\n"},
		{"?follow=true", "one\ntwo\nthree\n"}, // the container has exited: follow ends
	} {
		if code, body := get(t, c, logs+tc.query); code != http.StatusOK || body != tc.want {
			t.Errorf("logs%s: %d %q, want %q", tc.query, code, body, tc.want)
		}
	}
	if code, body := get(t, c, base+"/containerLogs/default/nope/c"); code != http.StatusBadRequest || !strings.Contains(body, `pod "nope" not found`) {
		t.Errorf("unknown pod: %d %q, want 400 with the lookup's error", code, body)
	}
}

// A last line without a newline (printf's output: a P line that no F line
// follows) is shown, as upstream's kubelet shows it.
func TestContainerLogsEndingMidLine(t *testing.T) {
	ca := newCA(t)
	pods := &fakePods{dir: t.TempDir()}
	writeLog(t, filepath.Join(pods.dir, "1.log"),
		"2026-01-02T03:04:05.000000001Z stdout F one",
		"2026-01-02T03:04:06.000000001Z stdout P no-newline")
	base := endpoint(t, ca, pods)
	c := client(t, ca, APIServerClientName)
	for _, tc := range []struct{ query, want string }{
		{"", "one\nno-newline"},
		{"?timestamps=true", "2026-01-02T03:04:05.000000001Z one\n2026-01-02T03:04:06.000000001Z no-newline"},
		{"?follow=true", "one\nno-newline"},
	} {
		if code, body := get(t, c, base+"/containerLogs/default/web/c"+tc.query); code != http.StatusOK || body != tc.want {
			t.Errorf("logs%s: %d %q, want %q", tc.query, code, body, tc.want)
		}
	}
}

func TestPortForwardFindsTheSandboxFirst(t *testing.T) {
	ca := newCA(t)
	base := endpoint(t, ca, &fakePods{dir: t.TempDir()})
	c := client(t, ca, APIServerClientName)
	post := func(path string) (int, string) {
		resp, err := c.Post(base+path, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := post("/portForward/default/missing"); code != http.StatusNotFound {
		t.Errorf("missing pod: %d, want 404", code)
	}
	if code, body := post("/portForward/default/web"); code != http.StatusBadRequest || !strings.Contains(body, "no running sandbox") {
		t.Errorf("pod without a sandbox: %d %q, want 400", code, body)
	}
}

func TestExecNeedsACommandAndWebSockets(t *testing.T) {
	ca := newCA(t)
	base := endpoint(t, ca, &fakePods{dir: t.TempDir()})
	c := client(t, ca, APIServerClientName)
	if code, body := get(t, c, base+"/exec/default/web/c"); code != http.StatusBadRequest || !strings.Contains(body, "at least 1 command") {
		t.Errorf("exec without a command: %d %q", code, body)
	}
	if code, body := get(t, c, base+"/exec/default/web/c?command=ls"); code != http.StatusBadRequest || !strings.Contains(body, "WebSocket") {
		t.Errorf("exec without an upgrade: %d %q", code, body)
	}
}

// exec over each version of the channel protocol: stdout on channel 1, and
// the result on channel 3 as a JSON Status (v4, v5) or, before v4, nothing
// on success and the message on failure (upstream's WebSocket exec
// conformance spec asks channel.k8s.io and fails on any other channel).
func TestExecOverEveryChannelProtocol(t *testing.T) {
	ca := newCA(t)
	base := endpoint(t, ca, &fakePods{dir: t.TempDir()})
	tr := client(t, ca, APIServerClientName).Transport.(*http.Transport)
	run := func(protocol, command string) (stdout, result string) {
		d := websocket.Dialer{TLSClientConfig: tr.TLSClientConfig, Subprotocols: []string{protocol}}
		conn, _, err := d.Dial(strings.Replace(base, "https://", "wss://", 1)+"/exec/default/web/c?"+command+"&stdout=1", nil)
		if err != nil {
			t.Fatalf("%s: %v", protocol, err)
		}
		defer conn.Close()
		if conn.Subprotocol() != protocol {
			t.Fatalf("negotiated %q, want %q", conn.Subprotocol(), protocol)
		}
		for {
			_, msg, err := conn.ReadMessage()
			if err != nil {
				return
			}
			if strings.HasPrefix(protocol, "base64") || strings.Contains(protocol, ".base64.") {
				dec, err := base64.StdEncoding.DecodeString(string(msg[1:]))
				if err != nil {
					t.Fatalf("%s: %v", protocol, err)
				}
				msg = append([]byte{msg[0] - '0'}, dec...)
			}
			switch {
			case len(msg) > 0 && msg[0] == 1:
				stdout += string(msg[1:])
			case len(msg) > 1 && msg[0] == 3:
				result += string(msg[1:])
			}
		}
	}
	for _, p := range []string{"v5.channel.k8s.io", "v4.channel.k8s.io", "v4.base64.channel.k8s.io"} {
		if out, res := run(p, "command=echo&command=hi"); out != "hi" || res != `{"metadata":{},"status":"Success"}` {
			t.Errorf("%s: stdout %q, result %q", p, out, res)
		}
	}
	for _, p := range []string{"channel.k8s.io", "base64.channel.k8s.io"} {
		if out, res := run(p, "command=echo&command=hi"); out != "hi" || res != "" {
			t.Errorf("%s: stdout %q, result %q, want nothing on the error channel", p, out, res)
		}
		if _, res := run(p, "command=false"); !strings.Contains(res, "non-zero exit code") || strings.HasPrefix(res, "{") {
			t.Errorf("%s: failure result %q, want the message", p, res)
		}
	}
}
