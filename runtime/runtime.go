// Package runtime is the kubelet's thin layer over the containerd Go
// client: images (import from the air-gap directory, pull by policy) and
// containers (an OCI spec built from a ContainerSpec, tasks, exit and OOM
// status, exec, CRI-format logs). Everything lives in the containerd
// namespace "k8s.io", as under k3s.
//
// Per-node isolation follows shared/docs/machine.md: several agents (one
// per simulated node) may share one machine, so each Runtime has its own
// runc state root, cgroup root and FIFO directory.
package runtime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/containerd/containerd"
	"github.com/containerd/containerd/namespaces"

	"github.com/kelp-project/kelp/runtime/cgroups"
	"github.com/sirupsen/logrus"

	"github.com/kelp-project/kelp/runtime/containerlog"
)

// Namespace is the containerd namespace every kelp container lives in.
const Namespace = "k8s.io"

// Options place one node's containers apart from another's.
type Options struct {
	// Address is containerd's socket.
	Address string
	// StateDir holds runc's state root (<StateDir>/runc) and the FIFOs
	// (<StateDir>/fifo); by default /run/kelp/runtime.
	StateDir string
	// CgroupRoot is the cgroup under which pod cgroups are made:
	// <CgroupRoot>/<qos>/pod<uid>/<container>; by default /kubepods
	// (kubepods.slice under the systemd driver; see cgroups.Layout).
	CgroupRoot string
	// CgroupDriver is --cgroup-driver: auto (the default: systemd when
	// systemd runs), cgroupfs or systemd.
	CgroupDriver string
	// Cgroups is the host's cgroup version and layout; New detects it
	// under /sys/fs/cgroup unless it is given (tests give a fake tree).
	Cgroups cgroups.Host
	// LogRoot is where container logs go (/var/log/pods by default).
	LogRoot string
	// LoggerBinary is the program the containerd shim runs for each
	// container's output (`internal container-logger`, package
	// containerlog), and that runs the node's log daemon: kelp's small
	// launcher ($KELP_LAUNCHER, which it sets before it runs the full
	// kelp), else this very program.
	LoggerBinary string
}

// Runtime is one node's view of containerd.
type Runtime struct {
	client *containerd.Client
	opts   Options
	// pods makes the pod cgroups (EnsurePodCgroup).
	pods *cgroups.Pods
	// tasks is held shared while a task is being created (its shim runs
	// before the task is listed) and exclusively while orphan shims are
	// looked for, so the one is never mistaken for the other.
	tasks sync.RWMutex
}

// New connects to containerd at opts.Address.
func New(ctx context.Context, opts Options) (*Runtime, error) {
	if opts.StateDir == "" {
		opts.StateDir = "/run/kelp/runtime"
	}
	if opts.CgroupRoot == "" {
		opts.CgroupRoot = "/kubepods"
	}
	if err := opts.resolveCgroups(); err != nil {
		return nil, err
	}
	pods, err := cgroups.NewPods(opts.Cgroups)
	if err != nil {
		return nil, err
	}
	if opts.LogRoot == "" {
		opts.LogRoot = "/var/log/pods"
	}
	if opts.LoggerBinary == "" {
		opts.LoggerBinary = os.Getenv(containerlog.LauncherEnv)
	}
	if opts.LoggerBinary == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		opts.LoggerBinary = exe
	}
	for _, d := range []string{filepath.Join(opts.StateDir, "runc"), filepath.Join(opts.StateDir, "fifo"), opts.LogRoot} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	r := &Runtime{opts: opts, pods: pods}
	// Without a daemon each container's writer copies its output itself:
	// logs still work, at a process per container.
	if err := containerlog.EnsureDaemon(opts.LoggerBinary, r.logSocket(), filepath.Join(opts.StateDir, "containerlog.log")); err != nil {
		logrus.Warnf("runtime: container log daemon: %v; each container's log writer will copy its output itself", err)
	}
	client, err := containerd.New(opts.Address, containerd.WithDefaultNamespace(Namespace))
	if err != nil {
		return nil, fmt.Errorf("containerd at %s: %w", opts.Address, err)
	}
	r.client = client
	return r, nil
}

// LogSocket is where the log daemon of the node whose runtime state is
// in stateDir (Options.StateDir) listens.
func LogSocket(stateDir string) string {
	return filepath.Join(stateDir, "containerlog.sock")
}

func (r *Runtime) logSocket() string { return LogSocket(r.opts.StateDir) }

// StopLogDaemon stops this node's log daemon, for `kelp killall` once the
// containers are gone.
func (r *Runtime) StopLogDaemon() error {
	return containerlog.StopDaemon(r.logSocket())
}

// Close releases the connection; containers keep running.
func (r *Runtime) Close() error { return r.client.Close() }

// Version is containerd's version, for the node's containerRuntimeVersion
// ("containerd://<version>").
func (r *Runtime) Version(ctx context.Context) (string, error) {
	v, err := r.client.Version(ctx)
	if err != nil {
		return "", err
	}
	return v.Version, nil
}

func (r *Runtime) ctx(ctx context.Context) context.Context {
	return namespaces.WithNamespace(ctx, Namespace)
}
