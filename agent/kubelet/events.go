package kubelet

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// event records an Event on the pod, as the kubelet component of the node.
func (k *Kubelet) event(pod *corev1.Pod, typ, reason, format string, args ...any) {
	if k.recorder == nil {
		return
	}
	k.recorder.Event(pod, typ, reason, fmt.Sprintf(format, args...))
}
