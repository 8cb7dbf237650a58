package kubelet

import (
	"errors"
	"net/netip"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kelp-project/kelp/agent/kubelet/kubelettest"
	"github.com/kelp-project/kelp/runtime"
)

// portMappingNetwork is the test network plus MapHostPorts, as nodenet's
// networks have it: it records each call and fails the first ones while
// failures > 0.
type portMappingNetwork struct {
	*kubelettest.Network
	mu       sync.Mutex
	mapped   []string
	failures int
}

func (n *portMappingNetwork) MapHostPorts(pod *corev1.Pod, ip netip.Addr) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.failures > 0 {
		n.failures--
		return errors.New("nftables: no luck")
	}
	n.mapped = append(n.mapped, pod.Name+" "+ip.String())
	return nil
}

// The sandbox maps the pod's host ports through the node network, before
// the containers start; a failed mapping is FailedCreatePodSandBox and is
// tried again at the next sync, and no HostPortUnsupported is said.
func TestSandboxMapsHostPorts(t *testing.T) {
	pod := testPod("web", "app")
	pod.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}
	tk := newTestKubelet(t, pod)
	nw := &portMappingNetwork{Network: tk.net, failures: 1}
	tk.network = nw
	w := tk.worker(t, pod)
	w.sync(pod, false)
	if list, _ := tk.rt.ListContainers(t.Context(), nil); len(list) != 0 {
		t.Fatalf("containers started although the host ports were not mapped: %+v", list)
	}
	w.sync(pod, false)
	w.sync(pod, false)
	if want := []string{"web 10.42.0.7"}; strings.Join(nw.mapped, ",") != strings.Join(want, ",") {
		t.Errorf("MapHostPorts calls %q, want %q (once the failed one was retried)", nw.mapped, want)
	}
	var failed, unsupported int
	for len(tk.events.Events) > 0 {
		e := <-tk.events.Events
		if strings.Contains(e, "FailedCreatePodSandBox") && strings.Contains(e, "no luck") {
			failed++
		}
		if strings.Contains(e, "HostPortUnsupported") {
			unsupported++
		}
	}
	if failed != 1 || unsupported != 0 {
		t.Errorf("FailedCreatePodSandBox events %d (want 1), HostPortUnsupported %d (want 0)", failed, unsupported)
	}
	if list, _ := tk.rt.ListContainers(t.Context(), nil); len(list) != 1 || list[0].State != runtime.StateRunning {
		t.Errorf("the pod's container did not start: %+v", list)
	}
}
