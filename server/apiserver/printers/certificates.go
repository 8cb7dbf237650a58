package printers

import (
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
)

func init() {
	cells([]metav1.TableColumnDefinition{
		nameColumn(),
		ageColumn(),
		column("SignerName", "string", "signerName indicates the requested signer, and is a qualified name."),
		column("Requestor", "string", "request contains an x509 certificate signing request encoded in a \"CERTIFICATE REQUEST\" PEM block."),
		column("RequestedDuration", "string", "expirationSeconds is the requested duration of validity of the issued certificate."),
		column("Condition", "string", "conditions applied to the request. Known conditions are \"Approved\", \"Denied\", and \"Failed\"."),
	}, func(csr *certificatesv1.CertificateSigningRequest, now time.Time) []interface{} {
		requested := "<none>"
		if s := csr.Spec.ExpirationSeconds; s != nil {
			requested = duration.HumanDuration(time.Duration(*s) * time.Second)
		}
		return []interface{}{csr.Name, age(csr.ObjectMeta, now), orNone(csr.Spec.SignerName), csr.Spec.Username, requested, csrCondition(csr)}
	})
}

// csrCondition is upstream's summary: Denied, else Approved, else
// Pending; then ,Failed and ,Issued.
func csrCondition(csr *certificatesv1.CertificateSigningRequest) string {
	var approved, denied, failed bool
	for _, c := range csr.Status.Conditions {
		switch c.Type {
		case certificatesv1.CertificateApproved:
			approved = true
		case certificatesv1.CertificateDenied:
			denied = true
		case certificatesv1.CertificateFailed:
			failed = true
		}
	}
	status := "Pending"
	if denied {
		status = "Denied"
	} else if approved {
		status = "Approved"
	}
	if failed {
		status += ",Failed"
	}
	if len(csr.Status.Certificate) > 0 {
		status += ",Issued"
	}
	return status
}

func init() {
	cells([]metav1.TableColumnDefinition{
		nameColumn(),
		column("SignerName", "string", certificatesv1.ClusterTrustBundleSpec{}.SwaggerDoc()["signerName"]),
	}, func(b *certificatesv1.ClusterTrustBundle, _ time.Time) []interface{} {
		return []interface{}{b.Name, orNone(b.Spec.SignerName)}
	})
}
