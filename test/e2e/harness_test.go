// Package e2e runs real pods: a `kelp server` with its node agent, a
// supervised containerd, runc, the netlink bridge and real network
// namespaces on this machine. It needs root; without it the tests fail
// (they never skip). Servers run one at a time: the node network (cni0,
// 10.42.0.0/24) is the host's.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kelp-project/kelp/test/images"
	"github.com/kelp-project/kelp/test/nodelock"
)

var (
	kelpBin   string
	imageTars []string
	// one cluster at a time: they share the host's node network.
	clusterMu sync.Mutex
)

func TestMain(m *testing.M) {
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "e2e: these tests run real containers and need root (run scripts/test.sh as root)")
		os.Exit(1)
	}
	for _, bin := range []string{"containerd", "runc"} {
		if _, err := exec.LookPath(bin); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: %s is not installed (apt-get install containerd runc)\n", bin)
			os.Exit(1)
		}
	}
	// Another checkout's e2e run, a node benchmark or the conformance
	// harness would share the host's node network with ours: wait for it.
	if _, err := nodelock.Acquire(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	_, file, _, _ := goruntime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	kelpBin = os.Getenv("KELP_BIN")
	if kelpBin == "" {
		cmd := exec.Command("bash", filepath.Join(root, "scripts", "build.sh"))
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: building kelp:", err)
			os.Exit(1)
		}
		kelpBin = filepath.Join(root, "bin", "kelp")
	}
	var err error
	if imageTars, err = images.Build(filepath.Join(root, "bin", "images")); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building the test images:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// cluster is one `kelp server` with its agent, every path and port its own.
type cluster struct {
	t          *testing.T
	dataDir    string
	runDir     string
	cgroupRoot string
	kubeconfig string
	logPath    string
	cmd        *exec.Cmd
	exited     chan struct{}
	config     *rest.Config
	cs         *kubernetes.Clientset
	port       string
}

func startCluster(t *testing.T, extra ...string) *cluster {
	t.Helper()
	clusterMu.Lock()
	id := randomID()
	dir := t.TempDir()
	c := &cluster{t: t, dataDir: filepath.Join(dir, "data"), runDir: "/run/kelp-e2e-" + id,
		cgroupRoot: "/kelp-e2e-" + id, kubeconfig: filepath.Join(dir, "kubeconfig"), logPath: filepath.Join(dir, "kelp.log"), port: "0"}
	imagesDir := filepath.Join(c.dataDir, "agent", "images")
	if err := os.MkdirAll(imagesDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tar := range imageTars {
		if err := os.Link(tar, filepath.Join(imagesDir, filepath.Base(tar))); err != nil {
			copyFile(t, tar, filepath.Join(imagesDir, filepath.Base(tar)))
		}
	}
	t.Cleanup(func() {
		c.stop()
		out, err := exec.Command(kelpBin, c.agentArgs("killall")...).CombinedOutput()
		if err != nil {
			t.Errorf("kelp killall: %v\n%s", err, out)
		}
		if t.Failed() {
			t.Logf("kelp server log (tail):\n%s", c.logTail(80))
		}
		clusterMu.Unlock()
	})
	c.start(extra...)
	c.waitNodeReady()
	return c
}

func (c *cluster) agentArgs(cmd string) []string {
	return []string{cmd, "--data-dir", c.dataDir, "--run-dir", c.runDir, "--cgroup-root", c.cgroupRoot,
		"--pod-log-dir", filepath.Join(c.dataDir, "pod-logs")}
}

func (c *cluster) start(extra ...string) {
	c.t.Helper()
	_ = os.Remove(c.kubeconfig)
	// The API listens on every address (random port), so the kubernetes
	// Service reaches it from pods, as on a real node.
	args := append(c.agentArgs("server"), "--https-listen-port", c.port,
		"--write-kubeconfig", c.kubeconfig, "--kubelet-port", "0")
	args = append(args, extra...)
	logFile, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	c.cmd = exec.Command(kelpBin, args...)
	c.cmd.Stdout, c.cmd.Stderr = logFile, logFile
	c.exited = make(chan struct{})
	if err := c.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); logFile.Close(); close(done) }(c.cmd, c.exited)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig); err == nil && cfg.Host != "" {
			cfg.QPS, cfg.Burst = 100, 200
			c.config = cfg
			c.port = cfg.Host[strings.LastIndex(cfg.Host, ":")+1:]
			break
		}
		select {
		case <-c.exited:
			c.t.Fatalf("kelp server exited:\n%s", c.logTail(40))
		default:
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("kelp server wrote no kubeconfig in 30s:\n%s", c.logTail(40))
		}
		time.Sleep(20 * time.Millisecond)
	}
	cs, err := kubernetes.NewForConfig(c.config)
	if err != nil {
		c.t.Fatal(err)
	}
	c.cs = cs
}

// stop sends SIGTERM and waits: the containers keep running.
func (c *cluster) stop() {
	if c.cmd == nil {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
		c.t.Errorf("kelp server did not stop within 30s of SIGTERM")
	}
	c.cmd = nil
}

func (c *cluster) logTail(n int) string {
	b, _ := os.ReadFile(c.logPath)
	lines := strings.Split(string(b), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func (c *cluster) node() *corev1.Node {
	c.t.Helper()
	l, err := c.cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil || len(l.Items) != 1 {
		c.t.Fatalf("nodes: %v (%d)", err, len(l.Items))
	}
	return &l.Items[0]
}

func (c *cluster) waitNodeReady() {
	c.t.Helper()
	c.waitFor(60*time.Second, "the node Ready", func() bool {
		l, err := c.cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
		return err == nil && len(l.Items) == 1 && nodeReady(&l.Items[0])
	})
}

func (c *cluster) waitFor(limit time.Duration, what string, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// kubectl runs the embedded kubectl against the cluster.
func (c *cluster) kubectl(args ...string) (string, error) {
	return c.kubectlIn("", args...)
}

func (c *cluster) kubectlIn(stdin string, args ...string) (string, error) {
	cmd := exec.Command(kelpBin, append([]string{"kubectl", "--kubeconfig", c.kubeconfig}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECACHEDIR="+filepath.Join(c.dataDir, "kubectl-cache"))
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func (c *cluster) mustKubectl(args ...string) string {
	c.t.Helper()
	out, err := c.kubectl(args...)
	if err != nil {
		c.t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// portForward runs `kubectl port-forward target :port` until the test
// ends and returns the local address it listens on.
func (c *cluster) portForward(target string, port int) string {
	c.t.Helper()
	pf := exec.Command(kelpBin, "kubectl", "--kubeconfig", c.kubeconfig, "port-forward", target, fmt.Sprintf(":%d", port))
	out, err := pf.StdoutPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	pf.Stderr = pf.Stdout
	if err := pf.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { _ = pf.Process.Kill(); _ = pf.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "Forwarding from 127.0.0.1:") {
		c.t.Fatalf("port-forward %s: %v %q", target, err, line)
	}
	return strings.Fields(strings.TrimPrefix(line, "Forwarding from "))[0]
}

func (c *cluster) pod(name string) *corev1.Pod {
	c.t.Helper()
	p, err := c.cs.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	return p
}

func (c *cluster) livePods(selector string) []corev1.Pod {
	c.t.Helper()
	l, err := c.cs.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		c.t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// httpClient opens a new connection per request: the proxy picks a
// backend per connection, so reusing one would pin every request.
var httpClient = &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}}

func httpGet(url string) (string, error) { return getWith(httpClient, url) }

func getWith(client *http.Client, url string) (string, error) {
	resp, err := client.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func randomID() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func copyFile(t *testing.T, src, dst string) {
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
