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
