package webhook

import (
	webhookutil "k8s.io/apiserver/pkg/util/webhook"

	"github.com/kelp-project/kelp/server/apiserver/admission"
)

// NewServiceResolver resolves a webhook's service reference as the
// admission webhooks do (serviceResolver, webhook.go); CRD conversion
// webhooks share it.
func NewServiceResolver(services admission.ObjectGetter) webhookutil.ServiceResolver {
	return serviceResolver{services: services}
}
