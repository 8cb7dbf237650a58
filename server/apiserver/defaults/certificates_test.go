package defaults

import (
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/utils/ptr"
)

// A request without maxExpirationSeconds asks for 24 hours; a set one stays.
func TestPodCertificateRequestDefaults(t *testing.T) {
	r := &certificatesv1.PodCertificateRequest{}
	PodCertificateRequest(r)
	if r.Spec.MaxExpirationSeconds == nil || *r.Spec.MaxExpirationSeconds != 86400 {
		t.Errorf("maxExpirationSeconds = %v, want 86400", r.Spec.MaxExpirationSeconds)
	}
	r.Spec.MaxExpirationSeconds = ptr.To[int32](3600)
	PodCertificateRequest(r)
	if *r.Spec.MaxExpirationSeconds != 3600 {
		t.Errorf("a set maxExpirationSeconds changed to %d", *r.Spec.MaxExpirationSeconds)
	}
}
