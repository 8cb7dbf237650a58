package kubelet

import (
	"context"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kelp-project/kelp/agent/kubelet/prober"
)

// terminate ends a pod whose deletionTimestamp is set, as upstream: each
// running container's preStop hook, then its stop signal (app containers
// first, sidecars after them in reverse order), SIGKILL when the grace
// period is over; then the sandbox goes, the final status is
// written, and the deletion is confirmed with grace 0. It returns true
// when the pod is gone.
func (w *podWorker) terminate(ctx context.Context, pod *corev1.Pod) bool {
	w.probes.StopAll()
	inst, err := w.instances(ctx)
	if err != nil {
		return false
	}
	// App containers first, then sidecars in reverse order (sidecars.go).
	w.stopInOrder(ctx, pod, inst, prober.GracePeriod(pod))
	// Init containers may still be running when the pod is deleted early.
	w.killAll(ctx, pod, 0)
	if inst, err := w.instances(ctx); err == nil {
		_ = w.k.patchStatus(ctx, pod, w.podStatus(pod, inst))
	}
	w.cleanup(ctx, pod)
	zero := int64(0)
	err = w.k.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		logrus.WithError(err).Warnf("kubelet: confirming the deletion of %s/%s", pod.Namespace, pod.Name)
		return false
	}
	return true
}
