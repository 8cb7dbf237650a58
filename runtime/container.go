package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/containerd"
	"github.com/containerd/containerd/cio"
	"github.com/containerd/containerd/errdefs"
	"github.com/containerd/containerd/runtime/v2/runc/options"

	"github.com/kelp-project/kelp/runtime/cgroups"

	"github.com/kelp-project/kelp/runtime/containerlog"
)

// ContainerSpec is everything the kubelet decided about one container.
type ContainerSpec struct {
	ID     string            // containerd container ID (kubelet chooses, unique)
	Labels map[string]string // kubelet's labels (pod uid, namespace, name, container name, attempt)
	Image  Image             // from EnsureImage
	// Command and Args are the pod's; see processArgs for the rules
	// against the image's Entrypoint and Cmd.
	Command, Args []string
	Env           []string // "K=V", already resolved; image Env comes first, these override
	WorkingDir    string   // "" → image's
	Hostname      string
	NetNSPath     string // pinned pod netns to join ("" = host network)
	// PIDNSPath is a PID namespace to join (/proc/<pid>/ns/pid of another
	// container's task): an ephemeral container's targetContainerName.
	// "" = the container's own PID namespace.
	PIDNSPath    string
	Mounts       []Mount
	CgroupParent string // from EnsurePodCgroup, e.g. /kubepods/burstable/pod<uid>; "" → the pods' root
	Resources    Resources
	Security     Security
	LogPath      string // absolute; CRI-format log written by the logger binary
	TTY, Stdin   bool   // Stdin: the container's stdin is /dev/null (no attach yet)
	// Sysctls are the pod's, by dotted name, written by runc inside the
	// container's namespaces.
	Sysctls map[string]string
}

// Mount is one bind or tmpfs mount.
type Mount struct {
	Source, Destination string
	ReadOnly            bool
	Type                string // "bind" (default) or "tmpfs"
	Options             []string
}

// Resources are cgroup limits; 0 = unset. The container's go into its
// OCI spec (runc writes them, on v1 or v2); a pod's are written by
// EnsurePodCgroup.
type Resources = cgroups.Resources

// Security is the container's security context.
type Security struct {
	Privileged, ReadOnlyRootfs, NoNewPrivileges bool
	CapAdd, CapDrop                             []string
	RunAsUser, RunAsGroup                       *int64
	SupplementalGroups                          []int64
}

// Labels kelp keeps on containerd containers besides the kubelet's. They
// live in containerd's metadata, so they survive a kelp restart; they are
// not returned in ContainerStatus.Labels.
const (
	labelPrefix    = "io.kelp.runtime/"
	labelLogPath   = labelPrefix + "log-path"
	labelStartedAt = labelPrefix + "started-at"
	labelOOM       = labelPrefix + "oom-killed"
	labelCgroup    = labelPrefix + "cgroup" // the cgroup's directory (cgroupDir)
)

// snapshotter is the only one kelp uses (machine.md: overlayfs works).
const snapshotter = "overlayfs"

// ErrNotFound is returned (wrapped) for a container containerd does not know.
var ErrNotFound = errors.New("container not found")

// IsNotFound reports whether err means the container does not exist.
func IsNotFound(err error) bool {
	return errors.Is(err, ErrNotFound) || errdefs.IsNotFound(err)
}

func notFound(id string) error { return fmt.Errorf("%w: %s", ErrNotFound, id) }

// runtimeOpts gives every container this node's own runc root, so two
// nodes' containerd instances never share runc state (machine.md), and
// runc's systemd cgroup driver when kelp's is systemd (the spec's
// cgroupsPath is then "slice:prefix:name").
func (r *Runtime) runtimeOpts() containerd.NewContainerOpts {
	return containerd.WithRuntime("io.containerd.runc.v2", &options.Options{Root: filepath.Join(r.opts.StateDir, "runc"),
		SystemdCgroup: r.opts.Cgroups.Layout.Driver == cgroups.Systemd})
}

// CreateContainer creates the container and its rootfs snapshot; it does
// not start a task. The image must be unpacked for overlayfs.
func (r *Runtime) CreateContainer(ctx context.Context, spec ContainerSpec) error {
	ctx = r.ctx(ctx)
	r.watch()
	if spec.ID == "" {
		return errors.New("container ID is required")
	}
	img, err := r.client.GetImage(ctx, spec.Image.Ref)
	if err != nil {
		return fmt.Errorf("image %s: %w", spec.Image.Ref, err)
	}
	labels := map[string]string{
		labelLogPath: spec.LogPath,
		labelCgroup:  r.cgroupDir(spec),
	}
	for k, v := range spec.Labels {
		labels[k] = v
	}
	r.removeStaleSnapshot(ctx, spec.ID)
	if spec.Image.StopSignal != "" {
		labels[containerd.StopSignalLabel] = spec.Image.StopSignal
	}
	_, err = r.client.NewContainer(ctx, spec.ID,
		containerd.WithImage(img),
		containerd.WithSnapshotter(snapshotter),
		containerd.WithNewSnapshot(spec.ID, img),
		r.runtimeOpts(),
		containerd.WithContainerLabels(labels),
		containerd.WithNewSpec(r.specOpts(spec)...),
	)
	if err != nil {
		return fmt.Errorf("create container %s: %w", spec.ID, err)
	}
	return nil
}

// removeStaleSnapshot deletes a snapshot keyed id that no container owns
// (left by a create that failed after WithNewSnapshot), so a retry with
// the same ID does not fail with "already exists".
func (r *Runtime) removeStaleSnapshot(ctx context.Context, id string) {
	if _, err := r.client.LoadContainer(ctx, id); !errdefs.IsNotFound(err) {
		return // owned (or unknown): leave it
	}
	_ = r.client.SnapshotService(snapshotter).Remove(ctx, id)
}

// StartContainer creates the task with its output wired to the logging
// binary (started by the shim, it hands the output to the node's log
// daemon, so logging outlives kelp) and starts it.
func (r *Runtime) StartContainer(ctx context.Context, id string) error {
	ctx = r.ctx(ctx)
	r.watch()
	c, err := r.load(ctx, id)
	if err != nil {
		return err
	}
	labels, err := c.Labels(ctx)
	if err != nil {
		return err
	}
	s, err := c.Spec(ctx)
	if err != nil {
		return err
	}
	logPath := labels[labelLogPath]
	if logPath == "" {
		logPath = filepath.Join(r.opts.LogRoot, "_unnamed", id+".log")
	}
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return err
	}
	q := containerlog.WriterQuery(logPath, r.logSocket())
	creator := cio.BinaryIO(r.opts.LoggerBinary, q)
	if s.Process != nil && s.Process.Terminal {
		creator = cio.TerminalBinaryIO(r.opts.LoggerBinary, q)
	}
	r.tasks.RLock()
	defer r.tasks.RUnlock()
	task, err := r.leftTask(ctx, c)
	if err != nil {
		return err
	}
	if task == nil {
		if task, err = c.NewTask(ctx, creator); err != nil {
			return fmt.Errorf("create task %s: %w", id, err)
		}
	}
	// Taken before Start: a short-lived container may have exited (and
	// got its exit time) before Start returns.
	startedAt := time.Now().UTC()
	if err := task.Start(ctx); err != nil {
		_, _ = task.Delete(ctx, containerd.WithProcessKill)
		return fmt.Errorf("start task %s: %w", id, err)
	}
	_, err = c.SetLabels(ctx, map[string]string{labelStartedAt: startedAt.Format(time.RFC3339Nano)})
	return err
}

// leftTask is a task a previous kelp created for c and died before
// starting (a kill -9 between create and start: containerd finished the
// creation), which is started as it is; a stopped one is deleted, so a
// new one can be made. nil when there is none (or it was deleted).
func (r *Runtime) leftTask(ctx context.Context, c containerd.Container) (containerd.Task, error) {
	task, err := c.Task(ctx, nil)
	if errdefs.IsNotFound(err) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("task of %s: %w", c.ID(), err)
	}
	st, err := task.Status(ctx)
	if err == nil && st.Status == containerd.Created {
		return task, nil
	}
	if _, err := task.Delete(ctx, containerd.WithProcessKill); err != nil && !errdefs.IsNotFound(err) {
		return nil, fmt.Errorf("delete the old task of %s: %w", c.ID(), err)
	}
	return nil, nil
}

// StopContainer sends the stop signal (the image's STOPSIGNAL, default
// SIGTERM), waits up to grace, then SIGKILLs and waits for the exit. A
// container without a running task is left alone.
func (r *Runtime) StopContainer(ctx context.Context, id string, grace time.Duration) error {
	ctx = r.ctx(ctx)
	c, err := r.load(ctx, id)
	if err != nil {
		return err
	}
	task, err := c.Task(ctx, nil)
	if errdefs.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	st, err := task.Status(ctx)
	if err != nil || st.Status == containerd.Stopped {
		return ignoreNotFound(err)
	}
	exited, err := task.Wait(ctx)
	if err != nil {
		return err
	}
	sig, err := containerd.GetStopSignal(ctx, c, syscall.SIGTERM)
	if err != nil {
		sig = syscall.SIGTERM
	}
	if grace > 0 {
		if err := task.Kill(ctx, sig); err != nil && !errdefs.IsNotFound(err) {
			return fmt.Errorf("signal %s: %w", id, err)
		}
		timer := time.NewTimer(grace)
		defer timer.Stop()
		select {
		case <-exited:
			return nil
		case <-timer.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := task.Kill(ctx, syscall.SIGKILL); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("kill %s: %w", id, err)
	}
	select {
	case <-exited:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// RemoveContainer kills and deletes the task, then the container with its
// snapshot, then any cgroup directory runc left. Missing pieces are fine.
func (r *Runtime) RemoveContainer(ctx context.Context, id string) error {
	ctx = r.ctx(ctx)
	c, err := r.client.LoadContainer(ctx, id)
	if errdefs.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	labels, _ := c.Labels(ctx)
	if task, err := c.Task(ctx, nil); err == nil {
		if _, err := task.Delete(ctx, containerd.WithProcessKill); err != nil && !errdefs.IsNotFound(err) {
			return fmt.Errorf("delete task %s: %w", id, err)
		}
	} else if !errdefs.IsNotFound(err) {
		return err
	}
	if err := c.Delete(ctx, containerd.WithSnapshotCleanup); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("delete container %s: %w", id, err)
	}
	r.forget(id)
	r.removeCgroup(labels[labelCgroup])
	return nil
}

func (r *Runtime) load(ctx context.Context, id string) (containerd.Container, error) {
	c, err := r.client.LoadContainer(ctx, id)
	if errdefs.IsNotFound(err) {
		return nil, notFound(id)
	}
	return c, err
}

func ignoreNotFound(err error) error {
	if err != nil && errdefs.IsNotFound(err) {
		return nil
	}
	return err
}

// userLabels drops kelp's and containerd's own labels.
func userLabels(in map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range in {
		if strings.HasPrefix(k, labelPrefix) || k == containerd.StopSignalLabel {
			continue
		}
		out[k] = v
	}
	return out
}
