package kubelet

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kelp-project/kelp/runtime"
)

// postStatus computes the pod's status from the runtime and the probes and
// writes it through pods/status when it changed.
func (w *podWorker) postStatus(ctx context.Context, pod *corev1.Pod, inst map[string][]runtime.ContainerStatus) {
	st := w.podStatus(pod, inst)
	if w.posted != nil && apiequality.Semantic.DeepEqual(*w.posted, st) {
		return
	}
	if w.posted == nil && apiequality.Semantic.DeepEqual(pod.Status, st) {
		w.posted = &st
		return
	}
	if err := w.k.patchStatus(ctx, pod, st); err != nil {
		logrus.WithError(err).Debugf("kubelet: status of %s/%s", pod.Namespace, pod.Name)
		return
	}
	w.posted = &st
}

// patchStatus writes the whole status as a merge patch, as upstream's
// status manager patches: no resourceVersion, so other writers of the pod
// (labels, the scheduler's conditions) never make it conflict; the UID
// keeps it from landing on a new pod of the same name.
func (k *Kubelet) patchStatus(ctx context.Context, pod *corev1.Pod, st corev1.PodStatus) error {
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": pod.UID},
		"status":   st,
	})
	if err != nil {
		return err
	}
	_, err = k.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}

// podStatus is upstream's view of a pod: phase, conditions, one status per
// container, IPs, QoS class and start time. Transition times are kept
// from the previous status while a condition does not change.
func (w *podWorker) podStatus(pod *corev1.Pod, inst map[string][]runtime.ContainerStatus) corev1.PodStatus {
	// observedGeneration: the generation this status answers (a resize
	// is done when it has caught up and no resize condition is left).
	st := corev1.PodStatus{QOSClass: pod.Status.QOSClass, HostIP: w.k.cfg.NodeIP,
		HostIPs: []corev1.HostIP{{IP: w.k.cfg.NodeIP}}, ObservedGeneration: pod.Generation}
	if !w.startTime.IsZero() {
		t := metav1.NewTime(w.startTime.Truncate(time.Second))
		st.StartTime = &t
	}
	if w.podIP.IsValid() {
		st.PodIP = w.podIP.String()
		st.PodIPs = []corev1.PodIP{{IP: st.PodIP}}
	}
	// Initialized as the init containers' sync sees it (planInit): plain
	// ones succeeded, sidecars started.
	initDone := planInit(pod, inst, w.probes.Started).initialized
	initFailed := false
	allReady := true
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		cs := w.containerStatus(pod, c, inst[c.Name], true)
		st.InitContainerStatuses = append(st.InitContainerStatuses, cs)
		if isSidecar(c) {
			// A sidecar's readiness counts toward the pod's, as upstream.
			allReady = allReady && cs.Ready
			continue
		}
		if cs.State.Terminated != nil && cs.State.Terminated.ExitCode != 0 && pod.Spec.RestartPolicy == corev1.RestartPolicyNever {
			initFailed = true
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		c := (*corev1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
		cs := w.containerStatus(pod, c, inst[c.Name], false)
		// Ephemeral containers are neither probed nor ready; started once
		// running.
		cs.Ready = false
		started := cs.State.Running != nil
		cs.Started = &started
		st.EphemeralContainerStatuses = append(st.EphemeralContainerStatuses, cs)
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		cs := w.containerStatus(pod, c, inst[c.Name], false)
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
		allReady = allReady && cs.Ready
	}
	st.Phase = phase(pod, st, initDone, initFailed)
	if w.failed != nil {
		st.Phase, st.Reason, st.Message = corev1.PodFailed, w.failed.reason, w.failed.message
	}
	sandbox := w.netnsPath != "" || (pod.Spec.HostNetwork && w.podIP.IsValid())
	reason := func(ok bool, r string) string {
		if ok {
			return ""
		}
		return r
	}
	ready := initDone && allReady && st.Phase == corev1.PodRunning
	st.Conditions = []corev1.PodCondition{
		w.condition(pod, corev1.PodReadyToStartContainers, sandbox, ""),
		w.condition(pod, corev1.PodInitialized, initDone, reason(initDone, "ContainersNotInitialized")),
		w.condition(pod, corev1.ContainersReady, initDone && allReady, reason(initDone && allReady, "ContainersNotReady")),
		w.condition(pod, corev1.PodReady, ready, reason(ready, "ContainersNotReady")),
		w.condition(pod, corev1.PodScheduled, true, ""),
	}
	if !initDone && len(pod.Spec.InitContainers) > 0 {
		st.Conditions[2].Reason, st.Conditions[3].Reason = "PodInitializing", "PodInitializing"
	}
	st.Conditions = append(st.Conditions, w.resizeConditions()...)
	for i := range st.Conditions {
		c := &st.Conditions[i]
		if c.Status == corev1.ConditionFalse && c.Reason == "ContainersNotReady" {
			var names []string
			for i, cs := range st.InitContainerStatuses {
				if isSidecar(&pod.Spec.InitContainers[i]) && !cs.Ready {
					names = append(names, cs.Name)
				}
			}
			for _, cs := range st.ContainerStatuses {
				if !cs.Ready {
					names = append(names, cs.Name)
				}
			}
			c.Message = "containers with unready status: [" + strings.Join(names, " ") + "]"
		}
		if c.Status == corev1.ConditionFalse && c.Reason == "ContainersNotInitialized" {
			var names []string
			for i, cs := range st.InitContainerStatuses {
				if sidecar := isSidecar(&pod.Spec.InitContainers[i]); (sidecar && (cs.Started == nil || !*cs.Started)) ||
					(!sidecar && (cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 0)) {
					names = append(names, cs.Name)
				}
			}
			c.Message = "containers with incomplete status: [" + strings.Join(names, " ") + "]"
		}
	}
	// Conditions set by others (DisruptionTarget, readiness gates) stay.
	for _, c := range pod.Status.Conditions {
		switch c.Type {
		case corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady, corev1.PodScheduled,
			corev1.PodResizePending, corev1.PodResizeInProgress:
		default:
			st.Conditions = append(st.Conditions, c)
		}
	}
	return st
}

func (w *podWorker) condition(pod *corev1.Pod, typ corev1.PodConditionType, ok bool, reason string) corev1.PodCondition {
	c := corev1.PodCondition{Type: typ, Status: corev1.ConditionFalse, Reason: reason, ObservedGeneration: pod.Generation,
		LastTransitionTime: metav1.NewTime(time.Now().Truncate(time.Second))}
	if ok {
		c.Status = corev1.ConditionTrue
	}
	for _, old := range pod.Status.Conditions {
		if old.Type == typ && old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
			c.LastProbeTime = old.LastProbeTime
		}
	}
	if w.posted != nil {
		for _, old := range w.posted.Conditions {
			if old.Type == typ && old.Status == c.Status {
				c.LastTransitionTime = old.LastTransitionTime
			}
		}
	}
	return c
}

// phase follows upstream's getPhase.
func phase(pod *corev1.Pod, st corev1.PodStatus, initDone, initFailed bool) corev1.PodPhase {
	if initFailed {
		return corev1.PodFailed
	}
	if !initDone {
		return corev1.PodPending
	}
	var waiting, running, succeeded, failed, stopped int
	for _, cs := range st.ContainerStatuses {
		switch {
		case cs.State.Running != nil:
			running++
		case cs.State.Terminated != nil:
			stopped++
			if cs.State.Terminated.ExitCode == 0 {
				succeeded++
			} else {
				failed++
			}
		case cs.State.Waiting != nil:
			if cs.LastTerminationState.Terminated != nil {
				stopped++
			} else {
				waiting++
			}
		}
	}
	switch {
	case waiting > 0:
		return corev1.PodPending
	case running > 0:
		return corev1.PodRunning
	case running == 0 && stopped > 0:
		switch pod.Spec.RestartPolicy {
		case corev1.RestartPolicyAlways:
			return corev1.PodRunning
		case corev1.RestartPolicyOnFailure:
			if stopped == succeeded {
				return corev1.PodSucceeded
			}
			return corev1.PodRunning
		default:
			if failed > 0 {
				return corev1.PodFailed
			}
			return corev1.PodSucceeded
		}
	}
	return corev1.PodPending
}

// containerStatus reports the latest instance of a container, with the
// one before it as lastState.
func (w *podWorker) containerStatus(pod *corev1.Pod, c *corev1.Container, inst []runtime.ContainerStatus, init bool) corev1.ContainerStatus {
	cs := corev1.ContainerStatus{Name: c.Name, Image: c.Image}
	f := false
	cs.Started = &f
	last := latest(inst)
	if last != nil {
		cs.ContainerID = "containerd://" + last.ID
		cs.RestartCount = int32(attempt(*last))
		cs.Image = last.Labels[labelImage]
		if cs.Image == "" {
			cs.Image = c.Image
		}
		cs.ImageID = last.Labels[labelImageID]
		cs.State = w.state(pod, c, *last)
		if len(inst) > 1 {
			cs.LastTerminationState = w.state(pod, c, inst[len(inst)-2])
		}
		w.containerResourcesStatus(&cs, c, last)
		if last.State == runtime.StateRunning {
			started := w.probes.Started(last.ID)
			cs.Started = &started
			cs.Ready = (!init || isSidecar(c)) && w.probes.Ready(last.ID)
		}
	}
	if wst, ok := w.waiting[c.Name]; ok && (last == nil || last.State != runtime.StateRunning) {
		if cs.State.Terminated != nil {
			cs.LastTerminationState = cs.State
		}
		cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: wst.reason, Message: wst.message}}
	}
	if last == nil && cs.State.Waiting == nil {
		reason := "ContainerCreating"
		if init || !w.initDone(pod) {
			reason = "PodInitializing"
			if init {
				reason = "PodInitializing"
			}
		}
		cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}
	}
	// As upstream's prober manager: an init container that completed
	// successfully is Ready.
	if init && !isSidecar(c) && cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0 {
		cs.Ready = true
	}
	return cs
}

func (w *podWorker) initDone(pod *corev1.Pod) bool {
	return len(pod.Spec.InitContainers) == 0 || (w.posted != nil && podCondition(w.posted, corev1.PodInitialized))
}

func podCondition(st *corev1.PodStatus, typ corev1.PodConditionType) bool {
	for _, c := range st.Conditions {
		if c.Type == typ {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (w *podWorker) state(pod *corev1.Pod, spec *corev1.Container, c runtime.ContainerStatus) corev1.ContainerState {
	switch c.State {
	case runtime.StateRunning:
		return corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(c.StartedAt)}}
	case runtime.StateExited:
		reason := c.Reason
		if reason == "" {
			reason = "Error"
			if c.ExitCode == 0 {
				reason = "Completed"
			}
		}
		return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: c.ExitCode, Reason: reason, Message: w.k.terminationMessage(pod, spec, c),
			StartedAt: metav1.NewTime(c.StartedAt), FinishedAt: metav1.NewTime(c.FinishedAt),
			ContainerID: "containerd://" + c.ID,
		}}
	}
	return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}
}
