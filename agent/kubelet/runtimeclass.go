package kubelet

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// defaultRuntimeHandler is the one handler kelp's runtime has: runc, the
// name containerd's CRI plugin gives its default runtime.
const defaultRuntimeHandler = "runc"

// checkRuntimeHandler resolves the pod's RuntimeClass to its handler
// before a sandbox is made, as upstream's kubelet does. kelp's runtime
// runs every container with runc, so a class naming another handler
// fails the sandbox the way upstream's does when the CRI runtime lacks
// the handler: the pod stays Pending with a FailedCreatePodSandBox event
// and is retried, rather than run with a runtime it did not ask for. The
// class is read when the sandbox is made (rarely), with the kubelet's own
// GET, which the Node authorizer allows for RuntimeClasses.
func (k *Kubelet) checkRuntimeHandler(ctx context.Context, pod *corev1.Pod) error {
	if pod.Spec.RuntimeClassName == nil || *pod.Spec.RuntimeClassName == "" {
		return nil
	}
	name := *pod.Spec.RuntimeClassName
	rc, err := k.client.NodeV1().RuntimeClasses().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("RuntimeClass %q not found", name)
	}
	if err != nil {
		return fmt.Errorf("looking up RuntimeClass %q: %w", name, err)
	}
	if rc.Handler != defaultRuntimeHandler {
		return fmt.Errorf("RuntimeHandler %q of RuntimeClass %q not supported: this node runs only the %q handler",
			rc.Handler, name, defaultRuntimeHandler)
	}
	return nil
}
