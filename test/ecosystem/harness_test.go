package ecosystem

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

var kelpBin string

// TestMain needs KELP_BIN: this module cannot build kelp itself (it is
// outside kelp's module), and a run without a server must fail loudly
// rather than pass with nothing tested.
func TestMain(m *testing.M) {
	kelpBin = os.Getenv("KELP_BIN")
	if kelpBin == "" {
		fmt.Fprintln(os.Stderr, "KELP_BIN must name a built kelp binary (scripts/test.sh sets it)")
		os.Exit(1)
	}
	if _, err := os.Stat(kelpBin); err != nil {
		fmt.Fprintln(os.Stderr, "KELP_BIN:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// syncBuffer collects the server's output; the process writes it from
// its own goroutines while a failing test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// testServer is one running `kelp server` (embedded etcd, a free port, a
// temporary data dir, no agent), as test/integration starts it.
type testServer struct {
	t          testing.TB
	kubeconfig string
	cmd        *exec.Cmd
	logs       *syncBuffer
	config     *rest.Config
}

func startServer(t testing.TB) *testServer {
	t.Helper()
	dir := t.TempDir()
	s := &testServer{t: t, kubeconfig: filepath.Join(dir, "kubeconfig"), logs: &syncBuffer{}}
	s.cmd = exec.Command(kelpBin, "server", "--data-dir", filepath.Join(dir, "data"), "--https-listen-port", "0",
		"--bind-address", "127.0.0.1", "--write-kubeconfig", s.kubeconfig, "--disable-agent")
	s.cmd.Stdout, s.cmd.Stderr = s.logs, s.logs
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("starting kelp server: %v", err)
	}
	t.Cleanup(s.stop)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(s.kubeconfig); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("kelp server wrote no kubeconfig within 30s; logs:\n%s", s.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", s.kubeconfig)
	if err != nil {
		t.Fatalf("reading kubeconfig: %v", err)
	}
	cfg.QPS, cfg.Burst = 1000, 2000
	s.config = cfg
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	for time.Now().Before(deadline.Add(30 * time.Second)) {
		if resp, err := hc.Get(cfg.Host + "/readyz"); err == nil {
			var b bytes.Buffer
			_, _ = b.ReadFrom(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 && strings.TrimSpace(b.String()) == "ok" {
				return s
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("kelp server not ready; logs:\n%s", s.logs.String())
	return nil
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

func (s *testServer) client() *kubernetes.Clientset {
	s.t.Helper()
	cs, err := kubernetes.NewForConfig(s.config)
	if err != nil {
		s.t.Fatal(err)
	}
	return cs
}

func (s *testServer) crdClient() *apiextensionsclient.Clientset {
	s.t.Helper()
	c, err := apiextensionsclient.NewForConfig(s.config)
	if err != nil {
		s.t.Fatal(err)
	}
	return c
}

// waitEstablished waits until the named CRD is Established (kelp's target
// is 1 s; 10 s leaves room on a loaded machine).
func (s *testServer) waitEstablished(ctx context.Context, name string) {
	s.t.Helper()
	eventually(s.t, 10*time.Second, "CRD "+name+" Established", func() (bool, string) {
		got, err := s.crdClient().ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range got.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, ""
			}
		}
		return false, fmt.Sprintf("conditions %+v", got.Status.Conditions)
	})
}

// eventually polls cond until it holds, failing the test with cond's last
// word after timeout.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %s", what, timeout, why)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx
}
