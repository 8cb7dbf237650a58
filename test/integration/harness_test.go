// Package integration runs a real `kelp server` (embedded etcd, random
// port, temporary data dir) and drives it with client-go and the embedded
// kubectl, exactly as a user would.
package integration

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

var kelpBin string

func TestMain(m *testing.M) {
	kelpBin = os.Getenv("KELP_BIN")
	if kelpBin == "" {
		dir, err := os.MkdirTemp("", "kelp-bin")
		if err != nil {
			panic(err)
		}
		kelpBin = filepath.Join(dir, "kelp")
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..")
		cmd := exec.Command("bash", filepath.Join(root, "scripts", "build.sh"))
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building kelp:", err)
			os.Exit(1)
		}
		kelpBin = filepath.Join(root, "bin", "kelp")
	}
	os.Exit(m.Run())
}

// testServer is one running `kelp server` process.
type testServer struct {
	t          testing.TB
	dataDir    string
	kubeconfig string
	cacheDir   string
	cmd        *exec.Cmd
	logs       *bytes.Buffer
	extraArgs  []string
	config     *rest.Config
	port       string // "0" until the first start picks one; kept across restarts
}

// startServer starts a server on a free port with a fresh data dir.
func startServer(t testing.TB, args ...string) *testServer {
	t.Helper()
	dir := t.TempDir()
	s := &testServer{t: t, dataDir: filepath.Join(dir, "data"), kubeconfig: filepath.Join(dir, "kubeconfig"),
		cacheDir: filepath.Join(dir, "kubectl-cache"), extraArgs: args, port: "0"}
	s.start()
	t.Cleanup(s.stop)
	return s
}

func (s *testServer) start() {
	s.t.Helper()
	_ = os.Remove(s.kubeconfig)
	args := append([]string{"server", "--data-dir", s.dataDir, "--https-listen-port", s.port,
		"--bind-address", "127.0.0.1", "--write-kubeconfig", s.kubeconfig, "--disable-agent"}, s.extraArgs...)
	s.logs = &bytes.Buffer{}
	s.cmd = exec.Command(kelpBin, args...)
	s.cmd.Stdout, s.cmd.Stderr = s.logs, s.logs
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("starting kelp server: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(s.kubeconfig); err == nil {
			break
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("kelp server wrote no kubeconfig within 30s; logs:\n%s", s.logs.String())
		}
		if s.cmd.ProcessState != nil {
			s.t.Fatalf("kelp server exited; logs:\n%s", s.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", s.kubeconfig)
	if err != nil {
		s.t.Fatalf("reading kubeconfig: %v", err)
	}
	cfg.QPS, cfg.Burst = 1000, 2000 // tests measure the server, not client-side throttling
	s.config = cfg
	s.port = cfg.Host[strings.LastIndex(cfg.Host, ":")+1:]
	s.waitReady()
}

func (s *testServer) waitReady() {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		body, code := s.raw("/readyz")
		if code == 200 && strings.TrimSpace(body) == "ok" {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.t.Fatalf("server not ready; logs:\n%s", s.logs.String())
}

// stop sends SIGTERM and waits, as an init system would.
func (s *testServer) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
		s.t.Errorf("kelp server did not stop within 20s of SIGTERM")
	}
	s.cmd = nil
}

func (s *testServer) restart() {
	s.t.Helper()
	s.stop()
	s.start()
}

func (s *testServer) client() *kubernetes.Clientset {
	s.t.Helper()
	cs, err := kubernetes.NewForConfig(s.config)
	if err != nil {
		s.t.Fatal(err)
	}
	return cs
}

// protoClient is a clientset that sends and accepts protobuf.
func (s *testServer) protoClient() *kubernetes.Clientset {
	s.t.Helper()
	cfg := rest.CopyConfig(s.config)
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		s.t.Fatal(err)
	}
	return cs
}

// raw GETs a path with no credentials at all.
func (s *testServer) raw(path string) (string, int) {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := c.Get(s.config.Host + path)
	if err != nil {
		return err.Error(), 0
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return b.String(), resp.StatusCode
}

// kubectl runs the embedded kubectl and returns its combined output.
func (s *testServer) kubectl(args ...string) (string, error) {
	return s.kubectlIn("", nil, args...)
}

func (s *testServer) kubectlIn(stdin string, env []string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	full := append([]string{"kubectl", "--kubeconfig", s.kubeconfig, "--cache-dir", s.cacheDir}, args...)
	cmd := exec.CommandContext(ctx, kelpBin, full...)
	cmd.Env = append(os.Environ(), env...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// mustKubectl fails the test when kubectl fails.
func (s *testServer) mustKubectl(args ...string) string {
	s.t.Helper()
	out, err := s.kubectl(args...)
	if err != nil {
		s.t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func mustRead(t testing.TB, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
