package kubelet

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/kelp-project/kelp/runtime"
)

// fakeRuntime keeps containers in memory and records what the kubelet
// asked of it, in order.
type fakeRuntime struct {
	mu         sync.Mutex
	containers map[string]*runtime.ContainerStatus
	specs      map[string]runtime.ContainerSpec
	calls      []string
	pullErr    map[string]error // by image
	exits      chan string
}

func newFakeRuntime() *fakeRuntime {
	return &fakeRuntime{containers: map[string]*runtime.ContainerStatus{}, specs: map[string]runtime.ContainerSpec{},
		pullErr: map[string]error{}, exits: make(chan string, 16)}
}

func (r *fakeRuntime) record(format string, args ...any) {
	r.calls = append(r.calls, fmt.Sprintf(format, args...))
}

func (r *fakeRuntime) Version(context.Context) (string, error) { return "fake", nil }

func (r *fakeRuntime) EnsureImage(_ context.Context, ref string, _ corev1.PullPolicy) (runtime.Image, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.record("pull %s", ref)
	if err := r.pullErr[ref]; err != nil {
		return runtime.Image{}, err
	}
	return runtime.Image{Ref: "docker.io/library/" + ref, ID: "sha256:" + ref}, nil
}

func (r *fakeRuntime) CreateContainer(_ context.Context, spec runtime.ContainerSpec) error {
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

func (r *fakeRuntime) StartContainer(_ context.Context, id string) error {
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

func (r *fakeRuntime) StopContainer(_ context.Context, id string, grace time.Duration) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.record("stop %s %s", id, grace)
	if c, ok := r.containers[id]; ok && c.State == runtime.StateRunning {
		c.State, c.ExitCode, c.FinishedAt = runtime.StateExited, 137, time.Now()
	}
	return nil
}

func (r *fakeRuntime) RemoveContainer(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.record("remove %s", id)
	delete(r.containers, id)
	return nil
}

func (r *fakeRuntime) ContainerStatus(_ context.Context, id string) (runtime.ContainerStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.containers[id]
	if !ok {
		return runtime.ContainerStatus{}, fmt.Errorf("%w: %s", runtime.ErrNotFound, id)
	}
	return *c, nil
}

func (r *fakeRuntime) ListContainers(_ context.Context, labels map[string]string) ([]runtime.ContainerStatus, error) {
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

func (r *fakeRuntime) Exits() <-chan string { return r.exits }

func (r *fakeRuntime) Exec(context.Context, string, []string, io.Reader, io.Writer, io.Writer, bool) (int, error) {
	return 0, nil
}

// exit ends a running container with code, as if its process exited.
func (r *fakeRuntime) exit(t *testing.T, id string, code int32) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.containers[id]
	if !ok || c.State != runtime.StateRunning {
		t.Fatalf("container %s is not running: %+v", id, c)
	}
	c.State, c.ExitCode, c.FinishedAt = runtime.StateExited, code, time.Now()
}

// adopt puts a running container into the runtime, as a kelp restart
// finds it.
func (r *fakeRuntime) adopt(pod *corev1.Pod, name string, attempt int) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	id := containerID(pod, name, attempt)
	r.containers[id] = &runtime.ContainerStatus{ID: id, State: runtime.StateRunning, StartedAt: time.Now(),
		Labels: map[string]string{labelPodUID: string(pod.UID), labelContainerName: name, labelAttempt: fmt.Sprint(attempt)}}
	return id
}

// took returns the calls made since the last took, with the given prefixes.
func (r *fakeRuntime) took(prefixes ...string) []string {
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

func (r *fakeRuntime) spec(id string) (runtime.ContainerSpec, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.specs[id]
	return s, ok
}

// fakeNetwork hands out one fixed IP and records setups and teardowns.
type fakeNetwork struct {
	mu                sync.Mutex
	setups, teardowns []string
	recovered         map[string]bool
	inNetNS           []string
}

func (n *fakeNetwork) Setup(podUID string) (string, netip.Addr, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.setups = append(n.setups, podUID)
	return "/run/test/netns/" + podUID, netip.MustParseAddr("10.42.0.7"), nil
}

func (n *fakeNetwork) Teardown(podUID string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.teardowns = append(n.teardowns, podUID)
	return nil
}

func (n *fakeNetwork) Recover(keep map[string]bool) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.recovered = keep
	return nil
}

func (n *fakeNetwork) InNetNS(_ string, fn func() error) error { return fn() }

const testNodeIP = "192.0.2.10"

type testKubelet struct {
	*Kubelet
	client  *fake.Clientset
	rt      *fakeRuntime
	net     *fakeNetwork
	events  *record.FakeRecorder
	factory informers.SharedInformerFactory
}

// newTestKubelet builds a kubelet on fakes as Run would wire it, without
// starting informers: tests put pods into the lister themselves.
func newTestKubelet(t *testing.T, objs ...*corev1.Pod) *testKubelet {
	t.Helper()
	client := fake.NewClientset()
	rt, nw := newFakeRuntime(), &fakeNetwork{}
	events := record.NewFakeRecorder(1000)
	k := New(Config{NodeName: "node-1", NodeIP: testNodeIP, DataDir: t.TempDir(), LogRoot: t.TempDir(),
		ClusterDNS: "10.43.0.10", CrashLoopMaxBackoff: time.Minute}, client, rt, events)
	k.network = nw
	factory := informers.NewSharedInformerFactory(client, 0)
	k.podLister = factory.Core().V1().Pods().Lister()
	k.services = factory.Core().V1().Services().Lister()
	tk := &testKubelet{Kubelet: k, client: client, rt: rt, net: nw, events: events, factory: factory}
	for _, p := range objs {
		tk.addPod(t, p)
	}
	return tk
}

// addPod stores the pod in the API and in the kubelet's pod lister.
func (tk *testKubelet) addPod(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	if _, err := tk.client.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := tk.factory.Core().V1().Pods().Informer().GetIndexer().Add(pod); err != nil {
		t.Fatal(err)
	}
}

// worker makes the pod's worker without its goroutine: tests call sync
// themselves, one step at a time.
func (tk *testKubelet) worker(t *testing.T, pod *corev1.Pod) *podWorker {
	t.Helper()
	w := newPodWorker(tk.Kubelet, pod)
	tk.mu.Lock()
	tk.workers[pod.UID] = w
	tk.mu.Unlock()
	t.Cleanup(w.stop)
	return w
}

// apiPod is the pod as the API has it now.
func (tk *testKubelet) apiPod(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	p, err := tk.client.CoreV1().Pods(pod.Namespace).Get(context.Background(), pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func testPod(name string, containers ...string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec:       corev1.PodSpec{NodeName: "node-1", RestartPolicy: corev1.RestartPolicyAlways},
	}
	for _, c := range containers {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: c, Image: "img-" + c})
	}
	return pod
}
