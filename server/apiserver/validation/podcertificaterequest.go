package validation

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/mail"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Upstream's bounds of a PodCertificateRequest (pkg/apis/certificates).
const (
	// MinMaxExpirationSeconds is the least maxExpirationSeconds a request
	// (and a pod's podCertificate projection) may ask for: one hour.
	MinMaxExpirationSeconds = 60 * 60
	// MaxMaxExpirationSeconds: 91 days, for any signer but Kubernetes'.
	MaxMaxExpirationSeconds = 91 * 24 * 60 * 60
	// KubernetesMaxMaxExpirationSeconds: 24 hours, for the kubernetes.io
	// signers.
	KubernetesMaxMaxExpirationSeconds = 24 * 60 * 60

	maxStubPKCS10RequestSize = 10 * 1024
	maxCertificateChainSize  = 100 * 1024
)

var (
	pcrStubPath         = specPath.Child("stubPKCS10Request")
	pcrChainPath        = statusPath.Child("certificateChain")
	pcrNotBeforePath    = statusPath.Child("notBefore")
	pcrNotAfterPath     = statusPath.Child("notAfter")
	pcrBeginRefreshPath = statusPath.Child("beginRefreshAt")
)

// pcrClock is the API server's "now" against which an issued
// certificate's notBefore is checked; tests move it.
var pcrClock = time.Now

// isKubernetesSignerName is upstream's IsKubernetesSignerName: a signer of
// kubernetes.io or one of its subdomains.
func isKubernetesSignerName(signerName string) bool {
	host, _, _ := strings.Cut(signerName, "/")
	return host == "kubernetes.io" || strings.HasSuffix(host, ".kubernetes.io")
}

// validateUserAnnotations is upstream's ValidateUserAnnotations: every key
// (lowercased) domain-prefixed, and all of them within the annotations'
// size limit.
func validateUserAnnotations(annotations map[string]string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for k := range annotations {
		errs = append(errs, validation.IsDomainPrefixedKey(fldPath, strings.ToLower(k))...)
	}
	if err := apimachineryvalidation.ValidateAnnotationsSize(annotations); err != nil {
		errs = append(errs, field.TooLong(fldPath, "", apimachineryvalidation.TotalAnnotationSizeLimitB))
	}
	return errs
}

// PodCertificateRequest is upstream's ValidatePodCertificateRequestCreate
// for certificates.k8s.io/v1: the signer name's form, the pod, service
// account and node each named (DNS subdomains) with a UID of at most 128
// bytes, maxExpirationSeconds within [1h, 24h] for kubernetes.io signers
// and [1h, 91d] for others, and the stub PKCS#10 request (the v1 proof of
// possession: a CSR signed by the private key the certificate is for)
// parsing, of an accepted key (Ed25519, ECDSA P-256/384/521, RSA 3072 or
// 4096) and with a valid signature. Its contents are not looked at, as
// upstream: signers judge them.
func PodCertificateRequest(r *certificatesv1.PodCertificateRequest) field.ErrorList {
	errs := validateObjectMeta(&r.ObjectMeta, true, nameIsDNSSubdomain)
	s := &r.Spec
	errs = append(errs, validateSignerName(specPath.Child("signerName"), s.SignerName)...)
	if s.UnverifiedUserAnnotations != nil {
		errs = append(errs, validateUserAnnotations(s.UnverifiedUserAnnotations, specPath.Child("unverifiedUserAnnotations"))...)
	}
	named := func(name, uid string, namePath, uidPath *field.Path) {
		errs = append(errs, invalidFor(name, apimachineryvalidation.NameIsDNSSubdomain(name, false), namePath)...)
		if len(uid) == 0 {
			errs = append(errs, field.Invalid(uidPath, uid, "must not be empty"))
		}
		if len(uid) > 128 {
			errs = append(errs, field.TooLong(uidPath, uid, 128))
		}
	}
	named(s.PodName, string(s.PodUID), specPath.Child("podName"), specPath.Child("podUID"))
	named(s.ServiceAccountName, string(s.ServiceAccountUID), specPath.Child("serviceAccountName"), specPath.Child("serviceAccountUID"))
	named(string(s.NodeName), string(s.NodeUID), specPath.Child("nodeName"), specPath.Child("nodeUID"))

	if s.MaxExpirationSeconds == nil {
		return append(errs, field.Required(specPath.Child("maxExpirationSeconds"), "must be set"))
	}
	most := int32(MaxMaxExpirationSeconds)
	if isKubernetesSignerName(s.SignerName) {
		most = KubernetesMaxMaxExpirationSeconds
	}
	if m := *s.MaxExpirationSeconds; m < MinMaxExpirationSeconds || m > most {
		errs = append(errs, field.Invalid(specPath.Child("maxExpirationSeconds"), s.MaxExpirationSeconds,
			fmt.Sprintf("must be in the range [%d, %d]", MinMaxExpirationSeconds, most)))
	}
	if len(s.StubPKCS10Request) == 0 {
		// v1 has no pkixPublicKey and proofOfPossession (v1beta1's): the
		// stub request is the only form left, and upstream's message
		// names both.
		return append(errs, field.Invalid(specPath, field.OmitValueType{}, "exactly one of (stubPKCS10Request) or (pkixPublicKey, proofOfPossession) must be set"))
	}
	return append(errs, validateStubPKCS10Request(s.StubPKCS10Request)...)
}

// validateStubPKCS10Request is upstream's: the request's key is checked,
// and its self-signature proves the requester holds the private key.
func validateStubPKCS10Request(der []byte) field.ErrorList {
	if len(der) > maxStubPKCS10RequestSize {
		return field.ErrorList{field.TooLong(pcrStubPath, der, maxStubPKCS10RequestSize)}
	}
	req, err := x509.ParseCertificateRequest(der)
	if err != nil {
		return field.ErrorList{field.Invalid(pcrStubPath, field.OmitValueType{}, "must be a valid PKCS#10 CSR")}
	}
	switch pub := req.PublicKey.(type) {
	case ed25519.PublicKey:
	case *ecdsa.PublicKey:
		if pub.Curve != elliptic.P256() && pub.Curve != elliptic.P384() && pub.Curve != elliptic.P521() {
			return field.ErrorList{field.Invalid(pcrStubPath, "curve "+pub.Curve.Params().Name, "elliptic public keys must use curve P256, P384, or P521")}
		}
	case *rsa.PublicKey:
		if bits := pub.Size() * 8; bits != 3072 && bits != 4096 {
			return field.ErrorList{field.Invalid(pcrStubPath, fmt.Sprintf("%d-bit modulus", bits), "RSA keys must have modulus size 3072 or 4096")}
		}
	default:
		return field.ErrorList{field.Invalid(pcrStubPath, field.OmitValueType{}, "unknown public key type; supported types are Ed25519, ECDSA, and RSA")}
	}
	if err := req.CheckSignature(); err != nil {
		return field.ErrorList{field.Invalid(pcrStubPath, field.OmitValueType{}, "invalid signature")}
	}
	return nil
}

// PodCertificateRequestUpdate is upstream's: through the main endpoint
// only metadata changes; the whole spec is immutable.
func PodCertificateRequestUpdate(r, old *certificatesv1.PodCertificateRequest) field.ErrorList {
	errs := validateObjectMetaUpdate(&r.ObjectMeta, &old.ObjectMeta)
	return append(errs, validateImmutable(r.Spec, old.Spec, specPath)...)
}

// PodCertificateRequestStatusUpdate is upstream's
// ValidatePodCertificateRequestStatusUpdate (the strategy has put the old
// spec back): at most one of the conditions Issued, Denied and Failed,
// each True, and no other type; once one is set the status never changes
// again; Denied or Failed carry nothing but conditions; Issued carries a
// PEM chain whose leaf is for the stub request's key, notBefore and
// notAfter equal to the leaf's (notBefore within 5 minutes of now), a
// lifetime of at least an hour and at most maxExpirationSeconds, and
// beginRefreshAt at least 10 minutes inside both ends. Short of a
// terminal condition the status may not change at all.
func PodCertificateRequestStatusUpdate(r, old *certificatesv1.PodCertificateRequest) field.ErrorList {
	errs := validateObjectMetaUpdate(&r.ObjectMeta, &old.ObjectMeta)
	if len(errs) > 0 {
		return errs
	}
	terminal := []string{certificatesv1.PodCertificateRequestConditionTypeIssued, certificatesv1.PodCertificateRequestConditionTypeDenied, certificatesv1.PodCertificateRequestConditionTypeFailed}
	known := 0
	for i, c := range r.Status.Conditions {
		p := statusPath.Child("conditions").Index(i)
		switch c.Type {
		case terminal[0], terminal[1], terminal[2]:
			known++
			if known > 1 {
				errs = append(errs, field.Invalid(p.Child("type"), c.Type, `There may be at most one condition with type "Issued", "Denied", or "Failed"`))
			}
			if c.Status != metav1.ConditionTrue {
				errs = append(errs, field.NotSupported(p.Child("status"), c.Status, []metav1.ConditionStatus{metav1.ConditionTrue}))
			}
		default:
			errs = append(errs, field.NotSupported(p.Child("type"), c.Type, terminal))
		}
	}
	errs = append(errs, metav1validation.ValidateConditions(r.Status.Conditions, statusPath.Child("conditions"))...)
	if len(errs) > 0 {
		return errs
	}
	if PodCertificateRequestTerminal(old) != "" {
		return sameStatus(r.Status, old.Status, "immutable after PodCertificateRequest is issued, denied, or failed")
	}
	switch PodCertificateRequestTerminal(r) {
	case certificatesv1.PodCertificateRequestConditionTypeDenied, certificatesv1.PodCertificateRequestConditionTypeFailed:
		return sameStatus(r.Status, certificatesv1.PodCertificateRequestStatus{Conditions: r.Status.Conditions},
			"non-condition status fields must be empty when denying or failing the PodCertificateRequest")
	case certificatesv1.PodCertificateRequestConditionTypeIssued:
		return validateIssued(r, old)
	}
	return sameStatus(r.Status, old.Status, `status is immutable unless transitioning to "Issued", "Denied", or "Failed"`)
}

// PodCertificateRequestTerminal names the request's terminal condition
// that is True (Issued, Denied or Failed), or "" while it is pending.
func PodCertificateRequestTerminal(r *certificatesv1.PodCertificateRequest) string {
	for _, c := range r.Status.Conditions {
		switch c.Type {
		case certificatesv1.PodCertificateRequestConditionTypeIssued, certificatesv1.PodCertificateRequestConditionTypeDenied, certificatesv1.PodCertificateRequestConditionTypeFailed:
			if c.Status == metav1.ConditionTrue {
				return c.Type
			}
		}
	}
	return ""
}

func sameStatus(a, b certificatesv1.PodCertificateRequestStatus, detail string) field.ErrorList {
	if apiequality.Semantic.DeepEqual(a, b) {
		return nil
	}
	return field.ErrorList{field.Invalid(statusPath, field.OmitValueType{}, detail)}
}

// validateIssued checks an issuing status update, in upstream's order
// (each failure ends the check).
func validateIssued(r, old *certificatesv1.PodCertificateRequest) field.ErrorList {
	st := &r.Status
	chain := st.CertificateChain
	if len(chain) > maxCertificateChainSize {
		return field.ErrorList{field.TooLong(pcrChainPath, chain, maxCertificateChainSize)}
	}
	leafBlock, rest := pem.Decode([]byte(chain))
	if leafBlock == nil {
		return field.ErrorList{field.Invalid(pcrChainPath, chain, "issued certificate chain must contain at least one certificate")}
	}
	if leafBlock.Type != "CERTIFICATE" {
		return field.ErrorList{field.Invalid(pcrChainPath, chain, "issued certificate chain must consist entirely of CERTIFICATE PEM blocks")}
	}
	leaf, err := x509.ParseCertificate(leafBlock.Bytes)
	if err != nil {
		return field.ErrorList{field.Invalid(pcrChainPath, chain, "leaf certificate does not parse as valid X.509")}
	}
	var errs field.ErrorList
	for _, n := range leaf.DNSNames {
		if n == "" {
			errs = append(errs, field.Invalid(pcrChainPath, n, "leaf certificate should not contain empty DNSName"))
		}
		if strings.Contains(n, "..") {
			errs = append(errs, field.Invalid(pcrChainPath, n, "leaf certificate's DNSName should not contain '..'"))
		}
		if strings.HasPrefix(n, ".") || strings.HasSuffix(n, ".") {
			errs = append(errs, field.Invalid(pcrChainPath, n, "leaf certificate's DNSName should not start or end with '.'"))
		}
	}
	for _, e := range leaf.EmailAddresses {
		if _, err := mail.ParseAddress(e); err != nil {
			errs = append(errs, field.Invalid(pcrChainPath, e, "leaf certificate should not contain invalid EmailAddress"))
		}
	}
	stub, err := x509.ParseCertificateRequest(old.Spec.StubPKCS10Request)
	if err != nil {
		return append(errs, field.Invalid(pcrStubPath, field.OmitValueType{}, "must be a valid PKCS#10 CSR"))
	}
	if want, ok := stub.PublicKey.(interface{ Equal(crypto.PublicKey) bool }); !ok || !want.Equal(leaf.PublicKey) {
		return append(errs, field.Invalid(pcrChainPath, chain, "leaf certificate was not issued to the requested public key"))
	}
	if st.NotBefore == nil {
		errs = append(errs, field.Required(pcrNotBeforePath, "must be present and consistent with the issued certificate"))
	}
	if st.NotAfter == nil {
		errs = append(errs, field.Required(pcrNotAfterPath, "must be present and consistent with the issued certificate"))
	}
	if st.BeginRefreshAt == nil {
		errs = append(errs, field.Required(pcrBeginRefreshPath, "must be present and in the range [notbefore+10min, notafter-10min]"))
	}
	if len(errs) > 0 {
		return errs
	}
	if !st.NotBefore.Time.Equal(leaf.NotBefore) {
		return field.ErrorList{field.Invalid(pcrNotBeforePath, st.NotBefore.Time, "must be set to the NotBefore time encoded in the leaf certificate")}
	}
	if d := st.NotBefore.Time.Sub(pcrClock()); d > 5*time.Minute || d < -5*time.Minute {
		return field.ErrorList{field.Invalid(pcrNotBeforePath, st.NotBefore.Time, "must be set to within 5 minutes of kube-apiserver's current time")}
	}
	if !st.NotAfter.Time.Equal(leaf.NotAfter) {
		return field.ErrorList{field.Invalid(pcrNotAfterPath, st.NotAfter.Time, "must be set to the NotAfter time encoded in the leaf certificate")}
	}
	lifetime := leaf.NotAfter.Sub(leaf.NotBefore)
	if lifetime < time.Hour {
		return field.ErrorList{field.Invalid(pcrChainPath, lifetime, "leaf certificate lifetime must be >= 1 hour")}
	}
	if r.Spec.MaxExpirationSeconds != nil && lifetime > time.Duration(*r.Spec.MaxExpirationSeconds)*time.Second {
		return field.ErrorList{field.Invalid(pcrChainPath, lifetime, fmt.Sprintf("leaf certificate lifetime must be <= spec.maxExpirationSeconds (%v)", *r.Spec.MaxExpirationSeconds))}
	}
	if st.BeginRefreshAt.Time.Before(st.NotBefore.Time.Add(10 * time.Minute)) {
		return field.ErrorList{field.Invalid(pcrBeginRefreshPath, st.BeginRefreshAt.Time, "must be at least 10 minutes after status.notBefore")}
	}
	if st.BeginRefreshAt.Time.After(st.NotAfter.Time.Add(-10 * time.Minute)) {
		return field.ErrorList{field.Invalid(pcrBeginRefreshPath, st.BeginRefreshAt.Time, "must be at least 10 minutes before status.notAfter")}
	}
	// The rest of the chain cannot be verified as a partial chain; each is
	// at least a certificate.
	for {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return nil
		}
		if b.Type != "CERTIFICATE" {
			return field.ErrorList{field.Invalid(pcrChainPath, chain, "issued certificate chain must consist entirely of CERTFICATE PEM blocks")}
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			return field.ErrorList{field.Invalid(pcrChainPath, chain, "intermediate certificate does not parse as valid X.509")}
		}
	}
}
