// Package kubelettest is a container runtime and a pod network in memory,
// for tests that run the kubelet without containerd or network namespaces
// (its own unit tests, and integration tests against a real API server).
// The runtime records what it was asked, in order.
package kubelettest

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kelp-project/kelp/runtime"
	"github.com/kelp-project/kelp/runtime/cgroups"
)

// Runtime keeps containers in memory: a started container runs until
// Exit or StopContainer ends it.
type Runtime struct {
	mu         sync.Mutex
	containers map[string]*runtime.ContainerStatus
	specs      map[string]runtime.ContainerSpec
	calls      []string
	pullErr    map[string]error // by image
	exits      chan string
	// podCgroups are the pod cgroups made, by pod UID.
	podCgroups map[string]PodCgroup
	// imageVolumes are the image volumes mounted, by pod UID and volume:
	// their image.
	imageVolumes map[string]map[string]string
}

// PodCgroup is a pod cgroup the kubelet asked for.
type PodCgroup struct {
	QOS       cgroups.QOS
	Resources runtime.Resources
	Parent    string // what EnsurePodCgroup returned
}

// NewRuntime returns an empty runtime.
func NewRuntime() *Runtime {
	return &Runtime{containers: map[string]*runtime.ContainerStatus{}, specs: map[string]runtime.ContainerSpec{},
		pullErr: map[string]error{}, exits: make(chan string, 16), podCgroups: map[string]PodCgroup{},
		imageVolumes: map[string]map[string]string{}}
}

func (r *Runtime) record(format string, args ...any) {
	r.calls = append(r.calls, fmt.Sprintf(format, args...))
}

func (r *Runtime) Version(context.Context) (string, error) { return "fake", nil }

func (r *Runtime) EnsureImage(_ context.Context, ref string, _ corev1.PullPolicy) (runtime.Image, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.record("pull %s", ref)
	if err := r.pullErr[ref]; err != nil {
		return runtime.Image{}, err
	}
	return runtime.Image{Ref: "docker.io/library/" + ref, ID: "sha256:" + ref}, nil
}

func (r *Runtime) CreateContainer(_ context.Context, spec runtime.ContainerSpec) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.record("create %s", spec.ID)
	if _, ok := r.containers[spec.ID]; ok {
		return fmt.Errorf("container %s exists", spec.ID)
	}
	r.containers[spec.ID] = &runtime.ContainerStatus{ID: spec.ID, Labels: spec.Labels, State: runtime.StateCreated, CreatedAt: time.Now()}
	r.specs[spec.ID] = spec
	return nil
}

func (r *Runtime) StartContainer(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.record("start %s", id)
	c, ok := r.containers[id]
	if !ok {
		return fmt.Errorf("%w: %s", runtime.ErrNotFound, id)
	}
	c.State, c.StartedAt = runtime.StateRunning, time.Now()
	return nil
}

func (r *Runtime) StopContainer(_ context.Context, id string, grace time.Duration) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.record("stop %s %s", id, grace)
	if c, ok := r.containers[id]; ok && c.State == runtime.StateRunning {
		c.State, c.ExitCode, c.FinishedAt = runtime.StateExited, 137, time.Now()
	}
	return nil
}

func (r *Runtime) RemoveContainer(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.record("remove %s", id)
	delete(r.containers, id)
	return nil
}

func (r *Runtime) ContainerStatus(_ context.Context, id string) (runtime.ContainerStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.containers[id]
	if !ok {
		return runtime.ContainerStatus{}, fmt.Errorf("%w: %s", runtime.ErrNotFound, id)
	}
	return *c, nil
}

func (r *Runtime) ListContainers(_ context.Context, labels map[string]string) ([]runtime.ContainerStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []runtime.ContainerStatus
next:
	for _, c := range r.containers {
		for k, v := range labels {
			if c.Labels[k] != v {
				continue next
			}
		}
		out = append(out, *c)
	}
	return out, nil
}

func (r *Runtime) Exits() <-chan string { return r.exits }

// UpdateContainerResources changes a running container's resources in
// place: its spec's Resources become res and labels are merged into its
// labels. A container that is not running cannot be updated, as a task
// that is gone cannot.
func (r *Runtime) UpdateContainerResources(_ context.Context, id string, res runtime.Resources, labels map[string]string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.record("update %s", id)
	c, ok := r.containers[id]
	if !ok || c.State != runtime.StateRunning {
		return fmt.Errorf("%w: no running task %s", runtime.ErrNotFound, id)
	}
	merged := maps.Clone(c.Labels)
	if merged == nil {
		merged = map[string]string{}
	}
	maps.Copy(merged, labels)
	c.Labels = merged
	spec := r.specs[id]
	spec.Resources, spec.Labels = res, merged
	r.specs[id] = spec
	return nil
}

// fakeLayout spells parents as the cgroupfs driver does.
var fakeLayout, _ = cgroups.NewLayout(cgroups.Cgroupfs, "/kubepods")

// EnsurePodCgroup keeps the pod's cgroup in memory.
func (r *Runtime) EnsurePodCgroup(_ context.Context, qos cgroups.QOS, uid string, res runtime.Resources) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	parent := fakeLayout.Parent(fakeLayout.Pod(qos, uid))
	r.podCgroups[uid] = PodCgroup{QOS: qos, Resources: res, Parent: parent}
	return parent, nil
}

func (r *Runtime) RemovePodCgroup(_ context.Context, _ cgroups.QOS, uid string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.podCgroups, uid)
	return nil
}

func (r *Runtime) RemoveOrphanPodCgroups(_ context.Context, keep map[string]bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for uid := range r.podCgroups {
		if !keep[uid] {
			delete(r.podCgroups, uid)
		}
	}
	return nil
}

// MountImage records the pod's image volume (once: the fake mounts
// nothing, so the kubelet asks again on every sync); a pull error set for
// the image fails it.
func (r *Runtime) MountImage(_ context.Context, podUID, volume, ref string, _ corev1.PullPolicy, _ string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.pullErr[ref]; err != nil {
		return err
	}
	if r.imageVolumes[podUID][volume] == ref {
		return nil
	}
	r.record("mount image %s as %s/%s", ref, podUID, volume)
	if r.imageVolumes[podUID] == nil {
		r.imageVolumes[podUID] = map[string]string{}
	}
	r.imageVolumes[podUID][volume] = ref
	return nil
}

func (r *Runtime) ReleaseImageVolumes(_ context.Context, podUID string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.imageVolumes, podUID)
	return nil
}

func (r *Runtime) RemoveOrphanImageVolumes(_ context.Context, keep map[string]bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for uid := range r.imageVolumes {
		if !keep[uid] {
			delete(r.imageVolumes, uid)
		}
	}
	return nil
}

// ImageVolumes are the pod's image volumes mounted now: volume to image.
func (r *Runtime) ImageVolumes(podUID string) map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.imageVolumes[podUID])
}

// PodCgroup is the pod's cgroup, if it has one.
func (r *Runtime) PodCgroup(uid string) (PodCgroup, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.podCgroups[uid]
	return c, ok
}

// RemoveOrphanShims: the fake has no shims.
func (r *Runtime) RemoveOrphanShims(context.Context) ([]string, error) { return nil, nil }

func (r *Runtime) Exec(context.Context, string, []string, io.Reader, io.Writer, io.Writer, bool) (int, error) {
	return 0, nil
}

// Exit ends a running container with code, as if its process exited.
func (r *Runtime) Exit(id string, code int32) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.containers[id]
	if !ok || c.State != runtime.StateRunning {
		return fmt.Errorf("container %s is not running: %+v", id, c)
	}
	c.State, c.ExitCode, c.FinishedAt = runtime.StateExited, code, time.Now()
	return nil
}

// Put stores a container as it is, as a kelp restart finds it running.
func (r *Runtime) Put(c runtime.ContainerStatus) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.containers[c.ID] = &c
}

// FailPull makes pulls of image fail with err.
func (r *Runtime) FailPull(image string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pullErr[image] = err
}

// Took returns the calls made since the last Took, with the given
// prefixes ("pull", "create", "start", "stop", "remove").
func (r *Runtime) Took(prefixes ...string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, c := range r.calls {
		for _, p := range prefixes {
			if strings.HasPrefix(c, p+" ") {
				out = append(out, c)
				break
			}
		}
	}
	r.calls = nil
	return out
}

// Calls returns every call not yet taken.
func (r *Runtime) Calls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// Spec returns what the container was created with.
func (r *Runtime) Spec(id string) (runtime.ContainerSpec, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.specs[id]
	return s, ok
}

// Containers returns the containers there are now, by ID.
func (r *Runtime) Containers() map[string]runtime.ContainerStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]runtime.ContainerStatus, len(r.containers))
	for id, c := range r.containers {
		out[id] = *c
	}
	return out
}

// SpecOf returns the spec of the container labelled with that container
// name (the kubelet's io.kubernetes.container.name), the latest first.
func (r *Runtime) SpecOf(name string) (runtime.ContainerSpec, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := slices.Sorted(maps.Keys(r.specs))
	for i := len(ids) - 1; i >= 0; i-- {
		if s := r.specs[ids[i]]; s.Labels["io.kubernetes.container.name"] == name {
			return s, true
		}
	}
	return runtime.ContainerSpec{}, false
}

// Network hands every pod the same address and a netns path nobody
// mounts, and records setups, teardowns and recoveries.
type Network struct {
	mu                sync.Mutex
	ip                netip.Addr
	setups, teardowns []string
	mapped            []string
	recovered         map[string]bool
}

// NewNetwork returns a network that gives pods ip.
func NewNetwork(ip string) *Network { return &Network{ip: netip.MustParseAddr(ip)} }

func (n *Network) Setup(podUID string) (string, netip.Addr, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.setups = append(n.setups, podUID)
	return "/run/test/netns/" + podUID, n.ip, nil
}

func (n *Network) Teardown(podUID string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.teardowns = append(n.teardowns, podUID)
	return nil
}

func (n *Network) Recover(keep map[string]bool) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.recovered = maps.Clone(keep)
	return nil
}

// MapHostPorts records "<pod> <ip>" for a pod with host ports.
func (n *Network) MapHostPorts(pod *corev1.Pod, ip netip.Addr) error {
	for _, c := range append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...) {
		for _, p := range c.Ports {
			if p.HostPort != 0 {
				n.mu.Lock()
				defer n.mu.Unlock()
				n.mapped = append(n.mapped, pod.Name+" "+ip.String())
				return nil
			}
		}
	}
	return nil
}

// Mapped is what MapHostPorts recorded.
func (n *Network) Mapped() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.mapped)
}

// InNetNS runs fn where it is: there is no namespace to enter.
func (n *Network) InNetNS(_ string, fn func() error) error { return fn() }

// Setups, Teardowns and Recovered are what the kubelet asked so far.
func (n *Network) Setups() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.setups)
}

func (n *Network) Teardowns() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.teardowns)
}

func (n *Network) Recovered() map[string]bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return maps.Clone(n.recovered)
}
