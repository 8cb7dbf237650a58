package validation

import (
	"testing"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap"
	"k8s.io/utils/ptr"

	"github.com/kelp-project/kelp/server/apiserver/defaults"
)

func validFlowSchema() *flowcontrolv1.FlowSchema {
	fs := &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: "mine"},
		Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "global-default"},
			DistinguisherMethod:        &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects: []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: "alice"}}},
				ResourceRules: []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{"get", "list"}, APIGroups: []string{""},
					Resources: []string{"pods"}, Namespaces: []string{"default"}}},
				NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"/healthz", "/api/*"}}},
			}},
		},
	}
	defaults.FlowSchema(fs)
	return fs
}

func TestFlowSchemaRules(t *testing.T) {
	fs := validFlowSchema()
	if fs.Spec.MatchingPrecedence != 1000 {
		t.Fatalf("matchingPrecedence defaulted to %d, want 1000", fs.Spec.MatchingPrecedence)
	}
	expectErrors(t, FlowSchema(fs), nil)

	rule := "spec.rules[0]"
	cases := []struct {
		name   string
		change func(*flowcontrolv1.FlowSchema)
		want   []want
	}{
		{"precedence 1 is exempt's", func(fs *flowcontrolv1.FlowSchema) { fs.Spec.MatchingPrecedence = 1 },
			[]want{{field.ErrorTypeInvalid, "spec.matchingPrecedence", "only the schema named 'exempt'"}}},
		{"precedence too large", func(fs *flowcontrolv1.FlowSchema) { fs.Spec.MatchingPrecedence = 10001 },
			[]want{{field.ErrorTypeInvalid, "spec.matchingPrecedence", "must not be greater than 10000"}}},
		{"negative precedence", func(fs *flowcontrolv1.FlowSchema) { fs.Spec.MatchingPrecedence = -1 },
			[]want{{field.ErrorTypeInvalid, "spec.matchingPrecedence", "must be a positive value"}}},
		{"no level", func(fs *flowcontrolv1.FlowSchema) { fs.Spec.PriorityLevelConfiguration.Name = "" },
			[]want{{field.ErrorTypeRequired, "spec.priorityLevelConfiguration.name", "must reference a priority level"}}},
		{"bad distinguisher", func(fs *flowcontrolv1.FlowSchema) { fs.Spec.DistinguisherMethod.Type = "ByColour" },
			[]want{{field.ErrorTypeNotSupported, "spec.distinguisherMethod.type", ""}}},
		{"no subjects", func(fs *flowcontrolv1.FlowSchema) { fs.Spec.Rules[0].Subjects = nil },
			[]want{{field.ErrorTypeRequired, rule + ".subjects", ""}}},
		{"user subject with a group", func(fs *flowcontrolv1.FlowSchema) {
			fs.Spec.Rules[0].Subjects[0].Group = &flowcontrolv1.GroupSubject{Name: "g"}
		}, []want{{field.ErrorTypeForbidden, rule + ".subjects[0].group", "when subject kind is not 'Group'"}}},
		{"service account without namespace", func(fs *flowcontrolv1.FlowSchema) {
			fs.Spec.Rules[0].Subjects[0] = flowcontrolv1.Subject{Kind: flowcontrolv1.SubjectKindServiceAccount, ServiceAccount: &flowcontrolv1.ServiceAccountSubject{Name: "*"}}
		}, []want{{field.ErrorTypeRequired, rule + ".subjects[0].serviceAccount.namespace", "must specify namespace"}}},
		{"unknown subject kind", func(fs *flowcontrolv1.FlowSchema) { fs.Spec.Rules[0].Subjects[0].Kind = "Robot" },
			[]want{{field.ErrorTypeNotSupported, rule + ".subjects[0].kind", ""}}},
		{"no rules at all", func(fs *flowcontrolv1.FlowSchema) {
			fs.Spec.Rules[0].ResourceRules, fs.Spec.Rules[0].NonResourceRules = nil, nil
		}, []want{{field.ErrorTypeRequired, rule, "at least one of resourceRules and nonResourceRules"}}},
		{"wildcard verb with others", func(fs *flowcontrolv1.FlowSchema) { fs.Spec.Rules[0].ResourceRules[0].Verbs = []string{"*", "get"} },
			[]want{{field.ErrorTypeInvalid, rule + ".resourceRules[0].verbs", "if '*' is present"}}},
		{"unknown verb", func(fs *flowcontrolv1.FlowSchema) { fs.Spec.Rules[0].ResourceRules[0].Verbs = []string{"escalate"} },
			[]want{{field.ErrorTypeNotSupported, rule + ".resourceRules[0].verbs", ""}}},
		{"namespaced rule without namespaces", func(fs *flowcontrolv1.FlowSchema) { fs.Spec.Rules[0].ResourceRules[0].Namespaces = nil },
			[]want{{field.ErrorTypeRequired, rule + ".resourceRules[0].namespaces", "not cluster scoped"}}},
		{"bad namespace", func(fs *flowcontrolv1.FlowSchema) {
			fs.Spec.Rules[0].ResourceRules[0].Namespaces = []string{"Not_A_Label"}
		},
			[]want{{field.ErrorTypeInvalid, rule + ".resourceRules[0].namespaces[0]", "must be '*' or a DNS-1123 label"}}},
		{"infix wildcard URL", func(fs *flowcontrolv1.FlowSchema) {
			fs.Spec.Rules[0].NonResourceRules[0].NonResourceURLs = []string{"/api/*/x"}
		},
			[]want{{field.ErrorTypeInvalid, rule + ".nonResourceRules[0].nonResourceURLs[0]", "wildcard can only do suffix matching"}}},
		{"relative URL", func(fs *flowcontrolv1.FlowSchema) {
			fs.Spec.Rules[0].NonResourceRules[0].NonResourceURLs = []string{"healthz"}
		},
			[]want{{field.ErrorTypeInvalid, rule + ".nonResourceRules[0].nonResourceURLs[0]", "must start with slash"}}},
		{"duplicate condition", func(fs *flowcontrolv1.FlowSchema) {
			fs.Status.Conditions = []flowcontrolv1.FlowSchemaCondition{{Type: "Dangling"}, {Type: "Dangling"}}
		}, []want{{field.ErrorTypeDuplicate, "status.conditions[1].type", ""}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := validFlowSchema()
			tc.change(fs)
			expectErrors(t, FlowSchema(fs), tc.want)
		})
	}
}

// The mandatory objects keep upstream's spec: as shipped it is valid, any
// change is refused, but for the exempt level's concurrency settings.
func TestMandatoryFlowcontrolObjects(t *testing.T) {
	for _, boot := range bootstrap.MandatoryFlowSchemas {
		fs := boot.DeepCopy()
		defaults.FlowSchema(fs)
		expectErrors(t, FlowSchema(fs), nil)
		fs.Spec.MatchingPrecedence++
		expectErrors(t, FlowSchema(fs), []want{{field.ErrorTypeInvalid, "spec", "must equal the fixed value"}})
	}
	for _, boot := range append(bootstrap.MandatoryPriorityLevelConfigurations, bootstrap.SuggestedPriorityLevelConfigurations...) {
		pl := boot.DeepCopy()
		defaults.PriorityLevelConfiguration(pl)
		expectErrors(t, PriorityLevelConfiguration(pl), nil)
	}
	for _, boot := range bootstrap.SuggestedFlowSchemas {
		fs := boot.DeepCopy()
		defaults.FlowSchema(fs)
		expectErrors(t, FlowSchema(fs), nil)
	}
	catchAll := bootstrap.MandatoryPriorityLevelConfigurationCatchAll.DeepCopy()
	catchAll.Spec.Limited.NominalConcurrencyShares = ptr.To(int32(100))
	expectErrors(t, PriorityLevelConfiguration(catchAll), []want{{field.ErrorTypeInvalid, "spec", "'catch-all' must equal the fixed value"}})
	exempt := bootstrap.MandatoryPriorityLevelConfigurationExempt.DeepCopy()
	exempt.Spec.Exempt.NominalConcurrencyShares = ptr.To(int32(10))
	expectErrors(t, PriorityLevelConfiguration(exempt), nil)
}

func validPriorityLevel() *flowcontrolv1.PriorityLevelConfiguration {
	pl := &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "mine"},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
				LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeQueue, Queuing: &flowcontrolv1.QueuingConfiguration{}}}},
	}
	defaults.PriorityLevelConfiguration(pl)
	return pl
}

func TestPriorityLevelConfigurationRules(t *testing.T) {
	pl := validPriorityLevel()
	l := pl.Spec.Limited
	if *l.NominalConcurrencyShares != 30 || *l.LendablePercent != 0 || *l.LimitResponse.Queuing != (flowcontrolv1.QueuingConfiguration{Queues: 64, HandSize: 8, QueueLengthLimit: 50}) {
		t.Fatalf("not defaulted as upstream: %+v %+v", l, l.LimitResponse.Queuing)
	}
	expectErrors(t, PriorityLevelConfiguration(pl), nil)
	// An explicit 0 shares is kept, and valid in v1.
	zero := validPriorityLevel()
	zero.Spec.Limited.NominalConcurrencyShares = ptr.To(int32(0))
	defaults.PriorityLevelConfiguration(zero)
	if *zero.Spec.Limited.NominalConcurrencyShares != 0 {
		t.Errorf("explicit 0 shares defaulted to %d", *zero.Spec.Limited.NominalConcurrencyShares)
	}
	expectErrors(t, PriorityLevelConfiguration(zero), nil)

	lim := "spec.limited"
	cases := []struct {
		name   string
		change func(*flowcontrolv1.PriorityLevelConfiguration)
		want   []want
	}{
		{"exempt type for another name", func(pl *flowcontrolv1.PriorityLevelConfiguration) {
			pl.Spec = flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementExempt}
		}, []want{{field.ErrorTypeInvalid, "spec.type", "must be 'Exempt' if and only if"}}},
		{"no type", func(pl *flowcontrolv1.PriorityLevelConfiguration) { pl.Spec.Type = "" },
			[]want{{field.ErrorTypeRequired, "spec.type", ""}}},
		{"limited without limited", func(pl *flowcontrolv1.PriorityLevelConfiguration) { pl.Spec.Limited = nil },
			[]want{{field.ErrorTypeRequired, lim, "must not be empty when type is Limited"}}},
		{"limited with exempt", func(pl *flowcontrolv1.PriorityLevelConfiguration) {
			pl.Spec.Exempt = &flowcontrolv1.ExemptPriorityLevelConfiguration{}
		}, []want{{field.ErrorTypeForbidden, "spec.exempt", ""}}},
		{"negative shares", func(pl *flowcontrolv1.PriorityLevelConfiguration) {
			pl.Spec.Limited.NominalConcurrencyShares = ptr.To(int32(-1))
		},
			[]want{{field.ErrorTypeInvalid, lim + ".nominalConcurrencyShares", "must be a non-negative integer"}}},
		{"lendable over 100", func(pl *flowcontrolv1.PriorityLevelConfiguration) {
			pl.Spec.Limited.LendablePercent = ptr.To(int32(101))
		},
			[]want{{field.ErrorTypeInvalid, lim + ".lendablePercent", "between 0 and 100"}}},
		{"negative borrowing", func(pl *flowcontrolv1.PriorityLevelConfiguration) {
			pl.Spec.Limited.BorrowingLimitPercent = ptr.To(int32(-1))
		},
			[]want{{field.ErrorTypeInvalid, lim + ".borrowingLimitPercent", ""}}},
		{"reject with queuing", func(pl *flowcontrolv1.PriorityLevelConfiguration) {
			pl.Spec.Limited.LimitResponse.Type = flowcontrolv1.LimitResponseTypeReject
		},
			[]want{{field.ErrorTypeForbidden, lim + ".limitResponse.queuing", ""}}},
		{"queue without queuing", func(pl *flowcontrolv1.PriorityLevelConfiguration) { pl.Spec.Limited.LimitResponse.Queuing = nil },
			[]want{{field.ErrorTypeRequired, lim + ".limitResponse.queuing", ""}}},
		{"hand larger than deck", func(pl *flowcontrolv1.PriorityLevelConfiguration) {
			pl.Spec.Limited.LimitResponse.Queuing.HandSize = 65
		},
			[]want{{field.ErrorTypeInvalid, lim + ".limitResponse.queuing.handSize", "should not be greater than queues (64)"}}},
		{"too much entropy", func(pl *flowcontrolv1.PriorityLevelConfiguration) {
			pl.Spec.Limited.LimitResponse.Queuing.Queues, pl.Spec.Limited.LimitResponse.Queuing.HandSize = 10000000, 40
		}, []want{{field.ErrorTypeInvalid, lim + ".limitResponse.queuing.handSize", "required entropy bits"}}},
		{"too many queues", func(pl *flowcontrolv1.PriorityLevelConfiguration) {
			pl.Spec.Limited.LimitResponse.Queuing.Queues = 10000001
		},
			[]want{{field.ErrorTypeInvalid, lim + ".limitResponse.queuing.queues", "must not be greater than 10000000"}}},
		{"v1beta3 round-trip annotation", func(pl *flowcontrolv1.PriorityLevelConfiguration) {
			pl.Annotations = map[string]string{"flowcontrol.k8s.io/v1beta3-preserve-zero-concurrency-shares": "true"}
		}, []want{{field.ErrorTypeForbidden, "metadata.annotations", ""}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pl := validPriorityLevel()
			tc.change(pl)
			expectErrors(t, PriorityLevelConfiguration(pl), tc.want)
		})
	}
}

// The update rules add metadata's; the status rules look at conditions.
func TestFlowcontrolUpdates(t *testing.T) {
	old := validFlowSchema()
	old.ResourceVersion = "1"
	fs := old.DeepCopy()
	fs.Spec.MatchingPrecedence = 9000
	expectErrors(t, FlowSchemaUpdate(fs, old), nil)
	fs.Name = "other"
	expectErrors(t, FlowSchemaUpdate(fs, old), []want{{field.ErrorTypeInvalid, "metadata.name", "field is immutable"}})
	st := old.DeepCopy()
	st.Status.Conditions = []flowcontrolv1.FlowSchemaCondition{{Type: ""}}
	expectErrors(t, FlowSchemaStatusUpdate(st, old), []want{{field.ErrorTypeRequired, "status.conditions[0].type", ""}})

	oldPL := validPriorityLevel()
	oldPL.ResourceVersion = "1"
	pl := oldPL.DeepCopy()
	pl.Status.Conditions = []flowcontrolv1.PriorityLevelConfigurationCondition{{Type: "A"}, {Type: "A"}}
	expectErrors(t, PriorityLevelConfigurationStatusUpdate(pl, oldPL), []want{{field.ErrorTypeDuplicate, "status.conditions[1].type", ""}})
	pl.Status.Conditions = nil
	pl.Spec.Limited.NominalConcurrencyShares = ptr.To(int32(6))
	expectErrors(t, PriorityLevelConfigurationUpdate(pl, oldPL), nil)
}
