package validation

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// csrOptions are upstream's certificateValidationOptions: what a write
// path may do (approval conditions through /approval, the certificate
// through /status), and what an old object's bad data lets an update keep.
type csrOptions struct {
	settingApproval, settingCertificate                                    bool
	bothApprovedAndDenied, duplicateConditions, emptyConditionType         bool
	arbitraryCertificate, unknownUsages, duplicateUsages, legacySignerName bool
}

// csrOptionsFor is upstream's getValidationOptions; old is nil on create.
func csrOptionsFor(csr, old *certificatesv1.CertificateSigningRequest) csrOptions {
	if old == nil {
		return csrOptions{}
	}
	approved, denied := len(csrConditions(old, certificatesv1.CertificateApproved)) > 0, len(csrConditions(old, certificatesv1.CertificateDenied)) > 0
	seen, dup, empty := map[certificatesv1.RequestConditionType]bool{}, false, false
	for _, c := range old.Status.Conditions {
		dup = dup || seen[c.Type]
		seen[c.Type] = true
		empty = empty || c.Type == ""
	}
	unknown, dupUsage := false, false
	usages := map[certificatesv1.KeyUsage]bool{}
	for _, u := range old.Spec.Usages {
		unknown = unknown || !validUsages[u]
		dupUsage = dupUsage || usages[u]
		usages[u] = true
	}
	return csrOptions{
		bothApprovedAndDenied: approved && denied,
		duplicateConditions:   dup,
		emptyConditionType:    empty,
		arbitraryCertificate:  bytes.Equal(csr.Status.Certificate, old.Status.Certificate) || validateCertificatePEM(old.Status.Certificate) != nil,
		unknownUsages:         unknown,
		duplicateUsages:       dupUsage,
		legacySignerName:      old.Spec.SignerName == legacyUnknownSignerName,
	}
}

const legacyUnknownSignerName = "kubernetes.io/legacy-unknown"

var validUsages = map[certificatesv1.KeyUsage]bool{}

func init() {
	for _, u := range []certificatesv1.KeyUsage{certificatesv1.UsageSigning, certificatesv1.UsageDigitalSignature, certificatesv1.UsageContentCommitment,
		certificatesv1.UsageKeyEncipherment, certificatesv1.UsageKeyAgreement, certificatesv1.UsageDataEncipherment, certificatesv1.UsageCertSign,
		certificatesv1.UsageCRLSign, certificatesv1.UsageEncipherOnly, certificatesv1.UsageDecipherOnly, certificatesv1.UsageAny,
		certificatesv1.UsageServerAuth, certificatesv1.UsageClientAuth, certificatesv1.UsageCodeSigning, certificatesv1.UsageEmailProtection,
		certificatesv1.UsageSMIME, certificatesv1.UsageIPsecEndSystem, certificatesv1.UsageIPsecTunnel, certificatesv1.UsageIPsecUser,
		certificatesv1.UsageTimestamping, certificatesv1.UsageOCSPSigning, certificatesv1.UsageMicrosoftSGC, certificatesv1.UsageNetscapeSGC} {
		validUsages[u] = true
	}
}

// CertificateSigningRequest is upstream's
// ValidateCertificateSigningRequestCreate: any name, a PEM PKCS#10
// request with a valid signature, known usages without repeats, a
// signerName of the form example.com/name, expirationSeconds ≥ 600.
func CertificateSigningRequest(csr *certificatesv1.CertificateSigningRequest) field.ErrorList {
	return validateCSR(csr, csrOptionsFor(csr, nil))
}

func validateCSR(csr *certificatesv1.CertificateSigningRequest, opts csrOptions) field.ErrorList {
	allErrs := validateObjectMeta(&csr.ObjectMeta, false, func(string, bool) []string { return nil })
	spec := field.NewPath("spec")
	if err := checkCSRRequest(csr.Spec.Request); err != nil {
		allErrs = append(allErrs, field.Invalid(spec.Child("request"), csr.Spec.Request, err.Error()))
	}
	if len(csr.Spec.Usages) == 0 {
		allErrs = append(allErrs, field.Required(spec.Child("usages"), ""))
	}
	seen := map[certificatesv1.KeyUsage]bool{}
	for i, u := range csr.Spec.Usages {
		if !opts.unknownUsages && !validUsages[u] {
			var known []string
			for v := range validUsages {
				known = append(known, string(v))
			}
			sort.Strings(known)
			allErrs = append(allErrs, field.NotSupported(spec.Child("usages").Index(i), u, known))
		}
		if !opts.duplicateUsages && seen[u] {
			allErrs = append(allErrs, field.Duplicate(spec.Child("usages").Index(i), u))
		}
		seen[u] = true
	}
	if !opts.legacySignerName && csr.Spec.SignerName == legacyUnknownSignerName {
		allErrs = append(allErrs, field.Invalid(spec.Child("signerName"), csr.Spec.SignerName, "the legacy signerName is not allowed via this API version"))
	} else {
		allErrs = append(allErrs, validateSignerName(spec.Child("signerName"), csr.Spec.SignerName)...)
	}
	if s := csr.Spec.ExpirationSeconds; s != nil && *s < 600 {
		allErrs = append(allErrs, field.Invalid(spec.Child("expirationSeconds"), *s, "may not specify a duration less than 600 seconds (10 minutes)"))
	}
	allErrs = append(allErrs, validateCSRConditions(field.NewPath("status", "conditions"), csr, opts)...)
	if !opts.arbitraryCertificate {
		if err := validateCertificatePEM(csr.Status.Certificate); err != nil {
			allErrs = append(allErrs, field.Invalid(field.NewPath("status", "certificate"), "<certificate data>", err.Error()))
		}
	}
	return allErrs
}

func checkCSRRequest(pemBytes []byte) error {
	block, _ := pem.Decode(pemBytes)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return errors.New("PEM block type must be CERTIFICATE REQUEST")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return err
	}
	return req.CheckSignature()
}

// validateCertificatePEM: empty, or only CERTIFICATE blocks without
// headers, each holding a certificate.
func validateCertificatePEM(data []byte) error {
	if len(data) == 0 {
		return nil
	}
	blocks := 0
	for {
		block, rest := pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return fmt.Errorf("only CERTIFICATE PEM blocks are allowed, found %q", block.Type)
		}
		if len(block.Headers) != 0 {
			return fmt.Errorf("no PEM block headers are permitted")
		}
		blocks++
		certs, err := x509.ParseCertificates(block.Bytes)
		if err != nil {
			return err
		}
		if len(certs) == 0 {
			return fmt.Errorf("found CERTIFICATE PEM block containing 0 certificates")
		}
		data = rest
	}
	if blocks == 0 {
		return fmt.Errorf("must contain at least one CERTIFICATE PEM block")
	}
	return nil
}

func validateCSRConditions(path *field.Path, csr *certificatesv1.CertificateSigningRequest, opts csrOptions) field.ErrorList {
	var allErrs field.ErrorList
	seen := map[certificatesv1.RequestConditionType]bool{}
	approved, denied := false, false
	for i, c := range csr.Status.Conditions {
		if !opts.emptyConditionType && c.Type == "" {
			allErrs = append(allErrs, field.Required(path.Index(i).Child("type"), ""))
		}
		allowed := []string{string(corev1.ConditionFalse), string(corev1.ConditionTrue), string(corev1.ConditionUnknown)}
		switch c.Type {
		case certificatesv1.CertificateApproved, certificatesv1.CertificateDenied, certificatesv1.CertificateFailed:
			allowed = []string{string(corev1.ConditionTrue)}
		}
		switch {
		case c.Status == "":
			allErrs = append(allErrs, field.Required(path.Index(i).Child("status"), ""))
		case !slices.Contains(allowed, string(c.Status)):
			allErrs = append(allErrs, field.NotSupported(path.Index(i).Child("status"), c.Status, allowed))
		}
		if !opts.bothApprovedAndDenied {
			switch c.Type {
			case certificatesv1.CertificateApproved:
				approved = true
				if denied {
					allErrs = append(allErrs, field.Invalid(path, c.Type, "Approved and Denied conditions are mutually exclusive"))
				}
			case certificatesv1.CertificateDenied:
				denied = true
				if approved {
					allErrs = append(allErrs, field.Invalid(path, c.Type, "Approved and Denied conditions are mutually exclusive"))
				}
			}
		}
		if !opts.duplicateConditions && seen[c.Type] {
			allErrs = append(allErrs, field.Duplicate(path.Index(i).Child("type"), c.Type))
		}
		seen[c.Type] = true
	}
	return allErrs
}

// validateSignerName is upstream's ValidateSignerName: a DNS domain of at
// least two labels, a slash, and a path of DNS subdomains.
func validateSignerName(path *field.Path, name string) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	segments := strings.Split(name, "/")
	if len(segments) != 2 {
		return field.ErrorList{field.Invalid(path, name, "must be a fully qualified domain and path of the form 'example.com/signer-name'")}
	}
	var el field.ErrorList
	if len(segments[0]) > validation.DNS1123SubdomainMaxLength {
		el = append(el, field.TooLong(path, "", validation.DNS1123SubdomainMaxLength))
	}
	domain := strings.Split(segments[0], ".")
	for _, lbl := range domain {
		if errs := validation.IsDNS1123Label(lbl); len(errs) > 0 {
			for _, err := range errs {
				el = append(el, field.Invalid(path, segments[0], fmt.Sprintf("validating label %q: %s", lbl, err)))
			}
			break
		}
	}
	if len(domain) < 2 {
		el = append(el, field.Invalid(path, segments[0], "should be a domain with at least two segments separated by dots"))
	}
	for _, lbl := range strings.Split(segments[1], ".") {
		if errs := validation.IsDNS1123Subdomain(lbl); len(errs) > 0 {
			for _, err := range errs {
				el = append(el, field.Invalid(path, segments[1], fmt.Sprintf("validating label %q: %s", lbl, err)))
			}
			break
		}
	}
	if max := validation.DNS1123SubdomainMaxLength + validation.DNS1123LabelMaxLength + 1; len(segments[1]) > max {
		el = append(el, field.TooLong(path, "", max))
	}
	return el
}

// CertificateSigningRequestUpdate through the main endpoint (which keeps
// spec and status), CertificateSigningRequestStatusUpdate through /status
// (which may set the certificate), CertificateSigningRequestApprovalUpdate
// through /approval (which may change Approved and Denied).
func CertificateSigningRequestUpdate(csr, old *certificatesv1.CertificateSigningRequest) field.ErrorList {
	return validateCSRUpdate(csr, old, csrOptionsFor(csr, old))
}

func CertificateSigningRequestStatusUpdate(csr, old *certificatesv1.CertificateSigningRequest) field.ErrorList {
	opts := csrOptionsFor(csr, old)
	opts.settingCertificate = true
	return validateCSRUpdate(csr, old, opts)
}

func CertificateSigningRequestApprovalUpdate(csr, old *certificatesv1.CertificateSigningRequest) field.ErrorList {
	opts := csrOptionsFor(csr, old)
	opts.settingApproval = true
	return validateCSRUpdate(csr, old, opts)
}

func validateCSRUpdate(csr, old *certificatesv1.CertificateSigningRequest, opts csrOptions) field.ErrorList {
	errs := validateCSR(csr, opts)
	conditions := field.NewPath("status", "conditions")
	for _, t := range []certificatesv1.RequestConditionType{certificatesv1.CertificateApproved, certificatesv1.CertificateDenied, certificatesv1.CertificateFailed} {
		if len(csrConditions(csr, t)) < len(csrConditions(old, t)) {
			errs = append(errs, field.Forbidden(conditions, fmt.Sprintf("updates may not remove a condition of type %q", t)))
		}
	}
	if !opts.settingApproval {
		for _, t := range []certificatesv1.RequestConditionType{certificatesv1.CertificateApproved, certificatesv1.CertificateDenied} {
			was, is := csrConditions(old, t), csrConditions(csr, t)
			switch {
			case len(is) < len(was):
			case len(is) > len(was):
				errs = append(errs, field.Forbidden(conditions, fmt.Sprintf("updates may not add a condition of type %q", t)))
			case !apiequality.Semantic.DeepEqual(was, is):
				errs = append(errs, field.Forbidden(conditions, fmt.Sprintf("updates may not modify a condition of type %q", t)))
			}
		}
	}
	if !bytes.Equal(csr.Status.Certificate, old.Status.Certificate) {
		if !opts.settingCertificate {
			errs = append(errs, field.Forbidden(field.NewPath("status", "certificate"), "updates may not set certificate content"))
		} else if len(old.Status.Certificate) > 0 {
			errs = append(errs, field.Forbidden(field.NewPath("status", "certificate"), "updates may not modify existing certificate content"))
		}
	}
	return append(errs, validateObjectMetaUpdate(&csr.ObjectMeta, &old.ObjectMeta)...)
}

func csrConditions(csr *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType) []certificatesv1.CertificateSigningRequestCondition {
	var out []certificatesv1.CertificateSigningRequestCondition
	for _, c := range csr.Status.Conditions {
		if c.Type == t {
			out = append(out, c)
		}
	}
	return out
}
