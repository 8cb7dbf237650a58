package registry

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kelp-project/kelp/server/apiserver/defaults"
	"github.com/kelp-project/kelp/server/apiserver/validation"
)

// admissionregistration.k8s.io/v1: the admission webhooks' configurations,
// which the webhook admission plugins (admission/webhook) follow through
// informers. Webhooks never intercept writes of these objects.

func mutatingWebhookConfigurations() *Resource {
	return &Resource{
		GVR: gvr("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations"), Kind: "MutatingWebhookConfiguration", Singular: "mutatingwebhookconfiguration",
		New:     func() runtime.Object { return &admissionregistrationv1.MutatingWebhookConfiguration{} },
		NewList: func() runtime.Object { return &admissionregistrationv1.MutatingWebhookConfigurationList{} },
		Strategy: Strategy{
			Default:              defaulter(defaults.MutatingWebhookConfiguration),
			Validate:             validator(validation.MutatingWebhookConfiguration),
			ValidateUpdate:       updateValidator(validation.MutatingWebhookConfigurationUpdate),
			ValidateStatusUpdate: metaUpdate,
		},
	}
}

func validatingWebhookConfigurations() *Resource {
	return &Resource{
		GVR: gvr("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations"), Kind: "ValidatingWebhookConfiguration", Singular: "validatingwebhookconfiguration",
		New:     func() runtime.Object { return &admissionregistrationv1.ValidatingWebhookConfiguration{} },
		NewList: func() runtime.Object { return &admissionregistrationv1.ValidatingWebhookConfigurationList{} },
		Strategy: Strategy{
			Default:              defaulter(defaults.ValidatingWebhookConfiguration),
			Validate:             validator(validation.ValidatingWebhookConfiguration),
			ValidateUpdate:       updateValidator(validation.ValidatingWebhookConfigurationUpdate),
			ValidateStatusUpdate: metaUpdate,
		},
	}
}

// The admission policies and their bindings, which the policy admission
// plugins (admission/policy) follow through informers. Policies never
// intercept writes of these four kinds (upstream exempts them). A
// ValidatingAdmissionPolicy's status (the type checking of its
// expressions) is written by the admissionpolicystatus controller.

func validatingAdmissionPolicies() *Resource {
	return &Resource{
		GVR: gvr("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies"), Kind: "ValidatingAdmissionPolicy", Singular: "validatingadmissionpolicy",
		New:     func() runtime.Object { return &admissionregistrationv1.ValidatingAdmissionPolicy{} },
		NewList: func() runtime.Object { return &admissionregistrationv1.ValidatingAdmissionPolicyList{} },
		Status:  true,
		Strategy: Strategy{
			Default:              defaulter(defaults.ValidatingAdmissionPolicy),
			Validate:             validator(validation.ValidatingAdmissionPolicy),
			ValidateUpdate:       updateValidator(validation.ValidatingAdmissionPolicyUpdate),
			ValidateStatusUpdate: updateValidator(validation.ValidatingAdmissionPolicyStatusUpdate),
		},
	}
}

func validatingAdmissionPolicyBindings() *Resource {
	return &Resource{
		GVR: gvr("admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings"), Kind: "ValidatingAdmissionPolicyBinding", Singular: "validatingadmissionpolicybinding",
		New:     func() runtime.Object { return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{} },
		NewList: func() runtime.Object { return &admissionregistrationv1.ValidatingAdmissionPolicyBindingList{} },
		Strategy: Strategy{
			Default:              defaulter(defaults.ValidatingAdmissionPolicyBinding),
			Validate:             validator(validation.ValidatingAdmissionPolicyBinding),
			ValidateUpdate:       updateValidator(validation.ValidatingAdmissionPolicyBindingUpdate),
			ValidateStatusUpdate: metaUpdate,
		},
	}
}

func mutatingAdmissionPolicies() *Resource {
	return &Resource{
		GVR: gvr("admissionregistration.k8s.io", "v1", "mutatingadmissionpolicies"), Kind: "MutatingAdmissionPolicy", Singular: "mutatingadmissionpolicy",
		New:     func() runtime.Object { return &admissionregistrationv1.MutatingAdmissionPolicy{} },
		NewList: func() runtime.Object { return &admissionregistrationv1.MutatingAdmissionPolicyList{} },
		Strategy: Strategy{
			Default:              defaulter(defaults.MutatingAdmissionPolicy),
			Validate:             validator(validation.MutatingAdmissionPolicy),
			ValidateUpdate:       updateValidator(validation.MutatingAdmissionPolicyUpdate),
			ValidateStatusUpdate: metaUpdate,
		},
	}
}

func mutatingAdmissionPolicyBindings() *Resource {
	return &Resource{
		GVR: gvr("admissionregistration.k8s.io", "v1", "mutatingadmissionpolicybindings"), Kind: "MutatingAdmissionPolicyBinding", Singular: "mutatingadmissionpolicybinding",
		New:     func() runtime.Object { return &admissionregistrationv1.MutatingAdmissionPolicyBinding{} },
		NewList: func() runtime.Object { return &admissionregistrationv1.MutatingAdmissionPolicyBindingList{} },
		Strategy: Strategy{
			Default:              defaulter(defaults.MutatingAdmissionPolicyBinding),
			Validate:             validator(validation.MutatingAdmissionPolicyBinding),
			ValidateUpdate:       updateValidator(validation.MutatingAdmissionPolicyBindingUpdate),
			ValidateStatusUpdate: metaUpdate,
		},
	}
}
