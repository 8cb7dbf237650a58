package admission

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/resource"
)

// podResizeValidator is upstream's PodResizeValidator (on by default with
// InPlacePodVerticalScaling): a resize through pods/resize that asks more
// cpu or memory than the pod's node can ever give (its allocatable) is
// refused at once, 403 with cause NodeCapacity, rather than left pending
// on the node forever; so is one of a pod on a node that is not Linux
// (cause UnsupportedPlatform). A resize that fits the node but not its
// free room is the kubelet's to defer.
type podResizeValidator struct {
	nodes ObjectGetter
}

// Cause types of its refusals, upstream's.
const (
	causeNodeCapacity        metav1.CauseType = "NodeCapacity"
	causeUnsupportedPlatform metav1.CauseType = "UnsupportedPlatform"
)

func (p podResizeValidator) Validate(ctx context.Context, a *Attributes) error {
	if a.Operation != "UPDATE" || a.Resource.GroupResource() != podsResource.GroupResource() || a.Subresource != "resize" {
		return nil
	}
	pod, ok := a.Object.(*corev1.Pod)
	if !ok {
		return apierrors.NewBadRequest(fmt.Sprintf("expected a pod but got a %T", a.Object))
	}
	old, ok := a.OldObject.(*corev1.Pod)
	if !ok {
		return apierrors.NewBadRequest(fmt.Sprintf("expected an old pod but got a %T", a.OldObject))
	}
	// Unbound pods are the scheduler's to fit; an unchanged generation is
	// no resize at all.
	if pod.Spec.NodeName == "" || old.Generation == pod.Generation {
		return nil
	}
	obj, err := p.nodes.Get(ctx, "", pod.Spec.NodeName)
	if apierrors.IsNotFound(err) {
		return forbidden(a, "node %q not found", pod.Spec.NodeName)
	} else if err != nil {
		return forbidden(a, "failed to get node %q: %v", pod.Spec.NodeName, err)
	}
	node := obj.(*corev1.Node)
	if os, ok := node.Labels[corev1.LabelOSStable]; ok && os != "linux" {
		return resizeRefused(a, fmt.Errorf("pod resize is only supported on linux nodes, node %q is %q", node.Name, os), causeUnsupportedPlatform)
	}
	if err := requestsWithinAllocatable(pod, node.Status.Allocatable); err != nil {
		return resizeRefused(a, err, causeNodeCapacity)
	}
	return nil
}

// resizeRefused is a 403 carrying the cause type clients check for.
func resizeRefused(a *Attributes, err error, cause metav1.CauseType) error {
	refusal := forbidden(a, "%v", err)
	var st *apierrors.StatusError
	if errors.As(refusal, &st) && st.ErrStatus.Details != nil {
		st.ErrStatus.Details.Causes = append(st.ErrStatus.Details.Causes, metav1.StatusCause{Type: cause})
	}
	return refusal
}

// requestsWithinAllocatable compares the pod's effective cpu and memory
// requests (component-helpers' PodRequests: init containers at their
// peak, pod-level resources when set) with the node's allocatable.
func requestsWithinAllocatable(pod *corev1.Pod, allocatable corev1.ResourceList) error {
	requests := resource.PodRequests(pod, resource.PodResourcesOptions{})
	cpu, mem := requests[corev1.ResourceCPU], requests[corev1.ResourceMemory]
	var msg []string
	if cpu.Cmp(*allocatable.Cpu()) > 0 {
		msg = append(msg, fmt.Sprintf("cpu, requested: %d, allocatable: %d", cpu.MilliValue(), allocatable.Cpu().MilliValue()))
	}
	if mem.Cmp(*allocatable.Memory()) > 0 {
		msg = append(msg, fmt.Sprintf("memory, requested: %d, allocatable: %d", mem.Value(), allocatable.Memory().Value()))
	}
	if len(msg) > 0 {
		return fmt.Errorf("node didn't have enough allocatable resources: %s", strings.Join(msg, "; "))
	}
	return nil
}
