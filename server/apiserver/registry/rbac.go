package registry

import (
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kelp-project/kelp/server/apiserver/defaults"
	"github.com/kelp-project/kelp/server/apiserver/validation"
)

// rbac.authorization.k8s.io/v1: what auth.RBAC decides from (through the
// index apiserver/rbacobjects.go keeps from these resources' watch
// caches). Writes are checked for escalation (auth.Escalation) with the
// validating admission steps.

func roles() *Resource {
	return &Resource{
		GVR: gvr("rbac.authorization.k8s.io", "v1", "roles"), Kind: "Role", Singular: "role", Namespaced: true,
		New: func() runtime.Object { return &rbacv1.Role{} }, NewList: func() runtime.Object { return &rbacv1.RoleList{} },
		Strategy: withGenericTable(plainStrategy(NoDefaults, validator(validation.Role))),
	}
}

func clusterRoles() *Resource {
	return &Resource{
		GVR: gvr("rbac.authorization.k8s.io", "v1", "clusterroles"), Kind: "ClusterRole", Singular: "clusterrole",
		New: func() runtime.Object { return &rbacv1.ClusterRole{} }, NewList: func() runtime.Object { return &rbacv1.ClusterRoleList{} },
		Strategy: withGenericTable(plainStrategy(NoDefaults, validator(validation.ClusterRole))),
	}
}

func roleBindings() *Resource {
	return &Resource{
		GVR: gvr("rbac.authorization.k8s.io", "v1", "rolebindings"), Kind: "RoleBinding", Singular: "rolebinding", Namespaced: true,
		New: func() runtime.Object { return &rbacv1.RoleBinding{} }, NewList: func() runtime.Object { return &rbacv1.RoleBindingList{} },
		Strategy: Strategy{
			Default:              defaulter(defaults.RoleBinding),
			Validate:             validator(validation.RoleBinding),
			ValidateUpdate:       updateValidator(validation.RoleBindingUpdate),
			ValidateStatusUpdate: metaUpdate,
		},
	}
}

func clusterRoleBindings() *Resource {
	return &Resource{
		GVR: gvr("rbac.authorization.k8s.io", "v1", "clusterrolebindings"), Kind: "ClusterRoleBinding", Singular: "clusterrolebinding",
		New: func() runtime.Object { return &rbacv1.ClusterRoleBinding{} }, NewList: func() runtime.Object { return &rbacv1.ClusterRoleBindingList{} },
		Strategy: Strategy{
			Default:              defaulter(defaults.ClusterRoleBinding),
			Validate:             validator(validation.ClusterRoleBinding),
			ValidateUpdate:       updateValidator(validation.ClusterRoleBindingUpdate),
			ValidateStatusUpdate: metaUpdate,
		},
	}
}
