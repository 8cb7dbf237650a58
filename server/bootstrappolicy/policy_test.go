package bootstrappolicy

import (
	"context"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kelp-project/kelp/config"
	"github.com/kelp-project/kelp/server/apiserver/auth"
	"github.com/kelp-project/kelp/server/apiserver/validation"
)

// Every object of the policy is valid, uniquely named, and every binding
// refers to a role of the policy.
func TestPolicyIsConsistent(t *testing.T) {
	clusterRoles := map[string]bool{}
	for _, r := range ClusterRoles() {
		if clusterRoles[r.Name] {
			t.Errorf("ClusterRole %s twice", r.Name)
		}
		clusterRoles[r.Name] = true
		if errs := validation.ClusterRole(&r); len(errs) > 0 {
			t.Errorf("ClusterRole %s: %v", r.Name, errs)
		}
		if r.Annotations[AutoUpdateAnnotation] != "true" || r.Labels[bootstrappingLabel] != "rbac-defaults" {
			t.Errorf("ClusterRole %s lacks the bootstrap annotation or label", r.Name)
		}
	}
	names := map[string]bool{}
	for _, b := range ClusterRoleBindings() {
		if names[b.Name] {
			t.Errorf("ClusterRoleBinding %s twice", b.Name)
		}
		names[b.Name] = true
		if errs := validation.ClusterRoleBinding(&b); len(errs) > 0 {
			t.Errorf("ClusterRoleBinding %s: %v", b.Name, errs)
		}
		if !clusterRoles[b.RoleRef.Name] {
			t.Errorf("ClusterRoleBinding %s refers to missing %s", b.Name, b.RoleRef.Name)
		}
	}
	roles := map[string]bool{}
	for _, r := range Roles() {
		roles[r.Namespace+"/"+r.Name] = true
		if errs := validation.Role(&r); len(errs) > 0 {
			t.Errorf("Role %s/%s: %v", r.Namespace, r.Name, errs)
		}
	}
	for _, b := range RoleBindings() {
		if errs := validation.RoleBinding(&b); len(errs) > 0 {
			t.Errorf("RoleBinding %s/%s: %v", b.Namespace, b.Name, errs)
		}
		if !roles[b.Namespace+"/"+b.RoleRef.Name] {
			t.Errorf("RoleBinding %s/%s refers to missing %s", b.Namespace, b.Name, b.RoleRef.Name)
		}
	}
	// Upstream's user-facing and system roles are all there.
	for _, name := range []string{"cluster-admin", "admin", "edit", "view", "system:basic-user", "system:discovery",
		"system:public-info-viewer", "system:node-proxier", "system:kube-controller-manager", "system:kube-scheduler",
		"system:monitoring", "system:node", "system:controller:deployment-controller", "system:controller:namespace-controller"} {
		if !clusterRoles[name] {
			t.Errorf("no ClusterRole %s", name)
		}
	}
	// Each controller kelp runs is bound to the controller manager's user.
	for name := range kelpControllers() {
		found := false
		for _, b := range ClusterRoleBindings() {
			if b.Name == ControllerRolePrefix+name {
				for _, s := range b.Subjects {
					found = found || (s.Kind == rbacv1.UserKind && s.Name == KubeControllerUser)
				}
			}
		}
		if !found {
			t.Errorf("%s is not bound to %s", name, KubeControllerUser)
		}
	}
}

// Reconcile creates the policy, restores what was removed from it, keeps
// what was added, and leaves objects annotated autoupdate=false alone.
func TestReconcile(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	if err := Reconcile(ctx, client); err != nil {
		t.Fatal(err)
	}
	crs := client.RbacV1().ClusterRoles()
	list, err := crs.List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != len(ClusterRoles()) {
		t.Fatalf("%d ClusterRoles (%v), want %d", len(list.Items), err, len(ClusterRoles()))
	}
	edit := func(name string, f func(r *rbacv1.ClusterRole)) {
		r, err := crs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		f(r)
		if _, err := crs.Update(ctx, r, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	extra := rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"example.com"}, Resources: []string{"widgets"}}
	edit("system:public-info-viewer", func(r *rbacv1.ClusterRole) { r.Rules = []rbacv1.PolicyRule{extra} })
	edit("system:monitoring", func(r *rbacv1.ClusterRole) {
		r.Annotations[AutoUpdateAnnotation] = "false"
		r.Rules = nil
	})
	if err := client.RbacV1().ClusterRoleBindings().Delete(ctx, "system:basic-user", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := Reconcile(ctx, client); err != nil {
		t.Fatal(err)
	}
	piv, _ := crs.Get(ctx, "system:public-info-viewer", metav1.GetOptions{})
	// Upstream's reconciliation adds the missing rules broken down, one
	// URL each.
	if len(piv.Rules) != 6 || !slices.Equal(piv.Rules[0].Resources, extra.Resources) ||
		!slices.ContainsFunc(piv.Rules, func(r rbacv1.PolicyRule) bool { return slices.Equal(r.NonResourceURLs, []string{"/healthz"}) }) {
		t.Errorf("public-info-viewer after reconcile: %v (want its rules back, and the added one kept)", piv.Rules)
	}
	mon, _ := crs.Get(ctx, "system:monitoring", metav1.GetOptions{})
	if len(mon.Rules) != 0 {
		t.Errorf("protected system:monitoring was changed: %v", mon.Rules)
	}
	if _, err := client.RbacV1().ClusterRoleBindings().Get(ctx, "system:basic-user", metav1.GetOptions{}); err != nil {
		t.Errorf("deleted binding not recreated: %v", err)
	}
}

// The node's local-path provisioner (config.LocalPathProvisionerUser) may
// do what upstream's external-provisioner does, and nothing a node's
// volumes do not need: no Secrets, no Pods, no other users' objects.
func TestLocalPathProvisionerPolicy(t *testing.T) {
	var role *rbacv1.ClusterRole
	for _, r := range ClusterRoles() {
		if r.Name == localPathProvisionerRoleName {
			role = &r
		}
	}
	if role == nil {
		t.Fatalf("no ClusterRole %s", localPathProvisionerRoleName)
	}
	bound := false
	for _, b := range ClusterRoleBindings() {
		if b.RoleRef.Name == localPathProvisionerRoleName {
			for _, s := range b.Subjects {
				bound = bound || (s.Kind == rbacv1.UserKind && s.Name == config.LocalPathProvisionerUser)
			}
		}
	}
	if !bound {
		t.Errorf("%s is not bound to %s", localPathProvisionerRoleName, config.LocalPathProvisionerUser)
	}
	allows := func(verb, group, resource string) bool {
		res, sub, _ := strings.Cut(resource, "/")
		a := auth.Attributes{IsResource: true, Verb: verb, Group: group, Resource: res, Subresource: sub}
		for i := range role.Rules {
			if auth.RuleAllows(a, &role.Rules[i]) {
				return true
			}
		}
		return false
	}
	for _, v := range []string{"get", "list", "watch", "create", "delete", "update", "patch"} {
		if !allows(v, "", "persistentvolumes") {
			t.Errorf("may not %s persistentvolumes", v)
		}
	}
	for _, v := range []string{"get", "list", "watch", "update", "patch"} {
		if !allows(v, "", "persistentvolumeclaims") {
			t.Errorf("may not %s persistentvolumeclaims", v)
		}
	}
	for _, c := range []struct{ verb, group, resource string }{
		{"get", "storage.k8s.io", "storageclasses"}, {"watch", "storage.k8s.io", "storageclasses"},
		{"list", "", "nodes"}, {"create", "", "events"}, {"patch", "events.k8s.io", "events"},
	} {
		if !allows(c.verb, c.group, c.resource) {
			t.Errorf("may not %s %s.%s", c.verb, c.resource, c.group)
		}
	}
	for _, c := range []struct{ verb, group, resource string }{
		{"delete", "", "persistentvolumeclaims"}, {"create", "", "persistentvolumeclaims"},
		{"get", "", "secrets"}, {"create", "", "pods"}, {"update", "", "nodes"},
		{"create", "storage.k8s.io", "storageclasses"}, {"update", "", "persistentvolumeclaims/status"},
	} {
		if allows(c.verb, c.group, c.resource) {
			t.Errorf("may %s %s.%s, which a provisioner has no need for", c.verb, c.resource, c.group)
		}
	}
}
