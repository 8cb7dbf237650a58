package validation

import (
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// PodResize is upstream's ValidatePodResize (InPlacePodVerticalScaling
// GA, its init-container and pod-level-resources gates on as in 1.37, the
// memory-backed-volumes gate off): a write through pods/resize may change
// only the cpu and memory requests and limits of containers (and of the
// pod), and the containers' resizePolicy; none may be removed, the QoS
// class stays (oldQOS is the stored pod's, newQOS the resized pod's), and
// static and Windows pods are not resized at all.
func PodResize(newPod, oldPod *corev1.Pod, oldQOS, newQOS corev1.PodQOSClass) field.ErrorList {
	allErrs := validateObjectMetaUpdate(&newPod.ObjectMeta, &oldPod.ObjectMeta)
	allErrs = append(allErrs, validateObjectMeta(&newPod.ObjectMeta, true, nameIsDNSSubdomain)...)
	allErrs = append(allErrs, validatePodSpec(&newPod.Spec, specPath, podSpecContext{isPod: true})...)

	if _, ok := oldPod.Annotations[corev1.MirrorPodAnnotationKey]; ok {
		return field.ErrorList{field.Forbidden(field.NewPath(""), "static pods cannot be resized")}
	}
	if oldPod.Spec.OS != nil && oldPod.Spec.OS.Name == corev1.Windows {
		return field.ErrorList{field.Forbidden(field.NewPath(""), "windows pods cannot be resized")}
	}
	if oldQOS != newQOS {
		allErrs = append(allErrs, field.Invalid(specPath, newPod.Status.QOSClass, "Pod QOS Class may not change as a result of resizing"))
	}
	if !resizeSupportedByNode(oldPod) {
		allErrs = append(allErrs, field.Forbidden(specPath, "Pod running on node without support for resize"))
	}

	munged := newPod.Spec.DeepCopy()
	if hasPodLevelResources(oldPod) || hasPodLevelResources(newPod) {
		allErrs = append(allErrs, validatePodLevelResourcesResize(newPod, oldPod, munged)...)
	}

	if errs := validateResizeContainerOrder(newPod, oldPod); errs != nil {
		return append(allErrs, errs...)
	}
	for i := range oldPod.Spec.InitContainers {
		allErrs = append(allErrs, validateContainerResize(&newPod.Spec.InitContainers[i].Resources, &oldPod.Spec.InitContainers[i].Resources,
			specPath.Child("initContainers").Index(i).Child("resources"))...)
	}
	for i := range oldPod.Spec.Containers {
		allErrs = append(allErrs, validateContainerResize(&newPod.Spec.Containers[i].Resources, &oldPod.Spec.Containers[i].Resources,
			specPath.Child("containers").Index(i).Child("resources"))...)
	}

	// Only cpu and memory may change: put the old values back and demand
	// equality, container by container.
	for i := range munged.Containers {
		c := &munged.Containers[i]
		keepOldCPUMemory(c, &oldPod.Spec.Containers[i])
		if !apiequality.Semantic.DeepEqual(*c, oldPod.Spec.Containers[i]) {
			allErrs = append(allErrs, field.Forbidden(specPath, "only cpu and memory resources are mutable"))
		}
	}
	for i := range munged.InitContainers {
		c := &munged.InitContainers[i]
		old := &oldPod.Spec.InitContainers[i]
		modified := !apiequality.Semantic.DeepEqual(*c, *old)
		keepOldCPUMemory(c, old)
		if !apiequality.Semantic.DeepEqual(*c, *old) {
			allErrs = append(allErrs, field.Forbidden(specPath.Child("initContainers").Index(i), "only cpu and memory resources for init or sidecar containers are mutable"))
		}
		if modified && !isSidecar(c) {
			for _, p := range c.ResizePolicy {
				if p.RestartPolicy == corev1.RestartContainer {
					allErrs = append(allErrs, field.Forbidden(specPath.Child("initContainers").Index(i), "non-sidecar init containers with a resize policy of RestartContainer cannot be resized"))
				}
			}
		}
	}
	if !apiequality.Semantic.DeepEqual(newPod.Spec.Volumes, oldPod.Spec.Volumes) {
		allErrs = append(allErrs, field.Forbidden(specPath.Child("volumes"), "volumes are immutable on resize when InPlacePodVerticalScalingMemoryBackedVolumes feature gate is disabled"))
	}
	munged.Volumes = oldPod.Spec.Volumes
	if len(allErrs) > 0 {
		return allErrs
	}
	if !apiequality.Semantic.DeepEqual(*munged, oldPod.Spec) {
		allErrs = append(allErrs, field.Forbidden(specPath, "only cpu and memory resources are mutable"))
	}
	return allErrs
}

// resizeSupportedByNode is upstream's isPodResizeRequestSupported: a node
// that resizes reports the resources of its running containers, so a
// running container without them is on a node that cannot. With nothing
// running, nobody can tell, and the resize is allowed.
func resizeSupportedByNode(pod *corev1.Pod) bool {
	for _, c := range pod.Status.ContainerStatuses {
		if c.State.Running != nil {
			return c.Resources != nil
		}
	}
	return true
}

func hasPodLevelResources(pod *corev1.Pod) bool {
	r := pod.Spec.Resources
	return r != nil && len(r.Requests)+len(r.Limits) > 0
}

func isSidecar(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// validateResizeContainerOrder: containers may not be added, removed,
// renamed or reordered by a resize.
func validateResizeContainerOrder(newPod, oldPod *corev1.Pod) field.ErrorList {
	var errs field.ErrorList
	check := func(newC, oldC []corev1.Container, what string) {
		p := specPath.Child(what)
		if len(newC) != len(oldC) {
			errs = append(errs, field.Forbidden(p, what+" may not be added or removed on resize"))
			return
		}
		for i := range oldC {
			if newC[i].Name != oldC[i].Name {
				errs = append(errs, field.Forbidden(p.Index(i).Child("name"), what+" may not be renamed or reordered on resize"))
			}
		}
	}
	check(newPod.Spec.Containers, oldPod.Spec.Containers, "containers")
	check(newPod.Spec.InitContainers, oldPod.Spec.InitContainers, "initContainers")
	return errs
}

// validateContainerResize: requests and limits may change, never go.
func validateContainerResize(newR, oldR *corev1.ResourceRequirements, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if resourcesRemoved(newR.Requests, oldR.Requests) {
		errs = append(errs, field.Forbidden(fldPath.Child("requests"), "resource requests cannot be removed"))
	}
	if resourcesRemoved(newR.Limits, oldR.Limits) {
		errs = append(errs, field.Forbidden(fldPath.Child("limits"), "resource limits cannot be removed"))
	}
	return errs
}

func resourcesRemoved(list, old corev1.ResourceList) bool {
	for name := range old {
		if _, ok := list[name]; !ok {
			return true
		}
	}
	return false
}

// validatePodLevelResourcesResize is upstream's: pod-level cpu and memory
// may change, not be removed, and nothing else of spec.resources may
// change; munged.Resources gets the old cpu and memory back.
func validatePodLevelResourcesResize(newPod, oldPod *corev1.Pod, munged *corev1.PodSpec) field.ErrorList {
	var errs field.ErrorList
	p := specPath.Child("resources")
	if oldPod.Spec.Resources != nil && newPod.Spec.Resources == nil {
		return field.ErrorList{field.Forbidden(p, "pod-level resources cannot be removed")}
	}
	if old := oldPod.Spec.Resources; old != nil {
		if resourcesRemoved(newPod.Spec.Resources.Requests, old.Requests) {
			errs = append(errs, field.Forbidden(p.Child("requests"), "pod-level resource requests cannot be removed"))
		}
		if resourcesRemoved(newPod.Spec.Resources.Limits, old.Limits) {
			errs = append(errs, field.Forbidden(p.Child("limits"), "pod-level resource limits cannot be removed"))
		}
	}
	if r := munged.Resources; r != nil {
		var oldReqs, oldLims corev1.ResourceList
		if oldPod.Spec.Resources != nil {
			oldReqs, oldLims = oldPod.Spec.Resources.Requests, oldPod.Spec.Resources.Limits
		}
		r.Requests, r.Limits = oldCPUMemory(r.Requests, oldReqs), oldCPUMemory(r.Limits, oldLims)
		if oldPod.Spec.Resources == nil && len(r.Requests) == 0 && len(r.Limits) == 0 && len(r.Claims) == 0 {
			munged.Resources = nil
		}
	}
	if !apiequality.Semantic.DeepEqual(munged.Resources, oldPod.Spec.Resources) {
		errs = append(errs, field.Forbidden(specPath, "only cpu and memory resources are mutable at pod-level"))
	}
	return errs
}

// oldCPUMemory is list with its cpu and memory as in old (upstream's
// dropCPUMemoryUpdates).
func oldCPUMemory(list, old corev1.ResourceList) corev1.ResourceList {
	if list == nil && old == nil {
		return nil
	}
	out := list.DeepCopy()
	if out == nil {
		out = corev1.ResourceList{}
	}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		delete(out, name)
		if q, ok := old[name]; ok {
			out[name] = q
		}
	}
	return out
}

// keepOldCPUMemory puts old's cpu and memory back into c (claims are
// immutable and kept as c has them, for the comparison to catch).
func keepOldCPUMemory(c, old *corev1.Container) {
	c.Resources = corev1.ResourceRequirements{
		Limits:   oldCPUMemory(c.Resources.Limits, old.Resources.Limits),
		Requests: oldCPUMemory(c.Resources.Requests, old.Resources.Requests),
		Claims:   c.Resources.Claims,
	}
}
