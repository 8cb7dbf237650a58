package admission

import (
	"context"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kelp-project/kelp/server/apiserver/auth"
)

// signerGrants allows verbs on certificates.k8s.io signers by name, per
// user, and nothing else.
type signerGrants map[string][]string // user -> "verb name"

func (g signerGrants) Authorize(u *auth.User, a auth.Attributes) (auth.Decision, string) {
	if a.Group != certificatesv1.GroupName || a.Resource != "signers" {
		return auth.DecisionNoOpinion, ""
	}
	for _, grant := range g[u.Name] {
		if grant == a.Verb+" "+a.Name {
			return auth.DecisionAllow, ""
		}
	}
	return auth.DecisionNoOpinion, ""
}

// Writing a ClusterTrustBundle linked to a signer takes attest on that
// signer (by name, or its domain's /*); an unlinked bundle, and an update
// that only moves garbage-collection fields, need none.
func TestClusterTrustBundleAttest(t *testing.T) {
	plugin := clusterTrustBundleAttest{authz: signerGrants{
		"publisher": {"attest example.com/signer"},
		"domain":    {"attest example.com/*"},
		"approver":  {"approve example.com/signer"},
	}}
	linked := &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: "example.com:signer:a", ResourceVersion: "5"},
		Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: "example.com/signer", TrustBundle: "pem"}}
	unlinked := &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: certificatesv1.ClusterTrustBundleSpec{TrustBundle: "pem"}}
	write := func(op, user string, obj, old *certificatesv1.ClusterTrustBundle) error {
		a := &Attributes{Operation: op, Resource: clusterTrustBundleResource, Name: obj.Name, Object: obj, User: &auth.User{Name: user}}
		if old != nil {
			a.OldObject = old
		}
		return plugin.Validate(context.Background(), a)
	}
	for _, user := range []string{"publisher", "domain"} {
		if err := write("CREATE", user, linked, nil); err != nil {
			t.Errorf("%s creating a linked bundle: %v", user, err)
		}
	}
	err := write("CREATE", "approver", linked, nil)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `user not permitted to attest for signerName "example.com/signer"`) {
		t.Errorf("approve is not attest: %v", err)
	}
	if err := write("CREATE", "nobody", unlinked, nil); err != nil {
		t.Errorf("an unlinked bundle needs no attest: %v", err)
	}
	changed := linked.DeepCopy()
	changed.Spec.TrustBundle = "other"
	if err := write("UPDATE", "nobody", changed, linked); !apierrors.IsForbidden(err) {
		t.Errorf("changing a linked bundle without attest: %v", err)
	}
	// The garbage collector adds an owner reference and a finalizer; the
	// write path moves resourceVersion and managedFields.
	gc := linked.DeepCopy()
	gc.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: "u"}}
	gc.Finalizers = []string{"example.com/keep"}
	gc.ResourceVersion = "6"
	gc.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "gc"}}
	if err := write("UPDATE", "nobody", gc, linked); err != nil {
		t.Errorf("an update of garbage-collection fields only: %v", err)
	}
	if err := write("DELETE", "nobody", linked, linked); err != nil {
		t.Errorf("a delete is not checked: %v", err)
	}
}
