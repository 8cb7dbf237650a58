package validation

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// maxTrustBundleSize is upstream's MaxTrustBundleSize: spec.trustBundle
// holds at most 1 MiB of PEM.
const maxTrustBundleSize = 1 << 20

// ClusterTrustBundle is upstream's ValidateClusterTrustBundle: a bundle
// linked to a signer is named `<signerName with / as :>:<name>`, an
// unlinked one has no ":" in its name; the signer name has
// ValidateSignerName's form; the bundle is one or more distinct X.509 CA
// certificates in header-less CERTIFICATE PEM blocks.
func ClusterTrustBundle(b *certificatesv1.ClusterTrustBundle) field.ErrorList {
	return validateClusterTrustBundle(b, true)
}

// ClusterTrustBundleUpdate: the signer name is immutable, and an
// unchanged bundle is not parsed again (upstream's SuppressBundleParsing:
// a newer Go refusing an old certificate must not freeze the object).
func ClusterTrustBundleUpdate(b, old *certificatesv1.ClusterTrustBundle) field.ErrorList {
	errs := validateClusterTrustBundle(b, b.Spec.TrustBundle != old.Spec.TrustBundle)
	errs = append(errs, validateObjectMetaUpdate(&b.ObjectMeta, &old.ObjectMeta)...)
	return append(errs, validateImmutable(b.Spec.SignerName, old.Spec.SignerName, specPath.Child("signerName"))...)
}

func validateClusterTrustBundle(b *certificatesv1.ClusterTrustBundle, parseBundle bool) field.ErrorList {
	errs := validateObjectMeta(&b.ObjectMeta, false, clusterTrustBundleName(b.Spec.SignerName))
	if b.Spec.SignerName != "" {
		errs = append(errs, validateSignerName(specPath.Child("signerName"), b.Spec.SignerName)...)
	}
	if parseBundle {
		errs = append(errs, validateTrustBundle(specPath.Child("trustBundle"), b.Spec.TrustBundle)...)
	}
	return errs
}

// clusterTrustBundleName is upstream's ValidateClusterTrustBundleName: the
// name rule of a bundle for signerName ("" for none). The prefix ties a
// name to one signer, so the ClusterTrustBundleAttest check on the
// signer also guards the name.
func clusterTrustBundleName(signerName string) nameFunc {
	return func(name string, prefix bool) []string {
		if signerName == "" {
			if strings.Contains(name, ":") {
				return []string{`ClusterTrustBundle without signer name must not have ":" in its name`}
			}
			return apimachineryvalidation.NameIsDNSSubdomain(name, prefix)
		}
		required := clusterTrustBundleNamePrefix(signerName)
		if !strings.HasPrefix(name, required) {
			return []string{fmt.Sprintf("ClusterTrustBundle for signerName %s must be named with prefix %s", signerName, required)}
		}
		return apimachineryvalidation.NameIsDNSSubdomain(strings.TrimPrefix(name, required), prefix)
	}
}

// clusterTrustBundleNamePrefix is what every bundle of signerName is
// named with: the signer name, "/" written ":", then ":".
func clusterTrustBundleNamePrefix(signerName string) string {
	return strings.ReplaceAll(signerName, "/", ":") + ":"
}

// clusterTrustBundleNameSigner is the signer a bundle name is linked to
// (everything before its last ":", ":" read back as "/"), or false for a
// name without one.
func clusterTrustBundleNameSigner(name string) (string, bool) {
	i := strings.LastIndex(name, ":")
	if i < 0 {
		return "", false
	}
	return strings.ReplaceAll(name[:i], ":", "/"), true
}

// validateTrustBundle is upstream's: every PEM block a header-less
// CERTIFICATE holding an X.509 CA certificate with valid basic
// constraints, at least one, none twice. Errors never echo the bundle.
func validateTrustBundle(path *field.Path, in string) field.ErrorList {
	if len(in) > maxTrustBundleSize {
		return field.ErrorList{field.TooLong(path, "", maxTrustBundleSize)}
	}
	const omitted = "<value omitted>"
	var errs field.ErrorList
	seen := map[string][]int{}
	var order []string
	rest := []byte(in)
	for i := 0; ; i++ {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			errs = append(errs, field.Invalid(path, omitted, fmt.Sprintf("entry %d has bad block type: %v", i, b.Type)))
			continue
		}
		if len(b.Headers) != 0 {
			errs = append(errs, field.Invalid(path, omitted, fmt.Sprintf("entry %d has PEM block headers", i)))
			continue
		}
		cert, err := x509.ParseCertificate(b.Bytes)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(path, omitted, fmt.Sprintf("entry %d does not parse as X.509", i)))
			continue
		case !cert.IsCA:
			errs = append(errs, field.Invalid(path, omitted, fmt.Sprintf("entry %d does not have the CA bit set", i)))
			continue
		case !cert.BasicConstraintsValid:
			errs = append(errs, field.Invalid(path, omitted, fmt.Sprintf("entry %d has invalid basic constraints", i)))
			continue
		}
		if _, ok := seen[string(b.Bytes)]; !ok {
			order = append(order, string(b.Bytes))
		}
		seen[string(b.Bytes)] = append(seen[string(b.Bytes)], i)
	}
	// A malformed block says enough; duplicates and emptiness would only
	// repeat it.
	if len(errs) != 0 {
		return errs
	}
	if len(seen) == 0 {
		return field.ErrorList{field.Invalid(path, omitted, "at least one trust anchor must be provided")}
	}
	for _, der := range order {
		if idx := seen[der]; len(idx) > 1 {
			errs = append(errs, field.Invalid(path, omitted, fmt.Sprintf("duplicate trust anchor (indices %v)", idx)))
		}
	}
	return errs
}

// validateClusterTrustBundleProjection is upstream's rule for a projected
// clusterTrustBundle source: one bundle by a name that obeys the bundle
// name rules (of the signer its name is linked to, if any) and no label
// selector, or the bundles of a valid signer name picked by a valid label
// selector (nil selects none, empty all).
func validateClusterTrustBundleProjection(b *corev1.ClusterTrustBundleProjection, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case b.Name != nil && b.SignerName != nil:
		errs = append(errs, field.Invalid(fldPath, b, "only one of name and signerName may be used"))
	case b.Name != nil:
		name := *b.Name
		if name == "" {
			errs = append(errs, field.Required(fldPath.Child("name"), "must be a valid object name"))
		}
		signer, _ := clusterTrustBundleNameSigner(name)
		for _, msg := range clusterTrustBundleName(signer)(name, false) {
			errs = append(errs, field.Invalid(fldPath.Child("name"), name, "not a valid clustertrustbundlename: "+msg))
		}
		if b.LabelSelector != nil {
			errs = append(errs, field.Invalid(fldPath.Child("labelSelector"), b.LabelSelector, "labelSelector must be unset if name is specified"))
		}
	case b.SignerName != nil:
		if *b.SignerName == "" {
			errs = append(errs, field.Required(fldPath.Child("signerName"), "must be a valid signer name"))
		}
		errs = append(errs, validateSignerName(fldPath.Child("signerName"), *b.SignerName)...)
		errs = append(errs, validateLabelSelector(b.LabelSelector, fldPath.Child("labelSelector"))...)
	default:
		errs = append(errs, field.Required(fldPath, "either name or signerName must be specified"))
	}
	return errs
}
