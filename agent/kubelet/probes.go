package kubelet

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kelp-project/kelp/runtime"
)

// prober runs a pod's startup, liveness and readiness probes: one
// goroutine per probe of each running container instance. Results are
// kept per container ID, so a restarted container starts unready again.
type prober struct {
	w  *podWorker
	mu sync.Mutex
	// running probes by container ID.
	active map[string]context.CancelFunc
	ready  map[string]bool
	start  map[string]bool // startup probe passed (or none)
}

func newProber(w *podWorker) *prober {
	return &prober{w: w, active: map[string]context.CancelFunc{}, ready: map[string]bool{}, start: map[string]bool{}}
}

func (p *prober) stopAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, cancel := range p.active {
		cancel()
		delete(p.active, id)
	}
}

// sync starts probes for running containers and stops those of
// containers that are gone or no longer running.
func (p *prober) sync(pod *corev1.Pod, inst map[string][]runtime.ContainerStatus) {
	running := map[string]*corev1.Container{}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if last := latest(inst[c.Name]); last != nil && last.State == runtime.StateRunning {
			running[last.ID] = c
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, cancel := range p.active {
		if running[id] == nil {
			cancel()
			delete(p.active, id)
			delete(p.ready, id)
			delete(p.start, id)
		}
	}
	for id, c := range running {
		if _, ok := p.active[id]; ok {
			continue
		}
		ctx, cancel := context.WithCancel(p.w.ctx)
		p.active[id] = cancel
		p.start[id] = c.StartupProbe == nil
		p.ready[id] = c.ReadinessProbe == nil
		// A container this kubelet adopts after a restart keeps the
		// readiness the API last saw for that same instance, so restarting
		// kelp never takes running pods out of their Services.
		for _, cs := range pod.Status.ContainerStatuses {
			if cs.Name == c.Name && cs.ContainerID == "containerd://"+id {
				p.ready[id] = p.ready[id] || cs.Ready
				p.start[id] = p.start[id] || (cs.Started != nil && *cs.Started)
			}
		}
		go p.runContainer(ctx, pod, c, id)
	}
}

// isReady reports the readiness of a running container instance: its
// readiness probe passed (or it has none) and its startup probe passed.
func (p *prober) isReady(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ready[id] && p.start[id]
}

func (p *prober) isStarted(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.start[id]
}

func (p *prober) set(m map[string]bool, id string, v bool) {
	p.mu.Lock()
	changed := m[id] != v
	m[id] = v
	p.mu.Unlock()
	if changed {
		p.w.kick()
	}
}

func (p *prober) runContainer(ctx context.Context, pod *corev1.Pod, c *corev1.Container, id string) {
	if c.StartupProbe != nil {
		if !p.loop(ctx, pod, c, id, c.StartupProbe, "Startup", func(ok bool) bool {
			if ok {
				p.set(p.start, id, true)
			}
			return ok
		}) {
			return
		}
	}
	var wg sync.WaitGroup
	if c.ReadinessProbe != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.loop(ctx, pod, c, id, c.ReadinessProbe, "Readiness", func(ok bool) bool { p.set(p.ready, id, ok); return false })
		}()
	}
	if c.LivenessProbe != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.loop(ctx, pod, c, id, c.LivenessProbe, "Liveness", func(bool) bool { return false })
		}()
	}
	wg.Wait()
}

// loop runs one probe with its timings and thresholds until ctx ends or
// report returns true. A startup or liveness probe that crosses its
// failure threshold kills the container (the restart policy decides the
// rest); it returns false then.
func (p *prober) loop(ctx context.Context, pod *corev1.Pod, c *corev1.Container, id string, probe *corev1.Probe, kind string, report func(bool) bool) bool {
	period := seconds(probe.PeriodSeconds, 10)
	timeout := seconds(probe.TimeoutSeconds, 1)
	success := int(max(probe.SuccessThreshold, 1))
	failure := int(max(probe.FailureThreshold, 3))
	select {
	case <-ctx.Done():
		return false
	case <-time.After(time.Duration(probe.InitialDelaySeconds) * time.Second):
	}
	okRun, failRun := 0, 0
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		err := p.w.probeOnce(ctx, pod, c, id, probe, timeout)
		if ctx.Err() != nil {
			return false
		}
		if err == nil {
			okRun, failRun = okRun+1, 0
			if okRun >= success && report(true) {
				return true
			}
		} else {
			okRun, failRun = 0, failRun+1
			p.w.k.event(pod, corev1.EventTypeWarning, "Unhealthy", "%s probe failed: %v", kind, err)
			if failRun >= failure {
				if kind == "Readiness" {
					report(false)
				} else {
					p.w.k.event(pod, corev1.EventTypeNormal, "Killing", "Container %s failed %s probe, will be restarted", c.Name, lower(kind))
					grace := gracePeriod(pod)
					if probe.TerminationGracePeriodSeconds != nil {
						grace = time.Duration(*probe.TerminationGracePeriodSeconds) * time.Second
					}
					_ = p.w.k.runtime.StopContainer(context.Background(), id, grace)
					p.w.kick()
					return false
				}
			}
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}

func lower(s string) string {
	if s == "" {
		return s
	}
	return string(s[0]+'a'-'A') + s[1:]
}

func seconds(v int32, def int) time.Duration {
	if v <= 0 {
		return time.Duration(def) * time.Second
	}
	return time.Duration(v) * time.Second
}

// probeOnce runs one check of a probe or lifecycle handler against the
// container: nil means success.
func (w *podWorker) probeOnce(ctx context.Context, pod *corev1.Pod, c *corev1.Container, id string, probe *corev1.Probe, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	h := probe.ProbeHandler
	switch {
	case h.Exec != nil:
		return w.execCheck(ctx, id, h.Exec.Command)
	case h.HTTPGet != nil:
		return w.httpGet(ctx, c, h.HTTPGet)
	case h.TCPSocket != nil:
		host := w.host(h.TCPSocket.Host)
		port, err := resolvePort(h.TCPSocket.Port, c)
		if err != nil {
			return err
		}
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return fmt.Errorf("dial tcp %s:%d: %v", host, port, err)
		}
		return conn.Close()
	case h.GRPC != nil:
		return fmt.Errorf("gRPC probes are not supported by kelp yet")
	}
	return fmt.Errorf("probe has no handler")
}

// execCheck runs an exec probe or hook: success is exit code 0; the
// output goes into the error message. stdout and stderr are written
// concurrently, so they share one locked buffer.
func (w *podWorker) execCheck(ctx context.Context, id string, cmd []string) error {
	var out lockedBuffer
	code, err := w.k.runtime.Exec(ctx, id, cmd, nil, &out, &out, false)
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

func (w *podWorker) host(h string) string {
	if h != "" {
		return h
	}
	return w.podIP.String()
}

// probeClient never follows redirects to other hosts' pages and never
// reuses connections, as upstream's prober.
var probeClient = &http.Client{
	Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil},
	CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) >= 10 {
			return http.ErrUseLastResponse
		}
		return nil
	},
}

func (w *podWorker) httpGet(ctx context.Context, c *corev1.Container, g *corev1.HTTPGetAction) error {
	port, err := resolvePort(g.Port, c)
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
	url := fmt.Sprintf("%s://%s%s", scheme, net.JoinHostPort(w.host(g.Host), strconv.Itoa(port)), path)
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

// runHook runs a postStart or preStop handler: exec, httpGet, or sleep.
func (w *podWorker) runHook(ctx context.Context, pod *corev1.Pod, c *corev1.Container, id string, h *corev1.LifecycleHandler) error {
	switch {
	case h.Sleep != nil:
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(h.Sleep.Seconds) * time.Second):
			return nil
		}
	case h.Exec != nil:
		return w.execCheck(ctx, id, h.Exec.Command)
	case h.HTTPGet != nil:
		return w.httpGet(ctx, c, h.HTTPGet)
	case h.TCPSocket != nil:
		return fmt.Errorf("tcpSocket lifecycle handlers are deprecated and not supported")
	}
	return nil
}
