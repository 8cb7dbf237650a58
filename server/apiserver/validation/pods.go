package validation

import (
	"fmt"
	"math"
	"path"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilsysctl "k8s.io/component-helpers/node/util/sysctl"
)

// podSpecContext says where a PodSpec is embedded, because a few rules
// differ between a Pod and a workload's pod template.
type podSpecContext struct {
	// isPod: a real Pod (image whitespace rule, ephemeral containers come
	// only through their subresource).
	isPod bool
	// extraVolumes are names a template may mount without declaring them
	// in spec.volumes: a StatefulSet's volumeClaimTemplates.
	extraVolumes []string
	// restartPolicy is the pod's, which bounds the containers'
	// resizePolicy (set by validatePodSpec).
	restartPolicy corev1.RestartPolicy
}

var (
	supportedPortProtocols   = sets.New(corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP)
	supportedRestartPolicies = []corev1.RestartPolicy{
		corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever,
	}
	supportedDNSPolicies = []corev1.DNSPolicy{
		corev1.DNSClusterFirstWithHostNet, corev1.DNSClusterFirst, corev1.DNSDefault, corev1.DNSNone,
	}
	supportedPullPolicies               = []corev1.PullPolicy{corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever}
	supportedTerminationMessagePolicies = []corev1.TerminationMessagePolicy{
		corev1.TerminationMessageReadFile, corev1.TerminationMessageFallbackToLogsOnError,
	}
	supportedTaintEffects = []corev1.TaintEffect{
		corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute,
	}
	supportedURISchemes               = []corev1.URIScheme{corev1.URISchemeHTTP, corev1.URISchemeHTTPS}
	supportedContainerRestartPolicies = []corev1.ContainerRestartPolicy{
		corev1.ContainerRestartPolicyAlways, corev1.ContainerRestartPolicyOnFailure, corev1.ContainerRestartPolicyNever,
	}
)

// updatablePodSpecFields is upstream's list, quoted verbatim in the error
// for a forbidden pod update.
var updatablePodSpecFields = []string{
	"`spec.containers[*].image`",
	"`spec.initContainers[*].image`",
	"`spec.activeDeadlineSeconds`",
	"`spec.tolerations` (only additions to existing tolerations)",
	"`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
}

// validatePod is ValidatePodCreate: metadata, spec, and the create-only rules.
func Pod(p *corev1.Pod) field.ErrorList {
	allErrs := validateObjectMeta(&p.ObjectMeta, true, nameIsDNSSubdomain)
	allErrs = append(allErrs, validatePodSpec(&p.Spec, specPath, podSpecContext{isPod: true})...)
	if len(p.Spec.EphemeralContainers) > 0 {
		allErrs = append(allErrs, field.Forbidden(specPath.Child("ephemeralContainers"), "cannot be set on create"))
	}
	if p.Spec.NodeName != "" && len(p.Spec.SchedulingGates) != 0 {
		allErrs = append(allErrs, field.Forbidden(specPath.Child("nodeName"), "cannot be set until all schedulingGates have been cleared"))
	}
	return allErrs
}

// validatePodUpdate is ValidatePodUpdate: a running pod's spec is
// immutable except for images, activeDeadlineSeconds (only shortened),
// added tolerations, removed scheduling gates, the negative grace period
// fix-up, and (while scheduling-gated) additions to node selection.
func PodUpdate(newPod, oldPod *corev1.Pod) field.ErrorList {
	allErrs := validateObjectMetaUpdate(&newPod.ObjectMeta, &oldPod.ObjectMeta)
	allErrs = append(allErrs, validatePodSpec(&newPod.Spec, specPath, podSpecContext{isPod: true})...)

	errs, stop := validateContainerUpdates(newPod.Spec.Containers, oldPod.Spec.Containers, specPath.Child("containers"))
	allErrs = append(allErrs, errs...)
	if stop {
		return allErrs
	}
	errs, stop = validateContainerUpdates(newPod.Spec.InitContainers, oldPod.Spec.InitContainers, specPath.Child("initContainers"))
	allErrs = append(allErrs, errs...)
	if stop {
		return allErrs
	}

	adsPath := specPath.Child("activeDeadlineSeconds")
	if n := newPod.Spec.ActiveDeadlineSeconds; n != nil {
		if *n < 0 || *n > math.MaxInt32 {
			return append(allErrs, field.Invalid(adsPath, *n, inclusiveRangeError(0, math.MaxInt32)))
		}
		if o := oldPod.Spec.ActiveDeadlineSeconds; o != nil && *o < *n {
			return append(allErrs, field.Invalid(adsPath, *n, "must be less than or equal to previous value"))
		}
	} else if oldPod.Spec.ActiveDeadlineSeconds != nil {
		allErrs = append(allErrs, field.Invalid(adsPath, newPod.Spec.ActiveDeadlineSeconds, "must not update from a positive integer to nil value"))
	}

	allErrs = append(allErrs, validateOnlyAddedTolerations(newPod.Spec.Tolerations, oldPod.Spec.Tolerations, specPath.Child("tolerations"))...)
	allErrs = append(allErrs, validateOnlyDeletedSchedulingGates(newPod.Spec.SchedulingGates, oldPod.Spec.SchedulingGates, specPath.Child("schedulingGates"))...)

	if apiequality.Semantic.DeepEqual(newPod.Spec, oldPod.Spec) {
		return allErrs
	}

	// Neutralise every field that may change, then demand equality.
	munged := newPod.Spec.DeepCopy()
	for i := range munged.Containers {
		munged.Containers[i].Image = oldPod.Spec.Containers[i].Image
	}
	for i := range munged.InitContainers {
		munged.InitContainers[i].Image = oldPod.Spec.InitContainers[i].Image
	}
	munged.ActiveDeadlineSeconds = oldPod.Spec.ActiveDeadlineSeconds
	munged.SchedulingGates = oldPod.Spec.SchedulingGates
	munged.Tolerations = oldPod.Spec.Tolerations
	if o := oldPod.Spec.TerminationGracePeriodSeconds; o != nil && *o < 0 &&
		munged.TerminationGracePeriodSeconds != nil && *munged.TerminationGracePeriodSeconds == 1 {
		munged.TerminationGracePeriodSeconds = o
	}
	if len(oldPod.Spec.SchedulingGates) > 0 {
		// A gated pod is not scheduled yet: its node selection may be
		// narrowed (additions only), never widened.
		if !apiequality.Semantic.DeepEqual(munged.NodeSelector, oldPod.Spec.NodeSelector) {
			for k, v := range oldPod.Spec.NodeSelector {
				if nv, ok := munged.NodeSelector[k]; !ok || nv != v {
					allErrs = append(allErrs, field.Invalid(specPath.Child("nodeSelector"), munged.NodeSelector, "only additions to spec.nodeSelector are allowed (no mutations or deletions)"))
					break
				}
			}
			munged.NodeSelector = oldPod.Spec.NodeSelector
		}
		var oldNA *corev1.NodeAffinity
		if oldPod.Spec.Affinity != nil {
			oldNA = oldPod.Spec.Affinity.NodeAffinity
		}
		if munged.Affinity != nil && oldNA == nil && munged.Affinity.NodeAffinity != nil {
			if oldPod.Spec.Affinity == nil && munged.Affinity.PodAffinity == nil && munged.Affinity.PodAntiAffinity == nil {
				munged.Affinity = nil
			} else {
				munged.Affinity.NodeAffinity = nil
			}
		}
	}
	if !apiequality.Semantic.DeepEqual(*munged, oldPod.Spec) {
		diff := changedFields(oldPod.Spec, *munged, "spec")
		allErrs = append(allErrs, field.Forbidden(specPath, fmt.Sprintf("pod updates may not change fields other than %s\n%s",
			strings.Join(updatablePodSpecFields, ","), diff)))
	}
	return allErrs
}

// changedFields lists the top-level fields (by JSON name, under prefix)
// that differ between two values of the same struct type, for the message
// of a forbidden update. Upstream prints a go-cmp diff here, which is not a
// stable interface; the field list is what a user needs to fix the request.
func changedFields(oldObj, newObj any, prefix string) string {
	ov, nv := reflect.Indirect(reflect.ValueOf(oldObj)), reflect.Indirect(reflect.ValueOf(newObj))
	t := ov.Type()
	var changed []string
	for i := 0; i < t.NumField(); i++ {
		if !apiequality.Semantic.DeepEqual(ov.Field(i).Interface(), nv.Field(i).Interface()) {
			changed = append(changed, prefix+"."+jsonName(t.Field(i)))
		}
	}
	return "changed: " + strings.Join(changed, ", ")
}

func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "" {
		return f.Name
	}
	return name
}

func validateContainerUpdates(newC, oldC []corev1.Container, fldPath *field.Path) (field.ErrorList, bool) {
	if len(newC) != len(oldC) {
		return field.ErrorList{field.Forbidden(fldPath, "pod updates may not add or remove containers")}, true
	}
	return nil, false
}

func validateOnlyAddedTolerations(newT, oldT []corev1.Toleration, fldPath *field.Path) field.ErrorList {
	for _, old := range oldT {
		found := false
		for _, nt := range newT {
			clone := old
			clone.TolerationSeconds = nt.TolerationSeconds
			if apiequality.Semantic.DeepEqual(clone, nt) {
				found = true
				break
			}
		}
		if !found {
			return field.ErrorList{field.Forbidden(fldPath, "existing toleration can not be modified except its tolerationSeconds")}
		}
	}
	return nil
}

func validateOnlyDeletedSchedulingGates(newG, oldG []corev1.PodSchedulingGate, fldPath *field.Path) field.ErrorList {
	old := sets.New[string]()
	for _, g := range oldG {
		old.Insert(g.Name)
	}
	var errs field.ErrorList
	for i, g := range newG {
		if !old.Has(g.Name) {
			errs = append(errs, field.Forbidden(fldPath.Index(i), fmt.Sprintf("only deletion is allowed, but found new scheduling gate '%s'", g.Name)))
		}
	}
	return errs
}

// validatePodStatusUpdate covers what the kubelet and scheduler may write
// through pods/status.
func PodStatusUpdate(newPod, oldPod *corev1.Pod) field.ErrorList {
	allErrs := validateObjectMetaUpdate(&newPod.ObjectMeta, &oldPod.ObjectMeta)
	if newPod.Spec.NodeName != oldPod.Spec.NodeName {
		allErrs = append(allErrs, field.Forbidden(statusPath.Child("nodeName"), "may not be changed directly"))
	}
	if n := newPod.Status.NominatedNodeName; n != "" && n != oldPod.Status.NominatedNodeName {
		allErrs = append(allErrs, validateName(n, nameIsDNSSubdomain, statusPath.Child("nominatedNodeName"))...)
	}
	if oldPod.Status.QOSClass != "" {
		allErrs = append(allErrs, validateImmutable(newPod.Status.QOSClass, oldPod.Status.QOSClass, statusPath.Child("qosClass"))...)
	}
	system := sets.New(corev1.PodScheduled, corev1.PodReady, corev1.PodInitialized, corev1.ContainersReady)
	for i, c := range newPod.Status.Conditions {
		if !system.Has(c.Type) {
			allErrs = append(allErrs, validateQualifiedName(string(c.Type), statusPath.Child("conditions").Index(i).Child("type"))...)
		}
	}
	allErrs = append(allErrs, validateContainerStateTransition(newPod.Status.ContainerStatuses, oldPod.Status.ContainerStatuses,
		statusPath.Child("containerStatuses"), oldPod.Spec.RestartPolicy)...)
	for i, ip := range newPod.Status.PodIPs {
		allErrs = append(allErrs, validateIP(ip.IP, statusPath.Child("podIPs").Index(i).Child("ip"))...)
	}
	if len(newPod.Status.PodIPs) > 0 && newPod.Status.PodIP != "" && newPod.Status.PodIPs[0].IP != newPod.Status.PodIP {
		allErrs = append(allErrs, field.Invalid(statusPath.Child("podIPs").Index(0).Child("ip"), newPod.Status.PodIPs[0].IP, "must match `podIP`"))
	}
	for i, ip := range newPod.Status.HostIPs {
		allErrs = append(allErrs, validateIP(ip.IP, statusPath.Child("hostIPs").Index(i).Child("ip"))...)
	}
	return allErrs
}

// validateContainerStateTransition: a container that finished for good
// (restartPolicy Never, or OnFailure with exit 0) may not come back.
func validateContainerStateTransition(newS, oldS []corev1.ContainerStatus, fldPath *field.Path, rp corev1.RestartPolicy) field.ErrorList {
	if rp == corev1.RestartPolicyAlways {
		return nil
	}
	var errs field.ErrorList
	for i, o := range oldS {
		if o.State.Terminated == nil {
			continue
		}
		if o.State.Terminated.ExitCode != 0 && rp == corev1.RestartPolicyOnFailure {
			continue
		}
		for _, n := range newS {
			if n.Name == o.Name && n.State.Terminated == nil {
				errs = append(errs, field.Forbidden(fldPath.Index(i).Child("state"), "may not be transitioned to non-terminated state"))
			}
		}
	}
	return errs
}

// validatePodTemplateSpec is upstream's ValidatePodTemplateSpec. Note the
// upstream paths for template labels: <template>.labels, not
// <template>.metadata.labels.
func validatePodTemplateSpec(t *corev1.PodTemplateSpec, fldPath *field.Path, ctx podSpecContext) field.ErrorList {
	allErrs := metav1validation.ValidateLabels(t.Labels, fldPath.Child("labels"))
	allErrs = append(allErrs, apiValidateAnnotations(t.Annotations, fldPath.Child("annotations"))...)
	allErrs = append(allErrs, validatePodSpec(&t.Spec, fldPath.Child("spec"), ctx)...)
	if len(t.Spec.EphemeralContainers) > 0 {
		allErrs = append(allErrs, field.Forbidden(fldPath.Child("spec", "ephemeralContainers"), "ephemeral containers not allowed in pod template"))
	}
	return allErrs
}

// validatePodSpec is upstream's ValidatePodSpec for the fields that matter.
func validatePodSpec(spec *corev1.PodSpec, fldPath *field.Path, ctx podSpecContext) field.ErrorList {
	ctx.restartPolicy = spec.RestartPolicy
	vols, allErrs := validateVolumes(spec.Volumes, fldPath.Child("volumes"))
	for _, name := range ctx.extraVolumes {
		if _, ok := vols[name]; !ok {
			vols[name] = corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}
		}
	}
	allErrs = append(allErrs, validateContainers(spec, vols, fldPath, ctx)...)
	allErrs = append(allErrs, validateRestartPolicy(spec.RestartPolicy, fldPath.Child("restartPolicy"))...)
	allErrs = append(allErrs, validateDNSPolicy(spec.DNSPolicy, fldPath.Child("dnsPolicy"))...)
	allErrs = append(allErrs, validateDNSConfig(spec.DNSConfig, spec.DNSPolicy, fldPath.Child("dnsConfig"))...)
	allErrs = append(allErrs, metav1validation.ValidateLabels(spec.NodeSelector, fldPath.Child("nodeSelector"))...)
	allErrs = append(allErrs, validatePodSecurityContext(spec.SecurityContext, fldPath.Child("securityContext"))...)
	allErrs = append(allErrs, validateSysctls(spec, fldPath.Child("securityContext", "sysctls"))...)
	allErrs = append(allErrs, validateAffinity(spec.Affinity, fldPath.Child("affinity"))...)
	allErrs = append(allErrs, validateTolerations(spec.Tolerations, fldPath.Child("tolerations"))...)
	allErrs = append(allErrs, validateTopologySpreadConstraints(spec.TopologySpreadConstraints, fldPath.Child("topologySpreadConstraints"))...)
	allErrs = append(allErrs, validateHostNetworkPorts(spec, fldPath)...)
	allErrs = append(allErrs, validateHostPortConflicts(spec, fldPath)...)

	if spec.ServiceAccountName != "" {
		allErrs = append(allErrs, validateName(spec.ServiceAccountName, nameIsDNSSubdomain, fldPath.Child("serviceAccountName"))...)
	}
	if spec.NodeName != "" {
		allErrs = append(allErrs, validateName(spec.NodeName, nameIsDNSSubdomain, fldPath.Child("nodeName"))...)
	}
	if spec.Hostname != "" {
		allErrs = append(allErrs, validateDNS1123Label(spec.Hostname, fldPath.Child("hostname"))...)
	}
	if spec.Subdomain != "" {
		allErrs = append(allErrs, validateDNS1123Label(spec.Subdomain, fldPath.Child("subdomain"))...)
	}
	if spec.PriorityClassName != "" {
		allErrs = append(allErrs, validateName(spec.PriorityClassName, nameIsDNSSubdomain, fldPath.Child("priorityClassName"))...)
	}
	if spec.RuntimeClassName != nil {
		allErrs = append(allErrs, validateName(*spec.RuntimeClassName, nameIsDNSSubdomain, fldPath.Child("runtimeClassName"))...)
	}
	if spec.ActiveDeadlineSeconds != nil {
		if v := *spec.ActiveDeadlineSeconds; v <= 0 || v > math.MaxInt32 {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("activeDeadlineSeconds"), v, inclusiveRangeError(1, math.MaxInt32)))
		}
	}
	allErrs = append(allErrs, validateNonnegativePtr(spec.TerminationGracePeriodSeconds, fldPath.Child("terminationGracePeriodSeconds"))...)
	for i, ha := range spec.HostAliases {
		p := fldPath.Child("hostAliases").Index(i)
		allErrs = append(allErrs, validateIP(ha.IP, p.Child("ip"))...)
		for j, h := range ha.Hostnames {
			allErrs = append(allErrs, validateDNS1123Subdomain(h, p.Child("hostnames").Index(j))...)
		}
	}
	for i, g := range spec.ReadinessGates {
		allErrs = append(allErrs, validateQualifiedName(string(g.ConditionType), fldPath.Child("readinessGates").Index(i).Child("conditionType"))...)
	}
	gates := sets.New[string]()
	for i, g := range spec.SchedulingGates {
		p := fldPath.Child("schedulingGates").Index(i).Child("name")
		allErrs = append(allErrs, validateQualifiedName(g.Name, p)...)
		if gates.Has(g.Name) {
			allErrs = append(allErrs, field.Duplicate(p, g.Name))
		}
		gates.Insert(g.Name)
	}
	if spec.PreemptionPolicy != nil {
		if p := *spec.PreemptionPolicy; p != corev1.PreemptLowerPriority && p != corev1.PreemptNever {
			allErrs = append(allErrs, field.NotSupported(fldPath.Child("preemptionPolicy"), p, []corev1.PreemptionPolicy{corev1.PreemptLowerPriority, corev1.PreemptNever}))
		}
	}
	if spec.OS != nil {
		if n := spec.OS.Name; n != corev1.Linux && n != corev1.Windows {
			allErrs = append(allErrs, field.NotSupported(fldPath.Child("os", "name"), n, []corev1.OSName{corev1.Linux, corev1.Windows}))
		}
	}
	for name, q := range spec.Overhead {
		p := fldPath.Child("overhead").Key(string(name))
		allErrs = append(allErrs, validateContainerResourceName(name, p)...)
		allErrs = append(allErrs, validateNonnegativeQuantity(q, p)...)
	}
	if spec.Resources != nil {
		allErrs = append(allErrs, validateResourceRequirements(spec.Resources, fldPath.Child("resources"))...)
	}
	claims := sets.New[string]()
	for i, c := range spec.ResourceClaims {
		p := fldPath.Child("resourceClaims").Index(i).Child("name")
		allErrs = append(allErrs, validateDNS1123Label(c.Name, p)...)
		if claims.Has(c.Name) {
			allErrs = append(allErrs, field.Duplicate(p, c.Name))
		}
		claims.Insert(c.Name)
	}
	return allErrs
}

// validateRequiredEnum: v must be set and be one of supported.
func validateRequiredEnum[T ~string](v T, supported []T, fldPath *field.Path) field.ErrorList {
	if v == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	if !slices.Contains(supported, v) {
		return field.ErrorList{field.NotSupported(fldPath, v, supported)}
	}
	return nil
}

func validateRestartPolicy(rp corev1.RestartPolicy, fldPath *field.Path) field.ErrorList {
	return validateRequiredEnum(rp, supportedRestartPolicies, fldPath)
}

func validateDNSPolicy(p corev1.DNSPolicy, fldPath *field.Path) field.ErrorList {
	return validateRequiredEnum(p, supportedDNSPolicies, fldPath)
}

const (
	maxDNSNameservers    = 3
	maxDNSSearchPaths    = 32
	maxDNSSearchListChar = 2048
)

func validateDNSConfig(c *corev1.PodDNSConfig, policy corev1.DNSPolicy, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if policy == corev1.DNSNone {
		if c == nil {
			return field.ErrorList{field.Required(fldPath, fmt.Sprintf("must provide `dnsConfig` when `dnsPolicy` is %s", corev1.DNSNone))}
		}
		if len(c.Nameservers) == 0 {
			errs = append(errs, field.Required(fldPath.Child("nameservers"), fmt.Sprintf("must provide at least one DNS nameserver when `dnsPolicy` is %s", corev1.DNSNone)))
		}
	}
	if c == nil {
		return errs
	}
	if len(c.Nameservers) > maxDNSNameservers {
		errs = append(errs, field.Invalid(fldPath.Child("nameservers"), c.Nameservers, fmt.Sprintf("must not have more than %v nameservers", maxDNSNameservers)))
	}
	for i, ns := range c.Nameservers {
		errs = append(errs, validateIP(ns, fldPath.Child("nameservers").Index(i))...)
	}
	if len(c.Searches) > maxDNSSearchPaths {
		errs = append(errs, field.Invalid(fldPath.Child("searches"), c.Searches, fmt.Sprintf("must not have more than %v search paths", maxDNSSearchPaths)))
	}
	if len(strings.Join(c.Searches, " ")) > maxDNSSearchListChar {
		errs = append(errs, field.Invalid(fldPath.Child("searches"), c.Searches, fmt.Sprintf("must not have more than %v characters (including spaces) in the search list", maxDNSSearchListChar)))
	}
	for i, s := range c.Searches {
		// A trailing dot marks an absolute name; "." alone is allowed too.
		if s == "." {
			continue
		}
		errs = append(errs, validateDNS1123Subdomain(strings.TrimSuffix(s, "."), fldPath.Child("searches").Index(i))...)
	}
	for i, o := range c.Options {
		if o.Name == "" {
			errs = append(errs, field.Required(fldPath.Child("options").Index(i), "must not be empty"))
		}
	}
	return errs
}

// validateContainers covers init, regular containers and (on pods)
// ephemeral containers: names unique across all of them, each valid.
func validateContainers(spec *corev1.PodSpec, vols map[string]corev1.VolumeSource, fldPath *field.Path, ctx podSpecContext) field.ErrorList {
	var allErrs field.ErrorList
	names := sets.New[string]()
	// checkContainer applies the per-container rules and keeps names unique
	// across init, regular and ephemeral containers.
	checkContainer := func(c *corev1.Container, p *field.Path) {
		allErrs = append(allErrs, validateContainer(c, vols, p, ctx)...)
		if c.Name != "" {
			if names.Has(c.Name) {
				allErrs = append(allErrs, field.Duplicate(p.Child("name"), c.Name))
			}
			names.Insert(c.Name)
		}
	}

	initPath := fldPath.Child("initContainers")
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		p := initPath.Index(i)
		checkContainer(c, p)
		sidecar := c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
		if c.RestartPolicy != nil && !sidecar {
			allErrs = append(allErrs, field.NotSupported(p.Child("restartPolicy"), *c.RestartPolicy, []corev1.ContainerRestartPolicy{corev1.ContainerRestartPolicyAlways}))
		}
		if !sidecar {
			// A plain init container has finished before any resize
			// could restart it.
			for j, rp := range c.ResizePolicy {
				if rp.RestartPolicy == corev1.RestartContainer {
					allErrs = append(allErrs, field.Invalid(p.Child("resizePolicy").Index(j).Child("restartPolicy"), rp.RestartPolicy, "must not be set to 'RestartContainer' for non-sidecar initContainers"))
				}
			}
		}
		if !sidecar {
			// Plain init containers run to completion once: hooks and
			// probes have no meaning for them.
			msg := "may not be set for init containers without restartPolicy=Always"
			if c.Lifecycle != nil {
				allErrs = append(allErrs, field.Forbidden(p.Child("lifecycle"), msg))
			}
			if c.LivenessProbe != nil {
				allErrs = append(allErrs, field.Forbidden(p.Child("livenessProbe"), msg))
			}
			if c.ReadinessProbe != nil {
				allErrs = append(allErrs, field.Forbidden(p.Child("readinessProbe"), msg))
			}
			if c.StartupProbe != nil {
				allErrs = append(allErrs, field.Forbidden(p.Child("startupProbe"), msg))
			}
		}
	}

	ctrPath := fldPath.Child("containers")
	if len(spec.Containers) == 0 {
		allErrs = append(allErrs, field.Required(ctrPath, ""))
	}
	for i := range spec.Containers {
		c := &spec.Containers[i]
		p := ctrPath.Index(i)
		checkContainer(c, p)
		if c.RestartPolicy != nil && !slices.Contains(supportedContainerRestartPolicies, *c.RestartPolicy) {
			allErrs = append(allErrs, field.NotSupported(p.Child("restartPolicy"), *c.RestartPolicy, supportedContainerRestartPolicies))
		}
	}

	// Ephemeral containers: a target among the init and regular
	// containers, and only the fields upstream allows.
	targets := sets.New[string]()
	for _, c := range spec.InitContainers {
		targets.Insert(c.Name)
	}
	for _, c := range spec.Containers {
		targets.Insert(c.Name)
	}
	ephPath := fldPath.Child("ephemeralContainers")
	for i := range spec.EphemeralContainers {
		ec := &spec.EphemeralContainers[i]
		p := ephPath.Index(i)
		c := (*corev1.Container)(&ec.EphemeralContainerCommon)
		checkContainer(c, p)
		if ec.TargetContainerName != "" && !targets.Has(ec.TargetContainerName) {
			allErrs = append(allErrs, field.NotFound(p.Child("targetContainerName"), ec.TargetContainerName))
		}
		allErrs = append(allErrs, validateEphemeralContainerFields(ec.EphemeralContainerCommon, p)...)
		for j, vm := range ec.VolumeMounts {
			if vm.SubPath != "" {
				allErrs = append(allErrs, field.Forbidden(p.Child("volumeMounts").Index(j).Child("subPath"), "cannot be set for an Ephemeral Container"))
			}
			if vm.SubPathExpr != "" {
				allErrs = append(allErrs, field.Forbidden(p.Child("volumeMounts").Index(j).Child("subPathExpr"), "cannot be set for an Ephemeral Container"))
			}
		}
	}
	return allErrs
}

// validateContainer holds the per-container rules common to all kinds.
func validateContainer(c *corev1.Container, vols map[string]corev1.VolumeSource, p *field.Path, ctx podSpecContext) field.ErrorList {
	var allErrs field.ErrorList
	if c.Name == "" {
		allErrs = append(allErrs, field.Required(p.Child("name"), ""))
	} else {
		allErrs = append(allErrs, validateDNS1123Label(c.Name, p.Child("name"))...)
	}
	// Pod templates may legitimately carry an image that is filled in
	// later by tooling, but upstream still requires it to be non-empty.
	if c.Image == "" {
		allErrs = append(allErrs, field.Required(p.Child("image"), ""))
	} else if ctx.isPod && strings.TrimSpace(c.Image) != c.Image {
		allErrs = append(allErrs, field.Invalid(p.Child("image"), c.Image, "must not have leading or trailing whitespace"))
	}
	allErrs = append(allErrs, validateContainerPorts(c.Ports, p.Child("ports"))...)
	allErrs = append(allErrs, validateEnv(c.Env, p.Child("env"))...)
	allErrs = append(allErrs, validateEnvFrom(c.EnvFrom, p.Child("envFrom"))...)
	allErrs = append(allErrs, validateVolumeMounts(c.VolumeMounts, vols, p.Child("volumeMounts"))...)
	allErrs = append(allErrs, validateVolumeDevices(c.VolumeDevices, vols, p.Child("volumeDevices"))...)
	allErrs = append(allErrs, validateResourceRequirements(&c.Resources, p.Child("resources"))...)
	allErrs = append(allErrs, validateProbe(c.LivenessProbe, p.Child("livenessProbe"), true)...)
	allErrs = append(allErrs, validateProbe(c.ReadinessProbe, p.Child("readinessProbe"), false)...)
	allErrs = append(allErrs, validateProbe(c.StartupProbe, p.Child("startupProbe"), true)...)
	if c.ReadinessProbe != nil && c.ReadinessProbe.TerminationGracePeriodSeconds != nil {
		allErrs = append(allErrs, field.Invalid(p.Child("readinessProbe", "terminationGracePeriodSeconds"), *c.ReadinessProbe.TerminationGracePeriodSeconds, "must not be set for readinessProbes"))
	}
	if c.Lifecycle != nil {
		allErrs = append(allErrs, validateLifecycleHandler(c.Lifecycle.PostStart, p.Child("lifecycle", "postStart"))...)
		allErrs = append(allErrs, validateLifecycleHandler(c.Lifecycle.PreStop, p.Child("lifecycle", "preStop"))...)
	}
	allErrs = append(allErrs, validateRequiredEnum(c.TerminationMessagePolicy, supportedTerminationMessagePolicies, p.Child("terminationMessagePolicy"))...)
	allErrs = append(allErrs, validateRequiredEnum(c.ImagePullPolicy, supportedPullPolicies, p.Child("imagePullPolicy"))...)
	allErrs = append(allErrs, validateSecurityContext(c.SecurityContext, p.Child("securityContext"))...)
	allErrs = append(allErrs, validateResizePolicy(c.ResizePolicy, p.Child("resizePolicy"), ctx.restartPolicy)...)
	return allErrs
}

func validateContainerPorts(ports []corev1.ContainerPort, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	names := sets.New[string]()
	for i, port := range ports {
		p := fldPath.Index(i)
		if port.Name != "" {
			if msgs := validation.IsValidPortName(port.Name); len(msgs) != 0 {
				for _, msg := range msgs {
					allErrs = append(allErrs, field.Invalid(p.Child("name"), port.Name, msg))
				}
			} else if names.Has(port.Name) {
				allErrs = append(allErrs, field.Duplicate(p.Child("name"), port.Name))
			} else {
				names.Insert(port.Name)
			}
		}
		if port.ContainerPort == 0 {
			allErrs = append(allErrs, field.Required(p.Child("containerPort"), ""))
		} else {
			for _, msg := range validation.IsValidPortNum(int(port.ContainerPort)) {
				allErrs = append(allErrs, field.Invalid(p.Child("containerPort"), port.ContainerPort, msg))
			}
		}
		if port.HostPort != 0 {
			for _, msg := range validation.IsValidPortNum(int(port.HostPort)) {
				allErrs = append(allErrs, field.Invalid(p.Child("hostPort"), port.HostPort, msg))
			}
		}
		allErrs = append(allErrs, validateProtocol(port.Protocol, p.Child("protocol"))...)
		if port.HostIP != "" {
			allErrs = append(allErrs, validateIP(port.HostIP, p.Child("hostIP"))...)
		}
	}
	return allErrs
}

func validateProtocol(proto corev1.Protocol, fldPath *field.Path) field.ErrorList {
	if proto == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	if !supportedPortProtocols.Has(proto) {
		return field.ErrorList{field.NotSupported(fldPath, proto, sets.List(supportedPortProtocols))}
	}
	return nil
}

// validateHostNetworkPorts: with the host's network namespace a container
// port IS a host port, so a differing hostPort cannot be honoured.
func validateHostNetworkPorts(spec *corev1.PodSpec, fldPath *field.Path) field.ErrorList {
	if !spec.HostNetwork {
		return nil
	}
	var errs field.ErrorList
	check := func(cs []corev1.Container, p *field.Path) {
		for i := range cs {
			for j, port := range cs[i].Ports {
				if port.HostPort != 0 && port.HostPort != port.ContainerPort {
					errs = append(errs, field.Invalid(p.Index(i).Child("ports").Index(j).Child("hostPort"), port.HostPort, "must match `containerPort` when `hostNetwork` is true"))
				}
			}
		}
	}
	check(spec.InitContainers, fldPath.Child("initContainers"))
	check(spec.Containers, fldPath.Child("containers"))
	return errs
}

// validateHostPortConflicts: two regular containers cannot bind the same
// host port/protocol/IP.
func validateHostPortConflicts(spec *corev1.PodSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, c := range spec.Containers {
		for j, port := range c.Ports {
			if port.HostPort == 0 {
				continue
			}
			key := fmt.Sprintf("%s/%s/%d", port.Protocol, port.HostIP, port.HostPort)
			if seen.Has(key) {
				errs = append(errs, field.Duplicate(fldPath.Child("containers").Index(i).Child("ports").Index(j).Child("hostPort"), key))
			}
			seen.Insert(key)
		}
	}
	return errs
}

// validEnvFieldPaths are the downward-API fields an env var may read.
var validEnvFieldPaths = sets.New(
	"metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName", "spec.serviceAccountName",
	"status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs",
)

// validVolumeFieldPaths are the downward-API fields a volume file may hold.
var validVolumeFieldPaths = sets.New(
	"metadata.annotations", "metadata.labels", "metadata.name", "metadata.namespace", "metadata.uid",
)

var validResourceFieldRefs = sets.New(
	"limits.cpu", "limits.memory", "limits.ephemeral-storage",
	"requests.cpu", "requests.memory", "requests.ephemeral-storage",
)

func validateEnv(vars []corev1.EnvVar, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i, ev := range vars {
		p := fldPath.Index(i)
		if ev.Name == "" {
			allErrs = append(allErrs, field.Required(p.Child("name"), ""))
		} else {
			for _, msg := range validation.IsRelaxedEnvVarName(ev.Name) {
				allErrs = append(allErrs, field.Invalid(p.Child("name"), ev.Name, msg))
			}
		}
		allErrs = append(allErrs, validateEnvVarValueFrom(ev, p.Child("valueFrom"))...)
	}
	return allErrs
}

func validateEnvVarValueFrom(ev corev1.EnvVar, fldPath *field.Path) field.ErrorList {
	vf := ev.ValueFrom
	if vf == nil {
		return nil
	}
	var allErrs field.ErrorList
	n := 0
	if vf.FieldRef != nil {
		n++
		allErrs = append(allErrs, validateObjectFieldSelector(vf.FieldRef, validEnvFieldPaths, fldPath.Child("fieldRef"))...)
	}
	if vf.ResourceFieldRef != nil {
		n++
		allErrs = append(allErrs, validateResourceFieldSelector(vf.ResourceFieldRef, false, fldPath.Child("resourceFieldRef"))...)
	}
	if vf.ConfigMapKeyRef != nil {
		n++
		allErrs = append(allErrs, validateKeyRef(vf.ConfigMapKeyRef.Name, vf.ConfigMapKeyRef.Key, fldPath.Child("configMapKeyRef"))...)
	}
	if vf.SecretKeyRef != nil {
		n++
		allErrs = append(allErrs, validateKeyRef(vf.SecretKeyRef.Name, vf.SecretKeyRef.Key, fldPath.Child("secretKeyRef"))...)
	}
	if vf.FileKeyRef != nil {
		n++
		if vf.FileKeyRef.VolumeName == "" {
			allErrs = append(allErrs, field.Required(fldPath.Child("fileKeyRef", "volumeName"), ""))
		}
		if vf.FileKeyRef.Path == "" {
			allErrs = append(allErrs, field.Required(fldPath.Child("fileKeyRef", "path"), ""))
		}
		if vf.FileKeyRef.Key == "" {
			allErrs = append(allErrs, field.Required(fldPath.Child("fileKeyRef", "key"), ""))
		}
	}
	if n == 0 {
		allErrs = append(allErrs, field.Invalid(fldPath, "", "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef`, `secretKeyRef` or `fileKeyRef`"))
	} else if n > 1 {
		allErrs = append(allErrs, field.Invalid(fldPath, "", "may not have more than one field specified at a time"))
	}
	if ev.Value != "" && n != 0 {
		allErrs = append(allErrs, field.Invalid(fldPath, "", "may not be specified when `value` is not empty"))
	}
	return allErrs
}

func validateKeyRef(name, key string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if name == "" {
		errs = append(errs, field.Required(fldPath.Child("name"), ""))
	}
	if key == "" {
		errs = append(errs, field.Required(fldPath.Child("key"), ""))
	} else {
		for _, msg := range validation.IsConfigMapKey(key) {
			errs = append(errs, field.Invalid(fldPath.Child("key"), key, msg))
		}
	}
	return errs
}

func validateObjectFieldSelector(fs *corev1.ObjectFieldSelector, allowed sets.Set[string], fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if fs.APIVersion == "" {
		errs = append(errs, field.Required(fldPath.Child("apiVersion"), ""))
		return errs
	}
	if fs.FieldPath == "" {
		return append(errs, field.Required(fldPath.Child("fieldPath"), ""))
	}
	fp := fs.FieldPath
	// metadata.labels['key'] / metadata.annotations['key'] select one entry.
	if base, sub, ok := splitSubscript(fp); ok {
		if base != "metadata.labels" && base != "metadata.annotations" {
			return append(errs, field.Invalid(fldPath.Child("fieldPath"), fp, "does not support subscript"))
		}
		for _, msg := range validation.IsQualifiedName(strings.ToLower(sub)) {
			errs = append(errs, field.Invalid(fldPath.Child("fieldPath"), fp, msg))
		}
		return errs
	}
	if !allowed.Has(fp) {
		errs = append(errs, field.NotSupported(fldPath.Child("fieldPath"), fp, sets.List(allowed)))
	}
	return errs
}

func splitSubscript(fp string) (string, string, bool) {
	i := strings.Index(fp, "[")
	if i < 0 || !strings.HasSuffix(fp, "]") {
		return fp, "", false
	}
	sub := strings.Trim(fp[i+1:len(fp)-1], `'"`)
	return fp[:i], sub, true
}

func validateResourceFieldSelector(rs *corev1.ResourceFieldSelector, needContainer bool, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if needContainer && rs.ContainerName == "" {
		errs = append(errs, field.Required(fldPath.Child("containerName"), ""))
	}
	if rs.Resource == "" {
		errs = append(errs, field.Required(fldPath.Child("resource"), ""))
	} else if !validResourceFieldRefs.Has(rs.Resource) &&
		!strings.HasPrefix(rs.Resource, "limits.hugepages-") && !strings.HasPrefix(rs.Resource, "requests.hugepages-") {
		errs = append(errs, field.NotSupported(fldPath.Child("resource"), rs.Resource, sets.List(validResourceFieldRefs)))
	}
	if rs.Divisor.Sign() < 0 {
		errs = append(errs, field.Invalid(fldPath.Child("divisor"), rs.Divisor.String(), isNegativeErrorMsg))
	}
	return errs
}

func validateEnvFrom(sources []corev1.EnvFromSource, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i, ef := range sources {
		p := fldPath.Index(i)
		if ef.Prefix != "" {
			for _, msg := range validation.IsRelaxedEnvVarName(ef.Prefix) {
				allErrs = append(allErrs, field.Invalid(p.Child("prefix"), ef.Prefix, msg))
			}
		}
		n := 0
		if ef.ConfigMapRef != nil {
			n++
			if ef.ConfigMapRef.Name == "" {
				allErrs = append(allErrs, field.Required(p.Child("configMapRef", "name"), ""))
			}
		}
		if ef.SecretRef != nil {
			n++
			if ef.SecretRef.Name == "" {
				allErrs = append(allErrs, field.Required(p.Child("secretRef", "name"), ""))
			}
		}
		if n == 0 {
			allErrs = append(allErrs, field.Invalid(p, "", "must specify one of: `configMapRef` or `secretRef`"))
		} else if n > 1 {
			allErrs = append(allErrs, field.Invalid(p, "", "may not have more than one field specified at a time"))
		}
	}
	return allErrs
}

var supportedMountPropagations = []corev1.MountPropagationMode{
	corev1.MountPropagationBidirectional, corev1.MountPropagationHostToContainer, corev1.MountPropagationNone,
}

func validateVolumeMounts(mounts []corev1.VolumeMount, vols map[string]corev1.VolumeSource, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	paths := sets.New[string]()
	for i, m := range mounts {
		p := fldPath.Index(i)
		if m.Name == "" {
			allErrs = append(allErrs, field.Required(p.Child("name"), ""))
		} else if _, ok := vols[m.Name]; !ok {
			allErrs = append(allErrs, field.NotFound(p.Child("name"), m.Name))
		}
		if m.MountPath == "" {
			allErrs = append(allErrs, field.Required(p.Child("mountPath"), ""))
		} else if paths.Has(m.MountPath) {
			allErrs = append(allErrs, field.Invalid(p.Child("mountPath"), m.MountPath, "must be unique"))
		}
		paths.Insert(m.MountPath)
		if m.SubPath != "" {
			allErrs = append(allErrs, validateLocalDescendingPath(m.SubPath, p.Child("subPath"))...)
		}
		if m.SubPathExpr != "" {
			if m.SubPath != "" {
				allErrs = append(allErrs, field.Invalid(p.Child("subPathExpr"), m.SubPathExpr, "subPathExpr and subPath are mutually exclusive"))
			}
			allErrs = append(allErrs, validateLocalDescendingPath(m.SubPathExpr, p.Child("subPathExpr"))...)
		}
		if m.MountPropagation != nil && !slices.Contains(supportedMountPropagations, *m.MountPropagation) {
			allErrs = append(allErrs, field.NotSupported(p.Child("mountPropagation"), *m.MountPropagation, supportedMountPropagations))
		}
		if m.RecursiveReadOnly != nil {
			switch *m.RecursiveReadOnly {
			case corev1.RecursiveReadOnlyDisabled:
			case corev1.RecursiveReadOnlyEnabled, corev1.RecursiveReadOnlyIfPossible:
				if !m.ReadOnly {
					allErrs = append(allErrs, field.Forbidden(p.Child("recursiveReadOnly"), "may only be specified when readOnly is true"))
				}
			default:
				allErrs = append(allErrs, field.NotSupported(p.Child("recursiveReadOnly"), *m.RecursiveReadOnly,
					[]corev1.RecursiveReadOnlyMode{corev1.RecursiveReadOnlyDisabled, corev1.RecursiveReadOnlyIfPossible, corev1.RecursiveReadOnlyEnabled}))
			}
		}
	}
	return allErrs
}

func validateVolumeDevices(devices []corev1.VolumeDevice, vols map[string]corev1.VolumeSource, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i, d := range devices {
		p := fldPath.Index(i)
		if d.Name == "" {
			allErrs = append(allErrs, field.Required(p.Child("name"), ""))
		} else if src, ok := vols[d.Name]; !ok {
			allErrs = append(allErrs, field.NotFound(p.Child("name"), d.Name))
		} else if src.PersistentVolumeClaim == nil && src.Ephemeral == nil {
			allErrs = append(allErrs, field.Invalid(p.Child("name"), d.Name, "can only use volume source type of PersistentVolumeClaim or Ephemeral for block mode"))
		}
		if d.DevicePath == "" {
			allErrs = append(allErrs, field.Required(p.Child("devicePath"), ""))
		}
	}
	return allErrs
}

// validateLocalDescendingPath: a path under a mount (subPath, item path)
// must stay inside it.
func validateLocalDescendingPath(target string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if path.IsAbs(target) {
		errs = append(errs, field.Invalid(fldPath, target, "must be a relative path"))
	}
	errs = append(errs, validatePathNoBacksteps(target, fldPath)...)
	return errs
}

func validatePathNoBacksteps(target string, fldPath *field.Path) field.ErrorList {
	for _, part := range strings.Split(target, "/") {
		if part == ".." {
			return field.ErrorList{field.Invalid(fldPath, target, "must not contain '..'")}
		}
	}
	return nil
}

// standardContainerResources are the unprefixed names a container may ask for.
var standardContainerResources = sets.New(
	corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage,
)

func isHugePages(name corev1.ResourceName) bool {
	return strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

// isNativeResource: unprefixed or kubernetes.io/-prefixed.
func isNativeResource(name corev1.ResourceName) bool {
	s := string(name)
	return !strings.Contains(s, "/") || strings.Contains(s, "kubernetes.io/")
}

// isOvercommitAllowed: native resources except hugepages may be requested
// below their limit; extended resources and hugepages may not.
func isOvercommitAllowed(name corev1.ResourceName) bool {
	return isNativeResource(name) && !isHugePages(name)
}

func validateContainerResourceName(name corev1.ResourceName, fldPath *field.Path) field.ErrorList {
	errs := validateQualifiedName(string(name), fldPath)
	if len(errs) > 0 {
		return errs
	}
	if !strings.Contains(string(name), "/") && !standardContainerResources.Has(name) && !isHugePages(name) {
		return field.ErrorList{field.Invalid(fldPath, string(name), "must be a standard resource for containers")}
	}
	return nil
}

// validateResourceQuantityValue: never negative, and whole numbers for
// resources that cannot be split (extended resources).
func validateResourceQuantityValue(name corev1.ResourceName, q resource.Quantity, fldPath *field.Path) field.ErrorList {
	errs := validateNonnegativeQuantity(q, fldPath)
	if !isNativeResource(name) && q.MilliValue()%1000 != 0 {
		errs = append(errs, field.Invalid(fldPath, q.String(), isNotIntegerErrorMsg))
	}
	return errs
}

// validateResourceRequirements is ValidateContainerResourceRequirements:
// valid names and quantities, requests never above limits (and equal to
// them for resources that cannot be overcommitted).
func validateResourceRequirements(r *corev1.ResourceRequirements, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	limPath, reqPath := fldPath.Child("limits"), fldPath.Child("requests")
	hasCPUOrMemory, hasHugePages := false, false
	// checkEntry holds the rules for each limit and request entry.
	checkEntry := func(name corev1.ResourceName, q resource.Quantity, p *field.Path) {
		allErrs = append(allErrs, validateContainerResourceName(name, p)...)
		allErrs = append(allErrs, validateResourceQuantityValue(name, q, p)...)
		if isHugePages(name) {
			hasHugePages = true
		}
		if name == corev1.ResourceCPU || name == corev1.ResourceMemory {
			hasCPUOrMemory = true
		}
	}
	for _, name := range sortedNames(r.Limits) {
		checkEntry(name, r.Limits[name], limPath.Key(string(name)))
	}
	for _, name := range sortedNames(r.Requests) {
		q := r.Requests[name]
		checkEntry(name, q, reqPath.Key(string(name)))
		if lim, ok := r.Limits[name]; ok {
			if q.Cmp(lim) != 0 && !isOvercommitAllowed(name) {
				allErrs = append(allErrs, field.Invalid(reqPath, q.String(), fmt.Sprintf("must be equal to %s limit of %s", name, lim.String())))
			} else if q.Cmp(lim) > 0 {
				allErrs = append(allErrs, field.Invalid(reqPath, q.String(), fmt.Sprintf("must be less than or equal to %s limit of %s", name, lim.String())))
			}
		} else if !isOvercommitAllowed(name) {
			allErrs = append(allErrs, field.Required(limPath, "Limit must be set for non overcommitable resources"))
		}
	}
	if hasHugePages && !hasCPUOrMemory {
		allErrs = append(allErrs, field.Forbidden(fldPath, "HugePages require cpu or memory"))
	}
	for i, c := range r.Claims {
		if c.Name == "" {
			allErrs = append(allErrs, field.Required(fldPath.Child("claims").Index(i).Child("name"), ""))
		}
	}
	return allErrs
}

func sortedNames(l corev1.ResourceList) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(l))
	for n := range l {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	return names
}

func validateResizePolicy(policies []corev1.ContainerResizePolicy, fldPath *field.Path, podRestartPolicy corev1.RestartPolicy) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[corev1.ResourceName]()
	for i, p := range policies {
		ip := fldPath.Index(i)
		switch p.ResourceName {
		case corev1.ResourceCPU, corev1.ResourceMemory:
		default:
			errs = append(errs, field.NotSupported(ip.Child("resourceName"), p.ResourceName, []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}))
		}
		if seen.Has(p.ResourceName) {
			errs = append(errs, field.Duplicate(ip.Child("resourceName"), p.ResourceName))
		}
		seen.Insert(p.ResourceName)
		switch p.RestartPolicy {
		case corev1.NotRequired, corev1.RestartContainer:
		case "":
			errs = append(errs, field.Required(ip.Child("restartPolicy"), ""))
		default:
			errs = append(errs, field.NotSupported(ip.Child("restartPolicy"), p.RestartPolicy, []corev1.ResourceResizeRestartPolicy{corev1.NotRequired, corev1.RestartContainer}))
		}
		// A pod that never restarts its containers cannot restart one
		// to resize it.
		if podRestartPolicy == corev1.RestartPolicyNever && p.RestartPolicy != corev1.NotRequired {
			errs = append(errs, field.Invalid(fldPath, p.RestartPolicy, "must be 'NotRequired' when pod `restartPolicy` is 'Never'"))
		}
	}
	return errs
}

// validateProbe: numbers non-negative, exactly one handler; liveness and
// startup probes can only succeed once (successThreshold 1).
func validateProbe(pr *corev1.Probe, fldPath *field.Path, mustSucceedOnce bool) field.ErrorList {
	if pr == nil {
		return nil
	}
	allErrs := validateProbeHandler(&pr.ProbeHandler, fldPath)
	allErrs = append(allErrs, validateNonnegative(int64(pr.InitialDelaySeconds), fldPath.Child("initialDelaySeconds"))...)
	allErrs = append(allErrs, validateNonnegative(int64(pr.TimeoutSeconds), fldPath.Child("timeoutSeconds"))...)
	allErrs = append(allErrs, validateNonnegative(int64(pr.PeriodSeconds), fldPath.Child("periodSeconds"))...)
	allErrs = append(allErrs, validateNonnegative(int64(pr.SuccessThreshold), fldPath.Child("successThreshold"))...)
	allErrs = append(allErrs, validateNonnegative(int64(pr.FailureThreshold), fldPath.Child("failureThreshold"))...)
	if mustSucceedOnce && pr.SuccessThreshold != 1 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("successThreshold"), pr.SuccessThreshold, "must be 1"))
	}
	if pr.TerminationGracePeriodSeconds != nil && *pr.TerminationGracePeriodSeconds <= 0 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("terminationGracePeriodSeconds"), *pr.TerminationGracePeriodSeconds, "must be greater than 0"))
	}
	return allErrs
}

// handlerType is one of the mutually exclusive fields of a probe or
// lifecycle handler: name is its JSON name, set whether it is given, and
// validate checks its content at fldPath.Child(name).
type handlerType struct {
	name     string
	set      bool
	validate func(p *field.Path) field.ErrorList
}

// commonHandlerTypes are the handler fields probes and lifecycle hooks share.
func commonHandlerTypes(exec *corev1.ExecAction, httpGet *corev1.HTTPGetAction, tcpSocket *corev1.TCPSocketAction) []handlerType {
	return []handlerType{
		{"exec", exec != nil, func(p *field.Path) field.ErrorList { return validateExecAction(exec, p) }},
		{"httpGet", httpGet != nil, func(p *field.Path) field.ErrorList { return validateHTTPGetAction(httpGet, p) }},
		{"tcpSocket", tcpSocket != nil, func(p *field.Path) field.ErrorList { return validatePortNumOrName(tcpSocket.Port, p.Child("port")) }},
	}
}

// validateOneHandler enforces the one-of rule with upstream's messages: the
// first handler given is validated, each later one is forbidden, and none
// at all is required.
func validateOneHandler(types []handlerType, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	n := 0
	for _, t := range types {
		if !t.set {
			continue
		}
		if n > 0 {
			allErrs = append(allErrs, field.Forbidden(fldPath.Child(t.name), "may not specify more than 1 handler type"))
		} else {
			allErrs = append(allErrs, t.validate(fldPath.Child(t.name))...)
		}
		n++
	}
	if n == 0 {
		allErrs = append(allErrs, field.Required(fldPath, "must specify a handler type"))
	}
	return allErrs
}

func validateProbeHandler(h *corev1.ProbeHandler, fldPath *field.Path) field.ErrorList {
	grpc := handlerType{"grpc", h.GRPC != nil, func(p *field.Path) field.ErrorList {
		var errs field.ErrorList
		for _, msg := range validation.IsValidPortNum(int(h.GRPC.Port)) {
			errs = append(errs, field.Invalid(p.Child("port"), h.GRPC.Port, msg))
		}
		return errs
	}}
	return validateOneHandler(append(commonHandlerTypes(h.Exec, h.HTTPGet, h.TCPSocket), grpc), fldPath)
}

func validateLifecycleHandler(h *corev1.LifecycleHandler, fldPath *field.Path) field.ErrorList {
	if h == nil {
		return nil
	}
	sleep := handlerType{"sleep", h.Sleep != nil, func(p *field.Path) field.ErrorList {
		if h.Sleep.Seconds < 0 {
			return field.ErrorList{field.Invalid(p.Child("seconds"), h.Sleep.Seconds, isNegativeErrorMsg)}
		}
		return nil
	}}
	return validateOneHandler(append(commonHandlerTypes(h.Exec, h.HTTPGet, h.TCPSocket), sleep), fldPath)
}

func validateExecAction(e *corev1.ExecAction, fldPath *field.Path) field.ErrorList {
	if len(e.Command) == 0 {
		return field.ErrorList{field.Required(fldPath.Child("command"), "")}
	}
	return nil
}

func validateHTTPGetAction(h *corev1.HTTPGetAction, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if h.Path == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("path"), ""))
	}
	allErrs = append(allErrs, validatePortNumOrName(h.Port, fldPath.Child("port"))...)
	if !slices.Contains(supportedURISchemes, h.Scheme) {
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("scheme"), h.Scheme, supportedURISchemes))
	}
	for i, hdr := range h.HTTPHeaders {
		for _, msg := range validation.IsHTTPHeaderName(hdr.Name) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("httpHeaders").Index(i).Child("name"), hdr.Name, msg))
		}
	}
	return allErrs
}

// validatePortNumOrName: a port number 1-65535 or an IANA_SVC_NAME.
func validatePortNumOrName(port intstr.IntOrString, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	switch port.Type {
	case intstr.Int:
		for _, msg := range validation.IsValidPortNum(port.IntValue()) {
			allErrs = append(allErrs, field.Invalid(fldPath, port.IntValue(), msg))
		}
	case intstr.String:
		for _, msg := range validation.IsValidPortName(port.StrVal) {
			allErrs = append(allErrs, field.Invalid(fldPath, port.StrVal, msg))
		}
	default:
		allErrs = append(allErrs, field.InternalError(fldPath, fmt.Errorf("unknown type: %v", port.Type)))
	}
	return allErrs
}

func validatePodSecurityContext(sc *corev1.PodSecurityContext, fldPath *field.Path) field.ErrorList {
	if sc == nil {
		return nil
	}
	var allErrs field.ErrorList
	if sc.FSGroup != nil {
		for _, msg := range validation.IsValidGroupID(*sc.FSGroup) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("fsGroup"), *sc.FSGroup, msg))
		}
	}
	allErrs = append(allErrs, validateRunAsIDs(sc.RunAsUser, sc.RunAsGroup, fldPath)...)
	for i, g := range sc.SupplementalGroups {
		for _, msg := range validation.IsValidGroupID(g) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("supplementalGroups").Index(i), g, msg))
		}
	}
	if sc.FSGroupChangePolicy != nil {
		if p := *sc.FSGroupChangePolicy; p != corev1.FSGroupChangeAlways && p != corev1.FSGroupChangeOnRootMismatch {
			allErrs = append(allErrs, field.NotSupported(fldPath.Child("fsGroupChangePolicy"), p,
				[]corev1.PodFSGroupChangePolicy{corev1.FSGroupChangeOnRootMismatch, corev1.FSGroupChangeAlways}))
		}
	}
	allErrs = append(allErrs, validateSeccompProfile(sc.SeccompProfile, fldPath.Child("seccompProfile"))...)
	return allErrs
}

// sysctlName is upstream's rule for a sysctl's name: dot- or
// slash-separated segments of lower-case alphanumerics, '-' and '_'.
var sysctlName = regexp.MustCompile(`^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$`)

// validateSysctls is upstream's: names well formed and distinct, and no
// sysctl of a namespace the pod shares with the host. Whether a node
// allows a sysctl is the kubelet's to decide (SysctlForbidden).
func validateSysctls(spec *corev1.PodSpec, fldPath *field.Path) field.ErrorList {
	if spec.SecurityContext == nil {
		return nil
	}
	var allErrs field.ErrorList
	names := map[string]bool{}
	for i, s := range spec.SecurityContext.Sysctls {
		p := fldPath.Index(i).Child("name")
		switch {
		case s.Name == "":
			allErrs = append(allErrs, field.Required(p, ""))
		case len(s.Name) > 253 || !sysctlName.MatchString(s.Name):
			allErrs = append(allErrs, field.Invalid(p, s.Name, fmt.Sprintf("must have at most 253 characters and match regex %s", sysctlName)))
		case names[s.Name]:
			allErrs = append(allErrs, field.Duplicate(p, s.Name))
		}
		ns, _, _ := utilsysctl.GetNamespace(s.Name)
		switch {
		case spec.HostNetwork && ns == utilsysctl.NetNamespace:
			allErrs = append(allErrs, field.Invalid(p, s.Name, "may not be specified when 'hostNetwork' is true"))
		case spec.HostIPC && ns == utilsysctl.IPCNamespace:
			allErrs = append(allErrs, field.Invalid(p, s.Name, "may not be specified when 'hostIPC' is true"))
		}
		names[s.Name] = true
	}
	return allErrs
}

func validateSecurityContext(sc *corev1.SecurityContext, fldPath *field.Path) field.ErrorList {
	if sc == nil {
		return nil
	}
	var allErrs field.ErrorList
	allErrs = append(allErrs, validateRunAsIDs(sc.RunAsUser, sc.RunAsGroup, fldPath)...)
	if sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
		if sc.Privileged != nil && *sc.Privileged {
			allErrs = append(allErrs, field.Invalid(fldPath, sc, "cannot set `allowPrivilegeEscalation` to false and `privileged` to true"))
		}
		if sc.Capabilities != nil && slices.Contains(sc.Capabilities.Add, "CAP_SYS_ADMIN") {
			allErrs = append(allErrs, field.Invalid(fldPath, sc, "cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN"))
		}
	}
	if sc.ProcMount != nil {
		if pm := *sc.ProcMount; pm != corev1.DefaultProcMount && pm != corev1.UnmaskedProcMount {
			allErrs = append(allErrs, field.NotSupported(fldPath.Child("procMount"), pm, []corev1.ProcMountType{corev1.DefaultProcMount, corev1.UnmaskedProcMount}))
		}
	}
	allErrs = append(allErrs, validateSeccompProfile(sc.SeccompProfile, fldPath.Child("seccompProfile"))...)
	return allErrs
}

// validateRunAsIDs checks the runAsUser and runAsGroup of a pod or
// container security context.
func validateRunAsIDs(user, group *int64, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if user != nil {
		for _, msg := range validation.IsValidUserID(*user) {
			errs = append(errs, field.Invalid(fldPath.Child("runAsUser"), *user, msg))
		}
	}
	if group != nil {
		for _, msg := range validation.IsValidGroupID(*group) {
			errs = append(errs, field.Invalid(fldPath.Child("runAsGroup"), *group, msg))
		}
	}
	return errs
}

func validateSeccompProfile(sp *corev1.SeccompProfile, fldPath *field.Path) field.ErrorList {
	if sp == nil {
		return nil
	}
	switch sp.Type {
	case corev1.SeccompProfileTypeLocalhost:
		if sp.LocalhostProfile == nil {
			return field.ErrorList{field.Required(fldPath.Child("localhostProfile"), "must be set when seccomp type is Localhost")}
		}
		return validateLocalDescendingPath(*sp.LocalhostProfile, fldPath.Child("localhostProfile"))
	case corev1.SeccompProfileTypeRuntimeDefault, corev1.SeccompProfileTypeUnconfined:
		if sp.LocalhostProfile != nil {
			return field.ErrorList{field.Invalid(fldPath.Child("localhostProfile"), sp, "can only be set when seccomp type is Localhost")}
		}
		return nil
	case "":
		return field.ErrorList{field.Required(fldPath.Child("type"), "")}
	default:
		return field.ErrorList{field.NotSupported(fldPath.Child("type"), sp.Type, []corev1.SeccompProfileType{
			corev1.SeccompProfileTypeLocalhost, corev1.SeccompProfileTypeRuntimeDefault, corev1.SeccompProfileTypeUnconfined})}
	}
}

// validateTolerations is upstream's ValidateTolerations.
func validateTolerations(ts []corev1.Toleration, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i, t := range ts {
		p := fldPath.Index(i)
		if t.Key != "" {
			allErrs = append(allErrs, metav1validation.ValidateLabelName(t.Key, p.Child("key"))...)
		}
		// An empty key with Exists (and no value) tolerates everything.
		if t.Key == "" && t.Operator != corev1.TolerationOpExists {
			allErrs = append(allErrs, field.Invalid(p.Child("operator"), t.Operator,
				"operator must be Exists when `key` is empty, which means \"match all values and all keys\""))
		}
		if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
			allErrs = append(allErrs, field.Invalid(p.Child("effect"), t.Effect, "effect must be 'NoExecute' when `tolerationSeconds` is set"))
		}
		switch t.Operator {
		case corev1.TolerationOpEqual, "":
			if errs := validation.IsValidLabelValue(t.Value); len(errs) != 0 {
				allErrs = append(allErrs, field.Invalid(p.Child("operator"), t.Value, strings.Join(errs, ";")))
			}
		case corev1.TolerationOpExists:
			if t.Value != "" {
				allErrs = append(allErrs, field.Invalid(p.Child("operator"), t, "value must be empty when `operator` is 'Exists'"))
			}
		case corev1.TolerationOpLt, corev1.TolerationOpGt:
			// Numeric comparison operators (TaintTolerationComparisonOperators).
			if _, err := parseInt64(t.Value); err != nil {
				allErrs = append(allErrs, field.Invalid(p.Child("value"), t.Value, "must be a valid integer when `operator` is 'Lt' or 'Gt'"))
			}
		default:
			allErrs = append(allErrs, field.NotSupported(p.Child("operator"), t.Operator,
				[]corev1.TolerationOperator{corev1.TolerationOpEqual, corev1.TolerationOpExists}))
		}
		if t.Effect != "" {
			allErrs = append(allErrs, validateTaintEffect(t.Effect, true, p.Child("effect"))...)
		}
	}
	return allErrs
}

func validateTaintEffect(e corev1.TaintEffect, allowEmpty bool, fldPath *field.Path) field.ErrorList {
	if e == "" && !allowEmpty {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	if e != "" && !slices.Contains(supportedTaintEffects, e) {
		return field.ErrorList{field.NotSupported(fldPath, e, supportedTaintEffects)}
	}
	return nil
}

func parseInt64(s string) (int64, error) {
	var n int64
	_, err := fmt.Sscanf(s, "%d", &n)
	if err == nil && fmt.Sprint(n) != s {
		err = fmt.Errorf("not canonical")
	}
	return n, err
}

func validateAffinity(a *corev1.Affinity, fldPath *field.Path) field.ErrorList {
	if a == nil {
		return nil
	}
	var allErrs field.ErrorList
	if na := a.NodeAffinity; na != nil {
		p := fldPath.Child("nodeAffinity")
		if r := na.RequiredDuringSchedulingIgnoredDuringExecution; r != nil {
			allErrs = append(allErrs, validateNodeSelector(r, p.Child("requiredDuringSchedulingIgnoredDuringExecution"))...)
		}
		for i, t := range na.PreferredDuringSchedulingIgnoredDuringExecution {
			tp := p.Child("preferredDuringSchedulingIgnoredDuringExecution").Index(i)
			allErrs = append(allErrs, validateWeight(t.Weight, tp.Child("weight"))...)
			allErrs = append(allErrs, validateNodeSelectorTerm(t.Preference, tp.Child("preference"))...)
		}
	}
	if pa := a.PodAffinity; pa != nil {
		allErrs = append(allErrs, validatePodAffinityRules(pa.RequiredDuringSchedulingIgnoredDuringExecution,
			pa.PreferredDuringSchedulingIgnoredDuringExecution, fldPath.Child("podAffinity"))...)
	}
	if pa := a.PodAntiAffinity; pa != nil {
		allErrs = append(allErrs, validatePodAffinityRules(pa.RequiredDuringSchedulingIgnoredDuringExecution,
			pa.PreferredDuringSchedulingIgnoredDuringExecution, fldPath.Child("podAntiAffinity"))...)
	}
	return allErrs
}

func validateWeight(w int32, fldPath *field.Path) field.ErrorList {
	if w <= 0 || w > 100 {
		return field.ErrorList{field.Invalid(fldPath, w, "must be in the range 1-100")}
	}
	return nil
}

func validateNodeSelector(ns *corev1.NodeSelector, fldPath *field.Path) field.ErrorList {
	termsPath := fldPath.Child("nodeSelectorTerms")
	if len(ns.NodeSelectorTerms) == 0 {
		return field.ErrorList{field.Required(termsPath, "must have at least one node selector term")}
	}
	var allErrs field.ErrorList
	for i, t := range ns.NodeSelectorTerms {
		allErrs = append(allErrs, validateNodeSelectorTerm(t, termsPath.Index(i))...)
	}
	return allErrs
}

func validateNodeSelectorTerm(t corev1.NodeSelectorTerm, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i, r := range t.MatchExpressions {
		allErrs = append(allErrs, validateNodeSelectorRequirement(r, fldPath.Child("matchExpressions").Index(i))...)
	}
	for i, r := range t.MatchFields {
		p := fldPath.Child("matchFields").Index(i)
		if r.Key != "metadata.name" {
			allErrs = append(allErrs, field.Invalid(p.Child("key"), r.Key, "not a valid field selector key"))
		}
		switch r.Operator {
		case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
			if len(r.Values) != 1 {
				allErrs = append(allErrs, field.Required(p.Child("values"), "must be only one value when `operator` is 'In' or 'NotIn' for node field selector"))
			}
		default:
			allErrs = append(allErrs, field.Invalid(p.Child("operator"), r.Operator, "not a valid selector operator"))
		}
	}
	return allErrs
}

func validateNodeSelectorRequirement(r corev1.NodeSelectorRequirement, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	switch r.Operator {
	case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
		if len(r.Values) == 0 {
			allErrs = append(allErrs, field.Required(fldPath.Child("values"), "must be specified when `operator` is 'In' or 'NotIn'"))
		}
	case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
		if len(r.Values) > 0 {
			allErrs = append(allErrs, field.Forbidden(fldPath.Child("values"), "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
		}
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if len(r.Values) != 1 {
			allErrs = append(allErrs, field.Required(fldPath.Child("values"), "must be specified single value when `operator` is 'Lt' or 'Gt'"))
		}
	default:
		allErrs = append(allErrs, field.Invalid(fldPath.Child("operator"), r.Operator, "not a valid selector operator"))
	}
	allErrs = append(allErrs, metav1validation.ValidateLabelName(r.Key, fldPath.Child("key"))...)
	return allErrs
}

// validatePodAffinityRules checks the terms of a podAffinity or
// podAntiAffinity.
func validatePodAffinityRules(required []corev1.PodAffinityTerm, preferred []corev1.WeightedPodAffinityTerm, fldPath *field.Path) field.ErrorList {
	allErrs := validatePodAffinityTerms(required, fldPath.Child("requiredDuringSchedulingIgnoredDuringExecution"))
	return append(allErrs, validateWeightedPodAffinityTerms(preferred, fldPath.Child("preferredDuringSchedulingIgnoredDuringExecution"))...)
}

func validatePodAffinityTerms(terms []corev1.PodAffinityTerm, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i, t := range terms {
		allErrs = append(allErrs, validatePodAffinityTerm(t, fldPath.Index(i))...)
	}
	return allErrs
}

func validateWeightedPodAffinityTerms(terms []corev1.WeightedPodAffinityTerm, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i, t := range terms {
		p := fldPath.Index(i)
		allErrs = append(allErrs, validateWeight(t.Weight, p.Child("weight"))...)
		allErrs = append(allErrs, validatePodAffinityTerm(t.PodAffinityTerm, p.Child("podAffinityTerm"))...)
	}
	return allErrs
}

func validatePodAffinityTerm(t corev1.PodAffinityTerm, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	allErrs = append(allErrs, validateLabelSelector(t.LabelSelector, fldPath.Child("labelSelector"))...)
	allErrs = append(allErrs, validateLabelSelector(t.NamespaceSelector, fldPath.Child("namespaceSelector"))...)
	for i, ns := range t.Namespaces {
		allErrs = append(allErrs, validateName(ns, nameIsDNSLabel, fldPath.Child("namespaces").Index(i))...)
	}
	if t.TopologyKey == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("topologyKey"), "can not be empty"))
	} else {
		allErrs = append(allErrs, metav1validation.ValidateLabelName(t.TopologyKey, fldPath.Child("topologyKey"))...)
	}
	for i, k := range t.MatchLabelKeys {
		allErrs = append(allErrs, metav1validation.ValidateLabelName(k, fldPath.Child("matchLabelKeys").Index(i))...)
	}
	for i, k := range t.MismatchLabelKeys {
		allErrs = append(allErrs, metav1validation.ValidateLabelName(k, fldPath.Child("mismatchLabelKeys").Index(i))...)
	}
	return allErrs
}

func validateTopologySpreadConstraints(cs []corev1.TopologySpreadConstraint, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	seen := sets.New[string]()
	for i, c := range cs {
		p := fldPath.Index(i)
		if c.MaxSkew <= 0 {
			allErrs = append(allErrs, field.Invalid(p.Child("maxSkew"), c.MaxSkew, isNotPositiveErrorMsg))
		}
		if c.TopologyKey == "" {
			allErrs = append(allErrs, field.Required(p.Child("topologyKey"), "can not be empty"))
		} else {
			allErrs = append(allErrs, metav1validation.ValidateLabelName(c.TopologyKey, p.Child("topologyKey"))...)
		}
		switch c.WhenUnsatisfiable {
		case corev1.DoNotSchedule, corev1.ScheduleAnyway:
		default:
			allErrs = append(allErrs, field.NotSupported(p.Child("whenUnsatisfiable"), c.WhenUnsatisfiable,
				[]corev1.UnsatisfiableConstraintAction{corev1.DoNotSchedule, corev1.ScheduleAnyway}))
		}
		if c.MinDomains != nil {
			if *c.MinDomains <= 0 {
				allErrs = append(allErrs, field.Invalid(p.Child("minDomains"), *c.MinDomains, isNotPositiveErrorMsg))
			}
			if c.WhenUnsatisfiable != corev1.DoNotSchedule {
				allErrs = append(allErrs, field.Invalid(p.Child("minDomains"), *c.MinDomains,
					fmt.Sprintf("can only use minDomains if whenUnsatisfiable=%s, not %s", corev1.DoNotSchedule, c.WhenUnsatisfiable)))
			}
		}
		key := c.TopologyKey + "/" + string(c.WhenUnsatisfiable)
		if seen.Has(key) {
			allErrs = append(allErrs, field.Duplicate(p, fmt.Sprintf("{%v, %v}", c.TopologyKey, c.WhenUnsatisfiable)))
		}
		seen.Insert(key)
		allErrs = append(allErrs, validateLabelSelector(c.LabelSelector, p.Child("labelSelector"))...)
		for j, k := range c.MatchLabelKeys {
			allErrs = append(allErrs, metav1validation.ValidateLabelName(k, p.Child("matchLabelKeys").Index(j))...)
		}
	}
	return allErrs
}

// allowedEphemeralContainerFields is upstream's allow list: ephemeral
// containers are debugging shells, not part of the workload, so ports,
// probes, lifecycle, resources and restart settings are refused. A list
// of what is allowed, so that a field added to the API is refused until
// someone decides otherwise.
var allowedEphemeralContainerFields = map[string]bool{
	"Name": true, "Image": true, "Command": true, "Args": true, "WorkingDir": true,
	"EnvFrom": true, "Env": true, "VolumeMounts": true, "VolumeDevices": true,
	"TerminationMessagePath": true, "TerminationMessagePolicy": true, "ImagePullPolicy": true,
	"SecurityContext": true, "Stdin": true, "StdinOnce": true, "TTY": true,
}

// validateEphemeralContainerFields is upstream's validateFieldAllowList
// over EphemeralContainerCommon: each set field not on the allow list is
// Forbidden, named by its JSON field name.
func validateEphemeralContainerFields(ec corev1.EphemeralContainerCommon, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	t, v := reflect.TypeOf(ec), reflect.ValueOf(ec)
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if allowedEphemeralContainerFields[f.Name] || v.Field(i).IsZero() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		allErrs = append(allErrs, field.Forbidden(fldPath.Child(name), "cannot be set for an Ephemeral Container"))
	}
	return allErrs
}

// PodEphemeralContainersUpdate is upstream's
// ValidatePodEphemeralContainersUpdate, for pods/ephemeralcontainers: the
// whole pod valid, static pods refused, and ephemeral containers only
// added, never changed or removed (matched by name: a patch may reorder
// them).
func PodEphemeralContainersUpdate(newPod, oldPod *corev1.Pod) field.ErrorList {
	allErrs := validateObjectMetaUpdate(&newPod.ObjectMeta, &oldPod.ObjectMeta)
	allErrs = append(allErrs, validatePodSpec(&newPod.Spec, specPath, podSpecContext{isPod: true})...)
	if _, ok := oldPod.Annotations[corev1.MirrorPodAnnotationKey]; ok {
		return field.ErrorList{field.Forbidden(field.NewPath(""), "static pods do not support ephemeral containers")}
	}
	ephPath := specPath.Child("ephemeralContainers")
	byName := map[string]*corev1.EphemeralContainer{}
	for i := range newPod.Spec.EphemeralContainers {
		byName[newPod.Spec.EphemeralContainers[i].Name] = &newPod.Spec.EphemeralContainers[i]
	}
	for _, old := range oldPod.Spec.EphemeralContainers {
		if n, ok := byName[old.Name]; !ok {
			allErrs = append(allErrs, field.Forbidden(ephPath, fmt.Sprintf("existing ephemeral containers %q may not be removed\n", old.Name)))
		} else if !apiequality.Semantic.DeepEqual(old, *n) {
			allErrs = append(allErrs, field.Forbidden(ephPath, fmt.Sprintf("existing ephemeral containers %q may not be changed\n%v", old.Name, changedFields(old, *n, "spec.ephemeralContainers"))))
		}
	}
	return allErrs
}
