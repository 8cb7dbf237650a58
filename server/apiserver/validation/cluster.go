package validation

import (
	"fmt"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// --- Namespace ---

func Namespace(ns *corev1.Namespace) field.ErrorList {
	allErrs := validateObjectMeta(&ns.ObjectMeta, false, nameIsDNSLabel)
	for i, f := range ns.Spec.Finalizers {
		allErrs = append(allErrs, validateKubeFinalizerName(string(f), field.NewPath("spec", "finalizers").Index(i))...)
	}
	return allErrs
}

// validateKubeFinalizerName: spec.finalizers hold "kubernetes" or a
// domain-qualified name.
func validateKubeFinalizerName(name string, fldPath *field.Path) field.ErrorList {
	errs := validateQualifiedName(name, fldPath)
	if len(errs) == 0 && !strings.Contains(name, "/") && name != string(corev1.FinalizerKubernetes) {
		errs = append(errs, field.Invalid(fldPath, name, "name is neither a standard finalizer name nor is it fully qualified"))
	}
	return errs
}

// validateNamespaceStatusUpdate: the phase follows deletion, nothing else.
func NamespaceStatusUpdate(newNS, oldNS *corev1.Namespace) field.ErrorList {
	allErrs := validateObjectMetaUpdate(&newNS.ObjectMeta, &oldNS.ObjectMeta)
	p := statusPath.Child("phase")
	if newNS.DeletionTimestamp.IsZero() {
		if newNS.Status.Phase != corev1.NamespaceActive {
			allErrs = append(allErrs, field.Invalid(p, newNS.Status.Phase, "may only be 'Active' if `deletionTimestamp` is empty"))
		}
	} else if newNS.Status.Phase != corev1.NamespaceTerminating {
		allErrs = append(allErrs, field.Invalid(p, newNS.Status.Phase, "may only be 'Terminating' if `deletionTimestamp` is not empty"))
	}
	return allErrs
}

// --- Node ---

func Node(n *corev1.Node) field.ErrorList {
	allErrs := validateObjectMeta(&n.ObjectMeta, false, nameIsDNSSubdomain)
	allErrs = append(allErrs, validateNodeSpec(n)...)
	allErrs = append(allErrs, validateNodeResources(n)...)
	return allErrs
}

func validateNodeSpec(n *corev1.Node) field.ErrorList {
	var allErrs field.ErrorList
	if n.Spec.PodCIDR != "" {
		if errs := validateCIDR(n.Spec.PodCIDR, specPath.Child("podCIDR")); len(errs) > 0 {
			allErrs = append(allErrs, field.Invalid(specPath.Child("podCIDR"), n.Spec.PodCIDR, "must be valid CIDR"))
		}
	}
	cidrsPath := specPath.Child("podCIDRs")
	fams := map[bool]bool{}
	seen := sets.New[string]()
	for i, c := range n.Spec.PodCIDRs {
		if errs := validateCIDR(c, cidrsPath.Index(i)); len(errs) > 0 {
			allErrs = append(allErrs, field.Invalid(cidrsPath.Index(i), n.Spec.PodCIDRs, "must be valid CIDR"))
			continue
		}
		if seen.Has(c) {
			allErrs = append(allErrs, field.Duplicate(cidrsPath.Index(i), c))
		}
		seen.Insert(c)
		fams[strings.Contains(c, ":")] = true
	}
	if len(n.Spec.PodCIDRs) > 2 || (len(n.Spec.PodCIDRs) == 2 && len(fams) != 2) {
		allErrs = append(allErrs, field.Invalid(cidrsPath, n.Spec.PodCIDRs, "may specify no more than one CIDR for each IP family"))
	}
	if n.Spec.PodCIDR != "" && len(n.Spec.PodCIDRs) > 0 && n.Spec.PodCIDRs[0] != n.Spec.PodCIDR {
		allErrs = append(allErrs, field.Invalid(cidrsPath, n.Spec.PodCIDRs, "first value must match `podCIDR`"))
	}
	allErrs = append(allErrs, validateTaints(n.Spec.Taints, specPath.Child("taints"))...)
	return allErrs
}

// validateTaints: valid key/value/effect, unique per (key, effect).
func validateTaints(taints []corev1.Taint, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	seen := sets.New[string]()
	for i, t := range taints {
		p := fldPath.Index(i)
		allErrs = append(allErrs, validateQualifiedName(t.Key, p.Child("key"))...)
		if errs := validation.IsValidLabelValue(t.Value); len(errs) != 0 {
			allErrs = append(allErrs, field.Invalid(p.Child("value"), t.Value, strings.Join(errs, ";")))
		}
		allErrs = append(allErrs, validateTaintEffect(t.Effect, false, p.Child("effect"))...)
		key := t.Key + "\x00" + string(t.Effect)
		if seen.Has(key) {
			dup := field.Duplicate(p, t)
			dup.Detail = "taints must be unique by key and effect pair"
			allErrs = append(allErrs, dup)
			continue
		}
		seen.Insert(key)
	}
	return allErrs
}

func validateNodeResources(n *corev1.Node) field.ErrorList {
	var allErrs field.ErrorList
	for name, q := range n.Status.Capacity {
		allErrs = append(allErrs, validateNonnegativeQuantity(q, statusPath.Child("capacity").Key(string(name)))...)
	}
	for name, q := range n.Status.Allocatable {
		allErrs = append(allErrs, validateNonnegativeQuantity(q, statusPath.Child("allocatable").Key(string(name)))...)
	}
	return allErrs
}

// validateNodeUpdate: the pod CIDRs and provider ID may be assigned once
// (by the controller manager / cloud provider) and never changed after.
func NodeUpdate(newN, oldN *corev1.Node) field.ErrorList {
	allErrs := validateObjectMetaUpdate(&newN.ObjectMeta, &oldN.ObjectMeta)
	allErrs = append(allErrs, validateNodeSpec(newN)...)
	allErrs = append(allErrs, validateNodeResources(newN)...)
	const cidrMsg = "node updates may not change podCIDR except from \"\" to valid"
	if oldN.Spec.PodCIDR != "" && newN.Spec.PodCIDR != oldN.Spec.PodCIDR {
		allErrs = append(allErrs, field.Forbidden(specPath.Child("podCIDR"), cidrMsg))
	}
	if len(oldN.Spec.PodCIDRs) > 0 {
		changed := len(oldN.Spec.PodCIDRs) != len(newN.Spec.PodCIDRs)
		for i := 0; !changed && i < len(oldN.Spec.PodCIDRs); i++ {
			changed = oldN.Spec.PodCIDRs[i] != newN.Spec.PodCIDRs[i]
		}
		if changed {
			allErrs = append(allErrs, field.Forbidden(specPath.Child("podCIDRs"), cidrMsg))
		}
	}
	if oldN.Spec.ProviderID != "" && newN.Spec.ProviderID != oldN.Spec.ProviderID {
		allErrs = append(allErrs, field.Forbidden(specPath.Child("providerID"), "node updates may not change providerID except from \"\" to valid"))
	}
	if newN.Spec.DoNotUseExternalID != oldN.Spec.DoNotUseExternalID {
		allErrs = append(allErrs, field.Forbidden(specPath.Child("externalID"), "may not be updated"))
	}
	addrs := sets.New[corev1.NodeAddress]()
	for i, a := range newN.Status.Addresses {
		if addrs.Has(a) {
			allErrs = append(allErrs, field.Duplicate(statusPath.Child("addresses").Index(i), a))
		}
		addrs.Insert(a)
	}
	return allErrs
}

// --- LimitRange ---

var standardLimitTypes = sets.New(corev1.LimitTypePod, corev1.LimitTypeContainer, corev1.LimitTypePersistentVolumeClaim)

func LimitRange(lr *corev1.LimitRange) field.ErrorList {
	allErrs := validateObjectMeta(&lr.ObjectMeta, true, nameIsDNSSubdomain)
	fldPath := specPath.Child("limits")
	types := sets.New[corev1.LimitType]()
	for i := range lr.Spec.Limits {
		item := &lr.Spec.Limits[i]
		p := fldPath.Index(i)
		tp := p.Child("type")
		if errs := validateQualifiedName(string(item.Type), tp); len(errs) > 0 {
			allErrs = append(allErrs, errs...)
		} else if !strings.Contains(string(item.Type), "/") && !standardLimitTypes.Has(item.Type) {
			allErrs = append(allErrs, field.Invalid(tp, item.Type, "must be a standard limit type or fully qualified"))
		}
		if types.Has(item.Type) {
			allErrs = append(allErrs, field.Duplicate(tp, item.Type))
		}
		types.Insert(item.Type)

		for _, l := range []struct {
			name string
			list corev1.ResourceList
		}{{"max", item.Max}, {"min", item.Min}, {"default", item.Default}, {"defaultRequest", item.DefaultRequest}, {"maxLimitRequestRatio", item.MaxLimitRequestRatio}} {
			for name, q := range l.list {
				rp := p.Child(l.name).Key(string(name))
				allErrs = append(allErrs, validateQualifiedName(string(name), rp)...)
				allErrs = append(allErrs, validateNonnegativeQuantity(q, rp)...)
			}
		}
		if item.Type == corev1.LimitTypePod {
			if len(item.Default) > 0 {
				allErrs = append(allErrs, field.Forbidden(p.Child("default"), "may not be specified when `type` is 'Pod'"))
			}
			if len(item.DefaultRequest) > 0 {
				allErrs = append(allErrs, field.Forbidden(p.Child("defaultRequest"), "may not be specified when `type` is 'Pod'"))
			}
		}
		if item.Type == corev1.LimitTypePersistentVolumeClaim {
			_, hasMin := item.Min[corev1.ResourceStorage]
			_, hasMax := item.Max[corev1.ResourceStorage]
			if !hasMin && !hasMax {
				allErrs = append(allErrs, field.Required(p.Child("limits"), "either minimum or maximum storage value is required, but neither was provided"))
			}
		}
		allErrs = append(allErrs, validateLimitRangeOrdering(item, p)...)
	}
	return allErrs
}

// validateLimitRangeOrdering: min <= defaultRequest <= default <= max per
// resource, and ratios of at least 1.
func validateLimitRangeOrdering(item *corev1.LimitRangeItem, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	keys := sets.New[corev1.ResourceName]()
	for _, l := range []corev1.ResourceList{item.Max, item.Min, item.Default, item.DefaultRequest, item.MaxLimitRequestRatio} {
		for k := range l {
			keys.Insert(k)
		}
	}
	for _, k := range sets.List(keys) {
		minQ, hasMin := item.Min[k]
		maxQ, hasMax := item.Max[k]
		defQ, hasDef := item.Default[k]
		reqQ, hasReq := item.DefaultRequest[k]
		ratio, hasRatio := item.MaxLimitRequestRatio[k]
		key := string(k)
		if hasMin && hasMax && minQ.Cmp(maxQ) > 0 {
			allErrs = append(allErrs, field.Invalid(p.Child("min").Key(key), minQ.String(), fmt.Sprintf("min value %s is greater than max value %s", minQ.String(), maxQ.String())))
		}
		if hasReq && hasMin && minQ.Cmp(reqQ) > 0 {
			allErrs = append(allErrs, field.Invalid(p.Child("defaultRequest").Key(key), reqQ.String(), fmt.Sprintf("min value %s is greater than default request value %s", minQ.String(), reqQ.String())))
		}
		if hasReq && hasMax && reqQ.Cmp(maxQ) > 0 {
			allErrs = append(allErrs, field.Invalid(p.Child("defaultRequest").Key(key), reqQ.String(), fmt.Sprintf("default request value %s is greater than max value %s", reqQ.String(), maxQ.String())))
		}
		if hasReq && hasDef && reqQ.Cmp(defQ) > 0 {
			allErrs = append(allErrs, field.Invalid(p.Child("defaultRequest").Key(key), reqQ.String(), fmt.Sprintf("default request value %s is greater than default limit value %s", reqQ.String(), defQ.String())))
		}
		if hasDef && hasMin && minQ.Cmp(defQ) > 0 {
			allErrs = append(allErrs, field.Invalid(p.Child("default").Key(key), minQ.String(), fmt.Sprintf("min value %s is greater than default value %s", minQ.String(), defQ.String())))
		}
		if hasDef && hasMax && defQ.Cmp(maxQ) > 0 {
			allErrs = append(allErrs, field.Invalid(p.Child("default").Key(key), maxQ.String(), fmt.Sprintf("default value %s is greater than max value %s", defQ.String(), maxQ.String())))
		}
		if hasRatio && ratio.Cmp(*resource.NewQuantity(1, resource.DecimalSI)) < 0 {
			allErrs = append(allErrs, field.Invalid(p.Child("maxLimitRequestRatio").Key(key), ratio.String(), fmt.Sprintf("ratio %s is less than 1", ratio.String())))
		}
	}
	return allErrs
}

// --- ResourceQuota ---

// standardQuotaResources are the unprefixed names a quota may bound.
var standardQuotaResources = sets.New(
	"pods", "services", "replicationcontrollers", "resourcequotas", "secrets", "configmaps",
	"persistentvolumeclaims", "services.nodeports", "services.loadbalancers",
	"cpu", "memory", "ephemeral-storage", "requests.cpu", "requests.memory", "requests.storage",
	"requests.ephemeral-storage", "limits.cpu", "limits.memory", "limits.ephemeral-storage",
)

var supportedQuotaScopes = []corev1.ResourceQuotaScope{
	corev1.ResourceQuotaScopeTerminating, corev1.ResourceQuotaScopeNotTerminating,
	corev1.ResourceQuotaScopeBestEffort, corev1.ResourceQuotaScopeNotBestEffort,
	corev1.ResourceQuotaScopePriorityClass, corev1.ResourceQuotaScopeCrossNamespacePodAffinity,
	corev1.ResourceQuotaScopeVolumeAttributesClass,
}

func validateQuotaResourceList(l corev1.ResourceList, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for _, name := range sortedNames(l) {
		p := fldPath.Key(string(name))
		s := string(name)
		if errs := validateQualifiedName(s, p); len(errs) > 0 {
			allErrs = append(allErrs, errs...)
		} else if !strings.Contains(s, "/") && !standardQuotaResources.Has(s) &&
			!strings.HasPrefix(s, corev1.ResourceHugePagesPrefix) && !strings.HasPrefix(s, "requests.hugepages-") {
			allErrs = append(allErrs, field.Invalid(p, s, "must be a standard resource for quota"))
		}
		allErrs = append(allErrs, validateResourceQuantityValue(name, l[name], p)...)
	}
	return allErrs
}

func ResourceQuota(q *corev1.ResourceQuota) field.ErrorList {
	allErrs := validateObjectMeta(&q.ObjectMeta, true, nameIsDNSSubdomain)
	allErrs = append(allErrs, validateQuotaResourceList(q.Spec.Hard, specPath.Child("hard"))...)
	scopes := sets.New[corev1.ResourceQuotaScope]()
	for i, s := range q.Spec.Scopes {
		ok := false
		for _, v := range supportedQuotaScopes {
			ok = ok || v == s
		}
		if !ok {
			allErrs = append(allErrs, field.NotSupported(specPath.Child("scopes").Index(i), s, supportedQuotaScopes))
		}
		scopes.Insert(s)
	}
	if (scopes.Has(corev1.ResourceQuotaScopeTerminating) && scopes.Has(corev1.ResourceQuotaScopeNotTerminating)) ||
		(scopes.Has(corev1.ResourceQuotaScopeBestEffort) && scopes.Has(corev1.ResourceQuotaScopeNotBestEffort)) {
		allErrs = append(allErrs, field.Invalid(specPath.Child("scopes"), q.Spec.Scopes, "conflicting scopes"))
	}
	if sel := q.Spec.ScopeSelector; sel != nil {
		for i, r := range sel.MatchExpressions {
			p := specPath.Child("scopeSelector", "matchExpressions").Index(i)
			switch r.Operator {
			case corev1.ScopeSelectorOpIn, corev1.ScopeSelectorOpNotIn:
				if len(r.Values) == 0 {
					allErrs = append(allErrs, field.Required(p.Child("values"), "must be at least one value when `operator` is 'In' or 'NotIn' for scope selector"))
				}
			case corev1.ScopeSelectorOpExists, corev1.ScopeSelectorOpDoesNotExist:
				if len(r.Values) != 0 {
					allErrs = append(allErrs, field.Invalid(p.Child("values"), r.Values, "must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector"))
				}
			default:
				allErrs = append(allErrs, field.Invalid(p.Child("operator"), r.Operator, "not a valid selector operator"))
			}
		}
	}
	return allErrs
}

func ResourceQuotaStatusUpdate(newQ, oldQ *corev1.ResourceQuota) field.ErrorList {
	allErrs := validateObjectMetaUpdate(&newQ.ObjectMeta, &oldQ.ObjectMeta)
	allErrs = append(allErrs, validateQuotaResourceList(newQ.Status.Hard, statusPath.Child("hard"))...)
	allErrs = append(allErrs, validateQuotaResourceList(newQ.Status.Used, statusPath.Child("used"))...)
	return allErrs
}

// --- PriorityClass ---

const highestUserDefinablePriority int32 = 1000000000

// SystemPriorityClasses are upstream's SystemPriorityClasses: the only
// classes whose names may start with "system-", with these values and
// never the global default. The API server creates them at start (as
// upstream's scheduling post-start hook) and the Priority admission
// plugin refuses their deletion. The node-critical one is above the
// cluster-critical one, both above any class a user may define.
func SystemPriorityClasses() []*schedulingv1.PriorityClass {
	return []*schedulingv1.PriorityClass{
		{
			ObjectMeta:  metav1.ObjectMeta{Name: "system-node-critical"},
			Value:       systemCriticalPriority + 1000,
			Description: "Used for system critical pods that must not be moved from their current node.",
		},
		{
			ObjectMeta:  metav1.ObjectMeta{Name: "system-cluster-critical"},
			Value:       systemCriticalPriority,
			Description: "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
		},
	}
}

// systemCriticalPriority is upstream's scheduling.SystemCriticalPriority.
const systemCriticalPriority int32 = 2000000000

// knownSystemPriorityClass is upstream's IsKnownSystemPriorityClass.
func knownSystemPriorityClass(pc *schedulingv1.PriorityClass) error {
	for _, spc := range SystemPriorityClasses() {
		if spc.Name != pc.Name {
			continue
		}
		if spc.Value != pc.Value {
			return fmt.Errorf("value of %v PriorityClass must be %v", spc.Name, spc.Value)
		}
		if pc.GlobalDefault {
			return fmt.Errorf("globalDefault of %v PriorityClass must be %v", spc.Name, false)
		}
		return nil
	}
	return fmt.Errorf("%v is not a known system priority class", pc.Name)
}

// PriorityClass is upstream's ValidatePriorityClass.
func PriorityClass(pc *schedulingv1.PriorityClass) field.ErrorList {
	allErrs := validateObjectMeta(&pc.ObjectMeta, false, nameIsDNSSubdomain)
	if strings.HasPrefix(pc.Name, "system-") {
		if err := knownSystemPriorityClass(pc); err != nil {
			allErrs = append(allErrs, field.Forbidden(metadataPath.Child("name"), "priority class names with 'system-' prefix are reserved for system use only. error: "+err.Error()))
		}
	} else if pc.Value > highestUserDefinablePriority {
		allErrs = append(allErrs, field.Forbidden(field.NewPath("value"), fmt.Sprintf("maximum allowed value of a user defined priority is %v", highestUserDefinablePriority)))
	}
	if pp := pc.PreemptionPolicy; pp != nil {
		switch *pp {
		case corev1.PreemptLowerPriority, corev1.PreemptNever:
		case "":
			allErrs = append(allErrs, field.Required(field.NewPath("preemptionPolicy"), ""))
		default:
			allErrs = append(allErrs, field.NotSupported(field.NewPath("preemptionPolicy"), *pp, []corev1.PreemptionPolicy{corev1.PreemptLowerPriority, corev1.PreemptNever}))
		}
	}
	return allErrs
}

func validatePriorityClassUpdate(newPC, oldPC *schedulingv1.PriorityClass) field.ErrorList {
	allErrs := validateObjectMetaUpdate(&newPC.ObjectMeta, &oldPC.ObjectMeta)
	// Running pods carry the resolved value, so it must never drift.
	if newPC.Value != oldPC.Value {
		allErrs = append(allErrs, field.Forbidden(field.NewPath("value"), "may not be changed in an update."))
	}
	allErrs = append(allErrs, validateImmutable(newPC.PreemptionPolicy, oldPC.PreemptionPolicy, field.NewPath("preemptionPolicy"))...)
	return allErrs
}

// --- Lease ---

func Lease(l *coordinationv1.Lease) field.ErrorList {
	allErrs := validateObjectMeta(&l.ObjectMeta, true, nameIsDNSSubdomain)
	if d := l.Spec.LeaseDurationSeconds; d != nil && *d <= 0 {
		allErrs = append(allErrs, field.Invalid(specPath.Child("leaseDurationSeconds"), *d, "must be greater than 0"))
	}
	if t := l.Spec.LeaseTransitions; t != nil && *t < 0 {
		allErrs = append(allErrs, field.Invalid(specPath.Child("leaseTransitions"), *t, isNegativeErrorMsg))
	}
	if s := l.Spec.Strategy; s != nil && *s != "" {
		if *s != coordinationv1.OldestEmulationVersion {
			allErrs = append(allErrs, field.NotSupported(specPath.Child("strategy"), *s, []coordinationv1.CoordinatedLeaseStrategy{coordinationv1.OldestEmulationVersion}))
		}
	}
	if ph := l.Spec.PreferredHolder; ph != nil && *ph != "" && (l.Spec.Strategy == nil || *l.Spec.Strategy == "") {
		allErrs = append(allErrs, field.Forbidden(specPath.Child("preferredHolder"), "may only be specified if `strategy` is defined"))
	}
	return allErrs
}

// --- Events ---

const (
	eventReasonLengthLimit   = 128
	eventActionLengthLimit   = 128
	eventNoteLengthLimit     = 1024
	eventReportingInstLength = 128
)

// validateCoreEvent is upstream's legacy (core/v1) event validation: the
// involved object's namespace must match the event's. Old-style events
// (no eventTime) are otherwise free-form for compatibility; new-style ones
// must name their reporter, action and reason.
func CoreEvent(e *corev1.Event) field.ErrorList {
	var allErrs field.ErrorList
	if e.Name == "" && e.GenerateName == "" {
		allErrs = append(allErrs, field.Required(metadataPath.Child("name"), "name or generateName is required"))
	}
	inv := field.NewPath("involvedObject", "namespace")
	if e.EventTime.IsZero() {
		if e.InvolvedObject.Namespace == "" {
			// Cluster-scoped objects: events live in "default" (or unset).
			if e.Namespace != metav1.NamespaceNone && e.Namespace != metav1.NamespaceDefault {
				allErrs = append(allErrs, field.Invalid(inv, e.InvolvedObject.Namespace, "does not match event.namespace"))
			}
		} else if e.Namespace != "" && e.Namespace != e.InvolvedObject.Namespace {
			allErrs = append(allErrs, field.Invalid(inv, e.InvolvedObject.Namespace, "does not match event.namespace"))
		}
	} else {
		if e.InvolvedObject.Namespace == "" && e.Namespace != metav1.NamespaceDefault && e.Namespace != metav1.NamespaceSystem && e.Namespace != "" {
			allErrs = append(allErrs, field.Invalid(inv, e.InvolvedObject.Namespace, "does not match event.namespace"))
		}
		allErrs = append(allErrs, validateEventReporting(e.ReportingController, e.ReportingInstance, e.Action, e.Reason, e.Message,
			field.NewPath("source"), field.NewPath("message"))...)
	}
	if e.Namespace != "" {
		allErrs = append(allErrs, validateDNS1123Subdomain(e.Namespace, metadataPath.Child("namespace"))...)
	}
	return allErrs
}

func validateEventReporting(controller, instance, action, reason, note string, controllerPath, notePath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if controller == "" {
		allErrs = append(allErrs, field.Required(controllerPath, ""))
	} else {
		allErrs = append(allErrs, validateQualifiedName(controller, controllerPath)...)
	}
	if instance == "" {
		allErrs = append(allErrs, field.Required(field.NewPath("reportingInstance"), ""))
	} else if len(instance) > eventReportingInstLength {
		allErrs = append(allErrs, field.Invalid(field.NewPath("reportingInstance"), "", fmt.Sprintf("can have at most %v characters", eventReportingInstLength)))
	}
	if action == "" {
		allErrs = append(allErrs, field.Required(field.NewPath("action"), ""))
	} else if len(action) > eventActionLengthLimit {
		allErrs = append(allErrs, field.Invalid(field.NewPath("action"), "", fmt.Sprintf("can have at most %v characters", eventActionLengthLimit)))
	}
	if reason == "" {
		allErrs = append(allErrs, field.Required(field.NewPath("reason"), ""))
	} else if len(reason) > eventReasonLengthLimit {
		allErrs = append(allErrs, field.Invalid(field.NewPath("reason"), "", fmt.Sprintf("can have at most %v characters", eventReasonLengthLimit)))
	}
	if len(note) > eventNoteLengthLimit {
		allErrs = append(allErrs, field.Invalid(notePath, "", fmt.Sprintf("can have at most %v characters", eventNoteLengthLimit)))
	}
	return allErrs
}

// validateEventV1 is the events.k8s.io/v1 validation: full metadata,
// eventTime and the reporting fields required, Normal/Warning type, and the
// deprecated core fields left unset.
func EventV1(e *eventsv1.Event) field.ErrorList {
	allErrs := validateObjectMeta(&e.ObjectMeta, true, nameIsDNSSubdomain)
	if e.EventTime.IsZero() {
		allErrs = append(allErrs, field.Required(field.NewPath("eventTime"), ""))
	}
	if e.Regarding.Namespace == "" {
		if e.Namespace != "" && e.Namespace != metav1.NamespaceDefault && e.Namespace != metav1.NamespaceSystem {
			allErrs = append(allErrs, field.Invalid(field.NewPath("regarding", "namespace"), e.Regarding.Namespace, "does not match event.namespace"))
		}
	}
	allErrs = append(allErrs, validateEventReporting(e.ReportingController, e.ReportingInstance, e.Action, e.Reason, e.Note,
		field.NewPath("reportingController"), field.NewPath("note"))...)
	if e.Type != corev1.EventTypeNormal && e.Type != corev1.EventTypeWarning {
		allErrs = append(allErrs, field.Invalid(field.NewPath("type"), "", fmt.Sprintf("has invalid value: %v", e.Type)))
	}
	if !e.DeprecatedFirstTimestamp.IsZero() {
		allErrs = append(allErrs, field.Invalid(field.NewPath("deprecatedFirstTimestamp"), "", "needs to be unset"))
	}
	if !e.DeprecatedLastTimestamp.IsZero() {
		allErrs = append(allErrs, field.Invalid(field.NewPath("deprecatedLastTimestamp"), "", "needs to be unset"))
	}
	if e.DeprecatedCount != 0 {
		allErrs = append(allErrs, field.Invalid(field.NewPath("deprecatedCount"), "", "needs to be unset"))
	}
	if e.DeprecatedSource.Component != "" || e.DeprecatedSource.Host != "" {
		allErrs = append(allErrs, field.Invalid(field.NewPath("deprecatedSource"), "", "needs to be unset"))
	}
	if s := e.Series; s != nil {
		if s.Count < 2 {
			allErrs = append(allErrs, field.Invalid(field.NewPath("series", "count"), "", "should be at least 2"))
		}
		if s.LastObservedTime.IsZero() {
			allErrs = append(allErrs, field.Required(field.NewPath("series", "lastObservedTime"), ""))
		}
	}
	return allErrs
}

// validateEventV1Update: an event records a fact; only its series (and
// metadata) may change.
func EventV1Update(newE, oldE *eventsv1.Event) field.ErrorList {
	allErrs := validateObjectMetaUpdate(&newE.ObjectMeta, &oldE.ObjectMeta)
	allErrs = append(allErrs, EventV1(newE)...)
	for _, f := range []struct {
		name     string
		new, old any
	}{
		{"regarding", newE.Regarding, oldE.Regarding},
		{"reason", newE.Reason, oldE.Reason},
		{"note", newE.Note, oldE.Note},
		{"action", newE.Action, oldE.Action},
		{"related", newE.Related, oldE.Related},
		{"reportingController", newE.ReportingController, oldE.ReportingController},
		{"reportingInstance", newE.ReportingInstance, oldE.ReportingInstance},
		{"type", newE.Type, oldE.Type},
		{"eventTime", newE.EventTime, oldE.EventTime},
	} {
		allErrs = append(allErrs, validateImmutable(f.new, f.old, field.NewPath(f.name))...)
	}
	return allErrs
}
