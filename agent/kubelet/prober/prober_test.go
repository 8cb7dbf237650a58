package prober

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
)

// fakeRuntime answers exec with a fixed exit code, writing to stdout and
// stderr from two goroutines as the real runtime's streams do.
type fakeRuntime struct {
	mu    sync.Mutex
	code  int
	execs [][]string
	stops map[string]time.Duration
}

func (r *fakeRuntime) Exec(_ context.Context, id string, cmd []string, _ io.Reader, stdout, stderr io.Writer, _ bool) (int, error) {
	r.mu.Lock()
	r.execs = append(r.execs, cmd)
	code := r.code
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, w := range []io.Writer{stdout, stderr} {
		wg.Add(1)
		go func() { defer wg.Done(); fmt.Fprintf(w, "out of %s\n", id) }()
	}
	wg.Wait()
	return code, nil
}

func (r *fakeRuntime) StopContainer(_ context.Context, id string, grace time.Duration) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stops == nil {
		r.stops = map[string]time.Duration{}
	}
	r.stops[id] = grace
	return nil
}

func (r *fakeRuntime) stopped(id string) (time.Duration, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	g, ok := r.stops[id]
	return g, ok
}

// server is an HTTP endpoint on 127.0.0.1 that answers /ok with 200,
// /redirect with a redirect to /ok and anything else with 500; it keeps
// the last request's headers.
func server(t *testing.T) (port int, last func() http.Header) {
	t.Helper()
	var mu sync.Mutex
	var hdr http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hdr = r.Header.Clone()
		mu.Unlock()
		switch r.URL.Path {
		case "/ok":
		case "/redirect":
			http.Redirect(w, r, "/ok", http.StatusFound)
		default:
			http.Error(w, "no", http.StatusInternalServerError)
		}
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	port, _ = strconv.Atoi(u.Port())
	return port, func() http.Header { mu.Lock(); defer mu.Unlock(); return hdr }
}

func target(port int) Target {
	return Target{ID: "c1", PodIP: "127.0.0.1",
		Container: &corev1.Container{Name: "app", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: int32(port)}}}}
}

func TestCheckHTTPGet(t *testing.T) {
	port, last := server(t)
	tg := target(port)
	get := func(path string, p intstr.IntOrString) error {
		return Check(t.Context(), nil, tg, corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: p,
			HTTPHeaders: []corev1.HTTPHeader{{Name: "X-Probe", Value: "yes"}}}})
	}
	if err := get("/ok", intstr.FromInt32(int32(port))); err != nil {
		t.Fatalf("200: %v", err)
	}
	if h := last(); h.Get("User-Agent") != "kube-probe/1.37" || h.Get("X-Probe") != "yes" {
		t.Fatalf("request headers %v", h)
	}
	if err := get("ok", intstr.FromString("http")); err != nil {
		t.Fatalf("named port, path without a slash: %v", err)
	}
	if err := get("/redirect", intstr.FromString("http")); err != nil {
		t.Fatalf("redirect to 200: %v", err)
	}
	if err := get("/fail", intstr.FromString("http")); err == nil || !strings.Contains(err.Error(), "statuscode: 500") {
		t.Fatalf("500: %v, want a status code failure", err)
	}
	if err := get("/ok", intstr.FromString("nope")); err == nil || !strings.Contains(err.Error(), `couldn't find port "nope"`) {
		t.Fatalf("unknown port name: %v", err)
	}
}

func TestCheckTCPSocket(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	tcp := corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("http")}}
	if err := Check(t.Context(), nil, target(port), tcp); err != nil {
		t.Fatalf("open port: %v", err)
	}
	ln.Close()
	if err := Check(t.Context(), nil, target(port), tcp); err == nil || !strings.Contains(err.Error(), "dial tcp") {
		t.Fatalf("closed port: %v, want a dial error", err)
	}
}

func TestCheckExec(t *testing.T) {
	rt := &fakeRuntime{}
	exec := corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"cat", "/tmp/healthy"}}}
	if err := Check(t.Context(), rt, target(0), exec); err != nil {
		t.Fatalf("exit 0: %v", err)
	}
	rt.code = 2
	err := Check(t.Context(), rt, target(0), exec)
	if err == nil || !strings.Contains(err.Error(), "exited with 2") || strings.Count(err.Error(), "out of c1") != 2 {
		t.Fatalf("exit 2: %v, want the code and both streams' output", err)
	}
}

// A gRPC probe asks the standard health service for the probe's service:
// SERVING passes, NOT_SERVING and an unknown service fail, as does a port
// with nothing listening.
func TestGRPCCheck(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus("down", healthpb.HealthCheckResponse_NOT_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	port := int32(ln.Addr().(*net.TCPAddr).Port)
	tg := Target{PodIP: "127.0.0.1"}
	check := func(service *string) error {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		return Check(ctx, &fakeRuntime{}, tg, corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: port, Service: service}})
	}
	if err := check(nil); err != nil {
		t.Errorf("a SERVING server: %v", err)
	}
	down := "down"
	if err := check(&down); err == nil || !strings.Contains(err.Error(), "NOT_SERVING") {
		t.Errorf("a NOT_SERVING service: %v", err)
	}
	unknown := "nope"
	if err := check(&unknown); err == nil {
		t.Error("an unknown service passed")
	}
	srv.Stop()
	if err := check(nil); err == nil {
		t.Error("a stopped server passed")
	}
}

func TestRunHook(t *testing.T) {
	rt := &fakeRuntime{}
	if err := RunHook(t.Context(), rt, target(0), &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}); err != nil || len(rt.execs) != 1 {
		t.Fatalf("exec hook: %v, %d execs", err, len(rt.execs))
	}
	port, _ := server(t)
	if err := RunHook(t.Context(), rt, target(port), &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/fail", Port: intstr.FromString("http")}}); err == nil {
		t.Fatal("an httpGet hook answered 500 passed")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := RunHook(ctx, rt, target(0), &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 30}}); err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("a sleep hook past its deadline: %v after %v", err, time.Since(start))
	}
	if err := RunHook(t.Context(), rt, target(0), &corev1.LifecycleHandler{TCPSocket: &corev1.TCPSocketAction{}}); err == nil {
		t.Fatal("a tcpSocket hook passed")
	}
}

func TestGracePeriod(t *testing.T) {
	pod := &corev1.Pod{}
	if g := GracePeriod(pod); g != 30*time.Second {
		t.Fatalf("default %v", g)
	}
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](5)
	if g := GracePeriod(pod); g != 5*time.Second {
		t.Fatalf("spec %v", g)
	}
	pod.DeletionGracePeriodSeconds = ptr.To[int64](1)
	if g := GracePeriod(pod); g != time.Second {
		t.Fatalf("deletion %v", g)
	}
}

// eventually waits for cond, the way a pod worker would be kicked.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func newManager(t *testing.T, rt Runtime) (*Manager, chan struct{}, *record.FakeRecorder) {
	changed := make(chan struct{}, 100)
	events := record.NewFakeRecorder(100)
	m := NewManager(t.Context(), rt, events, func() { changed <- struct{}{} })
	t.Cleanup(m.StopAll)
	return m, changed, events
}

func TestManagerReadinessFollowsTheProbe(t *testing.T) {
	port, _ := server(t)
	c := target(port).Container
	c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ok", Port: intstr.FromString("http")}}}
	m, changed, _ := newManager(t, &fakeRuntime{})
	pod := &corev1.Pod{}
	m.Sync(pod, "127.0.0.1", map[string]*corev1.Container{"c1": c})
	if m.Ready("c1") {
		t.Fatal("ready before the probe ran")
	}
	if !m.Started("c1") {
		t.Fatal("a container without a startup probe is not started")
	}
	eventually(t, "readiness", func() bool { return m.Ready("c1") })
	eventually(t, "the worker told of the change", func() bool { return len(changed) > 0 })
	// The instance is gone: its results go with it.
	m.Sync(pod, "127.0.0.1", nil)
	if m.Ready("c1") || m.Started("c1") {
		t.Fatal("a gone instance is still ready")
	}
}

func TestManagerAdoptedInstanceKeepsItsReadiness(t *testing.T) {
	rt := &fakeRuntime{code: 1} // the probe would fail
	c := &corev1.Container{Name: "app", ReadinessProbe: &corev1.Probe{InitialDelaySeconds: 60,
		ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"false"}}}}}
	pod := &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
		{Name: "app", ContainerID: "containerd://c1", Ready: true, Started: ptr.To(true)},
		{Name: "app", ContainerID: "containerd://old", Ready: true},
	}}}
	m, _, _ := newManager(t, rt)
	m.Sync(pod, "127.0.0.1", map[string]*corev1.Container{"c1": c, "c2": c})
	if !m.Ready("c1") {
		t.Fatal("the adopted instance lost the readiness the API saw")
	}
	if m.Ready("c2") {
		t.Fatal("another instance took the adopted one's readiness")
	}
}

func TestManagerLivenessFailureKillsTheContainer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	c := target(port).Container
	// Three failures a second apart.
	c.LivenessProbe = &corev1.Probe{PeriodSeconds: 1, FailureThreshold: 3, TerminationGracePeriodSeconds: ptr.To[int64](3),
		ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("http")}}}
	rt := &fakeRuntime{}
	m, changed, events := newManager(t, rt)
	m.Sync(&corev1.Pod{}, "127.0.0.1", map[string]*corev1.Container{"c1": c})
	eventually(t, "the kill", func() bool { _, ok := rt.stopped("c1"); return ok })
	if g, _ := rt.stopped("c1"); g != 3*time.Second {
		t.Fatalf("killed with grace %v, want the probe's 3s", g)
	}
	eventually(t, "the kick", func() bool { return len(changed) > 0 })
	var got []string
	for len(events.Events) > 0 {
		got = append(got, <-events.Events)
	}
	if len(got) != 4 || !strings.HasPrefix(got[0], "Warning Unhealthy Liveness probe failed: dial tcp") ||
		got[3] != "Normal Killing Container app failed liveness probe, will be restarted" {
		t.Fatalf("events %q", got)
	}
}

// TestManagerFailureThresholdOne: upstream's minimum is 1, so one failed
// liveness check kills the container.
func TestManagerFailureThresholdOne(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	c := target(port).Container
	c.LivenessProbe = &corev1.Probe{PeriodSeconds: 1, FailureThreshold: 1,
		ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("http")}}}
	rt := &fakeRuntime{}
	m, _, events := newManager(t, rt)
	m.Sync(&corev1.Pod{}, "127.0.0.1", map[string]*corev1.Container{"c1": c})
	eventually(t, "the kill", func() bool { _, ok := rt.stopped("c1"); return ok })
	var got []string
	for len(events.Events) > 0 {
		got = append(got, <-events.Events)
	}
	if len(got) != 2 || !strings.HasPrefix(got[0], "Warning Unhealthy") || !strings.HasPrefix(got[1], "Normal Killing") {
		t.Fatalf("events %q, want one Unhealthy then Killing", got)
	}
}

func TestManagerStartupProbeGatesReadiness(t *testing.T) {
	rt := &fakeRuntime{code: 1}
	c := &corev1.Container{Name: "app", StartupProbe: &corev1.Probe{PeriodSeconds: 1, FailureThreshold: 100,
		ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"started"}}}}}
	m, _, _ := newManager(t, rt)
	m.Sync(&corev1.Pod{}, "", map[string]*corev1.Container{"c1": c})
	eventually(t, "a startup check", func() bool { rt.mu.Lock(); defer rt.mu.Unlock(); return len(rt.execs) > 0 })
	if m.Started("c1") || m.Ready("c1") {
		t.Fatal("started or ready while the startup probe fails")
	}
	rt.mu.Lock()
	rt.code = 0
	rt.mu.Unlock()
	eventually(t, "started", func() bool { return m.Started("c1") })
	if !m.Ready("c1") {
		t.Fatal("not ready after starting, without a readiness probe")
	}
}
