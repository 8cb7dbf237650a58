package prober

import (
	"context"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
)

// Runtime is what a pod's probes need from the container runtime: exec
// checks, and stopping a container whose startup or liveness probe
// failed (*runtime.Runtime implements it).
type Runtime interface {
	Execer
	StopContainer(ctx context.Context, id string, grace time.Duration) error
}

// Manager runs one pod's startup, liveness and readiness probes: one
// goroutine per probe of each running container instance. Results are
// kept per container ID, so a restarted container starts unready again.
type Manager struct {
	ctx      context.Context // the pod worker's: probes end with it
	runtime  Runtime
	recorder record.EventRecorder // nil drops the events
	changed  func()               // a result changed or a container was killed: the pod needs a sync

	mu     sync.Mutex
	active map[string]context.CancelFunc // running probes by container ID
	ready  map[string]bool
	start  map[string]bool // startup probe passed (or none)
}

// NewManager builds the prober of one pod. changed is called (from probe
// goroutines) whenever the pod's status or containers may need another
// look.
func NewManager(ctx context.Context, rt Runtime, recorder record.EventRecorder, changed func()) *Manager {
	return &Manager{ctx: ctx, runtime: rt, recorder: recorder, changed: changed,
		active: map[string]context.CancelFunc{}, ready: map[string]bool{}, start: map[string]bool{}}
}

// StopAll stops every probe (the pod is terminating or gone).
func (m *Manager) StopAll() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, cancel := range m.active {
		cancel()
		delete(m.active, id)
	}
}

// Sync starts probes for the running container instances (by container
// ID) and stops those of instances that are gone or no longer running.
// podIP is where httpGet and tcpSocket probes without a host go.
func (m *Manager) Sync(pod *corev1.Pod, podIP string, running map[string]*corev1.Container) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, cancel := range m.active {
		if running[id] == nil {
			cancel()
			delete(m.active, id)
			delete(m.ready, id)
			delete(m.start, id)
		}
	}
	for id, c := range running {
		if _, ok := m.active[id]; ok {
			continue
		}
		ctx, cancel := context.WithCancel(m.ctx)
		m.active[id] = cancel
		m.start[id] = c.StartupProbe == nil
		m.ready[id] = c.ReadinessProbe == nil
		// A container this kubelet adopts after a restart keeps the
		// readiness the API last saw for that same instance, so restarting
		// kelp never takes running pods out of their Services.
		// Sidecars (restartable init containers) are probed too; their
		// statuses are among the init containers'.
		for _, cs := range append(slices.Clone(pod.Status.ContainerStatuses), pod.Status.InitContainerStatuses...) {
			if cs.Name == c.Name && cs.ContainerID == "containerd://"+id {
				m.ready[id] = m.ready[id] || cs.Ready
				m.start[id] = m.start[id] || (cs.Started != nil && *cs.Started)
			}
		}
		go m.runContainer(ctx, pod, Target{Container: c, ID: id, PodIP: podIP})
	}
}

// Ready reports the readiness of a running container instance: its
// readiness probe passed (or it has none) and its startup probe passed.
func (m *Manager) Ready(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ready[id] && m.start[id]
}

// Started reports whether a running container instance's startup probe
// passed (or it has none).
func (m *Manager) Started(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.start[id]
}

func (m *Manager) set(results map[string]bool, id string, v bool) {
	m.mu.Lock()
	changed := results[id] != v
	results[id] = v
	m.mu.Unlock()
	if changed {
		m.changed()
	}
}

func (m *Manager) event(pod *corev1.Pod, typ, reason, format string, args ...any) {
	if m.recorder != nil {
		m.recorder.Eventf(pod, typ, reason, format, args...)
	}
}

func (m *Manager) runContainer(ctx context.Context, pod *corev1.Pod, t Target) {
	c := t.Container
	if c.StartupProbe != nil {
		if !m.loop(ctx, pod, t, c.StartupProbe, "Startup", func(ok bool) bool {
			if ok {
				m.set(m.start, t.ID, true)
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
			m.loop(ctx, pod, t, c.ReadinessProbe, "Readiness", func(ok bool) bool { m.set(m.ready, t.ID, ok); return false })
		}()
	}
	if c.LivenessProbe != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.loop(ctx, pod, t, c.LivenessProbe, "Liveness", func(bool) bool { return false })
		}()
	}
	wg.Wait()
}

// loop runs one probe with its timings and thresholds until ctx ends or
// report returns true. A startup or liveness probe that crosses its
// failure threshold kills the container (the restart policy decides the
// rest); it returns false then.
func (m *Manager) loop(ctx context.Context, pod *corev1.Pod, t Target, probe *corev1.Probe, kind string, report func(bool) bool) bool {
	period := seconds(probe.PeriodSeconds, 10)
	timeout := seconds(probe.TimeoutSeconds, 1)
	success := int(max(probe.SuccessThreshold, 1))
	failure := int(max(probe.FailureThreshold, 1))
	select {
	case <-ctx.Done():
		return false
	case <-time.After(time.Duration(probe.InitialDelaySeconds) * time.Second):
	}
	okRun, failRun := 0, 0
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		checkCtx, cancel := context.WithTimeout(ctx, timeout)
		err := Check(checkCtx, m.runtime, t, probe.ProbeHandler)
		cancel()
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
			m.event(pod, corev1.EventTypeWarning, "Unhealthy", "%s probe failed: %v", kind, err)
			if failRun >= failure {
				if kind == "Readiness" {
					report(false)
				} else {
					m.event(pod, corev1.EventTypeNormal, "Killing", "Container %s failed %s probe, will be restarted", t.Container.Name, lower(kind))
					grace := GracePeriod(pod)
					if probe.TerminationGracePeriodSeconds != nil {
						grace = time.Duration(*probe.TerminationGracePeriodSeconds) * time.Second
					}
					_ = m.runtime.StopContainer(context.Background(), t.ID, grace)
					m.changed()
					return false
				}
			}
		}
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
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
