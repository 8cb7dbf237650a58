package validation

import (
	"fmt"
	"regexp"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	policyvalidating "k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/client-go/util/jsonpath"
)

// The admission policies of admissionregistration.k8s.io/v1
// (ValidatingAdmissionPolicy, MutatingAdmissionPolicy and their bindings),
// as upstream's pkg/apis/admissionregistration/validation: every CEL
// expression is compiled with k8s.io/apiserver's compilers, in the
// environment the admission plugins evaluate it in, and a compilation
// error is the field's error. On update, an expression the old object
// already had compiles in the environment of stored expressions, and
// unchanged matchConditions (with an unchanged paramKind) are not checked
// again.

const (
	maxAuditAnnotations = 20
	// upstream's 5 KiB limit on an audit annotation's expression
	maxAuditAnnotationValueExpressionLength = 5 * 1024
)

var (
	supportedFailurePolicies      = sets.New("Fail", "Ignore")
	supportedMatchPolicies        = sets.New("Equivalent", "Exact")
	supportedValidationReasons    = sets.New(string(metav1.StatusReasonForbidden), string(metav1.StatusReasonInvalid), string(metav1.StatusReasonRequestEntityTooLarge))
	supportedValidationActions    = sets.New("Audit", "Deny", "Warn")
	supportedPatchTypes           = sets.New("ApplyConfiguration", "JSONPatch")
	supportedReinvocationPolicies = sets.New("IfNeeded", "Never")
	// a mutating policy cannot act on a DELETE
	supportedMutatingOperations = sets.New("*", "CONNECT", "CREATE", "UPDATE")
)

// storedExpressions are the old object's expressions, by kind of
// expression, on an update; all empty on create.
type storedExpressions struct {
	matchConditions, validations, messages, auditAnnotations, applyConfigurations, jsonPatches sets.Set[string]
}

// policyOptions are what a create or an update checks.
type policyOptions struct {
	stored storedExpressions
	// skipMatchConditions: neither the conditions nor paramKind changed.
	skipMatchConditions bool
}

// ValidatingAdmissionPolicy is upstream's ValidateValidatingAdmissionPolicy.
func ValidatingAdmissionPolicy(p *admissionregistrationv1.ValidatingAdmissionPolicy) field.ErrorList {
	return validatingAdmissionPolicy(p, policyOptions{})
}

// ValidatingAdmissionPolicyUpdate: the metadata rules, then the policy's
// own with the old expressions compiled as stored ones.
func ValidatingAdmissionPolicyUpdate(p, old *admissionregistrationv1.ValidatingAdmissionPolicy) field.ErrorList {
	stored := storedExpressions{
		matchConditions: sets.New[string](), validations: sets.New[string](), messages: sets.New[string](), auditAnnotations: sets.New[string](),
	}
	for _, c := range old.Spec.MatchConditions {
		stored.matchConditions.Insert(c.Expression)
	}
	for _, v := range old.Spec.Validations {
		stored.validations.Insert(v.Expression)
		if v.MessageExpression != "" {
			stored.messages.Insert(v.MessageExpression)
		}
	}
	for _, a := range old.Spec.AuditAnnotations {
		stored.auditAnnotations.Insert(a.ValueExpression)
	}
	opts := policyOptions{stored: stored,
		skipMatchConditions: equality.Semantic.DeepEqual(p.Spec.ParamKind, old.Spec.ParamKind) && equality.Semantic.DeepEqual(p.Spec.MatchConditions, old.Spec.MatchConditions)}
	return dedupe(append(validateMetaUpdateOf(p, old), validatingAdmissionPolicy(p, opts)...))
}

// ValidatingAdmissionPolicyStatusUpdate checks the status only: the type
// checking's warnings and the conditions.
func ValidatingAdmissionPolicyStatusUpdate(p, old *admissionregistrationv1.ValidatingAdmissionPolicy) field.ErrorList {
	allErrs := validateMetaUpdateOf(p, old)
	sp := field.NewPath("status")
	if tc := p.Status.TypeChecking; tc != nil {
		for i, w := range tc.ExpressionWarnings {
			wp := sp.Child("typeChecking", "expressionWarnings").Index(i)
			if w.Warning == "" {
				allErrs = append(allErrs, field.Required(wp.Child("warning"), ""))
			}
			allErrs = append(allErrs, validateFieldRef(w.FieldRef, wp.Child("fieldRef"))...)
		}
	}
	return append(allErrs, metav1validation.ValidateConditions(p.Status.Conditions, sp.Child("conditions"))...)
}

// validateFieldRef: a warning's fieldRef is a JSONPath into the policy.
func validateFieldRef(ref string, p *field.Path) field.ErrorList {
	ref = strings.TrimSpace(ref)
	if ref == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	if err := jsonpath.New("spec").Parse(fmt.Sprintf("{%s}", ref)); err != nil {
		return field.ErrorList{field.Invalid(p, ref, fmt.Sprintf("invalid JSONPath: %v", err))}
	}
	return nil
}

func validatingAdmissionPolicy(p *admissionregistrationv1.ValidatingAdmissionPolicy, opts policyOptions) field.ErrorList {
	allErrs := validateObjectMeta(&p.ObjectMeta, false, nameIsDNSSubdomain)
	spec, sp := &p.Spec, field.NewPath("spec")
	hasParams := spec.ParamKind != nil
	// Variables need the composition compiler, which remembers the
	// variables compiled so far (so one per policy); without variables
	// the shared stateless one does.
	var compiler plugincel.Compiler
	if len(spec.Variables) > 0 {
		compiler = compositionCompiler()
	} else {
		compiler = matchConditionCompiler()
	}
	allErrs = append(allErrs, validatePolicyCommon(sp, spec.FailurePolicy, spec.ParamKind, spec.MatchConstraints, nil)...)
	if !opts.skipMatchConditions {
		allErrs = append(allErrs, validateMatchConditionsIn(spec.MatchConditions, sp.Child("matchConditions"), hasParams, opts.stored.matchConditions)...)
	}
	for i, v := range spec.Variables {
		allErrs = append(allErrs, validateVariable(compiler, v.Name, v.Expression, hasParams, opts.stored.validations, sp.Child("variables").Index(i))...)
	}
	if len(spec.Validations) == 0 && len(spec.AuditAnnotations) == 0 {
		const msg = "validations or auditAnnotations must contain at least one item"
		return append(allErrs, field.Required(sp.Child("validations"), msg), field.Required(sp.Child("auditAnnotations"), msg))
	}
	for i := range spec.Validations {
		allErrs = append(allErrs, validateValidation(compiler, &spec.Validations[i], hasParams, opts, sp.Child("validations").Index(i))...)
	}
	if len(spec.AuditAnnotations) > maxAuditAnnotations {
		allErrs = append(allErrs, field.Invalid(sp.Child("auditAnnotations"), spec.AuditAnnotations, fmt.Sprintf("must not have more than %d auditAnnotations", maxAuditAnnotations)))
	}
	keys := sets.New[string]()
	for i, a := range spec.AuditAnnotations {
		ap := sp.Child("auditAnnotations").Index(i)
		allErrs = append(allErrs, validateAuditAnnotation(compiler, p.Name, &a, hasParams, opts.stored.auditAnnotations, ap)...)
		if keys.Has(a.Key) {
			allErrs = append(allErrs, field.Duplicate(ap.Child("key"), a.Key))
		}
		keys.Insert(a.Key)
	}
	return allErrs
}

// validatePolicyCommon checks what both kinds of policy have:
// failurePolicy, paramKind and matchConstraints (with at least one
// resource rule, which gives the expressions their types). ops, when set,
// are the operations a rule may name.
func validatePolicyCommon(sp *field.Path, fp *admissionregistrationv1.FailurePolicyType, pk *admissionregistrationv1.ParamKind,
	mc *admissionregistrationv1.MatchResources, ops sets.Set[string]) field.ErrorList {
	var allErrs field.ErrorList
	switch {
	case fp == nil:
		allErrs = append(allErrs, field.Required(sp.Child("failurePolicy"), ""))
	case !supportedFailurePolicies.Has(string(*fp)):
		allErrs = append(allErrs, field.NotSupported(sp.Child("failurePolicy"), *fp, sets.List(supportedFailurePolicies)))
	}
	if pk != nil {
		allErrs = append(allErrs, validateParamKind(pk, sp.Child("paramKind"))...)
	}
	if mc == nil {
		return append(allErrs, field.Required(sp.Child("matchConstraints"), ""))
	}
	allErrs = append(allErrs, validateMatchResources(mc, sp.Child("matchConstraints"), ops)...)
	if len(mc.ResourceRules) == 0 {
		allErrs = append(allErrs, field.Required(sp.Child("matchConstraints", "resourceRules"), ""))
	}
	return allErrs
}

// validateParamKind: apiVersion a group (a DNS subdomain) and a version
// (a DNS label), kind a mixed-case DNS label, as an APIService's.
func validateParamKind(pk *admissionregistrationv1.ParamKind, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	vp := p.Child("apiVersion")
	if pk.APIVersion == "" {
		allErrs = append(allErrs, field.Required(vp, ""))
	} else if strings.Count(pk.APIVersion, "/") > 1 {
		allErrs = append(allErrs, field.Invalid(vp, pk.APIVersion, fmt.Sprintf("unexpected GroupVersion string: %v", pk.APIVersion)))
	} else {
		group, version := "", pk.APIVersion
		if i := strings.Index(pk.APIVersion, "/"); i >= 0 {
			group, version = pk.APIVersion[:i], pk.APIVersion[i+1:]
		}
		if group != "" {
			if errs := utilvalidation.IsDNS1123Subdomain(group); len(errs) > 0 {
				allErrs = append(allErrs, field.Invalid(vp, group, strings.Join(errs, ",")))
			}
		}
		if version == "" {
			allErrs = append(allErrs, field.Invalid(vp, pk.APIVersion, "version must be specified"))
		} else if errs := utilvalidation.IsDNS1035Label(version); len(errs) > 0 {
			allErrs = append(allErrs, field.Invalid(vp, version, strings.Join(errs, ",")))
		}
	}
	if pk.Kind == "" {
		allErrs = append(allErrs, field.Required(p.Child("kind"), ""))
	} else if errs := utilvalidation.IsDNS1035Label(strings.ToLower(pk.Kind)); len(errs) > 0 {
		allErrs = append(allErrs, field.Invalid(p.Child("kind"), pk.Kind, "may have mixed case, but should otherwise match: "+strings.Join(errs, ",")))
	}
	return allErrs
}

// validateMatchResources: matchPolicy and both selectors required (the
// defaults fill them), selectors checked strictly, each rule a rule with
// operations (limited to ops when set) and unique, valid resourceNames.
func validateMatchResources(mc *admissionregistrationv1.MatchResources, p *field.Path, ops sets.Set[string]) field.ErrorList {
	var allErrs field.ErrorList
	if mc == nil {
		return nil
	}
	switch {
	case mc.MatchPolicy == nil:
		allErrs = append(allErrs, field.Required(p.Child("matchPolicy"), ""))
	case !supportedMatchPolicies.Has(string(*mc.MatchPolicy)):
		allErrs = append(allErrs, field.NotSupported(p.Child("matchPolicy"), *mc.MatchPolicy, sets.List(supportedMatchPolicies)))
	}
	if mc.NamespaceSelector == nil {
		allErrs = append(allErrs, field.Required(p.Child("namespaceSelector"), ""))
	} else {
		allErrs = append(allErrs, validateLabelSelector(mc.NamespaceSelector, p.Child("namespaceSelector"))...)
	}
	if mc.ObjectSelector == nil {
		allErrs = append(allErrs, field.Required(p.Child("objectSelector"), ""))
	} else {
		allErrs = append(allErrs, validateLabelSelector(mc.ObjectSelector, p.Child("objectSelector"))...)
	}
	for i := range mc.ResourceRules {
		allErrs = append(allErrs, validateNamedRule(&mc.ResourceRules[i], p.Child("resourceRules").Index(i))...)
	}
	for i := range mc.ExcludeResourceRules {
		allErrs = append(allErrs, validateNamedRule(&mc.ExcludeResourceRules[i], p.Child("excludeResourceRules").Index(i))...)
	}
	if ops != nil {
		for _, r := range mc.ResourceRules {
			for _, op := range r.Operations {
				if !ops.Has(string(op)) {
					allErrs = append(allErrs, field.NotSupported(p.Child("resourceRules", "operations"), op, sets.List(ops)))
				}
			}
		}
	}
	return allErrs
}

func validateNamedRule(r *admissionregistrationv1.NamedRuleWithOperations, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	names := sets.New[string]()
	for i, n := range r.ResourceNames {
		for _, msg := range content.IsPathSegmentName(n) {
			allErrs = append(allErrs, field.Invalid(p.Child("resourceNames").Index(i), n, msg))
		}
		if names.Has(n) {
			allErrs = append(allErrs, field.Duplicate(p.Child("resourceNames").Index(i), n))
		}
		names.Insert(n)
	}
	return append(allErrs, validateRuleWithOperations(&r.RuleWithOperations, p)...)
}

var (
	celIdentifier = regexp.MustCompile("^[_a-zA-Z][_a-zA-Z0-9]*$")
	celReserved   = sets.New("true", "false", "null", "in", "as", "break", "const", "continue", "else", "for", "function",
		"if", "import", "let", "loop", "package", "namespace", "return", "var", "void", "while")
)

// validateVariable: a CEL identifier naming an expression that compiles
// (and is remembered by the composition compiler for later expressions).
// upstream compares a variable with the old validation expressions to
// pick its environment; so does kelp.
func validateVariable(compiler plugincel.Compiler, name, expression string, hasParams bool, stored sets.Set[string], p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if strings.TrimSpace(name) == "" {
		allErrs = append(allErrs, field.Required(p.Child("name"), "name is not specified"))
	} else if !celIdentifier.MatchString(name) || celReserved.Has(name) {
		allErrs = append(allErrs, field.Invalid(p.Child("name"), name, "must be a valid CEL identifier"))
	}
	if strings.TrimSpace(expression) == "" {
		return append(allErrs, field.Required(p.Child("expression"), "expression is not specified"))
	}
	composited, ok := compiler.(*plugincel.CompositedCompiler)
	if !ok {
		return append(allErrs, field.InternalError(p, fmt.Errorf("variable composition is not allowed")))
	}
	res := composited.CompileAndStoreVariable(&policyvalidating.Variable{Name: name, Expression: expression},
		plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: true}, envType(stored, expression))
	return append(allErrs, celError(p.Child("expression"), expression, res.Error)...)
}

var newlines = regexp.MustCompile(`[\n\r]+`)

// validateValidation: an expression compiling to a bool, an optional
// messageExpression compiling to a string (without params' authorizer,
// as upstream), a one-line message, a reason upstream supports.
func validateValidation(compiler plugincel.Compiler, v *admissionregistrationv1.Validation, hasParams bool, opts policyOptions, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if strings.TrimSpace(v.Expression) == "" {
		allErrs = append(allErrs, field.Required(p.Child("expression"), "expression is not specified"))
	} else {
		res := compiler.CompileCELExpression(&policyvalidating.ValidationCondition{Expression: v.Expression},
			plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: true}, envType(opts.stored.validations, v.Expression))
		allErrs = append(allErrs, celError(p.Child("expression"), v.Expression, res.Error)...)
	}
	switch {
	case v.MessageExpression != "" && strings.TrimSpace(v.MessageExpression) == "":
		allErrs = append(allErrs, field.Invalid(p.Child("messageExpression"), v.MessageExpression, "must be non-empty if specified"))
	case v.MessageExpression != "":
		// upstream declares params for a messageExpression only where it
		// allows them in matchConditions, that is with a paramKind
		res := compiler.CompileCELExpression(&policyvalidating.MessageExpressionCondition{MessageExpression: v.MessageExpression},
			plugincel.OptionalVariableDeclarations{HasParams: hasParams}, envType(opts.stored.messages, v.MessageExpression))
		allErrs = append(allErrs, celError(p.Child("messageExpression"), v.MessageExpression, res.Error)...)
	}
	msg := strings.TrimSpace(v.Message)
	switch {
	case v.Message != "" && msg == "":
		allErrs = append(allErrs, field.Invalid(p.Child("message"), v.Message, "must be non-empty if specified"))
	case newlines.MatchString(msg):
		allErrs = append(allErrs, field.Invalid(p.Child("message"), v.Message, "must not contain line breaks"))
	}
	if v.Reason != nil && !supportedValidationReasons.Has(string(*v.Reason)) {
		allErrs = append(allErrs, field.NotSupported(p.Child("reason"), *v.Reason, sets.List(supportedValidationReasons)))
	}
	return allErrs
}

// validateAuditAnnotation: "<policy name>/<key>" a qualified name, a
// valueExpression of at most 5 KiB compiling to a string or null.
func validateAuditAnnotation(compiler plugincel.Compiler, policyName string, a *admissionregistrationv1.AuditAnnotation, hasParams bool, stored sets.Set[string], p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if policyName != "" {
		allErrs = append(allErrs, validateQualifiedName(policyName+"/"+a.Key, p.Child("key"))...)
	} else {
		allErrs = append(allErrs, field.Invalid(p.Child("key"), a.Key, "requires metadata.name be non-empty"))
	}
	expr := strings.TrimSpace(a.ValueExpression)
	vp := p.Child("valueExpression")
	switch {
	case expr == "":
		return append(allErrs, field.Required(vp, "valueExpression is not specified"))
	case len(expr) > maxAuditAnnotationValueExpressionLength:
		return append(allErrs, field.Required(vp, fmt.Sprintf("must not exceed %d bytes in length", maxAuditAnnotationValueExpressionLength)))
	}
	res := compiler.CompileCELExpression(&policyvalidating.AuditAnnotationCondition{ValueExpression: expr},
		plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: true}, envType(stored, a.ValueExpression))
	return append(allErrs, celError(vp, a.ValueExpression, res.Error)...)
}

// compositionCompiler is a new compiler that composes variables, in the
// base environment (building one costs what the environment's extension
// does; policies with variables are rare writes).
func compositionCompiler() plugincel.Compiler {
	c, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		// upstream falls back to the stateless compiler, whose variables
		// then fail as not composable
		return matchConditionCompiler()
	}
	return c
}

// ValidatingAdmissionPolicyBinding is upstream's
// ValidateValidatingAdmissionPolicyBinding: a policy named, a paramRef by
// name or selector, matchResources, validationActions.
func ValidatingAdmissionPolicyBinding(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) field.ErrorList {
	allErrs := validateObjectMeta(&b.ObjectMeta, false, nameIsDNSSubdomain)
	sp := field.NewPath("spec")
	allErrs = append(allErrs, validateBindingCommon(sp, b.Spec.PolicyName, b.Spec.ParamRef, b.Spec.MatchResources, nil)...)
	return append(allErrs, validateValidationActions(b.Spec.ValidationActions, sp.Child("validationActions"))...)
}

// ValidatingAdmissionPolicyBindingUpdate: the metadata rules, then the
// binding's own.
func ValidatingAdmissionPolicyBindingUpdate(b, old *admissionregistrationv1.ValidatingAdmissionPolicyBinding) field.ErrorList {
	return dedupe(append(validateMetaUpdateOf(b, old), ValidatingAdmissionPolicyBinding(b)...))
}

func validateBindingCommon(sp *field.Path, policyName string, pr *admissionregistrationv1.ParamRef, mr *admissionregistrationv1.MatchResources, ops sets.Set[string]) field.ErrorList {
	var allErrs field.ErrorList
	if policyName == "" {
		allErrs = append(allErrs, field.Required(sp.Child("policyName"), ""))
	} else {
		allErrs = append(allErrs, validateName(policyName, nameIsDNSSubdomain, sp.Child("policyName"))...)
	}
	allErrs = append(allErrs, validateParamRef(pr, sp.Child("paramRef"))...)
	return append(allErrs, validateMatchResources(mr, sp.Child("matchResources"), ops)...)
}

// validateParamRef: a name or a selector, not both, and what to do when
// no parameter is found (Deny or Allow).
func validateParamRef(pr *admissionregistrationv1.ParamRef, p *field.Path) field.ErrorList {
	if pr == nil {
		return nil
	}
	var allErrs field.ErrorList
	if pr.Name != "" {
		for _, msg := range content.IsPathSegmentName(pr.Name) {
			allErrs = append(allErrs, field.Invalid(p.Child("name"), pr.Name, msg))
		}
		if pr.Selector != nil {
			allErrs = append(allErrs, field.Forbidden(p.Child("name"), `name and selector are mutually exclusive`))
		}
	}
	if pr.Selector != nil {
		allErrs = append(allErrs, validateLabelSelector(pr.Selector, p.Child("selector"))...)
		if pr.Name != "" {
			allErrs = append(allErrs, field.Forbidden(p.Child("selector"), `name and selector are mutually exclusive`))
		}
	}
	if pr.Name == "" && pr.Selector == nil {
		allErrs = append(allErrs, field.Required(p, `one of name or selector must be specified`))
	}
	switch a := pr.ParameterNotFoundAction; {
	case a == nil || *a == "":
		allErrs = append(allErrs, field.Required(p.Child("parameterNotFoundAction"), ""))
	case *a != admissionregistrationv1.DenyAction && *a != admissionregistrationv1.AllowAction:
		allErrs = append(allErrs, field.NotSupported(p.Child("parameterNotFoundAction"), pr.ParameterNotFoundAction, []string{"Deny", "Allow"}))
	}
	return allErrs
}

// validateValidationActions: at least one of Deny, Warn, Audit, each once,
// never Deny with Warn.
func validateValidationActions(actions []admissionregistrationv1.ValidationAction, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	seen := sets.New[string]()
	for i, a := range actions {
		if !supportedValidationActions.Has(string(a)) {
			allErrs = append(allErrs, field.NotSupported(p.Index(i), a, sets.List(supportedValidationActions)))
		}
		if seen.Has(string(a)) {
			allErrs = append(allErrs, field.Duplicate(p.Index(i), a))
		}
		seen.Insert(string(a))
	}
	if seen.Has("Deny") && seen.Has("Warn") {
		allErrs = append(allErrs, field.Invalid(p, actions, "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)"))
	}
	if len(seen) == 0 {
		allErrs = append(allErrs, field.Required(p, "at least one validation action is required"))
	}
	return allErrs
}

// MutatingAdmissionPolicy is upstream's ValidateMutatingAdmissionPolicy.
func MutatingAdmissionPolicy(p *admissionregistrationv1.MutatingAdmissionPolicy) field.ErrorList {
	return mutatingAdmissionPolicy(p, policyOptions{})
}

// MutatingAdmissionPolicyUpdate: the metadata rules, then the policy's
// own with the old expressions compiled as stored ones.
func MutatingAdmissionPolicyUpdate(p, old *admissionregistrationv1.MutatingAdmissionPolicy) field.ErrorList {
	stored := storedExpressions{matchConditions: sets.New[string](), applyConfigurations: sets.New[string](), jsonPatches: sets.New[string]()}
	for _, c := range old.Spec.MatchConditions {
		stored.matchConditions.Insert(c.Expression)
	}
	for _, m := range old.Spec.Mutations {
		if m.ApplyConfiguration != nil {
			stored.applyConfigurations.Insert(m.ApplyConfiguration.Expression)
		}
		if m.JSONPatch != nil {
			stored.jsonPatches.Insert(m.JSONPatch.Expression)
		}
	}
	opts := policyOptions{stored: stored,
		skipMatchConditions: equality.Semantic.DeepEqual(p.Spec.ParamKind, old.Spec.ParamKind) && equality.Semantic.DeepEqual(p.Spec.MatchConditions, old.Spec.MatchConditions)}
	return dedupe(append(validateMetaUpdateOf(p, old), mutatingAdmissionPolicy(p, opts)...))
}

func mutatingAdmissionPolicy(p *admissionregistrationv1.MutatingAdmissionPolicy, opts policyOptions) field.ErrorList {
	allErrs := validateObjectMeta(&p.ObjectMeta, false, nameIsDNSSubdomain)
	spec, sp := &p.Spec, field.NewPath("spec")
	hasParams := spec.ParamKind != nil
	compiler := compositionCompiler()
	allErrs = append(allErrs, validatePolicyCommon(sp, spec.FailurePolicy, spec.ParamKind, spec.MatchConstraints, supportedMutatingOperations)...)
	if !opts.skipMatchConditions {
		allErrs = append(allErrs, validateMatchConditionsIn(spec.MatchConditions, sp.Child("matchConditions"), hasParams, opts.stored.matchConditions)...)
	}
	for i, v := range spec.Variables {
		allErrs = append(allErrs, validateVariable(compiler, v.Name, v.Expression, hasParams, opts.stored.validations, sp.Child("variables").Index(i))...)
	}
	if len(spec.Mutations) == 0 {
		allErrs = append(allErrs, field.Required(sp.Child("mutations"), "mutations must contain at least one item"))
	}
	for i := range spec.Mutations {
		allErrs = append(allErrs, validateMutation(compiler, &spec.Mutations[i], hasParams, opts.stored, sp.Child("mutations").Index(i))...)
	}
	switch {
	case spec.ReinvocationPolicy == "":
		allErrs = append(allErrs, field.Required(sp.Child("reinvocationPolicy"), ""))
	case !supportedReinvocationPolicies.Has(string(spec.ReinvocationPolicy)):
		allErrs = append(allErrs, field.NotSupported(sp.Child("reinvocationPolicy"), spec.ReinvocationPolicy, sets.List(supportedReinvocationPolicies)))
	}
	return allErrs
}

// validateMutation: the patch type's own expression given (and the
// other's not), compiling with the patch types declared.
func validateMutation(compiler plugincel.Compiler, m *admissionregistrationv1.Mutation, hasParams bool, stored storedExpressions, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	vars := plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: true, HasPatchTypes: true}
	compile := func(accessor plugincel.ExpressionAccessor, expression string, stored sets.Set[string], ep *field.Path) field.ErrorList {
		if strings.TrimSpace(expression) == "" {
			return field.ErrorList{field.Required(ep, "")}
		}
		res := compiler.CompileCELExpression(accessor, vars, envType(stored, expression))
		return celError(ep, strings.TrimSpace(expression), res.Error)
	}
	switch m.PatchType {
	case "":
		allErrs = append(allErrs, field.Required(p.Child("patchType"), ""))
	case admissionregistrationv1.PatchTypeJSONPatch:
		if m.JSONPatch == nil {
			allErrs = append(allErrs, field.Required(p.Child("jsonPatch"), "must be specified when patchType is JSONPatch"))
		} else {
			e := m.JSONPatch.Expression
			// upstream looks the old JSON patches up among the old apply
			// configurations; kelp keeps them apart
			allErrs = append(allErrs, compile(&patch.JSONPatchCondition{Expression: strings.TrimSpace(e)}, e, stored.jsonPatches, p.Child("jsonPatch", "expression"))...)
		}
		if m.ApplyConfiguration != nil {
			allErrs = append(allErrs, field.Invalid(p.Child("applyConfiguration"), "{applyConfiguration}", "must not be specified when patchType is JSONPatch"))
		}
	case admissionregistrationv1.PatchTypeApplyConfiguration:
		if m.ApplyConfiguration == nil {
			allErrs = append(allErrs, field.Required(p.Child("applyConfiguration"), "must be specified when patchType is ApplyConfiguration"))
		} else {
			e := m.ApplyConfiguration.Expression
			allErrs = append(allErrs, compile(&patch.ApplyConfigurationCondition{Expression: strings.TrimSpace(e)}, e, stored.applyConfigurations, p.Child("applyConfiguration", "expression"))...)
		}
		if m.JSONPatch != nil {
			allErrs = append(allErrs, field.Invalid(p.Child("jsonPatch"), "{jsonPatch}", "must not be specified when patchType is ApplyConfiguration"))
		}
	default:
		allErrs = append(allErrs, field.NotSupported(p.Child("patchType"), m.PatchType, sets.List(supportedPatchTypes)))
	}
	return allErrs
}

// MutatingAdmissionPolicyBinding is upstream's
// ValidateMutatingAdmissionPolicyBinding: a policy named, a paramRef,
// matchResources whose rules name no DELETE.
func MutatingAdmissionPolicyBinding(b *admissionregistrationv1.MutatingAdmissionPolicyBinding) field.ErrorList {
	allErrs := validateObjectMeta(&b.ObjectMeta, false, nameIsDNSSubdomain)
	return append(allErrs, validateBindingCommon(field.NewPath("spec"), b.Spec.PolicyName, b.Spec.ParamRef, b.Spec.MatchResources, supportedMutatingOperations)...)
}

// MutatingAdmissionPolicyBindingUpdate: the metadata rules, then the
// binding's own.
func MutatingAdmissionPolicyBindingUpdate(b, old *admissionregistrationv1.MutatingAdmissionPolicyBinding) field.ErrorList {
	return dedupe(append(validateMetaUpdateOf(b, old), MutatingAdmissionPolicyBinding(b)...))
}
