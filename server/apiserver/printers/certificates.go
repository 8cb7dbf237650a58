package printers

import (
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
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

// PodCertificateRequests: upstream's columns; State is the terminal
// condition (Issued, Denied, Failed) or Pending. Upstream fills the last
// column only for -o wide, though its definition is not a wide one; kelp
// emits every column (see table.go), so it is always filled.
func init() {
	doc := certificatesv1.PodCertificateRequestSpec{}.SwaggerDoc()
	cells([]metav1.TableColumnDefinition{
		nameColumn(),
		column("PodName", "string", doc["podName"]),
		column("ServiceAccountName", "string", doc["serviceAccountName"]),
		column("NodeName", "string", doc["nodeName"]),
		column("SignerName", "string", doc["signerName"]),
		column("State", "string", "Is the request Pending, Issued, Denied, or Failed?"),
		column("UnverifiedUserAnnotations", "string", doc["unverifiedUserAnnotations"]),
	}, func(r *certificatesv1.PodCertificateRequest, _ time.Time) []interface{} {
		state := "Pending"
		for _, c := range r.Status.Conditions {
			switch c.Type {
			case certificatesv1.PodCertificateRequestConditionTypeIssued, certificatesv1.PodCertificateRequestConditionTypeDenied, certificatesv1.PodCertificateRequestConditionTypeFailed:
				state = c.Type
			}
		}
		return []interface{}{r.Name, r.Spec.PodName, r.Spec.ServiceAccountName, string(r.Spec.NodeName), r.Spec.SignerName, state,
			labels.FormatLabels(r.Spec.UnverifiedUserAnnotations)}
	})
}
