package validation

import (
	"fmt"
	"strings"
	"sync"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	webhookutil "k8s.io/apiserver/pkg/util/webhook"
)

// ValidatingWebhookConfiguration is upstream's
// ValidateValidatingWebhookConfiguration for v1 (sideEffects and
// admissionReviewVersions required).
func ValidatingWebhookConfiguration(c *admissionregistrationv1.ValidatingWebhookConfiguration) field.ErrorList {
	allErrs := validateObjectMeta(&c.ObjectMeta, false, nameIsDNSSubdomain)
	names := sets.New[string]()
	for i := range c.Webhooks {
		w := &c.Webhooks[i]
		p := field.NewPath("webhooks").Index(i)
		allErrs = append(allErrs, validateWebhookCommon(p, names, w.Name, w.Rules, w.FailurePolicy, w.MatchPolicy, w.SideEffects,
			w.TimeoutSeconds, w.AdmissionReviewVersions, w.NamespaceSelector, w.ObjectSelector, w.ClientConfig, w.MatchConditions)...)
	}
	return allErrs
}

// ValidatingWebhookConfigurationUpdate: the metadata rules, then the
// object's own.
func ValidatingWebhookConfigurationUpdate(c, old *admissionregistrationv1.ValidatingWebhookConfiguration) field.ErrorList {
	return dedupe(append(validateMetaUpdateOf(c, old), ValidatingWebhookConfiguration(c)...))
}

// MutatingWebhookConfiguration is ValidatingWebhookConfiguration's rules
// plus reinvocationPolicy Never or IfNeeded.
func MutatingWebhookConfiguration(c *admissionregistrationv1.MutatingWebhookConfiguration) field.ErrorList {
	allErrs := validateObjectMeta(&c.ObjectMeta, false, nameIsDNSSubdomain)
	names := sets.New[string]()
	for i := range c.Webhooks {
		w := &c.Webhooks[i]
		p := field.NewPath("webhooks").Index(i)
		allErrs = append(allErrs, validateWebhookCommon(p, names, w.Name, w.Rules, w.FailurePolicy, w.MatchPolicy, w.SideEffects,
			w.TimeoutSeconds, w.AdmissionReviewVersions, w.NamespaceSelector, w.ObjectSelector, w.ClientConfig, w.MatchConditions)...)
		if r := w.ReinvocationPolicy; r != nil && *r != admissionregistrationv1.NeverReinvocationPolicy && *r != admissionregistrationv1.IfNeededReinvocationPolicy {
			allErrs = append(allErrs, field.NotSupported(p.Child("reinvocationPolicy"), *r, []string{"IfNeeded", "Never"}))
		}
	}
	return allErrs
}

// MutatingWebhookConfigurationUpdate: the metadata rules, then the
// object's own.
func MutatingWebhookConfigurationUpdate(c, old *admissionregistrationv1.MutatingWebhookConfiguration) field.ErrorList {
	return dedupe(append(validateMetaUpdateOf(c, old), MutatingWebhookConfiguration(c)...))
}

func validateWebhookCommon(p *field.Path, names sets.Set[string], name string, rules []admissionregistrationv1.RuleWithOperations,
	fp *admissionregistrationv1.FailurePolicyType, mp *admissionregistrationv1.MatchPolicyType, se *admissionregistrationv1.SideEffectClass,
	timeout *int32, versions []string, nsSel, objSel *metav1.LabelSelector, cc admissionregistrationv1.WebhookClientConfig,
	conds []admissionregistrationv1.MatchCondition) field.ErrorList {
	var allErrs field.ErrorList
	// The name is a fully qualified domain: at least three segments.
	np := p.Child("name")
	switch {
	case name == "":
		allErrs = append(allErrs, field.Required(np, ""))
	default:
		allErrs = append(allErrs, validateDNS1123Subdomain(name, np)...)
		if strings.Count(name, ".") < 2 {
			allErrs = append(allErrs, field.Invalid(np, name, "should be a domain with at least three segments separated by dots"))
		}
		if names.Has(name) {
			allErrs = append(allErrs, field.Duplicate(np, name))
		}
		names.Insert(name)
	}
	for i, r := range rules {
		allErrs = append(allErrs, validateRuleWithOperations(&r, p.Child("rules").Index(i))...)
	}
	if fp != nil && *fp != admissionregistrationv1.Ignore && *fp != admissionregistrationv1.Fail {
		allErrs = append(allErrs, field.NotSupported(p.Child("failurePolicy"), *fp, []string{"Fail", "Ignore"}))
	}
	if mp != nil && *mp != admissionregistrationv1.Exact && *mp != admissionregistrationv1.Equivalent {
		allErrs = append(allErrs, field.NotSupported(p.Child("matchPolicy"), *mp, []string{"Equivalent", "Exact"}))
	}
	switch {
	case se == nil:
		allErrs = append(allErrs, field.Required(p.Child("sideEffects"), "must specify one of None, NoneOnDryRun"))
	case *se != admissionregistrationv1.SideEffectClassNone && *se != admissionregistrationv1.SideEffectClassNoneOnDryRun:
		allErrs = append(allErrs, field.NotSupported(p.Child("sideEffects"), *se, []string{"None", "NoneOnDryRun"}))
	}
	if timeout != nil && (*timeout < 1 || *timeout > 30) {
		allErrs = append(allErrs, field.Invalid(p.Child("timeoutSeconds"), *timeout, "the timeout value must be between 1 and 30 seconds"))
	}
	allErrs = append(allErrs, validateAdmissionReviewVersions(versions, p.Child("admissionReviewVersions"))...)
	if nsSel != nil {
		allErrs = append(allErrs, validateLabelSelector(nsSel, p.Child("namespaceSelector"))...)
	}
	if objSel != nil {
		allErrs = append(allErrs, validateLabelSelector(objSel, p.Child("objectSelector"))...)
	}
	ccp := p.Child("clientConfig")
	switch {
	case cc.URL != nil && cc.Service != nil:
		allErrs = append(allErrs, field.Required(ccp, "exactly one of url or service is required"))
	case cc.URL != nil:
		allErrs = append(allErrs, webhookutil.ValidateWebhookURL(ccp.Child("url"), *cc.URL, true)...)
	case cc.Service != nil:
		port := int32(443)
		if cc.Service.Port != nil {
			port = *cc.Service.Port
		}
		allErrs = append(allErrs, webhookutil.ValidateWebhookService(ccp.Child("service"), cc.Service.Namespace, cc.Service.Name, cc.Service.Path, port)...)
	default:
		allErrs = append(allErrs, field.Required(ccp, "exactly one of url or service is required"))
	}
	allErrs = append(allErrs, validateMatchConditions(conds, p.Child("matchConditions"))...)
	return allErrs
}

var supportedOperations = sets.New("*", "CREATE", "UPDATE", "DELETE", "CONNECT")

// validateRuleWithOperations is upstream's: operations, groups, versions
// and resources each required, "*" alone, resources "*" or "x/*" forms
// not overlapping, scope one of Cluster, Namespaced, *.
func validateRuleWithOperations(r *admissionregistrationv1.RuleWithOperations, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if len(r.Operations) == 0 {
		allErrs = append(allErrs, field.Required(p.Child("operations"), ""))
	}
	if len(r.Operations) > 1 && hasWildcardOp(r.Operations) {
		allErrs = append(allErrs, field.Invalid(p.Child("operations"), r.Operations, "if '*' is present, must not specify other operations"))
	}
	for i, op := range r.Operations {
		if !supportedOperations.Has(string(op)) {
			allErrs = append(allErrs, field.NotSupported(p.Child("operations").Index(i), op, sets.List(supportedOperations)))
		}
	}
	allErrs = append(allErrs, validateRuleLists(r.APIGroups, p.Child("apiGroups"), false)...)
	allErrs = append(allErrs, validateRuleLists(r.APIVersions, p.Child("apiVersions"), true)...)
	if len(r.Resources) == 0 {
		allErrs = append(allErrs, field.Required(p.Child("resources"), ""))
	}
	allErrs = append(allErrs, validateResources(r.Resources, p.Child("resources"))...)
	if r.Scope != nil {
		switch *r.Scope {
		case admissionregistrationv1.ClusterScope, admissionregistrationv1.NamespacedScope, admissionregistrationv1.AllScopes:
		default:
			allErrs = append(allErrs, field.NotSupported(p.Child("scope"), *r.Scope, []string{"*", "Cluster", "Namespaced"}))
		}
	}
	return allErrs
}

func hasWildcardOp(ops []admissionregistrationv1.OperationType) bool {
	for _, o := range ops {
		if o == admissionregistrationv1.OperationAll {
			return true
		}
	}
	return false
}

func validateRuleLists(vals []string, p *field.Path, noEmpty bool) field.ErrorList {
	var allErrs field.ErrorList
	if len(vals) == 0 {
		allErrs = append(allErrs, field.Required(p, ""))
	}
	if len(vals) > 1 {
		for _, v := range vals {
			if v == "*" {
				allErrs = append(allErrs, field.Invalid(p, vals, "if '*' is present, must not specify other API groups"))
				break
			}
		}
	}
	if noEmpty {
		for i, v := range vals {
			if v == "" {
				allErrs = append(allErrs, field.Required(p.Index(i), ""))
			}
		}
	}
	return allErrs
}

// validateResources is upstream's: "*" covers everything, "*/*" every
// subresource, "x/*" x's subresources, "*/s" subresource s of any.
func validateResources(resources []string, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	withSub := sets.New[string]()
	subWithWildcard := sets.New[string]()
	hasDoubleWildcard, hasSingleWildcard, hasResourceWithoutSub := false, false, false
	for i, r := range resources {
		if r == "" {
			allErrs = append(allErrs, field.Required(p.Index(i), ""))
			continue
		}
		switch r {
		case "*/*":
			hasDoubleWildcard = true
		case "*":
			hasSingleWildcard = true
		}
		parts := strings.SplitN(r, "/", 2)
		if len(parts) == 1 {
			hasResourceWithoutSub = r != "*"
			continue
		}
		res, sub := parts[0], parts[1]
		if withSub.Has(res) {
			allErrs = append(allErrs, field.Invalid(p.Index(i), r, "may not specify the same resource twice"))
		}
		withSub.Insert(res)
		if sub == "*" {
			subWithWildcard.Insert(res)
		}
	}
	if hasDoubleWildcard && len(resources) > 1 {
		allErrs = append(allErrs, field.Invalid(p, resources, "if '*/*' is present, must not specify other resources"))
	}
	if hasSingleWildcard && hasResourceWithoutSub {
		allErrs = append(allErrs, field.Invalid(p, resources, "if '*' is present, must not specify other resources without subresources"))
	}
	return allErrs
}

var admissionReviewVersionsSupported = sets.New("v1", "v1beta1")

func validateAdmissionReviewVersions(versions []string, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if len(versions) == 0 {
		return append(allErrs, field.Required(p, fmt.Sprintf("must specify one of %v", strings.Join(sets.List(admissionReviewVersionsSupported), ", "))))
	}
	seen := sets.New[string]()
	hasSupported := false
	for i, v := range versions {
		if seen.Has(v) {
			allErrs = append(allErrs, field.Invalid(p.Index(i), v, "duplicate version"))
			continue
		}
		seen.Insert(v)
		for _, msg := range utilvalidation.IsDNS1035Label(v) {
			allErrs = append(allErrs, field.Invalid(p.Index(i), v, msg))
		}
		if admissionReviewVersionsSupported.Has(v) {
			hasSupported = true
		}
	}
	if !hasSupported {
		allErrs = append(allErrs, field.Invalid(p, versions, fmt.Sprintf("must include at least one of %v", strings.Join(sets.List(admissionReviewVersionsSupported), ", "))))
	}
	return allErrs
}

// matchConditionCompiler is built when first needed: building CEL's
// environments takes some 5 ms and 1 MB at every kelp process's start
// (kubectl, the agent) otherwise.
var matchConditionCompiler = sync.OnceValue(func() plugincel.Compiler {
	return plugincel.NewCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
})

// validateMatchConditions is upstream's: at most 64, names unique
// qualified names, expressions required and compiling to a bool.
func validateMatchConditions(conds []admissionregistrationv1.MatchCondition, p *field.Path) field.ErrorList {
	return validateMatchConditionsIn(conds, p, false, nil)
}

// validateMatchConditionsIn compiles the conditions with params declared
// when the policy has a paramKind; an expression stored before (in stored)
// compiles in the environment of stored expressions, as upstream's
// update validation.
func validateMatchConditionsIn(conds []admissionregistrationv1.MatchCondition, p *field.Path, hasParams bool, stored sets.Set[string]) field.ErrorList {
	var allErrs field.ErrorList
	if len(conds) > 64 {
		allErrs = append(allErrs, field.TooMany(p, len(conds), 64))
	}
	names := sets.New[string]()
	for i, c := range conds {
		cp := p.Index(i)
		if c.Name == "" {
			allErrs = append(allErrs, field.Required(cp.Child("name"), ""))
		} else {
			allErrs = append(allErrs, validateQualifiedName(c.Name, cp.Child("name"))...)
			if names.Has(c.Name) {
				allErrs = append(allErrs, field.Duplicate(cp.Child("name"), c.Name))
			}
			names.Insert(c.Name)
		}
		if c.Expression == "" {
			allErrs = append(allErrs, field.Required(cp.Child("expression"), ""))
			continue
		}
		// upstream's validateCELCondition, in the environment of new
		// expressions
		res := matchConditionCompiler().CompileCELExpression(&matchconditions.MatchCondition{Expression: strings.TrimSpace(c.Expression)},
			plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: true}, envType(stored, c.Expression))
		allErrs = append(allErrs, celError(cp.Child("expression"), c.Expression, res.Error)...)
	}
	return allErrs
}

// envType is the CEL environment an expression compiles in: a new
// expression gets the current one, one already stored the one of stored
// expressions (which may know more), so an update never fails on what was
// accepted before.
func envType(stored sets.Set[string], expression string) environment.Type {
	if stored.Has(expression) {
		return environment.StoredExpressions
	}
	return environment.NewExpressions
}

// celError is upstream's convertCELErrorToValidationError: a compilation
// error as the field error of its type.
func celError(p *field.Path, expression string, err *apiservercel.Error) field.ErrorList {
	if err == nil {
		return nil
	}
	switch err.Type {
	case apiservercel.ErrorTypeRequired:
		return field.ErrorList{field.Required(p, err.Detail)}
	case apiservercel.ErrorTypeInvalid:
		return field.ErrorList{field.Invalid(p, expression, err.Detail)}
	}
	return field.ErrorList{field.InternalError(p, err)}
}
