package admission

import (
	"context"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kelp-project/kelp/server/apiserver/auth"
)

// A /status write that changes a request's status takes sign on its
// signer (by name or domain/*), as upstream's status strategy; the
// refusal is upstream's 422 with a Forbidden cause at spec.signerName.
func TestPodCertificateRequestSigning(t *testing.T) {
	plugin := podCertificateRequestSigning{authz: signerGrants{
		"signer": {"sign example.com/s"},
		"domain": {"sign example.com/*"},
	}}
	old := &certificatesv1.PodCertificateRequest{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns"},
		Spec: certificatesv1.PodCertificateRequestSpec{SignerName: "example.com/s"}}
	issued := old.DeepCopy()
	issued.Status.Conditions = []metav1.Condition{{Type: "Issued", Status: metav1.ConditionTrue}}
	write := func(user string, obj *certificatesv1.PodCertificateRequest, sub string) error {
		return plugin.Validate(context.Background(), &Attributes{Operation: "UPDATE", Resource: podCertificateRequestResource, Subresource: sub,
			Name: "r", Namespace: "ns", Object: obj, OldObject: old, User: &auth.User{Name: user}})
	}
	for _, u := range []string{"signer", "domain"} {
		if err := write(u, issued, "status"); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
	err := write("kubelet", issued, "status")
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), `spec.signerName: Forbidden: User "kubelet" is not permitted to "sign" for signer "example.com/s"`) {
		t.Errorf("no sign grant: %v", err)
	}
	if err := write("kubelet", old.DeepCopy(), "status"); err != nil {
		t.Errorf("an unchanged status needs no grant: %v", err)
	}
	if err := write("kubelet", issued, ""); err != nil {
		t.Errorf("the main endpoint is not checked (the strategy keeps the status): %v", err)
	}
}

// A node creates a PodCertificateRequest only for itself, a pod bound to
// it with that pod's service account, all by name and UID, for a signer
// the pod projects; a stale UID is a plain error (retryable), not 403.
func TestNodeRestrictionPodCertificateRequest(t *testing.T) {
	pcrVolume := corev1.Volume{Name: "c", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
		{PodCertificate: &corev1.PodCertificateProjection{SignerName: "example.com/s", KeyType: "ED25519", CredentialBundlePath: "c.pem"}}}}}}
	pods := &fakeObjects{items: map[string]runtime.Object{
		"ns/web":   &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-web"}, Spec: corev1.PodSpec{NodeName: "n1", ServiceAccountName: "sa", Volumes: []corev1.Volume{pcrVolume}}},
		"ns/db":    &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db", UID: "uid-db"}, Spec: corev1.PodSpec{NodeName: "n2", ServiceAccountName: "sa", Volumes: []corev1.Volume{pcrVolume}}},
		"ns/plain": &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "plain", UID: "uid-plain"}, Spec: corev1.PodSpec{NodeName: "n1", ServiceAccountName: "sa"}},
	}}
	nodes := &fakeObjects{items: map[string]runtime.Object{"/n1": &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "uid-n1"}}}}
	sas := &fakeObjects{items: map[string]runtime.Object{"ns/sa": &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "sa", UID: "uid-sa"}}}}
	plugin := nodeRestriction{pods: pods, nodes: nodes, serviceAccounts: sas, authz: signerGrants{}}
	n1 := &auth.User{Name: "system:node:n1", Groups: []string{"system:nodes", "system:authenticated"}}
	good := func() *certificatesv1.PodCertificateRequest {
		return &certificatesv1.PodCertificateRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "r"}, Spec: certificatesv1.PodCertificateRequestSpec{
			SignerName: "example.com/s", PodName: "web", PodUID: "uid-web", ServiceAccountName: "sa", ServiceAccountUID: "uid-sa", NodeName: "n1", NodeUID: "uid-n1"}}
	}
	create := func(r *certificatesv1.PodCertificateRequest) error {
		return plugin.Validate(context.Background(), &Attributes{Operation: "CREATE", Resource: podCertificateRequestResource, Namespace: "ns", Object: r, User: n1})
	}
	if err := create(good()); err != nil {
		t.Fatalf("own pod's request: %v", err)
	}
	for _, tc := range []struct {
		what      string
		mutate    func(*certificatesv1.PodCertificateRequest)
		forbidden bool
		want      string
	}{
		{"other node", func(r *certificatesv1.PodCertificateRequest) { r.Spec.NodeName = "n2" }, true, `PodCertificateRequest.Spec.NodeName="n2", which is not the requesting node "n1"`},
		{"stale node uid", func(r *certificatesv1.PodCertificateRequest) { r.Spec.NodeUID = "old" }, false, `names node UID "old", inconsistent with the running node ("uid-n1")`},
		{"other node's pod", func(r *certificatesv1.PodCertificateRequest) { r.Spec.PodName, r.Spec.PodUID = "db", "uid-db" }, true, `pod "ns/db" is not running on node "n1"`},
		{"stale pod uid", func(r *certificatesv1.PodCertificateRequest) { r.Spec.PodUID = "old" }, false, `contains pod UID ("old") which differs from running pod "uid-web"`},
		{"missing pod", func(r *certificatesv1.PodCertificateRequest) { r.Spec.PodName = "gone" }, false, `while retrieving pod "ns/gone"`},
		{"other service account", func(r *certificatesv1.PodCertificateRequest) { r.Spec.ServiceAccountName = "admin" }, true, `contains serviceAccountName ("admin") that differs from running pod ("sa")`},
		{"stale sa uid", func(r *certificatesv1.PodCertificateRequest) { r.Spec.ServiceAccountUID = "old" }, false, `names service account UID "old"`},
		{"signer not projected", func(r *certificatesv1.PodCertificateRequest) { r.Spec.SignerName = "example.com/other" }, true, `pod "ns/web" does not mount a podCertificate projected volume for signer "example.com/other"`},
		{"pod projecting nothing", func(r *certificatesv1.PodCertificateRequest) { r.Spec.PodName, r.Spec.PodUID = "plain", "uid-plain" }, true, `does not mount a podCertificate projected volume`},
	} {
		r := good()
		tc.mutate(r)
		err := create(r)
		if err == nil || apierrors.IsForbidden(err) != tc.forbidden || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want forbidden=%v %q", tc.what, err, tc.forbidden, tc.want)
		}
	}
	err := plugin.Validate(context.Background(), &Attributes{Operation: "UPDATE", Resource: podCertificateRequestResource, Namespace: "ns", Object: good(), OldObject: good(), User: n1})
	if !apierrors.IsForbidden(err) {
		t.Errorf("a node's update: %v", err)
	}
}

// grantVerb allows one verb on signer example.com/other (as RBAC names
// it) for service account sa, and nothing else.
type grantVerb string

func (g grantVerb) Authorize(_ *auth.User, a auth.Attributes) (auth.Decision, string) {
	if a.Verb == string(g) && a.Resource == "example.com:other" && a.Name == "sa" {
		return auth.DecisionAllow, ""
	}
	return auth.DecisionNoOpinion, ""
}

// A node granted request-serviceaccounts-podcertificate-signer on a
// signer (RBAC names it with / as :) for the service account may ask for
// it though the pod does not project it, as upstream.
func TestNodeRestrictionPodCertificateSignerGrant(t *testing.T) {
	pods := &fakeObjects{items: map[string]runtime.Object{
		"ns/web": &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-web"}, Spec: corev1.PodSpec{NodeName: "n1", ServiceAccountName: "sa"}}}}
	nodes := &fakeObjects{items: map[string]runtime.Object{"/n1": &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "uid-n1"}}}}
	sas := &fakeObjects{items: map[string]runtime.Object{"ns/sa": &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "sa", UID: "uid-sa"}}}}
	n1 := &auth.User{Name: "system:node:n1", Groups: []string{"system:nodes", "system:authenticated"}}
	r := &certificatesv1.PodCertificateRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "r"}, Spec: certificatesv1.PodCertificateRequestSpec{
		SignerName: "example.com/other", PodName: "web", PodUID: "uid-web", ServiceAccountName: "sa", ServiceAccountUID: "uid-sa", NodeName: "n1", NodeUID: "uid-n1"}}
	create := func(authz auth.Authorizer) error {
		return nodeRestriction{pods: pods, nodes: nodes, serviceAccounts: sas, authz: authz}.Validate(context.Background(),
			&Attributes{Operation: "CREATE", Resource: podCertificateRequestResource, Namespace: "ns", Object: r, User: n1})
	}
	if err := create(grantVerb("request-serviceaccounts-podcertificate-signer")); err != nil {
		t.Errorf("with the grant: %v", err)
	}
	if err := create(grantVerb("get")); !apierrors.IsForbidden(err) {
		t.Errorf("without the grant: %v, want 403", err)
	}
}
