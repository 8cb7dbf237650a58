package defaults

import (
	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/utils/ptr"
)

// PodCertificateRequest is upstream's v1 defaulting: a request without
// maxExpirationSeconds asks for 24 hours (a pod's podCertificate source
// without one therefore gets day-long certificates).
func PodCertificateRequest(r *certificatesv1.PodCertificateRequest) {
	if r.Spec.MaxExpirationSeconds == nil {
		r.Spec.MaxExpirationSeconds = ptr.To[int32](86400)
	}
}
