package admission

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kelp-project/kelp/server/apiserver/auth"
)

type namespaceGetter struct{}

func (namespaceGetter) Get(_ context.Context, _, name string) (runtime.Object, error) {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, nil
}

func (namespaceGetter) List(context.Context, string) ([]runtime.Object, error) { return nil, nil }

// The validating chain refuses a binding its writer could not grant, on
// create and update, and leaves deletes alone.
func TestRBACEscalationInChain(t *testing.T) {
	idx := auth.NewRBACIndex()
	idx.Set(&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "secrets"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"secrets"}}}})
	c := New(Config{Getter: func(schema.GroupVersionResource) ObjectGetter { return namespaceGetter{} },
		Escalation: auth.Escalation{Authorizer: auth.RBAC{Index: idx}, Index: idx}})
	b := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "b"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "secrets"}}
	bob := &auth.User{Name: "bob", Groups: []string{"system:authenticated"}}
	gvr := rbacv1.SchemeGroupVersion.WithResource("rolebindings")
	for _, op := range []string{"CREATE", "UPDATE"} {
		a := &Attributes{Operation: op, Resource: gvr, Namespace: "team", Name: "b", Object: b, User: bob}
		if op == "UPDATE" {
			old := b.DeepCopy()
			old.Subjects = []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "x"}}
			a.OldObject = old
		}
		if err := c.Validate(context.Background(), a); !apierrors.IsForbidden(err) {
			t.Errorf("%s: %v, want 403", op, err)
		}
	}
	a := &Attributes{Operation: "DELETE", Resource: gvr, Namespace: "team", Name: "b", OldObject: b, User: bob}
	if err := c.Validate(context.Background(), a); err != nil {
		t.Errorf("DELETE: %v", err)
	}
}
