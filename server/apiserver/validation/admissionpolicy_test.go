package validation

import (
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validPolicyMatch is a matchConstraints as stored (defaulted).
func validPolicyMatch() *admissionregistrationv1.MatchResources {
	equiv, all := admissionregistrationv1.Equivalent, admissionregistrationv1.AllScopes
	return &admissionregistrationv1.MatchResources{MatchPolicy: &equiv, NamespaceSelector: &metav1.LabelSelector{}, ObjectSelector: &metav1.LabelSelector{},
		ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{"CREATE", "UPDATE"},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}, Scope: &all}}}}}
}

func validVAP() *admissionregistrationv1.ValidatingAdmissionPolicy {
	fail := admissionregistrationv1.Fail
	return &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "replicas.example.com", ResourceVersion: "1"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{FailurePolicy: &fail, MatchConstraints: validPolicyMatch(),
			Variables:        []admissionregistrationv1.Variable{{Name: "replicas", Expression: "object.spec.replicas"}},
			Validations:      []admissionregistrationv1.Validation{{Expression: "variables.replicas > 1", MessageExpression: "'got ' + string(variables.replicas)"}},
			AuditAnnotations: []admissionregistrationv1.AuditAnnotation{{Key: "replicas", ValueExpression: "string(object.spec.replicas)"}}}}
}

// hasError reports an error of the type at the path.
func hasError(errs field.ErrorList, typ field.ErrorType, path string) bool {
	for _, e := range errs {
		if e.Type == typ && e.Field == path {
			return true
		}
	}
	return false
}

func TestValidatingAdmissionPolicy(t *testing.T) {
	if errs := ValidatingAdmissionPolicy(validVAP()); len(errs) != 0 {
		t.Fatalf("valid policy refused: %v", errs)
	}
	bad := admissionregistrationv1.FailurePolicyType("Sometimes")
	reason := metav1.StatusReasonConflict
	for name, tc := range map[string]struct {
		mod  func(*admissionregistrationv1.ValidatingAdmissionPolicySpec)
		typ  field.ErrorType
		path string
	}{
		"no failurePolicy":    {func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) { s.FailurePolicy = nil }, field.ErrorTypeRequired, "spec.failurePolicy"},
		"bad failurePolicy":   {func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) { s.FailurePolicy = &bad }, field.ErrorTypeNotSupported, "spec.failurePolicy"},
		"no matchConstraints": {func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) { s.MatchConstraints = nil }, field.ErrorTypeRequired, "spec.matchConstraints"},
		"no resourceRules":    {func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) { s.MatchConstraints.ResourceRules = nil }, field.ErrorTypeRequired, "spec.matchConstraints.resourceRules"},
		"no matchPolicy":      {func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) { s.MatchConstraints.MatchPolicy = nil }, field.ErrorTypeRequired, "spec.matchConstraints.matchPolicy"},
		"nothing to check": {func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.Validations, s.AuditAnnotations = nil, nil
		}, field.ErrorTypeRequired, "spec.validations"},
		"expression not a bool": {func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) { s.Validations[0].Expression = "'yes'" }, field.ErrorTypeInvalid, "spec.validations[0].expression"},
		"syntax error": {func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.Validations[0].Expression = "object.spec >"
		}, field.ErrorTypeInvalid, "spec.validations[0].expression"},
		"params without paramKind": {func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.Validations[0].Expression = "params.x == 1"
		},
			field.ErrorTypeInvalid, "spec.validations[0].expression"},
		"message not a string": {func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.Validations[0].MessageExpression = "1"
		}, field.ErrorTypeInvalid, "spec.validations[0].messageExpression"},
		"blank messageExpression": {func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.Validations[0].MessageExpression = "  "
		},
			field.ErrorTypeInvalid, "spec.validations[0].messageExpression"},
		"multi-line message": {func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) { s.Validations[0].Message = "a\nb" }, field.ErrorTypeInvalid, "spec.validations[0].message"},
		"reason":             {func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) { s.Validations[0].Reason = &reason }, field.ErrorTypeNotSupported, "spec.validations[0].reason"},
		"variable name":      {func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) { s.Variables[0].Name = "if" }, field.ErrorTypeInvalid, "spec.variables[0].name"},
		"unknown variable": {func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.Validations[0].Expression = "variables.nope > 1"
		},
			field.ErrorTypeInvalid, "spec.validations[0].expression"},
		"duplicate audit key": {func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.AuditAnnotations = append(s.AuditAnnotations, s.AuditAnnotations[0])
		}, field.ErrorTypeDuplicate, "spec.auditAnnotations[1].key"},
		"matchCondition": {func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "c", Expression: "object +"}}
		}, field.ErrorTypeInvalid, "spec.matchConditions[0].expression"},
		"paramKind version": {func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "example.com/", Kind: "Limit"}
		}, field.ErrorTypeInvalid, "spec.paramKind.apiVersion"},
		"resourceNames": {func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.MatchConstraints.ResourceRules[0].ResourceNames = []string{"a/b"}
		}, field.ErrorTypeInvalid, "spec.matchConstraints.resourceRules[0].resourceNames[0]"},
	} {
		p := validVAP()
		tc.mod(&p.Spec)
		if errs := ValidatingAdmissionPolicy(p); !hasError(errs, tc.typ, tc.path) {
			t.Errorf("%s: want %s at %s, got %v", name, tc.typ, tc.path, errs)
		}
	}
	// params are declared with a paramKind
	p := validVAP()
	p.Spec.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}
	p.Spec.Validations[0].Expression = "object.spec.replicas <= int(params.data.max)"
	if errs := ValidatingAdmissionPolicy(p); len(errs) != 0 {
		t.Fatalf("params with a paramKind refused: %v", errs)
	}
	// a compilation error carries CEL's message, as upstream's
	p = validVAP()
	p.Spec.Validations[0].Expression = "object.spec.replicas >"
	errs := ValidatingAdmissionPolicy(p)
	if len(errs) != 1 || !strings.Contains(errs[0].Detail, "compilation failed") {
		t.Fatalf("syntax error: %v", errs)
	}
}

func TestValidatingAdmissionPolicyUpdate(t *testing.T) {
	old := validVAP()
	p := validVAP()
	p.Spec.Validations[0].Expression = "object.spec.replicas > 2"
	if errs := ValidatingAdmissionPolicyUpdate(p, old); len(errs) != 0 {
		t.Fatalf("valid update refused: %v", errs)
	}
	p = validVAP()
	p.Spec.Validations[0].Expression = "nope("
	if errs := ValidatingAdmissionPolicyUpdate(p, old); !hasError(errs, field.ErrorTypeInvalid, "spec.validations[0].expression") {
		t.Fatalf("an update to an expression that does not compile: %v", errs)
	}
	// status: a warning needs its text and a JSONPath fieldRef
	p = validVAP()
	p.Status.TypeChecking = &admissionregistrationv1.TypeChecking{ExpressionWarnings: []admissionregistrationv1.ExpressionWarning{{FieldRef: "spec.validations[0", Warning: ""}}}
	errs := ValidatingAdmissionPolicyStatusUpdate(p, old)
	if !hasError(errs, field.ErrorTypeRequired, "status.typeChecking.expressionWarnings[0].warning") ||
		!hasError(errs, field.ErrorTypeInvalid, "status.typeChecking.expressionWarnings[0].fieldRef") {
		t.Fatalf("status update: %v", errs)
	}
}

func TestValidatingAdmissionPolicyBinding(t *testing.T) {
	deny := admissionregistrationv1.DenyAction
	valid := func() *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
		return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "b"},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "replicas.example.com",
				ParamRef:          &admissionregistrationv1.ParamRef{Name: "limits", ParameterNotFoundAction: &deny},
				ValidationActions: []admissionregistrationv1.ValidationAction{"Deny", "Audit"}}}
	}
	if errs := ValidatingAdmissionPolicyBinding(valid()); len(errs) != 0 {
		t.Fatalf("valid binding refused: %v", errs)
	}
	for name, tc := range map[string]struct {
		mod  func(*admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec)
		typ  field.ErrorType
		path string
	}{
		"no policy":  {func(s *admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec) { s.PolicyName = "" }, field.ErrorTypeRequired, "spec.policyName"},
		"no actions": {func(s *admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec) { s.ValidationActions = nil }, field.ErrorTypeRequired, "spec.validationActions"},
		"deny and warn": {func(s *admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec) {
			s.ValidationActions = []admissionregistrationv1.ValidationAction{"Deny", "Warn"}
		}, field.ErrorTypeInvalid, "spec.validationActions"},
		"unknown action": {func(s *admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec) {
			s.ValidationActions = []admissionregistrationv1.ValidationAction{"Shout"}
		}, field.ErrorTypeNotSupported, "spec.validationActions[0]"},
		"duplicate action": {func(s *admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec) {
			s.ValidationActions = []admissionregistrationv1.ValidationAction{"Audit", "Audit"}
		}, field.ErrorTypeDuplicate, "spec.validationActions[1]"},
		"name and selector": {func(s *admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec) {
			s.ParamRef.Selector = &metav1.LabelSelector{}
		},
			field.ErrorTypeForbidden, "spec.paramRef.name"},
		"neither name nor selector": {func(s *admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec) { s.ParamRef.Name = "" }, field.ErrorTypeRequired, "spec.paramRef"},
		"no not-found action": {func(s *admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec) {
			s.ParamRef.ParameterNotFoundAction = nil
		}, field.ErrorTypeRequired, "spec.paramRef.parameterNotFoundAction"},
		"matchResources without defaults": {func(s *admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec) {
			s.MatchResources = &admissionregistrationv1.MatchResources{}
		}, field.ErrorTypeRequired, "spec.matchResources.namespaceSelector"},
	} {
		b := valid()
		tc.mod(&b.Spec)
		if errs := ValidatingAdmissionPolicyBinding(b); !hasError(errs, tc.typ, tc.path) {
			t.Errorf("%s: want %s at %s, got %v", name, tc.typ, tc.path, errs)
		}
	}
}

func validMAP() *admissionregistrationv1.MutatingAdmissionPolicy {
	fail := admissionregistrationv1.Fail
	return &admissionregistrationv1.MutatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "annotate.example.com"},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{FailurePolicy: &fail, MatchConstraints: validPolicyMatch(),
			ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
			Mutations: []admissionregistrationv1.Mutation{{PatchType: admissionregistrationv1.PatchTypeApplyConfiguration,
				ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{Expression: `Object{spec: Object.spec{replicas: 1337}}`}}}}}
}

func TestMutatingAdmissionPolicy(t *testing.T) {
	if errs := MutatingAdmissionPolicy(validMAP()); len(errs) != 0 {
		t.Fatalf("valid policy refused: %v", errs)
	}
	jp := &admissionregistrationv1.JSONPatch{Expression: `[JSONPatch{op: "add", path: "/metadata/labels/a", value: "b"}]`}
	for name, tc := range map[string]struct {
		mod  func(*admissionregistrationv1.MutatingAdmissionPolicySpec)
		typ  field.ErrorType
		path string
	}{
		"no mutations":          {func(s *admissionregistrationv1.MutatingAdmissionPolicySpec) { s.Mutations = nil }, field.ErrorTypeRequired, "spec.mutations"},
		"no reinvocationPolicy": {func(s *admissionregistrationv1.MutatingAdmissionPolicySpec) { s.ReinvocationPolicy = "" }, field.ErrorTypeRequired, "spec.reinvocationPolicy"},
		"bad reinvocationPolicy": {func(s *admissionregistrationv1.MutatingAdmissionPolicySpec) { s.ReinvocationPolicy = "Always" },
			field.ErrorTypeNotSupported, "spec.reinvocationPolicy"},
		"DELETE": {func(s *admissionregistrationv1.MutatingAdmissionPolicySpec) {
			s.MatchConstraints.ResourceRules[0].Operations = []admissionregistrationv1.OperationType{"DELETE"}
		}, field.ErrorTypeNotSupported, "spec.matchConstraints.resourceRules.operations"},
		"no patchType": {func(s *admissionregistrationv1.MutatingAdmissionPolicySpec) { s.Mutations[0].PatchType = "" }, field.ErrorTypeRequired, "spec.mutations[0].patchType"},
		"both patches": {func(s *admissionregistrationv1.MutatingAdmissionPolicySpec) { s.Mutations[0].JSONPatch = jp }, field.ErrorTypeInvalid, "spec.mutations[0].jsonPatch"},
		"apply configuration does not compile": {func(s *admissionregistrationv1.MutatingAdmissionPolicySpec) {
			s.Mutations[0].ApplyConfiguration.Expression = "Object{spec:"
		}, field.ErrorTypeInvalid, "spec.mutations[0].applyConfiguration.expression"},
		"apply configuration of the wrong type": {func(s *admissionregistrationv1.MutatingAdmissionPolicySpec) {
			s.Mutations[0].ApplyConfiguration.Expression = "'text'"
		}, field.ErrorTypeInvalid, "spec.mutations[0].applyConfiguration.expression"},
		"JSONPatch without its expression": {func(s *admissionregistrationv1.MutatingAdmissionPolicySpec) {
			s.Mutations[0] = admissionregistrationv1.Mutation{PatchType: admissionregistrationv1.PatchTypeJSONPatch}
		}, field.ErrorTypeRequired, "spec.mutations[0].jsonPatch"},
	} {
		p := validMAP()
		tc.mod(&p.Spec)
		if errs := MutatingAdmissionPolicy(p); !hasError(errs, tc.typ, tc.path) {
			t.Errorf("%s: want %s at %s, got %v", name, tc.typ, tc.path, errs)
		}
	}
	p := validMAP()
	p.Spec.Mutations[0] = admissionregistrationv1.Mutation{PatchType: admissionregistrationv1.PatchTypeJSONPatch, JSONPatch: jp}
	if errs := MutatingAdmissionPolicy(p); len(errs) != 0 {
		t.Fatalf("a JSONPatch mutation refused: %v", errs)
	}
	b := &admissionregistrationv1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "b"},
		Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: "annotate.example.com", MatchResources: validPolicyMatch()}}
	if errs := MutatingAdmissionPolicyBinding(b); len(errs) != 0 {
		t.Fatalf("valid binding refused: %v", errs)
	}
	b.Spec.MatchResources.ResourceRules[0].Operations = []admissionregistrationv1.OperationType{"DELETE"}
	if errs := MutatingAdmissionPolicyBinding(b); !hasError(errs, field.ErrorTypeNotSupported, "spec.matchResources.resourceRules.operations") {
		t.Fatalf("a binding on DELETE: %v", errs)
	}
}
