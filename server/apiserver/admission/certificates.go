package admission

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kelp-project/kelp/server/apiserver/auth"
)

var (
	csrResource                = certificatesv1.SchemeGroupVersion.WithResource("certificatesigningrequests")
	clusterTrustBundleResource = certificatesv1.SchemeGroupVersion.WithResource("clustertrustbundles")
)

// certificateSigners is upstream's CertificateApproval and
// CertificateSigning plugins: approving or denying a request (through
// /approval) needs the verb approve, and issuing it or setting its
// conditions (through /status) the verb sign, on the request's signer:
// certificates.k8s.io signers named the signerName, or <domain>/*. The
// signer is the old object's, so a write cannot name another.
type certificateSigners struct{ authz auth.Authorizer }

func (c certificateSigners) Validate(_ context.Context, a *Attributes) error {
	if a.Operation != "UPDATE" || a.Resource.GroupResource() != csrResource.GroupResource() {
		return nil
	}
	old, ok := a.OldObject.(*certificatesv1.CertificateSigningRequest)
	if !ok {
		return nil
	}
	var verb string
	switch a.Subresource {
	case "approval":
		verb = "approve"
	case "status":
		csr, ok := a.Object.(*certificatesv1.CertificateSigningRequest)
		if !ok || (bytes.Equal(old.Status.Certificate, csr.Status.Certificate) &&
			apiequality.Semantic.DeepEqual(old.Status.Conditions, csr.Status.Conditions)) {
			return nil
		}
		verb = "sign"
	default:
		return nil
	}
	if signerAllows(c.authz, a.User, verb, old.Spec.SignerName) {
		return nil
	}
	return apierrors.NewForbidden(a.Resource.GroupResource(), a.Name,
		fmt.Errorf("user not permitted to %s requests with signerName %q", verb, old.Spec.SignerName))
}

// clusterTrustBundleAttest is upstream's ClusterTrustBundleAttest plugin:
// creating or updating a ClusterTrustBundle linked to a signer needs the
// verb attest on that signer, so only who speaks for a signer publishes
// its trust anchors (and, by the name prefix validation requires, names
// in its space). The new object's signer is checked: validation refuses
// a change of signerName. An update that only moves what the garbage
// collector and deletion change (owner references, finalizers) is not
// checked, as upstream, so the collector and storage migration need no
// attest permission.
type clusterTrustBundleAttest struct{ authz auth.Authorizer }

func (c clusterTrustBundleAttest) Validate(_ context.Context, a *Attributes) error {
	if (a.Operation != "CREATE" && a.Operation != "UPDATE") || a.Resource.GroupResource() != clusterTrustBundleResource.GroupResource() {
		return nil
	}
	b, ok := a.Object.(*certificatesv1.ClusterTrustBundle)
	if !ok {
		return apierrors.NewForbidden(a.Resource.GroupResource(), a.Name, fmt.Errorf("expected type ClusterTrustBundle, got: %T", a.Object))
	}
	if b.Spec.SignerName == "" {
		return nil
	}
	if a.Operation == "UPDATE" && a.OldObject != nil && auth.OnlyGCFields(a.Object, a.OldObject) {
		return nil
	}
	if signerAllows(c.authz, a.User, "attest", b.Spec.SignerName) {
		return nil
	}
	return apierrors.NewForbidden(a.Resource.GroupResource(), a.Name,
		fmt.Errorf("user not permitted to attest for signerName %q", b.Spec.SignerName))
}

// signerAllows is upstream's IsAuthorizedForSignerName: the verb on the
// certificates.k8s.io signers resource named signer, or <domain>/* for
// all of the domain's signers.
func signerAllows(authz auth.Authorizer, u *auth.User, verb, signer string) bool {
	if authz == nil {
		return false
	}
	domain, _, _ := strings.Cut(signer, "/")
	for _, name := range []string{signer, domain + "/*"} {
		d, _ := authz.Authorize(u, auth.Attributes{IsResource: true, Verb: verb, Group: certificatesv1.GroupName, Version: "*",
			Resource: "signers", Name: name})
		if d == auth.DecisionAllow {
			return true
		}
	}
	return false
}

var podCertificateRequestResource = certificatesv1.SchemeGroupVersion.WithResource("podcertificaterequests")

// podCertificateRequestSigning is the check upstream's
// PodCertificateRequest status strategy makes: a /status write that
// changes the status (issuing, denying or failing the request) takes the
// verb sign on the request's signer; refused, it is upstream's 422 with a
// Forbidden cause at spec.signerName. A write that changes nothing needs
// no permission.
type podCertificateRequestSigning struct{ authz auth.Authorizer }

func (c podCertificateRequestSigning) Validate(_ context.Context, a *Attributes) error {
	if a.Operation != "UPDATE" || a.Subresource != "status" || a.Resource.GroupResource() != podCertificateRequestResource.GroupResource() {
		return nil
	}
	old, ok := a.OldObject.(*certificatesv1.PodCertificateRequest)
	r, ok2 := a.Object.(*certificatesv1.PodCertificateRequest)
	if !ok || !ok2 || apiequality.Semantic.DeepEqual(old.Status, r.Status) {
		return nil
	}
	if signerAllows(c.authz, a.User, "sign", old.Spec.SignerName) {
		return nil
	}
	name := ""
	if a.User != nil {
		name = a.User.Name
	}
	return apierrors.NewInvalid(certificatesv1.SchemeGroupVersion.WithKind("PodCertificateRequest").GroupKind(), a.Name, field.ErrorList{
		field.Forbidden(field.NewPath("spec", "signerName"), fmt.Sprintf("User %q is not permitted to \"sign\" for signer %q", name, old.Spec.SignerName))})
}
