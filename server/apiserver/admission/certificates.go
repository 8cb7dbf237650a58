package admission

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/kelp-project/kelp/server/apiserver/auth"
)

var csrResource = certificatesv1.SchemeGroupVersion.WithResource("certificatesigningrequests")

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
	if c.allowed(a.User, verb, old.Spec.SignerName) {
		return nil
	}
	return apierrors.NewForbidden(a.Resource.GroupResource(), a.Name,
		fmt.Errorf("user not permitted to %s requests with signerName %q", verb, old.Spec.SignerName))
}

func (c certificateSigners) allowed(u *auth.User, verb, signer string) bool {
	if c.authz == nil {
		return false
	}
	domain, _, _ := strings.Cut(signer, "/")
	for _, name := range []string{signer, domain + "/*"} {
		d, _ := c.authz.Authorize(u, auth.Attributes{IsResource: true, Verb: verb, Group: certificatesv1.GroupName, Version: "*",
			Resource: "signers", Name: name})
		if d == auth.DecisionAllow {
			return true
		}
	}
	return false
}
