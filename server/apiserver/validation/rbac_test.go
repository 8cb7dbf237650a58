package validation

import (
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestRBAC(t *testing.T) {
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "system:pod-reader"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}}}}
	expectErrors(t, Validate(role), nil)

	noVerbs := role.DeepCopy()
	noVerbs.Rules[0].Verbs = nil
	noVerbs.Rules = append(noVerbs.Rules, rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}})
	expectErrors(t, Validate(noVerbs), []want{
		{field.ErrorTypeRequired, "rules[0].verbs", "verbs must contain at least one value"},
		{field.ErrorTypeInvalid, "rules[1].nonResourceURLs", "namespaced rules cannot apply to non-resource URLs"},
	})

	slash := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "a/b"}}
	expectErrors(t, Validate(slash), []want{{field.ErrorTypeInvalid, "metadata.name", ""}})

	rb := defaulted(&rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "read-pods"},
		RoleRef:    rbacv1.RoleRef{Kind: "Role", Name: "pod-reader"},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: "jane"}, {Kind: "ServiceAccount", Name: "builder"}},
	})
	expectErrors(t, Validate(rb), nil)

	badSubj := rb.DeepCopy()
	badSubj.Subjects = append(badSubj.Subjects, rbacv1.Subject{Kind: "Robot", Name: "r2"}, rbacv1.Subject{Kind: "User", APIGroup: "example.com", Name: "x"})
	badSubj.RoleRef.Kind = "Deployment"
	expectErrors(t, Validate(badSubj), []want{
		{field.ErrorTypeNotSupported, "subjects[2].kind", ""},
		{field.ErrorTypeNotSupported, "subjects[3].apiGroup", ""},
		{field.ErrorTypeNotSupported, "roleRef.kind", ""},
	})

	crb := defaulted(&rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "admins"},
		RoleRef:    rbacv1.RoleRef{Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "builder"}},
	})
	expectErrors(t, Validate(crb), []want{{field.ErrorTypeRequired, "subjects[0].namespace", ""}})

	old := stored(rb.DeepCopy())
	rebound := old.DeepCopy()
	rebound.RoleRef.Name = "admin"
	expectErrors(t, ValidateUpdate(rebound, old), []want{{field.ErrorTypeInvalid, "roleRef", "cannot change roleRef"}})
	renamed := old.DeepCopy()
	renamed.Name = "other"
	expectErrors(t, ValidateUpdate(renamed, old), []want{{field.ErrorTypeInvalid, "metadata.name", "field is immutable"}})
	expectErrors(t, ValidateStatusUpdate(renamed, old), []want{{field.ErrorTypeInvalid, "metadata.name", "field is immutable"}})
	moreSubjects := old.DeepCopy()
	moreSubjects.Subjects = append(moreSubjects.Subjects, rbacv1.Subject{Kind: "Group", APIGroup: rbacv1.GroupName, Name: "devs"})
	expectErrors(t, ValidateUpdate(moreSubjects, old), nil)
}
