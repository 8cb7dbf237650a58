package integration

import (
	"regexp"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kelp-project/kelp/server/pki/pkitest"
)

// TestClusterTrustBundles: certificates.k8s.io/v1 ClusterTrustBundles as
// kube-apiserver 1.37 serves them: only v1 in discovery; a bad bundle, a
// name outside its signer's prefix and a change of signer are 422; a
// field selector on spec.signerName; kubectl's SignerName column; writing
// a bundle linked to a signer takes attest on it (a user who may write
// bundles gets ClusterTrustBundleAttest's 403 without it); and nodes and
// service accounts may read and watch bundles (the kubelet projects
// them), but not write them.
func TestClusterTrustBundles(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	bundles := cs.CertificatesV1().ClusterTrustBundles()

	resources, err := cs.Discovery().ServerResourcesForGroupVersion("certificates.k8s.io/v1")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range resources.APIResources {
		if r.Name == "clustertrustbundles" {
			found = !r.Namespaced && r.Kind == "ClusterTrustBundle"
		}
	}
	if !found {
		t.Errorf("clustertrustbundles is not in certificates.k8s.io/v1's discovery as a cluster-scoped ClusterTrustBundle: %+v", resources.APIResources)
	}
	if _, err := cs.Discovery().ServerResourcesForGroupVersion("certificates.k8s.io/v1beta1"); !apierrors.IsNotFound(err) {
		t.Errorf("certificates.k8s.io/v1beta1: %v, want 404 (off by default upstream)", err)
	}

	ca1, ca2 := pkitest.SelfSignedPEM(t, "one", true), pkitest.SelfSignedPEM(t, "two", true)
	linked := &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: "example.com:signer:one", Labels: map[string]string{"alive": "true"}},
		Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: "example.com/signer", TrustBundle: ca1}}
	if _, err := bundles.Create(ctx, linked, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := bundles.Create(ctx, &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: "plain"},
		Spec: certificatesv1.ClusterTrustBundleSpec{TrustBundle: ca2}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for what, tc := range map[string]struct {
		b    *certificatesv1.ClusterTrustBundle
		want string
	}{
		"not a CA": {&certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: "leaf"},
			Spec: certificatesv1.ClusterTrustBundleSpec{TrustBundle: pkitest.SelfSignedPEM(t, "leaf", false)}}, "entry 0 does not have the CA bit set"},
		"duplicate": {&certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: "dup"},
			Spec: certificatesv1.ClusterTrustBundleSpec{TrustBundle: ca1 + ca1}}, "duplicate trust anchor"},
		"outside the signer's names": {&certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: "example.com:other:x"},
			Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: "example.com/signer", TrustBundle: ca1}}, "must be named with prefix example.com:signer:"},
	} {
		if _, err := bundles.Create(ctx, tc.b, metav1.CreateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want 422 %q", what, err, tc.want)
		}
	}
	if _, err := bundles.Patch(ctx, linked.Name, types.MergePatchType, []byte(`{"spec":{"signerName":"example.com/other"}}`), metav1.PatchOptions{}); !apierrors.IsInvalid(err) ||
		!strings.Contains(err.Error(), "field is immutable") {
		t.Errorf("changing the signer: %v, want 422 immutable", err)
	}
	list, err := bundles.List(ctx, metav1.ListOptions{FieldSelector: "spec.signerName=example.com/signer"})
	if err != nil || len(list.Items) != 1 || list.Items[0].Name != linked.Name {
		t.Errorf("listed by spec.signerName: %v, %v", list, err)
	}
	if out := s.mustKubectl("get", "clustertrustbundles"); !strings.Contains(out, "SIGNERNAME") ||
		!strings.Contains(out, "example.com/signer") || !regexp.MustCompile(`(?m)^plain +<none>$`).MatchString(out) {
		t.Errorf("kubectl get clustertrustbundles:\n%s", out)
	}

	// A writer of bundles without attest, then with attest on the signer.
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "ctb-writer"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"clustertrustbundles"},
			Verbs: []string{"get", "create", "update", "patch"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bind := func(name, role string) {
		t.Helper()
		if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: "publisher"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	bind("ctb-writer", "ctb-writer")
	publisher := s.impersonating("publisher").CertificatesV1().ClusterTrustBundles()
	second := &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: "example.com:signer:two"},
		Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: "example.com/signer", TrustBundle: ca2}}
	// (The binding reaches the authorizer through a watch: until then the
	// refusal is RBAC's.)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_, err := publisher.Create(ctx, second, metav1.CreateOptions{})
		if apierrors.IsForbidden(err) && strings.Contains(err.Error(), `user not permitted to attest for signerName "example.com/signer"`) {
			break
		}
		if time.Now().After(deadline) || !apierrors.IsForbidden(err) {
			t.Fatalf("a linked bundle without attest: %v, want 403 from ClusterTrustBundleAttest", err)
		}
	}
	if _, err := publisher.Create(ctx, &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: "unlinked"},
		Spec: certificatesv1.ClusterTrustBundleSpec{TrustBundle: ca1}}, metav1.CreateOptions{}); err != nil {
		t.Errorf("an unlinked bundle needs no attest: %v", err)
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "ctb-attest"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"signers"},
			ResourceNames: []string{"example.com/*"}, Verbs: []string{"attest"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bind("ctb-attest", "ctb-attest")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_, err := publisher.Create(ctx, second, metav1.CreateOptions{})
		if err == nil {
			break
		}
		if time.Now().After(deadline) || !apierrors.IsForbidden(err) {
			t.Fatalf("a linked bundle with attest on example.com/*: %v", err)
		}
	}

	// Nodes (the Node authorizer) and service accounts
	// (system:cluster-trust-bundle-discovery) read and watch them all.
	readers := map[string][]string{
		"system:node:n1":                   {"system:nodes", "system:authenticated"},
		"system:serviceaccount:default:sa": {"system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"},
	}
	for user, groups := range readers {
		r := s.impersonating(user, groups...).CertificatesV1().ClusterTrustBundles()
		got, err := r.List(ctx, metav1.ListOptions{})
		if err != nil || len(got.Items) != 4 {
			t.Errorf("%s listing bundles: %d, %v; want the 4", user, len(got.Items), err)
			continue
		}
		w, err := r.Watch(ctx, metav1.ListOptions{ResourceVersion: got.ResourceVersion})
		if err != nil {
			t.Errorf("%s watching bundles: %v", user, err)
		} else {
			w.Stop()
		}
		if _, err := r.Create(ctx, &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: "by-reader"},
			Spec: certificatesv1.ClusterTrustBundleSpec{TrustBundle: ca1}}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("%s creating a bundle: %v, want 403", user, err)
		}
	}
}
