package bootstrappolicy

import (
	"context"
	"fmt"

	"github.com/sirupsen/logrus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-helpers/auth/rbac/reconciliation"
)

// Reconcile makes the policy current through the API, as kube-apiserver's
// rbac/bootstrap-roles post-start hook does at every start: missing
// objects are created; existing ones gain missing rules, subjects, labels
// and annotations (nothing is removed, so additions by an administrator
// stay); objects annotated rbac.authorization.kubernetes.io/autoupdate:
// "false" are left as they are. client must be allowed everything
// (system:masters).
func Reconcile(ctx context.Context, client kubernetes.Interface) error {
	rbac := client.RbacV1()
	for _, role := range ClusterRoles() {
		if err := reconcileRole(reconciliation.ReconcileRoleOptions{
			Role: reconciliation.ClusterRoleRuleOwner{ClusterRole: &role}, Confirm: true,
			Client: reconciliation.ClusterRoleModifier{Client: rbac.ClusterRoles()}}); err != nil {
			return fmt.Errorf("clusterrole %s: %w", role.Name, err)
		}
	}
	for _, b := range ClusterRoleBindings() {
		if err := reconcileBinding(reconciliation.ReconcileRoleBindingOptions{
			RoleBinding: reconciliation.ClusterRoleBindingAdapter{ClusterRoleBinding: &b}, Confirm: true,
			Client: reconciliation.ClusterRoleBindingClientAdapter{Client: rbac.ClusterRoleBindings()}}); err != nil {
			return fmt.Errorf("clusterrolebinding %s: %w", b.Name, err)
		}
	}
	for _, r := range Roles() {
		if err := reconcileRole(reconciliation.ReconcileRoleOptions{
			Role: reconciliation.RoleRuleOwner{Role: &r}, Confirm: true,
			Client: reconciliation.RoleModifier{Client: rbac, NamespaceClient: client.CoreV1().Namespaces()}}); err != nil {
			return fmt.Errorf("role %s/%s: %w", r.Namespace, r.Name, err)
		}
	}
	for _, b := range RoleBindings() {
		if err := reconcileBinding(reconciliation.ReconcileRoleBindingOptions{
			RoleBinding: reconciliation.RoleBindingAdapter{RoleBinding: &b}, Confirm: true,
			Client: reconciliation.RoleBindingClientAdapter{Client: rbac, NamespaceClient: client.CoreV1().Namespaces()}}); err != nil {
			return fmt.Errorf("rolebinding %s/%s: %w", b.Namespace, b.Name, err)
		}
	}
	return ctx.Err()
}

func reconcileRole(o reconciliation.ReconcileRoleOptions) error {
	res, err := o.Run()
	if err != nil {
		return err
	}
	if res.Protected && res.Operation != reconciliation.ReconcileNone {
		logrus.Infof("rbac: role %s is protected (autoupdate=false); not updated", objectName(res.Role.GetNamespace(), res.Role.GetName()))
	}
	return nil
}

func reconcileBinding(o reconciliation.ReconcileRoleBindingOptions) error {
	res, err := o.Run()
	if err != nil {
		return err
	}
	if res.Protected && res.Operation != reconciliation.ReconcileNone {
		logrus.Infof("rbac: binding %s is protected (autoupdate=false); not updated", objectName(res.RoleBinding.GetNamespace(), res.RoleBinding.GetName()))
	}
	return nil
}

func objectName(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}
