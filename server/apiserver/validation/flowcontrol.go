package validation

import (
	"fmt"
	"slices"
	"strings"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	flowcontrolv1beta3 "k8s.io/api/flowcontrol/v1beta3"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap"
	"k8s.io/apiserver/pkg/util/shufflesharding"
)

// flowcontrol.apiserver.k8s.io/v1, as upstream's
// pkg/apis/flowcontrol/validation on the v1 types. The mandatory
// configuration objects (exempt, catch-all) may not be given another spec:
// the API server maintains them (server/controllers/apfconfig).

// The mandatory objects by name. Upstream's bootstrap objects are complete:
// defaulting changes nothing in them, so a defaulted spec compares equal to
// theirs exactly when it is the same configuration.
var (
	mandatoryFlowSchemas     = byName(bootstrap.MandatoryFlowSchemas)
	mandatoryPriorityLevels  = byName(bootstrap.MandatoryPriorityLevelConfigurations)
	flowSchemaMaxPrecedence  = flowcontrolv1.FlowSchemaMaxMatchingPrecedence
	priorityLevelMaxQueues   = int32(10 * 1000 * 1000)
	flowDistinguisherMethods = []string{string(flowcontrolv1.FlowDistinguisherMethodByNamespaceType), string(flowcontrolv1.FlowDistinguisherMethodByUserType)}
	flowcontrolVerbs         = []string{"create", "delete", "deletecollection", "get", "list", "patch", "proxy", "update", "watch"}
	flowSubjectKinds         = []string{string(flowcontrolv1.SubjectKindGroup), string(flowcontrolv1.SubjectKindServiceAccount), string(flowcontrolv1.SubjectKindUser)}
	priorityLevelTypes       = []string{string(flowcontrolv1.PriorityLevelEnablementExempt), string(flowcontrolv1.PriorityLevelEnablementLimited)}
	limitResponseTypes       = []string{string(flowcontrolv1.LimitResponseTypeQueue), string(flowcontrolv1.LimitResponseTypeReject)}
)

type named interface{ GetName() string }

func byName[T named](objs []T) map[string]T {
	m := make(map[string]T, len(objs))
	for _, o := range objs {
		m[o.GetName()] = o
	}
	return m
}

func FlowSchema(fs *flowcontrolv1.FlowSchema) field.ErrorList {
	allErrs := validateObjectMeta(&fs.ObjectMeta, false, nameIsDNSSubdomain)
	allErrs = append(allErrs, validateFlowSchemaSpec(fs.Name, &fs.Spec)...)
	if mand, ok := mandatoryFlowSchemas[fs.Name]; ok && !apiequality.Semantic.DeepEqual(fs.Spec, mand.Spec) {
		allErrs = append(allErrs, field.Invalid(specPath, fs.Spec, fmt.Sprintf("spec of '%s' must equal the fixed value", fs.Name)))
	}
	return append(allErrs, validateFlowSchemaConditions(fs.Status.Conditions)...)
}

// FlowSchemaUpdate: the spec is freely mutable (within the create rules).
func FlowSchemaUpdate(fs, old *flowcontrolv1.FlowSchema) field.ErrorList {
	return dedupe(append(validateObjectMetaUpdate(&fs.ObjectMeta, &old.ObjectMeta), FlowSchema(fs)...))
}

func FlowSchemaStatusUpdate(fs, old *flowcontrolv1.FlowSchema) field.ErrorList {
	return append(validateObjectMetaUpdate(&fs.ObjectMeta, &old.ObjectMeta), validateFlowSchemaConditions(fs.Status.Conditions)...)
}

func validateFlowSchemaSpec(name string, spec *flowcontrolv1.FlowSchemaSpec) field.ErrorList {
	var allErrs field.ErrorList
	precedence := specPath.Child("matchingPrecedence")
	if spec.MatchingPrecedence <= 0 {
		allErrs = append(allErrs, field.Invalid(precedence, spec.MatchingPrecedence, "must be a positive value"))
	}
	if spec.MatchingPrecedence > flowSchemaMaxPrecedence {
		allErrs = append(allErrs, field.Invalid(precedence, spec.MatchingPrecedence, fmt.Sprintf("must not be greater than %v", flowSchemaMaxPrecedence)))
	}
	// Precedence 1 is the exempt schema's, which must match first.
	if spec.MatchingPrecedence == 1 && name != flowcontrolv1.FlowSchemaNameExempt {
		allErrs = append(allErrs, field.Invalid(precedence, spec.MatchingPrecedence, "only the schema named 'exempt' may have matchingPrecedence 1"))
	}
	if dm := spec.DistinguisherMethod; dm != nil && !slices.Contains(flowDistinguisherMethods, string(dm.Type)) {
		allErrs = append(allErrs, field.NotSupported(specPath.Child("distinguisherMethod", "type"), dm, flowDistinguisherMethods))
	}
	plPath := specPath.Child("priorityLevelConfiguration", "name")
	if pl := spec.PriorityLevelConfiguration.Name; pl != "" {
		allErrs = append(allErrs, validateName(pl, nameIsDNSSubdomain, plPath)...)
	} else {
		allErrs = append(allErrs, field.Required(plPath, "must reference a priority level"))
	}
	for i := range spec.Rules {
		allErrs = append(allErrs, validatePolicyRulesWithSubjects(&spec.Rules[i], specPath.Child("rules").Index(i))...)
	}
	return allErrs
}

func validatePolicyRulesWithSubjects(rule *flowcontrolv1.PolicyRulesWithSubjects, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if len(rule.Subjects) == 0 {
		allErrs = append(allErrs, field.Required(fldPath.Child("subjects"), "subjects must contain at least one value"))
	}
	for i := range rule.Subjects {
		allErrs = append(allErrs, validateFlowSubject(&rule.Subjects[i], fldPath.Child("subjects").Index(i))...)
	}
	if len(rule.ResourceRules) == 0 && len(rule.NonResourceRules) == 0 {
		allErrs = append(allErrs, field.Required(fldPath, "at least one of resourceRules and nonResourceRules has to be non-empty"))
	}
	for i := range rule.ResourceRules {
		allErrs = append(allErrs, validateResourcePolicyRule(&rule.ResourceRules[i], fldPath.Child("resourceRules").Index(i))...)
	}
	for i := range rule.NonResourceRules {
		allErrs = append(allErrs, validateNonResourcePolicyRule(&rule.NonResourceRules[i], fldPath.Child("nonResourceRules").Index(i))...)
	}
	return allErrs
}

// validateFlowSubject: the member named by kind is required, the others
// forbidden.
func validateFlowSubject(s *flowcontrolv1.Subject, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	forbidUser := func() {
		if s.User != nil {
			allErrs = append(allErrs, field.Forbidden(fldPath.Child("user"), "user is forbidden when subject kind is not 'User'"))
		}
	}
	forbidGroup := func() {
		if s.Group != nil {
			allErrs = append(allErrs, field.Forbidden(fldPath.Child("group"), "group is forbidden when subject kind is not 'Group'"))
		}
	}
	forbidServiceAccount := func() {
		if s.ServiceAccount != nil {
			allErrs = append(allErrs, field.Forbidden(fldPath.Child("serviceAccount"), "serviceAccount is forbidden when subject kind is not 'ServiceAccount'"))
		}
	}
	switch s.Kind {
	case flowcontrolv1.SubjectKindServiceAccount:
		allErrs = append(allErrs, validateServiceAccountSubject(s.ServiceAccount, fldPath.Child("serviceAccount"))...)
		forbidUser()
		forbidGroup()
	case flowcontrolv1.SubjectKindUser:
		if s.User == nil {
			allErrs = append(allErrs, field.Required(fldPath.Child("user"), "user is required when subject kind is 'User'"))
		} else if s.User.Name == "" {
			allErrs = append(allErrs, field.Required(fldPath.Child("user", "name"), ""))
		}
		forbidServiceAccount()
		forbidGroup()
	case flowcontrolv1.SubjectKindGroup:
		if s.Group == nil {
			allErrs = append(allErrs, field.Required(fldPath.Child("group"), "group is required when subject kind is 'Group'"))
		} else if s.Group.Name == "" {
			allErrs = append(allErrs, field.Required(fldPath.Child("group", "name"), ""))
		}
		forbidServiceAccount()
		forbidUser()
	default:
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("kind"), s.Kind, flowSubjectKinds))
	}
	return allErrs
}

func validateServiceAccountSubject(sa *flowcontrolv1.ServiceAccountSubject, fldPath *field.Path) field.ErrorList {
	if sa == nil {
		return field.ErrorList{field.Required(fldPath, "serviceAccount is required when subject kind is 'ServiceAccount'")}
	}
	var allErrs field.ErrorList
	if sa.Name == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("name"), ""))
	} else if sa.Name != flowcontrolv1.NameAll {
		allErrs = append(allErrs, validateName(sa.Name, apimachineryvalidation.ValidateServiceAccountName, fldPath.Child("name"))...)
	}
	if sa.Namespace == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("namespace"), "must specify namespace for service account"))
	} else {
		allErrs = append(allErrs, validateName(sa.Namespace, apimachineryvalidation.ValidateNamespaceName, fldPath.Child("namespace"))...)
	}
	return allErrs
}

// validateFlowVerbs: '*' alone, or verbs from upstream's list.
func validateFlowVerbs(verbs []string, fldPath *field.Path) field.ErrorList {
	switch {
	case len(verbs) == 0:
		return field.ErrorList{field.Required(fldPath, "verbs must contain at least one value")}
	case slices.Contains(verbs, flowcontrolv1.VerbAll):
		if len(verbs) > 1 {
			return field.ErrorList{field.Invalid(fldPath, verbs, "if '*' is present, must not specify other verbs")}
		}
	default:
		for _, v := range verbs {
			if !slices.Contains(flowcontrolVerbs, v) {
				return field.ErrorList{field.NotSupported(fldPath, verbs, flowcontrolVerbs)}
			}
		}
	}
	return nil
}

func validateNonResourcePolicyRule(rule *flowcontrolv1.NonResourcePolicyRule, fldPath *field.Path) field.ErrorList {
	allErrs := validateFlowVerbs(rule.Verbs, fldPath.Child("verbs"))
	urls := fldPath.Child("nonResourceURLs")
	switch {
	case len(rule.NonResourceURLs) == 0:
		allErrs = append(allErrs, field.Required(urls, "nonResourceURLs must contain at least one value"))
	case slices.Contains(rule.NonResourceURLs, flowcontrolv1.NonResourceAll):
		if len(rule.NonResourceURLs) > 1 {
			allErrs = append(allErrs, field.Invalid(urls, rule.NonResourceURLs, "if '*' is present, must not specify other non-resource URLs"))
		}
	default:
		for i, u := range rule.NonResourceURLs {
			if err := validateNonResourceURLPath(u, urls.Index(i)); err != nil {
				allErrs = append(allErrs, err)
			}
		}
	}
	return allErrs
}

// validateNonResourceURLPath: "/", or a path starting with a slash,
// without white space or double slashes, whose one wildcard may only end
// it as "/*" (a prefix match, slashes included).
func validateNonResourceURLPath(p string, fldPath *field.Path) *field.Error {
	switch {
	case p == "":
		return field.Invalid(fldPath, p, "must not be empty")
	case p == "/":
		return nil
	case !strings.HasPrefix(p, "/"):
		return field.Invalid(fldPath, p, "must start with slash")
	case strings.Contains(p, " "):
		return field.Invalid(fldPath, p, "must not contain white-space")
	case strings.Contains(p, "//"):
		return field.Invalid(fldPath, p, "must not contain double slash")
	}
	if n := strings.Count(p, "*"); n > 1 || (n == 1 && !strings.HasSuffix(p, "/*")) {
		return field.Invalid(fldPath, p, "wildcard can only do suffix matching")
	}
	return nil
}

func validateResourcePolicyRule(rule *flowcontrolv1.ResourcePolicyRule, fldPath *field.Path) field.ErrorList {
	allErrs := validateFlowVerbs(rule.Verbs, fldPath.Child("verbs"))
	if len(rule.APIGroups) == 0 {
		allErrs = append(allErrs, field.Required(fldPath.Child("apiGroups"), "resource rules must supply at least one api group"))
	} else if len(rule.APIGroups) > 1 && slices.Contains(rule.APIGroups, flowcontrolv1.APIGroupAll) {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("apiGroups"), rule.APIGroups, "if '*' is present, must not specify other api groups"))
	}
	if len(rule.Resources) == 0 {
		allErrs = append(allErrs, field.Required(fldPath.Child("resources"), "resource rules must supply at least one resource"))
	} else if len(rule.Resources) > 1 && slices.Contains(rule.Resources, flowcontrolv1.ResourceAll) {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("resources"), rule.Resources, "if '*' is present, must not specify other resources"))
	}
	namespaces := fldPath.Child("namespaces")
	switch {
	case len(rule.Namespaces) == 0 && !rule.ClusterScope:
		allErrs = append(allErrs, field.Required(namespaces, "resource rules that are not cluster scoped must supply at least one namespace"))
	case slices.Contains(rule.Namespaces, flowcontrolv1.NamespaceEvery):
		if len(rule.Namespaces) > 1 {
			allErrs = append(allErrs, field.Invalid(namespaces, rule.Namespaces, "if '*' is present, must not specify other namespaces"))
		}
	default:
		for i, ns := range rule.Namespaces {
			for _, msg := range apimachineryvalidation.ValidateNamespaceName(ns, false) {
				allErrs = append(allErrs, field.Invalid(namespaces.Index(i), ns, "each member of this list must be '*' or a DNS-1123 label; "+msg))
			}
		}
	}
	return allErrs
}

func validateFlowSchemaConditions(conds []flowcontrolv1.FlowSchemaCondition) field.ErrorList {
	types := make([]string, len(conds))
	for i, c := range conds {
		types[i] = string(c.Type)
	}
	return validateConditionTypes(types)
}

// validateConditionTypes: each condition has a type, and no type twice.
func validateConditionTypes(types []string) field.ErrorList {
	var allErrs field.ErrorList
	seen := map[string]bool{}
	for i, t := range types {
		p := statusPath.Child("conditions").Index(i)
		if seen[t] {
			allErrs = append(allErrs, field.Duplicate(p.Child("type"), t))
		}
		seen[t] = true
		if t == "" {
			allErrs = append(allErrs, field.Required(p.Child("type"), ""))
		}
	}
	return allErrs
}

func PriorityLevelConfiguration(pl *flowcontrolv1.PriorityLevelConfiguration) field.ErrorList {
	allErrs := validateObjectMeta(&pl.ObjectMeta, false, nameIsDNSSubdomain)
	// v1beta3's round-trip annotation has no meaning in v1.
	if _, ok := pl.Annotations[flowcontrolv1beta3.PriorityLevelPreserveZeroConcurrencySharesKey]; ok {
		allErrs = append(allErrs, field.Forbidden(metadataPath.Child("annotations"), fmt.Sprintf("annotation '%s' is forbidden", flowcontrolv1beta3.PriorityLevelPreserveZeroConcurrencySharesKey)))
	}
	allErrs = append(allErrs, validatePriorityLevelSpec(pl.Name, &pl.Spec)...)
	allErrs = append(allErrs, validateMandatoryPriorityLevel(pl)...)
	return append(allErrs, validatePriorityLevelConditions(pl.Status.Conditions)...)
}

func PriorityLevelConfigurationUpdate(pl, old *flowcontrolv1.PriorityLevelConfiguration) field.ErrorList {
	return dedupe(append(validateObjectMetaUpdate(&pl.ObjectMeta, &old.ObjectMeta), PriorityLevelConfiguration(pl)...))
}

func PriorityLevelConfigurationStatusUpdate(pl, old *flowcontrolv1.PriorityLevelConfiguration) field.ErrorList {
	return append(validateObjectMetaUpdate(&pl.ObjectMeta, &old.ObjectMeta), validatePriorityLevelConditions(pl.Status.Conditions)...)
}

func validatePriorityLevelConditions(conds []flowcontrolv1.PriorityLevelConfigurationCondition) field.ErrorList {
	types := make([]string, len(conds))
	for i, c := range conds {
		types[i] = string(c.Type)
	}
	return validateConditionTypes(types)
}

// validateMandatoryPriorityLevel: a mandatory level keeps its fixed spec;
// of 'exempt' an administrator may change only spec.exempt.
func validateMandatoryPriorityLevel(pl *flowcontrolv1.PriorityLevelConfiguration) field.ErrorList {
	mand, ok := mandatoryPriorityLevels[pl.Name]
	if !ok {
		return nil
	}
	if pl.Name == flowcontrolv1.PriorityLevelConfigurationNameExempt {
		have := pl.Spec.DeepCopy()
		have.Exempt = mand.Spec.Exempt
		if !apiequality.Semantic.DeepEqual(&mand.Spec, have) {
			return field.ErrorList{field.Invalid(specPath, pl.Spec, fmt.Sprintf("spec of '%s' except the 'spec.exempt' field must equal the fixed value", pl.Name))}
		}
		return nil
	}
	if !apiequality.Semantic.DeepEqual(pl.Spec, mand.Spec) {
		return field.ErrorList{field.Invalid(specPath, pl.Spec, fmt.Sprintf("spec of '%s' must equal the fixed value", pl.Name))}
	}
	return nil
}

func validatePriorityLevelSpec(name string, spec *flowcontrolv1.PriorityLevelConfigurationSpec) field.ErrorList {
	var allErrs field.ErrorList
	if (name == flowcontrolv1.PriorityLevelConfigurationNameExempt) != (spec.Type == flowcontrolv1.PriorityLevelEnablementExempt) {
		allErrs = append(allErrs, field.Invalid(specPath.Child("type"), spec.Type, "must be 'Exempt' if and only if `name` is 'exempt'"))
	}
	switch spec.Type {
	case flowcontrolv1.PriorityLevelEnablementExempt:
		if spec.Limited != nil {
			allErrs = append(allErrs, field.Forbidden(specPath.Child("limited"), "must be nil if the type is not Limited"))
		}
		if e := spec.Exempt; e != nil {
			p := specPath.Child("exempt")
			if e.NominalConcurrencyShares != nil && *e.NominalConcurrencyShares < 0 {
				allErrs = append(allErrs, field.Invalid(p.Child("nominalConcurrencyShares"), *e.NominalConcurrencyShares, "must be a non-negative integer"))
			}
			allErrs = append(allErrs, validateLendablePercent(e.LendablePercent, p)...)
		}
	case flowcontrolv1.PriorityLevelEnablementLimited:
		if spec.Exempt != nil {
			allErrs = append(allErrs, field.Forbidden(specPath.Child("exempt"), "must be nil if the type is Limited"))
		}
		if spec.Limited == nil {
			allErrs = append(allErrs, field.Required(specPath.Child("limited"), "must not be empty when type is Limited"))
		} else {
			allErrs = append(allErrs, validateLimitedPriorityLevel(spec.Limited, specPath.Child("limited"))...)
		}
	case "":
		allErrs = append(allErrs, field.Required(specPath.Child("type"), ""))
	default:
		allErrs = append(allErrs, field.NotSupported(specPath.Child("type"), spec.Type, priorityLevelTypes))
	}
	return allErrs
}

func validateLendablePercent(v *int32, fldPath *field.Path) field.ErrorList {
	if v != nil && (*v < 0 || *v > 100) {
		return field.ErrorList{field.Invalid(fldPath.Child("lendablePercent"), *v, "must be between 0 and 100, inclusive")}
	}
	return nil
}

func validateLimitedPriorityLevel(l *flowcontrolv1.LimitedPriorityLevelConfiguration, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if l.NominalConcurrencyShares != nil && *l.NominalConcurrencyShares < 0 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("nominalConcurrencyShares"), *l.NominalConcurrencyShares, "must be a non-negative integer"))
	}
	allErrs = append(allErrs, validateLimitResponse(l.LimitResponse, fldPath.Child("limitResponse"))...)
	allErrs = append(allErrs, validateLendablePercent(l.LendablePercent, fldPath)...)
	if b := l.BorrowingLimitPercent; b != nil && *b < 0 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("borrowingLimitPercent"), *b, "if specified, must be a non-negative integer"))
	}
	return allErrs
}

func validateLimitResponse(lr flowcontrolv1.LimitResponse, fldPath *field.Path) field.ErrorList {
	switch lr.Type {
	case flowcontrolv1.LimitResponseTypeReject:
		if lr.Queuing != nil {
			return field.ErrorList{field.Forbidden(fldPath.Child("queuing"), "must be nil if limited.limitResponse.type is not Limited")}
		}
	case flowcontrolv1.LimitResponseTypeQueue:
		if lr.Queuing == nil {
			return field.ErrorList{field.Required(fldPath.Child("queuing"), "must not be empty if limited.limitResponse.type is Limited")}
		}
		return validateQueuing(lr.Queuing, fldPath.Child("queuing"))
	case "":
		return field.ErrorList{field.Required(fldPath.Child("type"), "")}
	default:
		return field.ErrorList{field.NotSupported(fldPath.Child("type"), lr.Type, limitResponseTypes)}
	}
	return nil
}

// validateQueuing: positive sizes, at most 10^7 queues, and a hand that
// fits the deck and shuffle sharding's hash.
func validateQueuing(q *flowcontrolv1.QueuingConfiguration, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if q.QueueLengthLimit <= 0 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("queueLengthLimit"), q.QueueLengthLimit, "must be positive"))
	}
	if q.Queues <= 0 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("queues"), q.Queues, "must be positive"))
	} else if q.Queues > priorityLevelMaxQueues {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("queues"), q.Queues, fmt.Sprintf("must not be greater than %d", priorityLevelMaxQueues)))
	}
	switch {
	case q.HandSize <= 0:
		allErrs = append(allErrs, field.Invalid(fldPath.Child("handSize"), q.HandSize, "must be positive"))
	case q.HandSize > q.Queues:
		allErrs = append(allErrs, field.Invalid(fldPath.Child("handSize"), q.HandSize, fmt.Sprintf("should not be greater than queues (%d)", q.Queues)))
	default:
		if bits := shufflesharding.RequiredEntropyBits(int(q.Queues), int(q.HandSize)); bits > shufflesharding.MaxHashBits {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("handSize"), q.HandSize,
				fmt.Sprintf("required entropy bits of deckSize %d and handSize %d should not be greater than %d", q.Queues, q.HandSize, shufflesharding.MaxHashBits)))
		}
	}
	return allErrs
}
