package validation

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const selectorMismatchMsg = "`selector` does not match template `labels`"

// validateSelectorRequired validates an apps/v1-style selector: required,
// well-formed and non-empty (an empty selector would match every pod in the
// namespace). kind is used in upstream's message, e.g. "deployment".
func validateSelectorRequired(sel *metav1.LabelSelector, kind string, fldPath *field.Path) field.ErrorList {
	if sel == nil {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	errs := validateLabelSelector(sel, fldPath)
	if len(sel.MatchLabels)+len(sel.MatchExpressions) == 0 {
		errs = append(errs, field.Invalid(fldPath, sel, fmt.Sprintf("empty selector is invalid for %s", kind)))
	}
	return errs
}

// validateSelectorMatchesTemplate: the controller finds its pods by the
// selector, so pods created from the template must match it.
func validateSelectorMatchesTemplate(sel *metav1.LabelSelector, t *corev1.PodTemplateSpec, templatePath *field.Path) field.ErrorList {
	if sel == nil {
		return nil
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil || s.Empty() {
		return nil // reported by the selector validation
	}
	if !s.Matches(labels.Set(t.Labels)) {
		return field.ErrorList{field.Invalid(templatePath.Child("metadata", "labels"), t.Labels, selectorMismatchMsg)}
	}
	return nil
}

// validateControllerSelector holds the selector rules shared by the apps/v1
// controllers (Deployment, ReplicaSet, StatefulSet, DaemonSet): spec.selector
// is required and non-empty (kind is used in upstream's message), and the
// template's labels must match it.
func validateControllerSelector(sel *metav1.LabelSelector, t *corev1.PodTemplateSpec, kind string, fldPath *field.Path) field.ErrorList {
	errs := validateSelectorRequired(sel, kind, fldPath.Child("selector"))
	return append(errs, validateSelectorMatchesTemplate(sel, t, fldPath.Child("template"))...)
}

// validateLongRunningTemplate validates the pod template of a controller
// that keeps pods running forever (Deployment, ReplicaSet, StatefulSet,
// DaemonSet, ReplicationController): a valid pod template whose
// restartPolicy is Always and whose activeDeadlineSeconds is unset. kind is
// used in upstream's message.
func validateLongRunningTemplate(t *corev1.PodTemplateSpec, kind string, templatePath *field.Path, ctx podSpecContext) field.ErrorList {
	errs := validatePodTemplateSpec(t, templatePath, ctx)
	if t.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		errs = append(errs, field.NotSupported(templatePath.Child("spec", "restartPolicy"), t.Spec.RestartPolicy, []corev1.RestartPolicy{corev1.RestartPolicyAlways}))
	}
	if t.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Invalid(templatePath.Child("spec", "activeDeadlineSeconds"), t.Spec.ActiveDeadlineSeconds,
			fmt.Sprintf("activeDeadlineSeconds in %s is not Supported", kind)))
	}
	return errs
}

func Deployment(d *appsv1.Deployment) field.ErrorList {
	allErrs := validateObjectMeta(&d.ObjectMeta, true, nameIsDNSSubdomain)
	return append(allErrs, validateDeploymentSpec(&d.Spec, specPath)...)
}

func validateDeploymentSpec(spec *appsv1.DeploymentSpec, fldPath *field.Path) field.ErrorList {
	allErrs := validateNonnegativePtr(spec.Replicas, fldPath.Child("replicas"))
	allErrs = append(allErrs, validateControllerSelector(spec.Selector, &spec.Template, "deployment", fldPath)...)
	allErrs = append(allErrs, validateLongRunningTemplate(&spec.Template, "ReplicaSet", fldPath.Child("template"), podSpecContext{})...)
	allErrs = append(allErrs, validateDeploymentStrategy(&spec.Strategy, fldPath.Child("strategy"))...)
	allErrs = append(allErrs, validateNonnegative(int64(spec.MinReadySeconds), fldPath.Child("minReadySeconds"))...)
	allErrs = append(allErrs, validateNonnegativePtr(spec.RevisionHistoryLimit, fldPath.Child("revisionHistoryLimit"))...)
	if pds := spec.ProgressDeadlineSeconds; pds != nil {
		allErrs = append(allErrs, validateNonnegative(int64(*pds), fldPath.Child("progressDeadlineSeconds"))...)
		// Progress is judged after pods are ready for minReadySeconds, so
		// a shorter deadline could never be met.
		if *pds <= spec.MinReadySeconds {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("progressDeadlineSeconds"), *pds, "must be greater than minReadySeconds"))
		}
	}
	return allErrs
}

func validateDeploymentStrategy(s *appsv1.DeploymentStrategy, fldPath *field.Path) field.ErrorList {
	switch s.Type {
	case appsv1.RecreateDeploymentStrategyType:
		if s.RollingUpdate != nil {
			return field.ErrorList{field.Forbidden(fldPath.Child("rollingUpdate"), "may not be specified when strategy `type` is 'Recreate'")}
		}
	case appsv1.RollingUpdateDeploymentStrategyType:
		if s.RollingUpdate == nil {
			return field.ErrorList{field.Required(fldPath.Child("rollingUpdate"), "this should be defaulted and never be nil")}
		}
		ru, p := s.RollingUpdate, fldPath.Child("rollingUpdate")
		errs := validatePositiveIntOrPercent(ru.MaxUnavailable, p.Child("maxUnavailable"))
		errs = append(errs, validatePositiveIntOrPercent(ru.MaxSurge, p.Child("maxSurge"))...)
		// With neither surge nor unavailability a rollout could never
		// make progress.
		if intOrPercentValue(ru.MaxUnavailable) == 0 && intOrPercentValue(ru.MaxSurge) == 0 {
			errs = append(errs, field.Invalid(p.Child("maxUnavailable"), ru.MaxUnavailable, "may not be 0 when `maxSurge` is 0"))
		}
		errs = append(errs, isNotMoreThan100Percent(ru.MaxUnavailable, p.Child("maxUnavailable"))...)
		return errs
	default:
		return field.ErrorList{field.NotSupported(fldPath.Child("type"), s.Type,
			[]appsv1.DeploymentStrategyType{appsv1.RecreateDeploymentStrategyType, appsv1.RollingUpdateDeploymentStrategyType})}
	}
	return nil
}

// validateControllerUpdate holds the update rules shared by Deployment,
// ReplicaSet and DaemonSet: the metadata update rules, the new spec's own
// errors (specErrs), and an immutable spec.selector: in apps/v1 changing it
// would orphan the existing pods (or a Deployment's ReplicaSets).
func validateControllerUpdate(newMeta, oldMeta *metav1.ObjectMeta, specErrs field.ErrorList, newSel, oldSel *metav1.LabelSelector) field.ErrorList {
	allErrs := validateObjectMetaUpdate(newMeta, oldMeta)
	allErrs = append(allErrs, specErrs...)
	return append(allErrs, validateImmutable(newSel, oldSel, specPath.Child("selector"))...)
}

func DeploymentUpdate(newD, oldD *appsv1.Deployment) field.ErrorList {
	return validateControllerUpdate(&newD.ObjectMeta, &oldD.ObjectMeta, validateDeploymentSpec(&newD.Spec, specPath), newD.Spec.Selector, oldD.Spec.Selector)
}

func validateDeploymentStatus(s *appsv1.DeploymentStatus) field.ErrorList {
	p := statusPath
	allErrs := validateNonnegative(s.ObservedGeneration, p.Child("observedGeneration"))
	allErrs = append(allErrs, validateNonnegative(int64(s.Replicas), p.Child("replicas"))...)
	allErrs = append(allErrs, validateNonnegative(int64(s.UpdatedReplicas), p.Child("updatedReplicas"))...)
	allErrs = append(allErrs, validateNonnegative(int64(s.ReadyReplicas), p.Child("readyReplicas"))...)
	allErrs = append(allErrs, validateNonnegative(int64(s.AvailableReplicas), p.Child("availableReplicas"))...)
	allErrs = append(allErrs, validateNonnegative(int64(s.UnavailableReplicas), p.Child("unavailableReplicas"))...)
	allErrs = append(allErrs, validateNonnegativePtr(s.TerminatingReplicas, p.Child("terminatingReplicas"))...)
	allErrs = append(allErrs, validateNonnegativePtr(s.CollisionCount, p.Child("collisionCount"))...)
	return append(allErrs, validateReplicaCountBounds(s.Replicas, s.ReadyReplicas, s.AvailableReplicas, "cannot be greater than readyReplicas",
		replicaCount{"updatedReplicas", s.UpdatedReplicas}, replicaCount{"readyReplicas", s.ReadyReplicas}, replicaCount{"availableReplicas", s.AvailableReplicas})...)
}

// replicaCount is a named status counter bounded by status.replicas.
type replicaCount struct {
	name string
	v    int32
}

// validateReplicaCountBounds holds the status rules shared by the replicated
// controllers: no counter may exceed status.replicas, and
// status.availableReplicas may not exceed status.readyReplicas (readyMsg is
// upstream's wording for that, which differs between kinds).
func validateReplicaCountBounds(replicas, ready, available int32, readyMsg string, counts ...replicaCount) field.ErrorList {
	var errs field.ErrorList
	for _, c := range counts {
		if c.v > replicas {
			errs = append(errs, field.Invalid(statusPath.Child(c.name), c.v, "cannot be greater than status.replicas"))
		}
	}
	if available > ready {
		errs = append(errs, field.Invalid(statusPath.Child("availableReplicas"), available, readyMsg))
	}
	return errs
}

func ReplicaSet(rs *appsv1.ReplicaSet) field.ErrorList {
	allErrs := validateObjectMeta(&rs.ObjectMeta, true, nameIsDNSSubdomain)
	return append(allErrs, validateReplicaSetSpec(&rs.Spec)...)
}

func validateReplicaSetSpec(spec *appsv1.ReplicaSetSpec) field.ErrorList {
	allErrs := validateNonnegativePtr(spec.Replicas, specPath.Child("replicas"))
	allErrs = append(allErrs, validateNonnegative(int64(spec.MinReadySeconds), specPath.Child("minReadySeconds"))...)
	// Upstream reuses the Deployment wording here.
	allErrs = append(allErrs, validateControllerSelector(spec.Selector, &spec.Template, "deployment", specPath)...)
	allErrs = append(allErrs, validateLongRunningTemplate(&spec.Template, "ReplicaSet", specPath.Child("template"), podSpecContext{})...)
	return allErrs
}

func ReplicaSetUpdate(newRS, oldRS *appsv1.ReplicaSet) field.ErrorList {
	return validateControllerUpdate(&newRS.ObjectMeta, &oldRS.ObjectMeta, validateReplicaSetSpec(&newRS.Spec), newRS.Spec.Selector, oldRS.Spec.Selector)
}

// validateReplicaSetCounters: the status counters a ReplicaSet shares with
// a ReplicationController may not be negative.
func validateReplicaSetCounters(replicas, fullyLabeled, ready, available int32, observedGeneration int64) field.ErrorList {
	p := statusPath
	allErrs := validateNonnegative(int64(replicas), p.Child("replicas"))
	allErrs = append(allErrs, validateNonnegative(int64(fullyLabeled), p.Child("fullyLabeledReplicas"))...)
	allErrs = append(allErrs, validateNonnegative(int64(ready), p.Child("readyReplicas"))...)
	allErrs = append(allErrs, validateNonnegative(int64(available), p.Child("availableReplicas"))...)
	return append(allErrs, validateNonnegative(observedGeneration, p.Child("observedGeneration"))...)
}

func validateReplicaSetStatus(s *appsv1.ReplicaSetStatus) field.ErrorList {
	allErrs := validateReplicaSetCounters(s.Replicas, s.FullyLabeledReplicas, s.ReadyReplicas, s.AvailableReplicas, s.ObservedGeneration)
	return append(allErrs, validateReplicaCountBounds(s.Replicas, s.ReadyReplicas, s.AvailableReplicas, "cannot be greater than readyReplicas",
		replicaCount{"fullyLabeledReplicas", s.FullyLabeledReplicas}, replicaCount{"readyReplicas", s.ReadyReplicas}, replicaCount{"availableReplicas", s.AvailableReplicas})...)
}

func StatefulSet(s *appsv1.StatefulSet) field.ErrorList {
	allErrs := validateObjectMeta(&s.ObjectMeta, true, nameIsDNSSubdomain)
	return append(allErrs, validateStatefulSetSpec(&s.Spec)...)
}

func validateStatefulSetSpec(spec *appsv1.StatefulSetSpec) field.ErrorList {
	var allErrs field.ErrorList
	switch spec.PodManagementPolicy {
	case "":
		allErrs = append(allErrs, field.Required(specPath.Child("podManagementPolicy"), ""))
	case appsv1.OrderedReadyPodManagement, appsv1.ParallelPodManagement:
	default:
		allErrs = append(allErrs, field.Invalid(specPath.Child("podManagementPolicy"), spec.PodManagementPolicy,
			fmt.Sprintf("must be '%s' or '%s'", appsv1.OrderedReadyPodManagement, appsv1.ParallelPodManagement)))
	}
	usp := specPath.Child("updateStrategy")
	switch spec.UpdateStrategy.Type {
	case "":
		allErrs = append(allErrs, field.Required(usp, ""))
	case appsv1.OnDeleteStatefulSetStrategyType:
		if spec.UpdateStrategy.RollingUpdate != nil {
			allErrs = append(allErrs, field.Invalid(usp.Child("rollingUpdate"), spec.UpdateStrategy.RollingUpdate,
				fmt.Sprintf("only allowed for updateStrategy '%s'", appsv1.RollingUpdateStatefulSetStrategyType)))
		}
	case appsv1.RollingUpdateStatefulSetStrategyType:
		if ru := spec.UpdateStrategy.RollingUpdate; ru != nil {
			allErrs = append(allErrs, validateNonnegativePtr(ru.Partition, usp.Child("rollingUpdate", "partition"))...)
			if ru.MaxUnavailable != nil {
				mp := usp.Child("rollingUpdate", "maxUnavailable")
				allErrs = append(allErrs, validatePositiveIntOrPercent(ru.MaxUnavailable, mp)...)
				if intOrPercentValue(ru.MaxUnavailable) == 0 {
					allErrs = append(allErrs, field.Invalid(mp, ru.MaxUnavailable, "cannot be 0"))
				}
				allErrs = append(allErrs, isNotMoreThan100Percent(ru.MaxUnavailable, mp)...)
			}
		}
	default:
		allErrs = append(allErrs, field.Invalid(usp, spec.UpdateStrategy,
			fmt.Sprintf("must be '%s' or '%s'", appsv1.RollingUpdateStatefulSetStrategyType, appsv1.OnDeleteStatefulSetStrategyType)))
	}
	if pol := spec.PersistentVolumeClaimRetentionPolicy; pol != nil {
		pp := specPath.Child("persistentVolumeClaimRetentionPolicy")
		valid := []appsv1.PersistentVolumeClaimRetentionPolicyType{appsv1.RetainPersistentVolumeClaimRetentionPolicyType, appsv1.DeletePersistentVolumeClaimRetentionPolicyType}
		for _, f := range []struct {
			name string
			v    appsv1.PersistentVolumeClaimRetentionPolicyType
		}{{"whenDeleted", pol.WhenDeleted}, {"whenScaled", pol.WhenScaled}} {
			switch f.v {
			case appsv1.RetainPersistentVolumeClaimRetentionPolicyType, appsv1.DeletePersistentVolumeClaimRetentionPolicyType:
			case "":
				allErrs = append(allErrs, field.Required(pp.Child(f.name), ""))
			default:
				allErrs = append(allErrs, field.NotSupported(pp.Child(f.name), f.v, valid))
			}
		}
	}
	allErrs = append(allErrs, validateNonnegativePtr(spec.Replicas, specPath.Child("replicas"))...)
	allErrs = append(allErrs, validateNonnegative(int64(spec.MinReadySeconds), specPath.Child("minReadySeconds"))...)
	allErrs = append(allErrs, validateNonnegativePtr(spec.RevisionHistoryLimit, specPath.Child("revisionHistoryLimit"))...)
	if spec.Ordinals != nil {
		allErrs = append(allErrs, validateNonnegative(int64(spec.Ordinals.Start), specPath.Child("ordinals", "start"))...)
	}
	if spec.ServiceName != "" {
		// Pods get <name>.<serviceName> DNS names, so it must be a Service name.
		allErrs = append(allErrs, validateName(spec.ServiceName, nameIsDNS1035Label, specPath.Child("serviceName"))...)
	}
	allErrs = append(allErrs, validateControllerSelector(spec.Selector, &spec.Template, "statefulset", specPath)...)

	// Upstream leaves the StatefulSet pod spec largely unchecked (pods then
	// fail at creation); kelp validates it, counting volumeClaimTemplates
	// as volumes the containers may mount.
	var claimNames []string
	for i := range spec.VolumeClaimTemplates {
		vct := &spec.VolumeClaimTemplates[i]
		p := specPath.Child("volumeClaimTemplates").Index(i)
		if vct.Name == "" {
			allErrs = append(allErrs, field.Required(p.Child("metadata", "name"), ""))
		} else {
			allErrs = append(allErrs, validateDNS1123Label(vct.Name, p.Child("metadata", "name"))...)
		}
		allErrs = append(allErrs, validatePVCSpec(&vct.Spec, p.Child("spec"))...)
		claimNames = append(claimNames, vct.Name)
	}
	allErrs = append(allErrs, validateLongRunningTemplate(&spec.Template, "StatefulSet", specPath.Child("template"), podSpecContext{extraVolumes: claimNames})...)
	return allErrs
}

// validateStatefulSetUpdate: only the fields listed in upstream's message
// may change; identity-defining ones (selector, serviceName,
// volumeClaimTemplates, podManagementPolicy) are fixed for the set's life.
func StatefulSetUpdate(newS, oldS *appsv1.StatefulSet) field.ErrorList {
	allErrs := validateObjectMetaUpdate(&newS.ObjectMeta, &oldS.ObjectMeta)
	allErrs = append(allErrs, validateStatefulSetSpec(&newS.Spec)...)
	a, b := newS.Spec.DeepCopy(), oldS.Spec.DeepCopy()
	a.Replicas, a.Ordinals, a.Template, a.UpdateStrategy = b.Replicas, b.Ordinals, b.Template, b.UpdateStrategy
	a.RevisionHistoryLimit, a.PersistentVolumeClaimRetentionPolicy, a.MinReadySeconds = b.RevisionHistoryLimit, b.PersistentVolumeClaimRetentionPolicy, b.MinReadySeconds
	if !apiequality.Semantic.DeepEqual(a, b) {
		allErrs = append(allErrs, field.Forbidden(specPath, "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"))
	}
	return allErrs
}

func validateStatefulSetStatus(s *appsv1.StatefulSetStatus) field.ErrorList {
	p := statusPath
	allErrs := validateNonnegative(int64(s.Replicas), p.Child("replicas"))
	allErrs = append(allErrs, validateNonnegative(int64(s.ReadyReplicas), p.Child("readyReplicas"))...)
	allErrs = append(allErrs, validateNonnegative(int64(s.CurrentReplicas), p.Child("currentReplicas"))...)
	allErrs = append(allErrs, validateNonnegative(int64(s.UpdatedReplicas), p.Child("updatedReplicas"))...)
	allErrs = append(allErrs, validateNonnegative(int64(s.AvailableReplicas), p.Child("availableReplicas"))...)
	allErrs = append(allErrs, validateNonnegative(s.ObservedGeneration, p.Child("observedGeneration"))...)
	allErrs = append(allErrs, validateNonnegativePtr(s.CollisionCount, p.Child("collisionCount"))...)
	return append(allErrs, validateReplicaCountBounds(s.Replicas, s.ReadyReplicas, s.AvailableReplicas, "cannot be greater than status.readyReplicas",
		replicaCount{"readyReplicas", s.ReadyReplicas}, replicaCount{"currentReplicas", s.CurrentReplicas},
		replicaCount{"updatedReplicas", s.UpdatedReplicas}, replicaCount{"availableReplicas", s.AvailableReplicas})...)
}

func DaemonSet(d *appsv1.DaemonSet) field.ErrorList {
	allErrs := validateObjectMeta(&d.ObjectMeta, true, nameIsDNSSubdomain)
	return append(allErrs, validateDaemonSetSpec(&d.Spec)...)
}

func validateDaemonSetSpec(spec *appsv1.DaemonSetSpec) field.ErrorList {
	allErrs := validateControllerSelector(spec.Selector, &spec.Template, "daemonset", specPath)
	allErrs = append(allErrs, validateLongRunningTemplate(&spec.Template, "DaemonSet", specPath.Child("template"), podSpecContext{})...)
	allErrs = append(allErrs, validateNonnegative(int64(spec.MinReadySeconds), specPath.Child("minReadySeconds"))...)
	allErrs = append(allErrs, validateNonnegativePtr(spec.RevisionHistoryLimit, specPath.Child("revisionHistoryLimit"))...)

	usp := specPath.Child("updateStrategy")
	switch spec.UpdateStrategy.Type {
	case appsv1.OnDeleteDaemonSetStrategyType:
	case appsv1.RollingUpdateDaemonSetStrategyType:
		ru := spec.UpdateStrategy.RollingUpdate
		if ru == nil {
			allErrs = append(allErrs, field.Required(usp.Child("rollingUpdate"), ""))
			break
		}
		p := usp.Child("rollingUpdate")
		allErrs = append(allErrs, validatePositiveIntOrPercent(ru.MaxUnavailable, p.Child("maxUnavailable"))...)
		allErrs = append(allErrs, validatePositiveIntOrPercent(ru.MaxSurge, p.Child("maxSurge"))...)
		allErrs = append(allErrs, isNotMoreThan100Percent(ru.MaxUnavailable, p.Child("maxUnavailable"))...)
		allErrs = append(allErrs, isNotMoreThan100Percent(ru.MaxSurge, p.Child("maxSurge"))...)
		// One pod per node: a rollout either surges or takes nodes down,
		// and exactly one of the two must be allowed.
		hasUnavailable := intOrPercentValue(ru.MaxUnavailable) != 0
		hasSurge := intOrPercentValue(ru.MaxSurge) != 0
		switch {
		case hasUnavailable && hasSurge:
			allErrs = append(allErrs, field.Invalid(p.Child("maxSurge"), ru.MaxSurge, "may not be set when maxUnavailable is non-zero"))
		case !hasUnavailable && !hasSurge:
			allErrs = append(allErrs, field.Required(p.Child("maxUnavailable"), "cannot be 0 when maxSurge is 0"))
		}
	default:
		allErrs = append(allErrs, field.NotSupported(usp.Child("type"), spec.UpdateStrategy.Type,
			[]appsv1.DaemonSetUpdateStrategyType{appsv1.RollingUpdateDaemonSetStrategyType, appsv1.OnDeleteDaemonSetStrategyType}))
	}
	return allErrs
}

func DaemonSetUpdate(newD, oldD *appsv1.DaemonSet) field.ErrorList {
	return validateControllerUpdate(&newD.ObjectMeta, &oldD.ObjectMeta, validateDaemonSetSpec(&newD.Spec), newD.Spec.Selector, oldD.Spec.Selector)
}

func validateDaemonSetStatus(s *appsv1.DaemonSetStatus) field.ErrorList {
	p := statusPath
	allErrs := validateNonnegative(int64(s.CurrentNumberScheduled), p.Child("currentNumberScheduled"))
	allErrs = append(allErrs, validateNonnegative(int64(s.NumberMisscheduled), p.Child("numberMisscheduled"))...)
	allErrs = append(allErrs, validateNonnegative(int64(s.DesiredNumberScheduled), p.Child("desiredNumberScheduled"))...)
	allErrs = append(allErrs, validateNonnegative(int64(s.NumberReady), p.Child("numberReady"))...)
	allErrs = append(allErrs, validateNonnegative(s.ObservedGeneration, p.Child("observedGeneration"))...)
	allErrs = append(allErrs, validateNonnegative(int64(s.UpdatedNumberScheduled), p.Child("updatedNumberScheduled"))...)
	allErrs = append(allErrs, validateNonnegative(int64(s.NumberAvailable), p.Child("numberAvailable"))...)
	allErrs = append(allErrs, validateNonnegative(int64(s.NumberUnavailable), p.Child("numberUnavailable"))...)
	allErrs = append(allErrs, validateNonnegativePtr(s.CollisionCount, p.Child("collisionCount"))...)
	return allErrs
}

func ReplicationController(rc *corev1.ReplicationController) field.ErrorList {
	allErrs := validateObjectMeta(&rc.ObjectMeta, true, nameIsDNSSubdomain)
	return append(allErrs, validateReplicationControllerSpec(&rc.Spec)...)
}

func validateReplicationControllerSpec(spec *corev1.ReplicationControllerSpec) field.ErrorList {
	allErrs := validateNonnegativePtr(spec.Replicas, specPath.Child("replicas"))
	allErrs = append(allErrs, validateNonnegative(int64(spec.MinReadySeconds), specPath.Child("minReadySeconds"))...)
	sp := specPath.Child("selector")
	if len(spec.Selector) == 0 {
		allErrs = append(allErrs, field.Required(sp, ""))
	} else {
		allErrs = append(allErrs, validateLabelsMap(spec.Selector, sp)...)
	}
	tp := specPath.Child("template")
	if spec.Template == nil {
		return append(allErrs, field.Required(tp, ""))
	}
	if len(spec.Selector) > 0 && !labels.SelectorFromSet(spec.Selector).Matches(labels.Set(spec.Template.Labels)) {
		allErrs = append(allErrs, field.Invalid(tp.Child("metadata", "labels"), spec.Template.Labels, selectorMismatchMsg))
	}
	allErrs = append(allErrs, validateLongRunningTemplate(spec.Template, "ReplicationController", tp, podSpecContext{})...)
	return allErrs
}

func validateReplicationControllerStatus(s *corev1.ReplicationControllerStatus) field.ErrorList {
	allErrs := validateReplicaSetCounters(s.Replicas, s.FullyLabeledReplicas, s.ReadyReplicas, s.AvailableReplicas, s.ObservedGeneration)
	return append(allErrs, validateReplicaCountBounds(s.Replicas, s.ReadyReplicas, s.AvailableReplicas, "cannot be greater than readyReplicas",
		replicaCount{"fullyLabeledReplicas", s.FullyLabeledReplicas}, replicaCount{"readyReplicas", s.ReadyReplicas}, replicaCount{"availableReplicas", s.AvailableReplicas})...)
}

func PodTemplate(pt *corev1.PodTemplate) field.ErrorList {
	allErrs := validateObjectMeta(&pt.ObjectMeta, true, nameIsDNSSubdomain)
	return append(allErrs, validatePodTemplateSpec(&pt.Template, field.NewPath("template"), podSpecContext{})...)
}

// validateControllerRevision: a revision is a snapshot; its data is
// mandatory, and immutable on update.
func ControllerRevision(cr *appsv1.ControllerRevision) field.ErrorList {
	allErrs := validateObjectMeta(&cr.ObjectMeta, true, nameIsDNSSubdomain)
	if cr.Data.Raw == nil && cr.Data.Object == nil {
		allErrs = append(allErrs, field.Required(field.NewPath("data"), "data is mandatory"))
	}
	allErrs = append(allErrs, validateNonnegative(cr.Revision, field.NewPath("revision"))...)
	return allErrs
}

func ControllerRevisionUpdate(newCR, oldCR *appsv1.ControllerRevision) field.ErrorList {
	allErrs := validateObjectMetaUpdate(&newCR.ObjectMeta, &oldCR.ObjectMeta)
	allErrs = append(allErrs, ControllerRevision(newCR)...)
	if !rawExtensionEqual(newCR.Data, oldCR.Data) {
		allErrs = append(allErrs, field.Invalid(field.NewPath("data"), newCR.Data, fieldImmutableMsg))
	}
	return allErrs
}

// rawExtensionEqual compares embedded objects by content, not by bytes: a
// client re-sending the stored data may serialize it with different
// spacing or key order.
func rawExtensionEqual(a, b runtime.RawExtension) bool {
	if a.Object != nil || b.Object != nil {
		return apiequality.Semantic.DeepEqual(a.Object, b.Object) && (a.Object != nil || bytes.Equal(a.Raw, b.Raw))
	}
	if bytes.Equal(a.Raw, b.Raw) {
		return true
	}
	var av, bv any
	if json.Unmarshal(a.Raw, &av) != nil || json.Unmarshal(b.Raw, &bv) != nil {
		return false
	}
	return reflect.DeepEqual(av, bv)
}
