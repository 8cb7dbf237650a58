package kubelet

import (
	"context"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"

	"github.com/kelp-project/kelp/runtime"
)

// isSidecar says whether an init container is restartable (restartPolicy
// Always): a sidecar, started in its turn among the init containers and
// then kept running beside the app containers.
func isSidecar(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// initPlan is what the init containers need this sync: which of them to
// sync (start, or restart when their policy allows), in order, and
// whether the pod is initialized, so its app containers may run.
type initPlan struct {
	sync        []*corev1.Container
	initialized bool
}

// planInit follows upstream's computeInitContainerActions. Init containers
// go in order: a plain one must have succeeded before the next starts; a
// sidecar must have started (running, and its startupProbe passed if it
// has one; started reports that for a running instance) but is never
// waited on to finish. Every sidecar that has run is synced each time, so
// it is restarted whenever it exits. Once a container after an init
// container has run (the pod got past it before, e.g. before a kelp
// restart or a sidecar crash), that init container no longer holds the
// pod back: a plain one is not run again, a sidecar is restarted beside
// the containers already running.
func planInit(pod *corev1.Pod, inst map[string][]runtime.ContainerStatus, started func(id string) bool) initPlan {
	inits := pod.Spec.InitContainers
	// passed[i]: some container after init container i has run.
	passed := make([]bool, len(inits))
	later := false
	for i := range pod.Spec.Containers {
		later = later || len(inst[pod.Spec.Containers[i].Name]) > 0
	}
	for i := len(inits) - 1; i >= 0; i-- {
		passed[i] = later
		later = later || len(inst[inits[i].Name]) > 0
	}
	var plan initPlan
	for i := range inits {
		c := &inits[i]
		last := latest(inst[c.Name])
		if !isSidecar(c) {
			if passed[i] || (last != nil && last.State == runtime.StateExited && last.ExitCode == 0) {
				continue
			}
			plan.sync = append(plan.sync, c)
			return plan
		}
		plan.sync = append(plan.sync, c)
		if passed[i] || (last != nil && last.State == runtime.StateRunning && started(last.ID)) {
			continue
		}
		return plan
	}
	plan.initialized = true
	return plan
}

// runningSidecars are the IDs of the pod's running sidecar instances.
func runningSidecars(pod *corev1.Pod, inst map[string][]runtime.ContainerStatus) []string {
	var ids []string
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if last := latest(inst[c.Name]); isSidecar(c) && last != nil && last.State == runtime.StateRunning {
			ids = append(ids, last.ID)
		}
	}
	return ids
}

// stopTarget is one running container instance to stop, and what must
// have exited before it gets its stop signal.
type stopTarget struct {
	c     *corev1.Container
	id    string
	hook  bool            // run its preStop hook (ephemeral containers have none)
	after []chan struct{} // closed when each container it waits for has exited
	done  chan struct{}
}

// stopInOrder stops the pod's running containers as upstream's
// killContainersWithSyncResult with a termination ordering: every preStop
// hook starts at once; app and ephemeral containers then get their stop
// signal, and each sidecar only once every app container and every
// sidecar after it has exited (reverse start order), waiting at most
// until the grace period ends. After a hook the stop signal gets at least
// 2 s, as upstream's minimum grace; a grace of 0 kills at once.
func (w *podWorker) stopInOrder(ctx context.Context, pod *corev1.Pod, inst map[string][]runtime.ContainerStatus, grace time.Duration) {
	deadline := time.Now().Add(grace)
	var targets []*stopTarget
	var apps []chan struct{}
	add := func(c *corev1.Container, hook bool) *stopTarget {
		last := latest(inst[c.Name])
		if last == nil || last.State != runtime.StateRunning {
			return nil
		}
		t := &stopTarget{c: c, id: last.ID, hook: hook, done: make(chan struct{})}
		targets = append(targets, t)
		return t
	}
	for i := range pod.Spec.Containers {
		if t := add(&pod.Spec.Containers[i], true); t != nil {
			apps = append(apps, t.done)
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		if t := add((*corev1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon), false); t != nil {
			apps = append(apps, t.done)
		}
	}
	waits := apps
	for i := len(pod.Spec.InitContainers) - 1; i >= 0; i-- {
		c := &pod.Spec.InitContainers[i]
		if !isSidecar(c) {
			continue
		}
		if t := add(c, true); t != nil {
			t.after = waits
			waits = append(append([]chan struct{}(nil), waits...), t.done)
		}
	}
	var wg sync.WaitGroup
	for _, t := range targets {
		wg.Add(1)
		go func(t *stopTarget) {
			defer wg.Done()
			defer close(t.done)
			w.k.event(pod, corev1.EventTypeNormal, "Killing", "Stopping container %s", t.c.Name)
			hooked := false
			if t.hook && t.c.Lifecycle != nil && t.c.Lifecycle.PreStop != nil && grace > 0 {
				hooked = true
				hookCtx, cancel := context.WithDeadline(ctx, deadline)
				if err := w.hook(hookCtx, t.c, t.id, t.c.Lifecycle.PreStop); err != nil {
					w.k.event(pod, corev1.EventTypeWarning, "FailedPreStopHook", "PreStopHook failed: %v", err)
				}
				cancel()
			}
			timer := time.NewTimer(max(time.Until(deadline), 0))
			defer timer.Stop()
		wait:
			for _, ch := range t.after {
				select {
				case <-ch:
				case <-timer.C:
					break wait
				case <-ctx.Done():
					return
				}
			}
			remaining := max(time.Until(deadline), 0)
			if hooked || len(t.after) > 0 {
				remaining = max(remaining, 2*time.Second)
			}
			if grace == 0 {
				remaining = 0
			}
			if err := w.k.runtime.StopContainer(ctx, t.id, remaining); err != nil {
				logrus.WithError(err).Warnf("kubelet: stopping %s", t.id)
			}
		}(t)
	}
	wg.Wait()
}
