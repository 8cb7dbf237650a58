package kubelet

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/kelp-project/kelp/agent/kubelet/kubelettest"
	"github.com/kelp-project/kelp/runtime"
)

// The kubelet's tests run it on kubelettest's runtime and network.
type (
	fakeRuntime = kubelettest.Runtime
	fakeNetwork = kubelettest.Network
)

// exitContainer ends a running container with code, as if its process
// exited.
func exitContainer(t *testing.T, rt *fakeRuntime, id string, code int32) {
	t.Helper()
	if err := rt.Exit(id, code); err != nil {
		t.Fatal(err)
	}
}

// adopt puts a running container into the runtime, as a kelp restart
// finds it.
func adopt(rt *fakeRuntime, pod *corev1.Pod, name string, attempt int) string {
	id := containerID(pod, name, attempt)
	rt.Put(runtime.ContainerStatus{ID: id, State: runtime.StateRunning, StartedAt: time.Now(),
		Labels: map[string]string{labelPodUID: string(pod.UID), labelContainerName: name, labelAttempt: fmt.Sprint(attempt)}})
	return id
}

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
	rt, nw := kubelettest.NewRuntime(), kubelettest.NewNetwork("10.42.0.7")
	events := record.NewFakeRecorder(1000)
	dataDir := t.TempDir()
	k := New(Config{NodeName: "node-1", NodeIP: testNodeIP, DataDir: dataDir, LogRoot: t.TempDir(),
		ClusterDNS: "10.43.0.10", CrashLoopMaxBackoff: time.Minute}, client, rt, events)
	// Secret and projected volumes are tmpfs mounts: gone before the
	// temporary directory is removed (cleanups run last-in first-out).
	t.Cleanup(func() {
		pods, _ := filepath.Glob(filepath.Join(dataDir, "pods", "*"))
		for _, p := range pods {
			unmountVolumes(p)
		}
	})
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

// drainEvents returns the events recorded so far.
func drainEvents(tk *testKubelet) []string {
	var out []string
	for len(tk.events.Events) > 0 {
		out = append(out, <-tk.events.Events)
	}
	return out
}

// eventsWith drains the events recorded so far and returns those that
// contain s.
func eventsWith(tk *testKubelet, s string) []string {
	var out []string
	for _, e := range drainEvents(tk) {
		if strings.Contains(e, s) {
			out = append(out, e)
		}
	}
	return out
}
