package runtime

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/containerd/containerd"
	apievents "github.com/containerd/containerd/api/events"
	"github.com/containerd/containerd/errdefs"
	"github.com/containerd/containerd/events"
	"github.com/containerd/typeurl/v2"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc/connectivity"
)

// State is a container's lifecycle state as the kubelet sees it.
type State string

const (
	StateCreated State = "created"
	StateRunning State = "running"
	StateExited  State = "exited"
	StateUnknown State = "unknown"
)

// Reasons for an exited container, as upstream reports them.
const (
	ReasonCompleted = "Completed"
	ReasonError     = "Error"
	ReasonOOMKilled = "OOMKilled"
)

// ContainerStatus is one container's state.
type ContainerStatus struct {
	ID                               string
	Labels                           map[string]string
	State                            State
	ExitCode                         int32
	Reason                           string // "Completed" (exit 0), "Error", "OOMKilled"
	CreatedAt, StartedAt, FinishedAt time.Time
	Pid                              uint32
}

// watcher follows containerd's task events for one Runtime. Runtime's
// struct is owned by runtime.go, so watchers hang off a package map keyed
// by *Runtime; one is started lazily on first use.
type watcher struct {
	once  sync.Once
	exits chan string
	mu    sync.Mutex
	oom   map[string]bool // OOM seen while kelp watched; also persisted as a label
}

var watchers sync.Map // *Runtime → *watcher

func (r *Runtime) watcher() *watcher {
	w, _ := watchers.LoadOrStore(r, &watcher{exits: make(chan string, 1024), oom: map[string]bool{}})
	return w.(*watcher)
}

// watch starts the event loop once per Runtime.
func (r *Runtime) watch() *watcher {
	w := r.watcher()
	w.once.Do(func() {
		ready := make(chan struct{})
		go r.eventLoop(w, ready)
		// Wait briefly for the subscription, so an exit that follows
		// right after the first create/start is not missed.
		select {
		case <-ready:
		case <-time.After(2 * time.Second):
		}
	})
	return w
}

// Exits delivers IDs of containers whose task just exited (buffered, best
// effort: a full buffer drops; the kubelet resyncs anyway), and an empty
// ID each time the event stream is subscribed again after it broke
// (containerd restarted, say): exits may have been missed meanwhile, so
// the kubelet should look at every pod.
func (r *Runtime) Exits() <-chan string { return r.watch().exits }

// eventLoop subscribes to exit and OOM events, resubscribing after errors
// until the client connection is closed.
func (r *Runtime) eventLoop(w *watcher, ready chan struct{}) {
	signalled := false
	for {
		ctx, cancel := context.WithCancel(r.ctx(context.Background()))
		evs, errs := r.client.Subscribe(ctx, `topic=="/tasks/exit"`, `topic=="/tasks/oom"`)
		if !signalled {
			close(ready)
			signalled = true
		} else {
			select {
			case w.exits <- "":
			default:
			}
		}
		err := r.consume(ctx, w, evs, errs)
		cancel()
		if r.client.Conn().GetState() == connectivity.Shutdown {
			watchers.Delete(r)
			return
		}
		logrus.WithError(err).Debug("runtime: containerd event stream ended, resubscribing")
		time.Sleep(time.Second)
	}
}

func (r *Runtime) consume(ctx context.Context, w *watcher, evs <-chan *events.Envelope, errs <-chan error) error {
	for {
		select {
		case err := <-errs:
			return err
		case e := <-evs:
			if e == nil || e.Namespace != Namespace || e.Event == nil {
				continue
			}
			v, err := typeurl.UnmarshalAny(e.Event)
			if err != nil {
				continue
			}
			r.handleEvent(ctx, w, v)
		}
	}
}

func (r *Runtime) handleEvent(ctx context.Context, w *watcher, v interface{}) {
	switch ev := v.(type) {
	case *apievents.TaskOOM:
		w.mu.Lock()
		w.oom[ev.ContainerID] = true
		w.mu.Unlock()
		if c, err := r.client.LoadContainer(ctx, ev.ContainerID); err == nil {
			_, _ = c.SetLabels(ctx, map[string]string{labelOOM: "true"})
		}
	case *apievents.TaskExit:
		if ev.ID != ev.ContainerID { // an exec process, not the container
			return
		}
		select {
		case w.exits <- ev.ContainerID:
		default:
		}
	}
}

// forget drops what the watcher remembers about a removed container.
func (r *Runtime) forget(id string) {
	w := r.watcher()
	w.mu.Lock()
	delete(w.oom, id)
	w.mu.Unlock()
}

func (r *Runtime) oomSeen(id string) bool {
	w := r.watcher()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.oom[id]
}

// ContainerStatus reads the container and its task from containerd. A
// stopped task stays in containerd until RemoveContainer, so the exit code
// and time survive a kelp restart.
func (r *Runtime) ContainerStatus(ctx context.Context, id string) (ContainerStatus, error) {
	ctx = r.ctx(ctx)
	r.watch()
	c, err := r.load(ctx, id)
	if err != nil {
		return ContainerStatus{ID: id, State: StateUnknown}, err
	}
	return r.status(ctx, c)
}

// ListContainers returns the containers in kelp's namespace that carry
// all the given labels (every container for nil).
func (r *Runtime) ListContainers(ctx context.Context, labels map[string]string) ([]ContainerStatus, error) {
	ctx = r.ctx(ctx)
	r.watch()
	// containerd filters by label in its metadata store, so the per-
	// container task queries below are made only for the matches.
	var conds []string
	for k, v := range labels {
		conds = append(conds, fmt.Sprintf("labels.%q==%q", k, v))
	}
	var filters []string
	if len(conds) > 0 {
		filters = []string{strings.Join(conds, ",")}
	}
	cs, err := r.client.Containers(ctx, filters...)
	if err != nil {
		return nil, err
	}
	out := make([]ContainerStatus, 0, len(cs))
	for _, c := range cs {
		st, err := r.status(ctx, c)
		if errdefs.IsNotFound(err) || IsNotFound(err) {
			continue // removed meanwhile
		} else if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

func (r *Runtime) status(ctx context.Context, c containerd.Container) (ContainerStatus, error) {
	info, err := c.Info(ctx, containerd.WithoutRefreshedMetadata)
	if err != nil {
		return ContainerStatus{}, err
	}
	st := ContainerStatus{ID: c.ID(), Labels: userLabels(info.Labels), State: StateCreated, CreatedAt: info.CreatedAt}
	if t, err := time.Parse(time.RFC3339Nano, info.Labels[labelStartedAt]); err == nil {
		st.StartedAt = t
	}
	task, err := c.Task(ctx, nil)
	if errdefs.IsNotFound(err) {
		return st, nil // never started (or the task was deleted out of band)
	} else if err != nil {
		return st, err
	}
	ts, err := task.Status(ctx)
	if err != nil {
		st.State = StateUnknown
		return st, ignoreNotFound(err)
	}
	st.Pid = task.Pid()
	switch ts.Status {
	case containerd.Created:
		st.State = StateCreated
	case containerd.Running, containerd.Paused, containerd.Pausing:
		st.State = StateRunning
	case containerd.Stopped:
		st.State, st.Pid = StateExited, 0
		st.ExitCode, st.FinishedAt = int32(ts.ExitStatus), ts.ExitTime
		st.Reason = r.exitReason(c.ID(), info.Labels, st.ExitCode)
	default:
		st.State = StateUnknown
	}
	return st, nil
}

// exitReason: OOM if containerd told us (event, or the label it left), or
// if the container's memory cgroup counted an OOM kill (the cgroup lives
// until the task is deleted, so this also works after a kelp restart).
func (r *Runtime) exitReason(id string, labels map[string]string, code int32) string {
	if r.oomSeen(id) || labels[labelOOM] == "true" || r.cgroupOOMKilled(labels[labelCgroup]) {
		return ReasonOOMKilled
	}
	if code == 0 {
		return ReasonCompleted
	}
	return ReasonError
}
