package printers

import (
	"fmt"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Roles and ClusterRoles have no printer upstream; they get the generic
// Name/Created At table from TableFor.
func init() {
	bindingColumns := func(kind, roleRefDoc string) []metav1.TableColumnDefinition {
		return []metav1.TableColumnDefinition{
			nameColumn(),
			column("Role", "string", roleRefDoc),
			ageColumn(),
			wide(column("Users", "string", "Users in the "+kind)),
			wide(column("Groups", "string", "Groups in the "+kind)),
			wide(column("ServiceAccounts", "string", "ServiceAccounts in the "+kind)),
		}
	}

	cells(bindingColumns("roleBinding", rbacv1.RoleBinding{}.SwaggerDoc()["roleRef"]), func(rb *rbacv1.RoleBinding, now time.Time) []interface{} {
		return bindingCells(rb.ObjectMeta, rb.RoleRef, rb.Subjects, now)
	})
	cells(bindingColumns("clusterRoleBinding", rbacv1.ClusterRoleBinding{}.SwaggerDoc()["roleRef"]), func(crb *rbacv1.ClusterRoleBinding, now time.Time) []interface{} {
		return bindingCells(crb.ObjectMeta, crb.RoleRef, crb.Subjects, now)
	})
}

func bindingCells(m metav1.ObjectMeta, ref rbacv1.RoleRef, subjects []rbacv1.Subject, now time.Time) []interface{} {
	// Subjects of any other kind are not shown.
	var users, groups, sas []string
	for _, s := range subjects {
		switch s.Kind {
		case rbacv1.UserKind:
			users = append(users, s.Name)
		case rbacv1.GroupKind:
			groups = append(groups, s.Name)
		case rbacv1.ServiceAccountKind:
			sas = append(sas, s.Namespace+"/"+s.Name)
		}
	}
	return []interface{}{
		m.Name,
		fmt.Sprintf("%s/%s", ref.Kind, ref.Name),
		age(m, now),
		strings.Join(users, ", "),
		strings.Join(groups, ", "),
		strings.Join(sas, ", "),
	}
}
