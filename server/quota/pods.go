package quota

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apiserver/pkg/admission"
	quota "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/apiserver/pkg/quota/v1/generic"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/kubectl/pkg/util/qos"
	"k8s.io/utils/clock"
)

var podsGVR = corev1.SchemeGroupVersion.WithResource("pods")

// podObjectCountName is count/pods.
var podObjectCountName = generic.ObjectCountQuotaResourceNameFor(podsGVR.GroupResource())

var resourceRequestsDeviceClassPrefix = corev1.DefaultResourceRequestsPrefix + resourceapi.ResourceDeviceClassPrefix

// podResources are the resources a pod is charged for.
var podResources = []corev1.ResourceName{
	podObjectCountName,
	corev1.ResourceCPU,
	corev1.ResourceMemory,
	corev1.ResourceEphemeralStorage,
	corev1.ResourceRequestsCPU,
	corev1.ResourceRequestsMemory,
	corev1.ResourceRequestsEphemeralStorage,
	corev1.ResourceLimitsCPU,
	corev1.ResourceLimitsMemory,
	corev1.ResourceLimitsEphemeralStorage,
	corev1.ResourcePods,
}

// podResourcePrefixes are the prefixed resources (hugepages) quota tracks
// for pods; requestedResourcePrefixes those a pod's requests may name.
var (
	podResourcePrefixes       = []string{corev1.ResourceHugePagesPrefix, corev1.ResourceRequestsHugePagesPrefix}
	requestedResourcePrefixes = []string{corev1.ResourceHugePagesPrefix}
)

// isNativeResource is upstream's helper: no domain, or one under
// kubernetes.io/.
func isNativeResource(name corev1.ResourceName) bool {
	return !strings.Contains(string(name), "/") || strings.Contains(string(name), corev1.ResourceDefaultNamespacePrefix)
}

// isExtendedResourceName is upstream's helper: a non-native name that
// makes a valid quota name once prefixed with requests.
func isExtendedResourceName(name corev1.ResourceName) bool {
	if isNativeResource(name) || strings.HasPrefix(string(name), corev1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(corev1.DefaultResourceRequestsPrefix+string(name))) == 0
}

// isExtendedResourceNameForQuota: requests.<extended resource> (or the
// implicit requests.deviceclass.resource.kubernetes.io/<class>).
func isExtendedResourceNameForQuota(name corev1.ResourceName) bool {
	nonNative := !isNativeResource(name)
	implicit := strings.HasPrefix(string(name), resourceRequestsDeviceClassPrefix)
	return (nonNative || implicit) && strings.HasPrefix(string(name), corev1.DefaultResourceRequestsPrefix)
}

// validationSet: a quota on any of these makes every container state it,
// upstream's backward-compatible mistake ("do not add more resources").
var validationSet = sets.NewString(
	string(corev1.ResourceCPU),
	string(corev1.ResourceMemory),
	string(corev1.ResourceRequestsCPU),
	string(corev1.ResourceRequestsMemory),
	string(corev1.ResourceLimitsCPU),
	string(corev1.ResourceLimitsMemory),
)

// NewPodEvaluator returns upstream's pod evaluator.
func NewPodEvaluator(f quota.ListerForResourceFunc, clk clock.Clock) quota.Evaluator {
	e := &podEvaluator{clock: clk}
	e.evaluator = newEvaluator(f, podsGVR, podMatchesScopeFunc, e.MatchingResources, e.Usage)
	return e
}

type podEvaluator struct {
	evaluator
	clock clock.Clock
}

func toPod(obj runtime.Object) (*corev1.Pod, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, fmt.Errorf("expect *api.Pod or *v1.Pod, got %T", obj)
	}
	return pod, nil
}

// Constraints requires each container to state what a quota on cpu or
// memory tracks (unless the pod sets pod-level resources).
func (p *podEvaluator) Constraints(required []corev1.ResourceName, item runtime.Object) error {
	pod, err := toPod(item)
	if err != nil {
		return err
	}
	if resourcehelper.IsPodLevelResourcesSet(pod) {
		return nil
	}
	requiredSet := quota.ToSet(required).Intersection(validationSet)
	missing := map[string]sets.String{}
	for i := range pod.Spec.Containers {
		enforcePodContainerConstraints(&pod.Spec.Containers[i], requiredSet, missing)
	}
	for i := range pod.Spec.InitContainers {
		enforcePodContainerConstraints(&pod.Spec.InitContainers[i], requiredSet, missing)
	}
	if len(missing) == 0 {
		return nil
	}
	names := sets.NewString()
	for name := range missing {
		names.Insert(name)
	}
	msgs := make([]string, 0, len(missing))
	for _, name := range names.List() {
		msgs = append(msgs, fmt.Sprintf("%s for: %s", name, strings.Join(missing[name].List(), ",")))
	}
	return fmt.Errorf("must specify %s", strings.Join(msgs, "; "))
}

// Handles: creates, updates that change the Terminating scope, and
// resizes.
func (p *podEvaluator) Handles(a admission.Attributes) bool {
	op := a.GetOperation()
	switch a.GetSubresource() {
	case "":
		if op == admission.Update {
			pod, err1 := toPod(a.GetObject())
			old, err2 := toPod(a.GetOldObject())
			if err1 != nil || err2 != nil {
				return false
			}
			if IsTerminating(old) != IsTerminating(pod) {
				return true
			}
		}
		return op == admission.Create
	case "resize":
		return op == admission.Update
	default:
		return false
	}
}

func (p *podEvaluator) MatchingResources(input []corev1.ResourceName) []corev1.ResourceName {
	result := quota.Intersection(input, podResources)
	for _, name := range input {
		if quota.ContainsPrefix(podResourcePrefixes, name) {
			result = append(result, name)
		}
		if isExtendedResourceNameForQuota(name) {
			result = append(result, name)
		}
	}
	return result
}

func (p *podEvaluator) Usage(item runtime.Object) (corev1.ResourceList, error) {
	return PodUsage(item, p.clock)
}

func enforcePodContainerConstraints(c *corev1.Container, requiredSet sets.String, missing map[string]sets.String) {
	usage := podComputeUsageHelper(c.Resources.Requests, c.Resources.Limits)
	have := quota.ToSet(quota.ResourceNames(usage))
	if have.Equal(requiredSet) {
		return
	}
	for _, diff := range requiredSet.Difference(have).List() {
		if _, ok := missing[diff]; !ok {
			missing[diff] = sets.NewString(c.Name)
		} else {
			missing[diff].Insert(c.Name)
		}
	}
}

// podComputeUsageHelper turns requests and limits into quota's names.
func podComputeUsageHelper(requests, limits corev1.ResourceList) corev1.ResourceList {
	result := corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")}
	if q, ok := requests[corev1.ResourceCPU]; ok {
		result[corev1.ResourceCPU] = q
		result[corev1.ResourceRequestsCPU] = q
	}
	if q, ok := limits[corev1.ResourceCPU]; ok {
		result[corev1.ResourceLimitsCPU] = q
	}
	if q, ok := requests[corev1.ResourceMemory]; ok {
		result[corev1.ResourceMemory] = q
		result[corev1.ResourceRequestsMemory] = q
	}
	if q, ok := limits[corev1.ResourceMemory]; ok {
		result[corev1.ResourceLimitsMemory] = q
	}
	if q, ok := requests[corev1.ResourceEphemeralStorage]; ok {
		result[corev1.ResourceEphemeralStorage] = q
		result[corev1.ResourceRequestsEphemeralStorage] = q
	}
	if q, ok := limits[corev1.ResourceEphemeralStorage]; ok {
		result[corev1.ResourceLimitsEphemeralStorage] = q
	}
	for name, q := range requests {
		if quota.ContainsPrefix(requestedResourcePrefixes, name) {
			result[name] = q
			result[corev1.ResourceName(corev1.DefaultResourceRequestsPrefix+string(name))] = q
		}
		if isExtendedResourceName(name) || strings.HasPrefix(string(name), resourceapi.ResourceDeviceClassPrefix) {
			result[corev1.ResourceName(corev1.DefaultResourceRequestsPrefix+string(name))] = q
		}
	}
	return result
}

func podMatchesScopeFunc(selector corev1.ScopedResourceSelectorRequirement, object runtime.Object) (bool, error) {
	pod, err := toPod(object)
	if err != nil {
		return false, err
	}
	switch selector.ScopeName {
	case corev1.ResourceQuotaScopeTerminating:
		return IsTerminating(pod), nil
	case corev1.ResourceQuotaScopeNotTerminating:
		return !IsTerminating(pod), nil
	case corev1.ResourceQuotaScopeBestEffort:
		return isBestEffort(pod), nil
	case corev1.ResourceQuotaScopeNotBestEffort:
		return !isBestEffort(pod), nil
	case corev1.ResourceQuotaScopePriorityClass:
		if selector.Operator == corev1.ScopeSelectorOpExists {
			return len(pod.Spec.PriorityClassName) != 0, nil
		}
		sel, err := scopedSelector(selector)
		if err != nil {
			return false, fmt.Errorf("failed to parse and convert selector: %v", err)
		}
		var m map[string]string
		if len(pod.Spec.PriorityClassName) != 0 {
			m = map[string]string{string(corev1.ResourceQuotaScopePriorityClass): pod.Spec.PriorityClassName}
		}
		return sel.Matches(labels.Set(m)), nil
	case corev1.ResourceQuotaScopeCrossNamespacePodAffinity:
		return usesCrossNamespacePodAffinity(pod), nil
	}
	return false, nil
}

// PodUsage is upstream's PodUsageFunc: count/pods always; the compute
// resources and "pods" only while the pod is not terminal nor past its
// deletion grace period.
func PodUsage(obj runtime.Object, clk clock.Clock) (corev1.ResourceList, error) {
	pod, err := toPod(obj)
	if err != nil {
		return corev1.ResourceList{}, err
	}
	result := corev1.ResourceList{podObjectCountName: *resource.NewQuantity(1, resource.DecimalSI)}
	if !QuotaV1Pod(pod, clk) {
		return result, nil
	}
	opts := resourcehelper.PodResourcesOptions{UseStatusResources: true}
	requests := resourcehelper.PodRequests(pod, opts)
	limits := resourcehelper.PodLimits(pod, opts)
	return quota.Add(result, podComputeUsageHelper(requests, limits)), nil
}

// isBestEffort: the pod's QoS class (its status's, else computed as
// upstream does) is BestEffort.
func isBestEffort(pod *corev1.Pod) bool {
	return qos.GetPodQOS(pod) == corev1.PodQOSBestEffort
}

// IsTerminating: the pod has an activeDeadlineSeconds.
func IsTerminating(pod *corev1.Pod) bool {
	return pod.Spec.ActiveDeadlineSeconds != nil && *pod.Spec.ActiveDeadlineSeconds >= 0
}

func crossNamespaceTerm(t *corev1.PodAffinityTerm) bool {
	return len(t.Namespaces) != 0 || t.NamespaceSelector != nil
}

func crossNamespaceTerms(terms []corev1.PodAffinityTerm, weighted []corev1.WeightedPodAffinityTerm) bool {
	for i := range terms {
		if crossNamespaceTerm(&terms[i]) {
			return true
		}
	}
	for i := range weighted {
		if crossNamespaceTerm(&weighted[i].PodAffinityTerm) {
			return true
		}
	}
	return false
}

func usesCrossNamespacePodAffinity(pod *corev1.Pod) bool {
	if pod == nil || pod.Spec.Affinity == nil {
		return false
	}
	if a := pod.Spec.Affinity.PodAffinity; a != nil &&
		crossNamespaceTerms(a.RequiredDuringSchedulingIgnoredDuringExecution, a.PreferredDuringSchedulingIgnoredDuringExecution) {
		return true
	}
	if a := pod.Spec.Affinity.PodAntiAffinity; a != nil &&
		crossNamespaceTerms(a.RequiredDuringSchedulingIgnoredDuringExecution, a.PreferredDuringSchedulingIgnoredDuringExecution) {
		return true
	}
	return false
}

// QuotaV1Pod: a pod is charged unless its phase is terminal or its
// deletion's grace period has passed (a pod stuck terminating on a lost
// node must not block new ones).
func QuotaV1Pod(pod *corev1.Pod, clk clock.Clock) bool {
	if pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
		return false
	}
	if pod.DeletionTimestamp != nil && pod.DeletionGracePeriodSeconds != nil {
		grace := time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
		if clk.Now().After(pod.DeletionTimestamp.Time.Add(grace)) {
			return false
		}
	}
	return true
}
