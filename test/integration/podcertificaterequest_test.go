package integration

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"fmt"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/kelp-project/kelp/server/pki/pkitest"
)

// TestPodCertificateRequests: certificates.k8s.io/v1 PodCertificateRequests
// as kube-apiserver 1.37 serves them: namespaced with /status in
// discovery; maxExpirationSeconds defaulted to a day; a request without
// its stub PKCS#10 proof is 422; the spec is immutable; issuing through
// /status takes sign on the signer (422 Forbidden at spec.signerName
// without it) and a certificate for the requested key; once issued the
// status is fixed; kubectl's State column. A node creates requests only
// for its own pods (NodeRestriction), and reads and lists only its own
// (the Node authorizer).
func TestPodCertificateRequests(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)

	resources, err := cs.Discovery().ServerResourcesForGroupVersion("certificates.k8s.io/v1")
	if err != nil {
		t.Fatal(err)
	}
	var main, status bool
	for _, r := range resources.APIResources {
		switch r.Name {
		case "podcertificaterequests":
			main = r.Namespaced && r.Kind == "PodCertificateRequest"
		case "podcertificaterequests/status":
			status = true
		}
	}
	if !main || !status {
		t.Errorf("podcertificaterequests (namespaced) and /status not both in discovery: %+v", resources.APIResources)
	}

	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	stub, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		t.Fatal(err)
	}
	spec := certificatesv1.PodCertificateRequestSpec{SignerName: "example.com/s", PodName: "web", PodUID: "uid-web",
		ServiceAccountName: "default", ServiceAccountUID: "uid-sa", NodeName: "n1", NodeUID: "uid-n1", StubPKCS10Request: stub}
	reqs := cs.CertificatesV1().PodCertificateRequests("default")
	r, err := reqs.Create(ctx, &certificatesv1.PodCertificateRequest{ObjectMeta: metav1.ObjectMeta{GenerateName: "req-"}, Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Spec.MaxExpirationSeconds == nil || *r.Spec.MaxExpirationSeconds != 86400 {
		t.Errorf("maxExpirationSeconds %v, want the default 86400", r.Spec.MaxExpirationSeconds)
	}
	noStub := spec
	noStub.StubPKCS10Request = nil
	if _, err := reqs.Create(ctx, &certificatesv1.PodCertificateRequest{ObjectMeta: metav1.ObjectMeta{Name: "nostub"}, Spec: noStub}, metav1.CreateOptions{}); !apierrors.IsInvalid(err) ||
		!strings.Contains(err.Error(), "exactly one of (stubPKCS10Request)") {
		t.Errorf("without a stub request: %v, want 422", err)
	}
	changed := r.DeepCopy()
	changed.Spec.PodName = "other"
	if _, err := reqs.Update(ctx, changed, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "field is immutable") {
		t.Errorf("changing the spec: %v, want 422 immutable", err)
	}

	// A signer that may write the status, without and then with sign.
	for _, role := range []*rbacv1.ClusterRole{
		{ObjectMeta: metav1.ObjectMeta{Name: "pcr-status"}, Rules: []rbacv1.PolicyRule{{APIGroups: []string{"certificates.k8s.io"},
			Resources: []string{"podcertificaterequests", "podcertificaterequests/status"}, Verbs: []string{"get", "list", "update"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "pcr-sign"}, Rules: []rbacv1.PolicyRule{{APIGroups: []string{"certificates.k8s.io"},
			Resources: []string{"signers"}, ResourceNames: []string{"example.com/s"}, Verbs: []string{"sign"}}}},
	} {
		if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	bind := func(role string) {
		t.Helper()
		if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: "signer"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	bind("pcr-status")
	now := time.Now().Truncate(time.Second)
	issued := r.DeepCopy()
	issued.Status = certificatesv1.PodCertificateRequestStatus{
		Conditions:       []metav1.Condition{{Type: "Issued", Status: metav1.ConditionTrue, Reason: "Test", Message: "issued", LastTransitionTime: metav1.NewTime(now)}},
		CertificateChain: pkitest.IssuedPEM(t, "web", &key.PublicKey, now, 2*time.Hour),
		NotBefore:        ptr.To(metav1.NewTime(now)), NotAfter: ptr.To(metav1.NewTime(now.Add(2 * time.Hour))), BeginRefreshAt: ptr.To(metav1.NewTime(now.Add(time.Hour))),
	}
	signer := s.impersonating("signer").CertificatesV1().PodCertificateRequests("default")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_, err := signer.UpdateStatus(ctx, issued, metav1.UpdateOptions{})
		if apierrors.IsInvalid(err) && strings.Contains(err.Error(), `User "signer" is not permitted to "sign" for signer "example.com/s"`) {
			break
		}
		if time.Now().After(deadline) || !apierrors.IsForbidden(err) {
			t.Fatalf("issuing without sign: %v, want 422 Forbidden at spec.signerName", err)
		}
	}
	bind("pcr-sign")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_, err := signer.UpdateStatus(ctx, issued, metav1.UpdateOptions{})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("issuing with sign: %v", err)
		}
	}
	got, err := reqs.Get(ctx, r.Name, metav1.GetOptions{})
	if err != nil || len(got.Status.Conditions) != 1 || got.Status.CertificateChain == "" {
		t.Fatalf("issued request: %+v, %v", got, err)
	}
	denied := got.DeepCopy()
	denied.Status = certificatesv1.PodCertificateRequestStatus{Conditions: []metav1.Condition{{Type: "Denied", Status: metav1.ConditionTrue, Reason: "Late", Message: "no", LastTransitionTime: metav1.NewTime(now)}}}
	if _, err := signer.UpdateStatus(ctx, denied, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "immutable after PodCertificateRequest is issued") {
		t.Errorf("denying an issued request: %v, want 422", err)
	}
	if out := s.mustKubectl("get", "podcertificaterequests", "-n", "default"); !strings.Contains(out, "STATE") || !strings.Contains(out, "Issued") {
		t.Errorf("kubectl get podcertificaterequests:\n%s", out)
	}

	// A node and its pod; the node asks for that pod's certificate.
	node, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var sa *corev1.ServiceAccount
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if sa, err = cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{}); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("default service account: %v", err)
		}
	}
	pod, err := cs.CoreV1().Pods("default").Create(ctx, podCertificatePod("web", "n1", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = cs.CoreV1().Pods("default").Create(ctx, podCertificatePod("too-long", "", ptr.To[int32](91*24*3600+1)), metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "if provided, maxExpirationSeconds must be <= 7862400") {
		t.Errorf("a pod asking for more than 91 days: %v, want 422", err)
	}
	n1, _ := s.nodeClient("n1")
	nodeReqs := n1.CertificatesV1().PodCertificateRequests("default")
	own := spec
	own.PodUID, own.ServiceAccountUID, own.NodeUID = pod.UID, sa.UID, node.UID
	mine, err := nodeReqs.Create(ctx, &certificatesv1.PodCertificateRequest{ObjectMeta: metav1.ObjectMeta{GenerateName: "req-"}, Spec: own}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a node's request for its own pod: %v", err)
	}
	other := own
	other.NodeName = "n2"
	if _, err := nodeReqs.Create(ctx, &certificatesv1.PodCertificateRequest{ObjectMeta: metav1.ObjectMeta{GenerateName: "req-"}, Spec: other}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) ||
		!strings.Contains(err.Error(), `which is not the requesting node "n1"`) {
		t.Errorf("a request naming another node: %v, want 403", err)
	}
	unprojected := own
	unprojected.SignerName = "example.com/other"
	if _, err := nodeReqs.Create(ctx, &certificatesv1.PodCertificateRequest{ObjectMeta: metav1.ObjectMeta{GenerateName: "req-"}, Spec: unprojected}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) ||
		!strings.Contains(err.Error(), "does not mount a podCertificate projected volume") {
		t.Errorf("a request for a signer the pod does not project: %v, want 403", err)
	}
	if _, err := nodeReqs.Get(ctx, mine.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("a node reading its request: %v", err)
	}
	if _, err := nodeReqs.Get(ctx, r.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("a node reading a request naming it: %v", err)
	}
	if l, err := n1.CertificatesV1().PodCertificateRequests("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=n1"}); err != nil || len(l.Items) != 2 {
		t.Errorf("a node listing its requests: %v, %v", l, err)
	}
	if _, err := nodeReqs.List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("a node listing every request: %v, want 403", err)
	}
	if err := nodeReqs.Delete(ctx, mine.Name, metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("a node deleting a request: %v, want 403", err)
	}
	n2, _ := s.nodeClient("n2")
	if _, err := n2.CertificatesV1().PodCertificateRequests("default").Get(ctx, mine.Name, metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("another node reading the request: %v, want 403", err)
	}
}

// podCertificatePod projects an example.com/s certificate.
func podCertificatePod(name, node string, maxExpiration *int32) *corev1.Pod {
	src := &corev1.PodCertificateProjection{SignerName: "example.com/s", KeyType: "ECDSAP256", CredentialBundlePath: "c.pem", MaxExpirationSeconds: maxExpiration}
	volume := corev1.Volume{Name: "creds", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{{PodCertificate: src}}}}}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: "default",
		Containers: []corev1.Container{{Name: "app", Image: "busybox"}}, Volumes: []corev1.Volume{volume}}}
}

// TestPodCertificateRequestStatusPatches: the status of a fresh request
// issued by each patch type, as the conformance spec of the API patches
// it (server-side apply, strategic merge, JSON merge, JSON patch), and an
// apply of the same status again changes nothing.
func TestPodCertificateRequestStatusPatches(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	stub, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		t.Fatal(err)
	}
	notBefore := time.Now().Add(-time.Minute).Truncate(time.Second)
	chain := pkitest.IssuedPEM(t, "e2e", &key.PublicKey, notBefore, time.Hour)
	ts := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	status := fmt.Sprintf(`{"certificateChain":%q,"notBefore":%q,"notAfter":%q,"beginRefreshAt":%q,"conditions":[{"type":"Issued","status":"True","reason":"E2E","message":"Issued by patch","lastTransitionTime":%q}]}`,
		chain, ts(notBefore), ts(notBefore.Add(time.Hour)), ts(notBefore.Add(15*time.Minute)), ts(time.Now()))
	full := `{"apiVersion":"certificates.k8s.io/v1","kind":"PodCertificateRequest","metadata":{"name":"%s"},"status":` + status + `}`
	jsonPatch := fmt.Sprintf(`[{"op":"add","path":"/status/certificateChain","value":%q},{"op":"add","path":"/status/notBefore","value":%q},{"op":"add","path":"/status/notAfter","value":%q},{"op":"add","path":"/status/beginRefreshAt","value":%q},{"op":"add","path":"/status/conditions","value":[{"type":"Issued","status":"True","reason":"E2E","message":"m","lastTransitionTime":%q}]}]`,
		chain, ts(notBefore), ts(notBefore.Add(time.Hour)), ts(notBefore.Add(15*time.Minute)), ts(time.Now()))
	reqs := cs.CertificatesV1().PodCertificateRequests("default")
	for i, p := range []struct {
		typ  types.PatchType
		body string
	}{{types.ApplyPatchType, full}, {types.StrategicMergePatchType, `{"status":` + status + `}`}, {types.MergePatchType, `{"status":` + status + `}`}, {types.JSONPatchType, jsonPatch}} {
		name := fmt.Sprintf("pcr-%d", i)
		if _, err := reqs.Create(ctx, &certificatesv1.PodCertificateRequest{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: certificatesv1.PodCertificateRequestSpec{
			SignerName: "example.com/e2e", PodName: "test-pod", PodUID: "uid-pod", ServiceAccountName: "default", ServiceAccountUID: "uid-sa",
			NodeName: "test-node", NodeUID: "uid-node", MaxExpirationSeconds: ptr.To[int32](86400), StubPKCS10Request: stub}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		body := p.body
		opts := metav1.PatchOptions{}
		if p.typ == types.ApplyPatchType {
			body = fmt.Sprintf(p.body, name)
			opts.FieldManager, opts.Force = "e2e", ptr.To(true)
		}
		got, err := reqs.Patch(ctx, name, p.typ, []byte(body), opts, "status")
		if err != nil {
			t.Errorf("%s: %v", p.typ, err)
			continue
		}
		if len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Type != "Issued" || got.Status.CertificateChain != chain {
			t.Errorf("%s: status %+v", p.typ, got.Status)
		}
		if p.typ == types.ApplyPatchType {
			if _, err := reqs.Patch(ctx, name, p.typ, []byte(body), opts, "status"); err != nil {
				t.Errorf("applying the same status again: %v", err)
			}
		}
	}
}
