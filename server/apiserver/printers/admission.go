package printers

import (
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func init() {
	webhookColumns := []metav1.TableColumnDefinition{
		nameColumn(),
		column("Webhooks", "integer", "Webhooks indicates the number of webhooks registered in this configuration"),
		ageColumn(),
	}
	cells(webhookColumns, func(c *admissionregistrationv1.MutatingWebhookConfiguration, now time.Time) []interface{} {
		return []interface{}{c.Name, int64(len(c.Webhooks)), age(c.ObjectMeta, now)}
	})
	cells(webhookColumns, func(c *admissionregistrationv1.ValidatingWebhookConfiguration, now time.Time) []interface{} {
		return []interface{}{c.Name, int64(len(c.Webhooks)), age(c.ObjectMeta, now)}
	})

	paramKindColumn := column("ParamKind", "string", "ParamKind specifies the kind of resources used to parameterize this policy")
	cells([]metav1.TableColumnDefinition{
		nameColumn(),
		column("Validations", "integer", "Validations indicates the number of validation rules defined in this configuration"),
		paramKindColumn, ageColumn(),
	}, func(p *admissionregistrationv1.ValidatingAdmissionPolicy, now time.Time) []interface{} {
		return []interface{}{p.Name, int64(len(p.Spec.Validations)), paramKind(p.Spec.ParamKind), age(p.ObjectMeta, now)}
	})
	cells([]metav1.TableColumnDefinition{
		nameColumn(),
		column("Mutations", "integer", "Mutation indicates the number of mutations rules defined in this configuration"),
		paramKindColumn, ageColumn(),
	}, func(p *admissionregistrationv1.MutatingAdmissionPolicy, now time.Time) []interface{} {
		return []interface{}{p.Name, int64(len(p.Spec.Mutations)), paramKind(p.Spec.ParamKind), age(p.ObjectMeta, now)}
	})
	bindingColumns := []metav1.TableColumnDefinition{
		nameColumn(),
		column("PolicyName", "string", "PolicyName indicates the policy definition which the policy binding binded to"),
		column("ParamRef", "string", "ParamRef indicates the param resource which sets the configuration param"),
		ageColumn(),
	}
	cells(bindingColumns, func(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding, now time.Time) []interface{} {
		return []interface{}{b.Name, b.Spec.PolicyName, paramRef(b.Spec.ParamRef), age(b.ObjectMeta, now)}
	})
	cells(bindingColumns, func(b *admissionregistrationv1.MutatingAdmissionPolicyBinding, now time.Time) []interface{} {
		return []interface{}{b.Name, b.Spec.PolicyName, paramRef(b.Spec.ParamRef), age(b.ObjectMeta, now)}
	})
}

// paramKind is a policy's "<apiVersion>/<kind>", or <unset>.
func paramKind(k *admissionregistrationv1.ParamKind) string {
	if k == nil {
		return "<unset>"
	}
	return k.APIVersion + "/" + k.Kind
}

// paramRef is a binding's parameter: "<namespace>/<name>" ("*/<name>"
// without a namespace, since the parameter's scope is not known here), its
// selector, or <unset>.
func paramRef(r *admissionregistrationv1.ParamRef) string {
	switch {
	case r == nil:
		return "<unset>"
	case r.Name != "" && r.Namespace != "":
		return r.Namespace + "/" + r.Name
	case r.Name != "":
		return "*/" + r.Name
	case r.Selector != nil:
		return r.Selector.String()
	}
	return "<unset>"
}
