package kubelet

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/kelp-project/kelp/agent/kubelet/server"
)

// endpointPods answers the HTTPS endpoint's questions from the pod
// workers. The containers are asked of the runtime on each request, never
// cached: a container may have restarted since the worker's last sync.
type endpointPods struct{ k *Kubelet }

// lookup finds the pod and its worker (nil when it is not running here).
func (p endpointPods) lookup(namespace, name string) (*corev1.Pod, *podWorker, error) {
	pod, err := p.k.podLister.Pods(namespace).Get(name)
	if err != nil {
		return nil, nil, err
	}
	p.k.mu.Lock()
	defer p.k.mu.Unlock()
	return pod, p.k.workers[pod.UID], nil
}

func (p endpointPods) Container(ctx context.Context, namespace, name, container string, previous bool) (server.Container, error) {
	pod, w, err := p.lookup(namespace, name)
	if err != nil {
		return server.Container{}, fmt.Errorf("pod %q not found", name)
	}
	if w == nil {
		return server.Container{}, fmt.Errorf("pod %q is not running on this node", name)
	}
	inst, err := w.instances(ctx)
	if err != nil {
		return server.Container{}, err
	}
	l := inst[container]
	n := len(l) - 1
	if previous {
		if len(l) < 2 {
			return server.Container{}, fmt.Errorf("previous terminated container %q in pod %q not found", container, name)
		}
		n = len(l) - 2
	} else if len(l) == 0 {
		return server.Container{}, fmt.Errorf("container %q in pod %q is waiting to start", container, name)
	}
	return server.Container{ID: l[n].ID, LogPath: p.k.logPath(pod, container, attempt(l[n]))}, nil
}

func (p endpointPods) Sandbox(namespace, name string) (string, error) {
	pod, w, err := p.lookup(namespace, name)
	if err != nil {
		return "", err
	}
	var netns string
	if w != nil {
		netns = w.sandbox()
	}
	if w == nil || (netns == "" && !pod.Spec.HostNetwork) {
		return "", fmt.Errorf("pod %q has no running sandbox on this node", pod.Name)
	}
	return netns, nil
}
