package kubelet

import (
	"context"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kelp-project/kelp/agent/kubelet/prober"
	"github.com/kelp-project/kelp/runtime"
)

// terminate ends a pod whose deletionTimestamp is set, as upstream: each
// running container's preStop hook, then its stop signal, SIGKILL when
// the grace period is over; then the sandbox goes, the final status is
// written, and the deletion is confirmed with grace 0. It returns true
// when the pod is gone.
func (w *podWorker) terminate(ctx context.Context, pod *corev1.Pod) bool {
	grace := prober.GracePeriod(pod)
	deadline := time.Now().Add(grace)
	w.probes.StopAll()
	inst, err := w.instances(ctx)
	if err != nil {
		return false
	}
	var wg sync.WaitGroup
	for _, c := range pod.Spec.Containers {
		last := latest(inst[c.Name])
		if last == nil || last.State != runtime.StateRunning {
			continue
		}
		wg.Add(1)
		go func(c corev1.Container, id string) {
			defer wg.Done()
			w.k.event(pod, corev1.EventTypeNormal, "Killing", "Stopping container %s", c.Name)
			if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
				hookCtx, cancel := context.WithDeadline(ctx, deadline)
				if err := w.hook(hookCtx, &c, id, c.Lifecycle.PreStop); err != nil {
					w.k.event(pod, corev1.EventTypeWarning, "FailedPreStopHook", "PreStopHook failed: %v", err)
				}
				cancel()
			}
			// Upstream gives at least 2 s for the stop signal after a hook.
			remaining := max(time.Until(deadline), 2*time.Second)
			if grace == 0 {
				remaining = 0
			}
			if err := w.k.runtime.StopContainer(ctx, id, remaining); err != nil {
				logrus.WithError(err).Warnf("kubelet: stopping %s", id)
			}
		}(c, last.ID)
	}
	wg.Wait()
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
