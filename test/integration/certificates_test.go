package integration

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509/pkix"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/cert"
)

// TestCertificateSigningRequests: the CSR API as the conformance spec
// drives it. The requester is recorded, the main endpoint changes only
// metadata, /approval the conditions, /status the certificate; a field
// selector on spec.signerName; kubectl's columns; and approving needs
// approve on the signer (CertificateApproval), which an editor of CSRs
// without it lacks.
func TestCertificateSigningRequests(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	request, err := cert.MakeCSR(key, &pkix.Name{CommonName: "e2e.example.com"}, []string{"e2e.example.com"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	certificate, _, err := cert.GenerateSelfSignedCertKey("e2e.example.com", nil, []string{"e2e.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	hour := int32(3600)
	csrs := cs.CertificatesV1().CertificateSigningRequests()
	tmpl := &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-"}, Spec: certificatesv1.CertificateSigningRequestSpec{
		Request: request, SignerName: "example.com/e2e", ExpirationSeconds: &hour,
		Usages:   []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth},
		Username: "someone-else", // replaced by the requester
	}}
	created, err := csrs.Create(ctx, tmpl, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.Spec.Username == "" || created.Spec.Username == "someone-else" || len(created.Status.Conditions) != 0 {
		t.Errorf("created: username %q, conditions %v", created.Spec.Username, created.Status.Conditions)
	}
	if _, err := csrs.Create(ctx, &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "bad"},
		Spec: certificatesv1.CertificateSigningRequestSpec{Request: []byte("nope"), SignerName: "nodomain"}}, metav1.CreateOptions{}); !apierrors.IsInvalid(err) ||
		!strings.Contains(err.Error(), "spec.request") || !strings.Contains(err.Error(), "spec.signerName") || !strings.Contains(err.Error(), "spec.usages") {
		t.Errorf("a bad request: %v, want 422 naming request, signerName and usages", err)
	}
	list, err := csrs.List(ctx, metav1.ListOptions{FieldSelector: "spec.signerName=example.com/e2e"})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("listed by signerName: %v, %v", list, err)
	}

	// The main endpoint keeps spec and status.
	patched, err := csrs.Patch(ctx, created.Name, types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"patched":"true"}},"spec":{"signerName":"example.com/other"},"status":{"conditions":[{"type":"Approved","status":"True"}]}}`), metav1.PatchOptions{})
	if err != nil || patched.Annotations["patched"] != "true" || patched.Spec.SignerName != "example.com/e2e" || len(patched.Status.Conditions) != 0 {
		t.Fatalf("a patch of the main endpoint: %+v, %v", patched, err)
	}

	// Someone who may update approvals but not approve for this signer.
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "csr-editor"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests", "certificatesigningrequests/approval"},
			Verbs: []string{"get", "update", "patch"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "csr-editor"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "csr-editor"},
		Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: "editor"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	editor := s.impersonating("editor")
	approve := patched.DeepCopy()
	approve.Status.Conditions = append(approve.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "Test"})
	// (The binding reaches the authorizer through a watch: until then the
	// refusal is RBAC's.)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_, err := editor.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, approve.Name, approve, metav1.UpdateOptions{})
		if apierrors.IsForbidden(err) && strings.Contains(err.Error(), `user not permitted to approve requests with signerName "example.com/e2e"`) {
			break
		}
		if time.Now().After(deadline) || !apierrors.IsForbidden(err) {
			t.Fatalf("approval without approve on the signer: %v, want 403 from CertificateApproval", err)
		}
	}

	// /approval: conditions only.
	approve.Annotations["approval"] = "true"
	approve.Status.Certificate = certificate
	approved, err := csrs.UpdateApproval(ctx, approve.Name, approve, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(approved.Status.Conditions) != 1 || approved.Status.Conditions[0].Type != certificatesv1.CertificateApproved ||
		approved.Status.Conditions[0].LastUpdateTime.IsZero() || len(approved.Status.Certificate) != 0 || approved.Annotations["approval"] != "true" {
		t.Errorf("after /approval: %+v", approved.Status)
	}
	// /status: the certificate, and Approved kept as it was.
	issue := approved.DeepCopy()
	issue.Status.Certificate = certificate
	issue.Status.Conditions[0].Reason = "Changed"
	issued, err := csrs.UpdateStatus(ctx, issue, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(issued.Status.Certificate) != string(certificate) || issued.Status.Conditions[0].Reason != "Test" {
		t.Errorf("after /status: certificate set %v, Approved's reason %q", len(issued.Status.Certificate) > 0, issued.Status.Conditions[0].Reason)
	}
	again := issued.DeepCopy()
	again.Status.Certificate = append([]byte{}, certificate...)
	again.Status.Certificate = append(again.Status.Certificate, certificate...)
	if _, err := csrs.UpdateStatus(ctx, again, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "may not modify existing certificate content") {
		t.Errorf("replacing the certificate: %v, want 422", err)
	}
	out := s.mustKubectl("get", "csr", created.Name)
	if !strings.Contains(out, "REQUESTEDDURATION") || !strings.Contains(out, "example.com/e2e") || !strings.Contains(out, "60m") || !strings.Contains(out, "Approved,Issued") {
		t.Errorf("kubectl get csr:\n%s", out)
	}
}
