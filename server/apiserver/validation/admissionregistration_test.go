package validation

import (
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func validWebhook() admissionregistrationv1.ValidatingWebhook {
	url := "https://hooks.example.com/validate"
	none := admissionregistrationv1.SideEffectClassNone
	return admissionregistrationv1.ValidatingWebhook{Name: "check.example.com", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url},
		Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{"CREATE"},
			Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods", "pods/status"}}}},
		SideEffects: &none, AdmissionReviewVersions: []string{"v1", "v1beta1"}}
}

func TestValidatingWebhookConfiguration(t *testing.T) {
	cfg := func(mod func(*admissionregistrationv1.ValidatingWebhook)) *admissionregistrationv1.ValidatingWebhookConfiguration {
		w := validWebhook()
		if mod != nil {
			mod(&w)
		}
		return &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Webhooks: []admissionregistrationv1.ValidatingWebhook{w}}
	}
	if errs := ValidatingWebhookConfiguration(cfg(nil)); len(errs) != 0 {
		t.Fatalf("valid configuration refused: %v", errs)
	}
	some := admissionregistrationv1.SideEffectClassSome
	ignore := admissionregistrationv1.FailurePolicyType("Sometimes")
	for name, tc := range map[string]struct {
		mod  func(*admissionregistrationv1.ValidatingWebhook)
		want string
	}{
		"two-segment name":      {func(w *admissionregistrationv1.ValidatingWebhook) { w.Name = "check.example" }, "webhooks[0].name"},
		"no side effects":       {func(w *admissionregistrationv1.ValidatingWebhook) { w.SideEffects = nil }, "webhooks[0].sideEffects"},
		"side effects Some":     {func(w *admissionregistrationv1.ValidatingWebhook) { w.SideEffects = &some }, "webhooks[0].sideEffects"},
		"failure policy":        {func(w *admissionregistrationv1.ValidatingWebhook) { w.FailurePolicy = &ignore }, "webhooks[0].failurePolicy"},
		"no review versions":    {func(w *admissionregistrationv1.ValidatingWebhook) { w.AdmissionReviewVersions = nil }, "webhooks[0].admissionReviewVersions"},
		"unknown versions only": {func(w *admissionregistrationv1.ValidatingWebhook) { w.AdmissionReviewVersions = []string{"v2"} }, "webhooks[0].admissionReviewVersions"},
		"http url": {func(w *admissionregistrationv1.ValidatingWebhook) {
			u := "http://hooks.example.com/"
			w.ClientConfig.URL = &u
		}, "webhooks[0].clientConfig.url"},
		"url and service": {func(w *admissionregistrationv1.ValidatingWebhook) {
			w.ClientConfig.Service = &admissionregistrationv1.ServiceReference{Namespace: "ns", Name: "svc"}
		}, "webhooks[0].clientConfig"},
		"timeout": {func(w *admissionregistrationv1.ValidatingWebhook) { t := int32(31); w.TimeoutSeconds = &t }, "webhooks[0].timeoutSeconds"},
		"wildcard with others": {func(w *admissionregistrationv1.ValidatingWebhook) {
			w.Rules[0].Operations = []admissionregistrationv1.OperationType{"*", "CREATE"}
		}, "webhooks[0].rules[0].operations"},
		"no resources": {func(w *admissionregistrationv1.ValidatingWebhook) { w.Rules[0].Resources = nil }, "webhooks[0].rules[0].resources"},
		"bad scope": {func(w *admissionregistrationv1.ValidatingWebhook) {
			s := admissionregistrationv1.ScopeType("Galaxy")
			w.Rules[0].Scope = &s
		}, "webhooks[0].rules[0].scope"},
		"CEL not compiling": {func(w *admissionregistrationv1.ValidatingWebhook) {
			w.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "x", Expression: "object.metadata.name +"}}
		}, "compilation failed"},
		"CEL not bool": {func(w *admissionregistrationv1.ValidatingWebhook) {
			w.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "x", Expression: "'a string'"}}
		}, "webhooks[0].matchConditions[0].expression"},
	} {
		errs := ValidatingWebhookConfiguration(cfg(tc.mod))
		if len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), tc.want) {
			t.Errorf("%s: want an error about %s, got %v", name, tc.want, errs)
		}
	}
	dup := cfg(nil)
	dup.Webhooks = append(dup.Webhooks, dup.Webhooks[0])
	if errs := ValidatingWebhookConfiguration(dup); len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), "Duplicate value") {
		t.Errorf("duplicate webhook names: %v", errs)
	}
}

func TestMutatingWebhookConfigurationReinvocation(t *testing.T) {
	v := validWebhook()
	bad := admissionregistrationv1.ReinvocationPolicyType("Always")
	c := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "m"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: v.Name, ClientConfig: v.ClientConfig, Rules: v.Rules,
			SideEffects: v.SideEffects, AdmissionReviewVersions: v.AdmissionReviewVersions, ReinvocationPolicy: &bad}}}
	if errs := MutatingWebhookConfiguration(c); len(errs) != 1 || errs[0].Field != "webhooks[0].reinvocationPolicy" {
		t.Errorf("reinvocationPolicy Always: %v", errs)
	}
}
