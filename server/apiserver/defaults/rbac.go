package defaults

import (
	rbacv1 "k8s.io/api/rbac/v1"
)

func RoleBinding(b *rbacv1.RoleBinding) {
	if b.RoleRef.APIGroup == "" {
		b.RoleRef.APIGroup = rbacv1.GroupName
	}
	subjects(b.Subjects)
}

func ClusterRoleBinding(b *rbacv1.ClusterRoleBinding) {
	if b.RoleRef.APIGroup == "" {
		b.RoleRef.APIGroup = rbacv1.GroupName
	}
	subjects(b.Subjects)
}

// subjects: users and groups live in the RBAC API group, service accounts
// in the core group (""). Unknown kinds are left for validation to reject.
func subjects(ss []rbacv1.Subject) {
	for i := range ss {
		s := &ss[i]
		if s.APIGroup != "" {
			continue
		}
		switch s.Kind {
		case rbacv1.UserKind, rbacv1.GroupKind:
			s.APIGroup = rbacv1.GroupName
		case rbacv1.ServiceAccountKind:
			s.APIGroup = ""
		}
	}
}
