package bench

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

var (
	binOnce sync.Once
	binPath string // the copy of kelp that the benchmarks start
	binDir  string
	binErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// kelpBinary returns a private copy of the kelp binary, building it with
// scripts/build.sh first unless KELP_BIN names one. Only benchmarks call it, so
// plain `go test` never builds anything.
//
// The copy matters twice: a freshly linked binary shows a higher RSS than an
// installed one, and the copy is named "kbench", in a directory whose name
// has no "kelp" either, so that someone's `pkill kelp` or
// `pkill -f 'kelp server'` on the same machine (for their own leftover dev
// servers) does not kill a benchmark's server half-way.
func kelpBinary(tb testing.TB) string {
	tb.Helper()
	binOnce.Do(func() {
		src := os.Getenv("KELP_BIN")
		if src == "" {
			_, file, _, _ := runtime.Caller(0)
			root := filepath.Join(filepath.Dir(file), "..", "..")
			cmd := exec.Command("bash", filepath.Join(root, "scripts", "build.sh"))
			cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
			if binErr = cmd.Run(); binErr != nil {
				binErr = fmt.Errorf("scripts/build.sh: %w", binErr)
				return
			}
			src = filepath.Join(root, "bin", "kelp")
		}
		if binDir, binErr = os.MkdirTemp("", "benchbin-"); binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "kbench")
		binErr = copyFile(src, binPath)
	})
	if binErr != nil {
		tb.Fatalf("kelp binary: %v", binErr)
	}
	return binPath
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// server is one `kelp server` process.
type server struct {
	tb         testing.TB
	bin        string
	dataDir    string
	kubeconfig string
	logPath    string
	cmd        *exec.Cmd
	logFile    *os.File
	config     *rest.Config
	port       string // "0" until the first start picks one; kept across restarts
	extraArgs  []string
	withAgent  bool // run the node agent (containerd, real pods) too
	exited     chan struct{}
}

// newServer prepares (but does not start) a server with a fresh data dir.
func newServer(tb testing.TB) *server {
	tb.Helper()
	dir := tb.TempDir()
	s := &server{tb: tb, bin: kelpBinary(tb), dataDir: filepath.Join(dir, "data"),
		kubeconfig: filepath.Join(dir, "kubeconfig"), logPath: filepath.Join(dir, "kelp.log"), port: "0"}
	tb.Cleanup(func() { s.stop() })
	return s
}

// startServer starts a server with a fresh data dir and waits for /readyz.
// args are added to the `kelp server` command line.
func startServer(tb testing.TB, args ...string) *server {
	tb.Helper()
	s := newServer(tb)
	s.extraArgs = args
	s.start()
	return s
}

// start launches the process, waits until it is ready, and returns the
// time from just before the exec to the first /readyz that answered "ok".
func (s *server) start() time.Duration {
	s.tb.Helper()
	_ = os.Remove(s.kubeconfig)
	logFile, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		s.tb.Fatal(err)
	}
	s.logFile = logFile
	args := []string{"server", "--data-dir", s.dataDir, "--https-listen-port", s.port,
		"--bind-address", "127.0.0.1", "--write-kubeconfig", s.kubeconfig}
	if !s.withAgent {
		args = append(args, "--disable-agent")
	}
	args = append(args, s.extraArgs...)
	s.cmd = exec.Command(s.bin, args...)
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	s.exited = make(chan struct{})
	t0 := time.Now()
	if err := s.cmd.Start(); err != nil {
		s.tb.Fatalf("starting kelp server: %v", err)
	}
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(s.cmd, s.exited)

	// Poll tightly: the cold-start benchmark measures in milliseconds.
	deadline := t0.Add(60 * time.Second)
	for {
		if _, err := os.Stat(s.kubeconfig); err == nil {
			cfg, err := clientcmd.BuildConfigFromFlags("", s.kubeconfig)
			if err == nil && cfg.Host != "" {
				s.setConfig(cfg)
				break
			}
		}
		s.checkAlive(deadline, "wrote no kubeconfig")
		time.Sleep(2 * time.Millisecond)
	}
	hc := insecureClient()
	defer hc.CloseIdleConnections()
	for {
		if body, code := get(hc, s.config.Host+"/readyz"); code == http.StatusOK && strings.TrimSpace(body) == "ok" {
			return time.Since(t0)
		}
		s.checkAlive(deadline, "never became ready")
		time.Sleep(5 * time.Millisecond)
	}
}

func (s *server) setConfig(cfg *rest.Config) {
	// The benchmarks measure the server, not client-side throttling: a
	// negative QPS gives the clients no rate limiter at all.
	cfg.QPS, cfg.Burst = -1, 0
	cfg.Timeout = 60 * time.Second
	s.config = cfg
	s.port = cfg.Host[strings.LastIndex(cfg.Host, ":")+1:]
}

func (s *server) checkAlive(deadline time.Time, what string) {
	s.tb.Helper()
	select {
	case <-s.exited:
		s.tb.Fatalf("kelp server exited (%v); log tail:\n%s", s.cmd.ProcessState, s.logTail())
	default:
	}
	if time.Now().After(deadline) {
		s.tb.Fatalf("kelp server %s within 60s; log tail:\n%s", what, s.logTail())
	}
}

// stop sends SIGTERM and waits for the process to exit; it returns how
// long that took.
func (s *server) stop() time.Duration {
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	t0 := time.Now()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
		s.tb.Errorf("kelp server did not stop within 20s of SIGTERM")
	}
	d := time.Since(t0)
	s.cmd = nil
	_ = s.logFile.Close()
	return d
}

func (s *server) pid() int { return s.cmd.Process.Pid }

func (s *server) client() *kubernetes.Clientset {
	s.tb.Helper()
	cs, err := kubernetes.NewForConfig(s.config)
	if err != nil {
		s.tb.Fatal(err)
	}
	return cs
}

// logTail returns the last few KB of the server's log.
func (s *server) logTail() string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return err.Error()
	}
	if len(b) > 8192 {
		b = b[len(b)-8192:]
	}
	return string(b)
}

func insecureClient() *http.Client {
	return &http.Client{Timeout: 5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
}

// get GETs url without credentials and returns the body and status code
// (0 when the request failed).
func get(c *http.Client, url string) (string, int) {
	resp, err := c.Get(url)
	if err != nil {
		return err.Error(), 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b), resp.StatusCode
}

// procStatus reads the named kB fields (VmRSS, RssAnon, ...) of
// /proc/<pid>/status, in bytes.
func procStatus(pid int, fields ...string) (map[string]int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	want := map[string]bool{}
	for _, k := range fields {
		want[k] = true
	}
	out := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || !want[k] {
			continue
		}
		num, unit, _ := strings.Cut(strings.TrimSpace(v), " ")
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil || unit != "kB" {
			return nil, fmt.Errorf("/proc/%d/status: bad %s line %q", pid, k, sc.Text())
		}
		out[k] = n * 1024
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	for _, k := range fields {
		if _, ok := out[k]; !ok {
			return nil, fmt.Errorf("/proc/%d/status has no %s", pid, k)
		}
	}
	return out, nil
}

// ctxFor returns a context that ends when the benchmark does, or after d.
func ctxFor(tb testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	tb.Cleanup(cancel)
	return ctx
}
