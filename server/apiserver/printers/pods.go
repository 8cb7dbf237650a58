package printers

import (
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// nodeLostReason is the pod status reason the node lifecycle controller sets
// when the pod's node stops reporting; such pods print as "Unknown".
const nodeLostReason = "NodeLost"

var (
	podSucceededConditions = []metav1.TableRowCondition{{
		Type: metav1.RowCompleted, Status: metav1.ConditionTrue,
		Reason: string(corev1.PodSucceeded), Message: "The pod has completed successfully.",
	}}
	podFailedConditions = []metav1.TableRowCondition{{
		Type: metav1.RowCompleted, Status: metav1.ConditionTrue,
		Reason: string(corev1.PodFailed), Message: "The pod failed.",
	}}
)

func init() {
	rows([]metav1.TableColumnDefinition{
		nameColumn(),
		column("Ready", "string", "The aggregate readiness state of this pod for accepting traffic."),
		column("Status", "string", "The aggregate status of the containers in this pod."),
		column("Restarts", "string", "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."),
		ageColumn(),
		wide(column("IP", "string", corev1.PodStatus{}.SwaggerDoc()["podIP"])),
		wide(column("Node", "string", corev1.PodSpec{}.SwaggerDoc()["nodeName"])),
		wide(column("Nominated Node", "string", corev1.PodStatus{}.SwaggerDoc()["nominatedNodeName"])),
		wide(column("Readiness Gates", "string", corev1.PodSpec{}.SwaggerDoc()["readinessGates"])),
	}, podRow)

	cells([]metav1.TableColumnDefinition{
		nameColumn(),
		column("Containers", "string", "Names of each container in the template."),
		column("Images", "string", "Images referenced by each container in the template."),
		column("Pod Labels", "string", "The labels for the pod template."),
	}, func(t *corev1.PodTemplate, _ time.Time) []interface{} {
		names, images := containerCells(t.Template.Spec.Containers)
		return []interface{}{t.Name, names, images, labels.FormatLabels(t.Template.Labels)}
	})
}

func podRow(pod *corev1.Pod, now time.Time) (metav1.TableRow, error) {
	var row metav1.TableRow
	switch pod.Status.Phase {
	case corev1.PodSucceeded:
		row.Conditions = podSucceededConditions
	case corev1.PodFailed:
		row.Conditions = podFailedConditions
	}

	s := summarizePod(pod)
	restarts := strconv.Itoa(s.restarts)
	if s.restarts != 0 && !s.lastRestart.IsZero() {
		restarts = fmt.Sprintf("%d (%s ago)", s.restarts, since(metav1.NewTime(s.lastRestart), now))
	}

	row.Cells = []interface{}{
		pod.Name,
		fmt.Sprintf("%d/%d", s.ready, s.total),
		s.status,
		restarts,
		age(pod.ObjectMeta, now),
		orNone(podIP(pod)),
		orNone(pod.Spec.NodeName),
		orNone(pod.Status.NominatedNodeName),
		readinessGates(pod),
	}
	return row, nil
}

type podSummary struct {
	ready, total int
	status       string
	restarts     int
	lastRestart  time.Time
}

// summarizePod computes the READY, STATUS and RESTARTS cells.
//
// Sidecars (restartable init containers) count toward READY's total and, once
// started, toward ready. RESTARTS counts every init container while the pod is
// still initializing, but only sidecars plus regular containers afterwards, so
// a long-finished init container's restarts do not linger.
func summarizePod(pod *corev1.Pod) podSummary {
	s := podSummary{total: len(pod.Spec.Containers), status: string(pod.Status.Phase)}
	if pod.Status.Reason != "" {
		s.status = pod.Status.Reason
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonSchedulingGated {
			s.status = corev1.PodReasonSchedulingGated
		}
	}

	sidecars := make(map[string]bool, len(pod.Spec.InitContainers))
	for i := range pod.Spec.InitContainers {
		if isSidecar(&pod.Spec.InitContainers[i]) {
			sidecars[pod.Spec.InitContainers[i].Name] = true
			s.total++
		}
	}

	var sidecarRestarts int
	var lastSidecarRestart time.Time
	initializing := false
	// Walk init containers in order and stop at the first one that has not
	// finished: it alone decides the Init:* status.
	for i := range pod.Status.InitContainerStatuses {
		cs := &pod.Status.InitContainerStatuses[i]
		s.restarts += int(cs.RestartCount)
		s.lastRestart = laterTermination(s.lastRestart, cs)
		sidecar := sidecars[cs.Name]
		if sidecar {
			sidecarRestarts += int(cs.RestartCount)
			lastSidecarRestart = laterTermination(lastSidecarRestart, cs)
		}

		term, wait := cs.State.Terminated, cs.State.Waiting
		if term != nil && term.ExitCode == 0 {
			continue
		}
		if sidecar && cs.Started != nil && *cs.Started {
			if cs.Ready {
				s.ready++
			}
			continue
		}
		initializing = true
		switch {
		case term != nil:
			s.status = "Init:" + terminatedReason(term)
		case wait != nil && wait.Reason != "" && wait.Reason != "PodInitializing":
			s.status = "Init:" + wait.Reason
		default:
			s.status = fmt.Sprintf("Init:%d/%d", i, len(pod.Spec.InitContainers))
		}
		break
	}

	// A pod whose Initialized condition is already true (e.g. init statuses
	// reset after a node restart) is judged by its regular containers.
	if !initializing || podConditionTrue(pod, corev1.PodInitialized) {
		s.restarts = sidecarRestarts
		s.lastRestart = lastSidecarRestart
		hasRunning := false
		// Walk backwards so the first container's reason wins.
		for i := len(pod.Status.ContainerStatuses) - 1; i >= 0; i-- {
			cs := &pod.Status.ContainerStatuses[i]
			s.restarts += int(cs.RestartCount)
			s.lastRestart = laterTermination(s.lastRestart, cs)
			switch term, wait := cs.State.Terminated, cs.State.Waiting; {
			case wait != nil && wait.Reason != "":
				s.status = wait.Reason
			case term != nil:
				s.status = terminatedReason(term)
			case cs.Ready && cs.State.Running != nil:
				hasRunning = true
				s.ready++
			}
		}
		// Some containers finished but others still run: the pod as a whole
		// is running (or not ready), not completed.
		if s.status == "Completed" && hasRunning {
			if podConditionTrue(pod, corev1.PodReady) {
				s.status = "Running"
			} else {
				s.status = "NotReady"
			}
		}
	}

	if pod.DeletionTimestamp != nil {
		if pod.Status.Reason == nodeLostReason {
			s.status = "Unknown"
		} else if pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
			s.status = "Terminating"
		}
	}
	return s
}

// terminatedReason prefers the runtime's reason (Completed, Error, OOMKilled)
// and otherwise falls back to the signal or exit code.
func terminatedReason(t *corev1.ContainerStateTerminated) string {
	switch {
	case t.Reason != "":
		return t.Reason
	case t.Signal != 0:
		return fmt.Sprintf("Signal:%d", t.Signal)
	default:
		return fmt.Sprintf("ExitCode:%d", t.ExitCode)
	}
}

func laterTermination(last time.Time, cs *corev1.ContainerStatus) time.Time {
	if t := cs.LastTerminationState.Terminated; t != nil && last.Before(t.FinishedAt.Time) {
		return t.FinishedAt.Time
	}
	return last
}

func isSidecar(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// podConditionTrue looks only at the first condition of the given type, as
// upstream does.
func podConditionTrue(pod *corev1.Pod, t corev1.PodConditionType) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podIP prefers status.podIPs; status.podIP only matters for objects that
// never went through defaulting/conversion, which fills podIPs from it.
func podIP(pod *corev1.Pod) string {
	if len(pod.Status.PodIPs) > 0 {
		return pod.Status.PodIPs[0].IP
	}
	return pod.Status.PodIP
}

func readinessGates(pod *corev1.Pod) string {
	if len(pod.Spec.ReadinessGates) == 0 {
		return "<none>"
	}
	trueCount := 0
	for _, gate := range pod.Spec.ReadinessGates {
		if podConditionTrue(pod, gate.ConditionType) {
			trueCount++
		}
	}
	return fmt.Sprintf("%d/%d", trueCount, len(pod.Spec.ReadinessGates))
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// containerCells lays out a template's containers as comma-separated names and
// images for the wide CONTAINERS/IMAGES columns.
func containerCells(containers []corev1.Container) (names, images string) {
	n := make([]string, len(containers))
	im := make([]string, len(containers))
	for i, c := range containers {
		n[i], im[i] = c.Name, c.Image
	}
	return joinOr(n, ",", ""), joinOr(im, ",", "")
}
