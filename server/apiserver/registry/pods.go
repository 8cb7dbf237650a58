package registry

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kelp-project/kelp/server/apiserver/defaults"
	"github.com/kelp-project/kelp/server/apiserver/validation"
)

// pods: bound to a node through pods/binding, evicted through
// pods/eviction within their disruption budgets, resized in place through
// pods/resize (the kubelet applies it), given debugging containers
// through pods/ephemeralcontainers (the kubelet starts them), deleted gracefully while a
// kubelet may be running them, and their log, exec, attach and
// portforward are answered by that kubelet.
func pods() *Resource {
	return &Resource{
		GVR: gvr("", "v1", "pods"), Kind: "Pod", Singular: "pod", ShortNames: []string{"po"}, Categories: []string{"all"}, Namespaced: true,
		New: func() runtime.Object { return &corev1.Pod{} }, NewList: func() runtime.Object { return &corev1.PodList{} },
		Status: true, Fields: podFields,
		Subresources: []Subresource{
			{Name: "binding", Verbs: []string{"create"}, GVK: gvk("Binding"), Kind: BindingSubresource},
			{Name: "eviction", Verbs: []string{"create"}, GVK: schema.GroupVersionKind{Group: "policy", Version: "v1", Kind: "Eviction"}, Kind: EvictionSubresource},
			{Name: "log", Verbs: []string{"get"}, GVK: gvk("Pod"), Kind: KubeletSubresource},
			{Name: "exec", Verbs: []string{"create", "get"}, GVK: gvk("PodExecOptions"), Kind: KubeletSubresource},
			{Name: "attach", Verbs: []string{"create", "get"}, GVK: gvk("PodAttachOptions"), Kind: KubeletSubresource},
			{Name: "portforward", Verbs: []string{"create", "get"}, GVK: gvk("PodPortForwardOptions"), Kind: KubeletSubresource},
			{Name: "proxy", Verbs: []string{"create", "delete", "get", "patch", "update"}, GVK: gvk("PodProxyOptions"), Kind: PodProxySubresource},
			{Name: "resize", Verbs: []string{"get", "patch", "update"}, GVK: gvk("Pod"), Kind: SpecLikeSubresource,
				Prepare: preparePodResize, ValidateUpdate: updateValidator(validatePodResize)},
			{Name: "ephemeralcontainers", Verbs: []string{"get", "patch", "update"}, GVK: gvk("Pod"), Kind: SpecLikeSubresource,
				Prepare: preparePodEphemeralContainers, ValidateUpdate: updateValidator(validation.PodEphemeralContainersUpdate)},
		},
		Strategy: Strategy{
			Default:              defaulter(defaults.Pod),
			Validate:             validator(validation.Pod),
			ValidateUpdate:       updateValidator(validation.PodUpdate),
			ValidateStatusUpdate: updateValidator(validation.PodStatusUpdate),
			PrepareForCreate:     preparePod,
			GracePeriod:          podGracePeriod,
			Bind:                 bindPod,
		},
	}
}

func podFields(o runtime.Object) fields.Set {
	p := o.(*corev1.Pod)
	return fields.Set{
		"spec.nodeName":            p.Spec.NodeName,
		"spec.restartPolicy":       string(p.Spec.RestartPolicy),
		"spec.schedulerName":       p.Spec.SchedulerName,
		"spec.serviceAccountName":  p.Spec.ServiceAccountName,
		"spec.hostNetwork":         strconv.FormatBool(p.Spec.HostNetwork),
		"status.phase":             string(p.Status.Phase),
		"status.podIP":             p.Status.PodIP,
		"status.nominatedNodeName": p.Status.NominatedNodeName,
	}
}

func preparePod(o runtime.Object) {
	p := o.(*corev1.Pod)
	p.Status = corev1.PodStatus{Phase: corev1.PodPending, QOSClass: QOSClass(p)}
}

// podGracePeriod is 0 for pods no kubelet runs (unbound or finished);
// others get the requested or the pod's own terminationGracePeriodSeconds.
func podGracePeriod(o runtime.Object, opts *metav1.DeleteOptions) int64 {
	pod := o.(*corev1.Pod)
	if pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return 0
	}
	if opts.GracePeriodSeconds != nil {
		return *opts.GracePeriodSeconds
	}
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		return *pod.Spec.TerminationGracePeriodSeconds
	}
	return corev1.DefaultTerminationGracePeriodSeconds
}

// bindPod sets spec.nodeName and the PodScheduled condition, the one spec
// change a pod allows. A pod is bound once: a second binding conflicts.
func bindPod(o runtime.Object, b *corev1.Binding) (runtime.Object, error) {
	pod := o.DeepCopyObject().(*corev1.Pod)
	gr := corev1.Resource("pods")
	if b.UID != "" && b.UID != pod.UID {
		return nil, apierrors.NewConflict(gr, pod.Name, fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", b.UID, pod.UID))
	}
	if pod.DeletionTimestamp != nil {
		return nil, apierrors.NewConflict(gr, pod.Name, fmt.Errorf("pod %s is being deleted, cannot be assigned to a host", pod.Name))
	}
	if pod.Spec.NodeName != "" {
		return nil, apierrors.NewConflict(gr, pod.Name, fmt.Errorf("pod %s is already assigned to node %q", pod.Name, pod.Spec.NodeName))
	}
	pod.Spec.NodeName = b.Target.Name
	for k, v := range b.Annotations {
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[k] = v
	}
	setPodCondition(&pod.Status, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()})
	return pod, nil
}

func setPodCondition(st *corev1.PodStatus, c corev1.PodCondition) {
	for i := range st.Conditions {
		if st.Conditions[i].Type == c.Type {
			if st.Conditions[i].Status != c.Status {
				st.Conditions[i] = c
			}
			return
		}
	}
	st.Conditions = append(st.Conditions, c)
}

// preparePodResize is upstream's ResizeStrategy.PrepareForUpdate: of a
// write through pods/resize only the containers' resources and
// resizePolicy and the pod-level resources are kept; everything else,
// metadata included, stays as stored. A write that adds, removes or
// renames containers is kept whole, for validatePodResize to refuse.
func preparePodResize(obj, old runtime.Object) {
	p, o := obj.(*corev1.Pod), old.(*corev1.Pod)
	if len(p.Spec.Containers) != len(o.Spec.Containers) || len(p.Spec.InitContainers) != len(o.Spec.InitContainers) {
		return
	}
	containers, ok := resizedContainers(p.Spec.Containers, o.Spec.Containers)
	if !ok {
		return
	}
	inits, ok := resizedContainers(p.Spec.InitContainers, o.Spec.InitContainers)
	if !ok {
		return
	}
	podResources := p.Spec.Resources
	if podResources == nil && o.Spec.Resources != nil {
		// A client that does not know pod-level resources dropped them:
		// they stay (upstream's PodLevelResourcesFixDefaulting).
		podResources = o.Spec.Resources.DeepCopy()
	}
	p.Spec = *o.Spec.DeepCopy()
	p.Spec.Containers, p.Spec.InitContainers, p.Spec.Resources = containers, inits, podResources
	// As metav1.ResetObjectMetaForStatus: the subresource changes no
	// metadata.
	p.Labels, p.Annotations = o.Labels, o.Annotations
	p.Finalizers, p.OwnerReferences = o.Finalizers, o.OwnerReferences
}

// resizedContainers is old with the resources and resizePolicy of
// resized; false when a container was renamed or reordered.
func resizedContainers(resized, old []corev1.Container) ([]corev1.Container, bool) {
	if len(resized) == 0 {
		return resized, true
	}
	out := make([]corev1.Container, len(old))
	for i := range old {
		if resized[i].Name != old[i].Name {
			return nil, false
		}
		out[i] = *old[i].DeepCopy()
		out[i].Resources, out[i].ResizePolicy = resized[i].Resources, resized[i].ResizePolicy
	}
	return out, true
}

// validatePodResize is upstream's ValidatePodResize, with the QoS
// classes computed here, where QOSClass is.
func validatePodResize(newPod, oldPod *corev1.Pod) field.ErrorList {
	oldQOS := oldPod.Status.QOSClass
	if oldQOS == "" {
		oldQOS = QOSClass(oldPod)
	}
	return validation.PodResize(newPod, oldPod, oldQOS, QOSClass(newPod))
}

// preparePodEphemeralContainers is upstream's
// podEphemeralContainersStrategy.PrepareForUpdate: of a write through
// pods/ephemeralcontainers only spec.ephemeralContainers is kept;
// everything else, metadata included, stays as stored.
func preparePodEphemeralContainers(obj, old runtime.Object) {
	p, o := obj.(*corev1.Pod), old.(*corev1.Pod)
	ephemeral := p.Spec.EphemeralContainers
	metav1.ResetObjectMetaForStatus(&p.ObjectMeta, &o.ObjectMeta)
	p.Spec = *o.Spec.DeepCopy()
	p.Spec.EphemeralContainers = ephemeral
}
