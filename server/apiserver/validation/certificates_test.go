package validation

import (
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestSignerName(t *testing.T) {
	for name, want := range map[string]string{
		"example.com/signer":                  "",
		"kubernetes.io/kube-apiserver-client": "",
		"":                                    "Required value",
		"example.com":                         "must be a fully qualified domain and path",
		"a/b/c":                               "must be a fully qualified domain and path",
		"localhost/signer":                    "should be a domain with at least two segments",
		"Example.com/signer":                  "validating label",
		"example.com/UPPER":                   "validating label",
	} {
		errs := validateSignerName(field.NewPath("spec", "signerName"), name)
		if got := errs.ToAggregate(); (want == "") != (got == nil) || (got != nil && !strings.Contains(got.Error(), want)) {
			t.Errorf("%q: %v, want %q", name, got, want)
		}
	}
}

// Approved, Denied and Failed may only be True, Approved and Denied
// exclude each other, and no type repeats; through the main endpoint and
// /status Approved and Denied cannot be added.
func TestCSRConditions(t *testing.T) {
	cond := func(t certificatesv1.RequestConditionType, s corev1.ConditionStatus) certificatesv1.CertificateSigningRequestCondition {
		return certificatesv1.CertificateSigningRequestCondition{Type: t, Status: s}
	}
	csr := func(cs ...certificatesv1.CertificateSigningRequestCondition) *certificatesv1.CertificateSigningRequest {
		return &certificatesv1.CertificateSigningRequest{Status: certificatesv1.CertificateSigningRequestStatus{Conditions: cs}}
	}
	for _, tc := range []struct {
		csr  *certificatesv1.CertificateSigningRequest
		want string
	}{
		{csr(cond(certificatesv1.CertificateApproved, corev1.ConditionTrue), cond("Custom", corev1.ConditionFalse)), ""},
		{csr(cond(certificatesv1.CertificateApproved, corev1.ConditionFalse)), "Unsupported value"},
		{csr(cond(certificatesv1.CertificateApproved, corev1.ConditionTrue), cond(certificatesv1.CertificateDenied, corev1.ConditionTrue)), "mutually exclusive"},
		{csr(cond("Custom", corev1.ConditionTrue), cond("Custom", corev1.ConditionTrue)), "Duplicate value"},
		{csr(cond("", corev1.ConditionTrue)), "Required value"},
	} {
		got := validateCSRConditions(field.NewPath("status", "conditions"), tc.csr, csrOptions{}).ToAggregate()
		if (tc.want == "") != (got == nil) || (got != nil && !strings.Contains(got.Error(), tc.want)) {
			t.Errorf("%v: %v, want %q", tc.csr.Status.Conditions, got, tc.want)
		}
	}
	old, approved := csr(), csr(cond(certificatesv1.CertificateApproved, corev1.ConditionTrue))
	errs := validateCSRUpdate(approved, old, csrOptions{arbitraryCertificate: true}).ToAggregate()
	if errs == nil || !strings.Contains(errs.Error(), `updates may not add a condition of type "Approved"`) {
		t.Errorf("adding Approved outside /approval: %v", errs)
	}
	errs = validateCSRUpdate(old, approved, csrOptions{arbitraryCertificate: true, settingApproval: true}).ToAggregate()
	if errs == nil || !strings.Contains(errs.Error(), `updates may not remove a condition of type "Approved"`) {
		t.Errorf("removing Approved: %v", errs)
	}
}
