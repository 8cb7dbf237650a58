package auth

import (
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestEscalation(t *testing.T) {
	idx := policyIndex(t)
	bind := func(ns, name, role, user string) {
		idx.Set(&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}})
	}
	bind("team", "eve-edit", "edit", "eve")
	bind("team", "ann-admin", "admin", "ann")
	idx.Set(&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "bind-view"}, Rules: []rbacv1.PolicyRule{
		{Verbs: []string{"bind"}, APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles"}, ResourceNames: []string{"view"}}}})
	bind("team", "eve-bind-view", "bind-view", "eve")
	az := Chain{PrivilegedGroup{}, RBAC{Index: idx}}
	e := Escalation{Authorizer: az, Index: idx}
	eve, ann := authd("eve"), authd("ann")
	binding := func(role string) *rbacv1.RoleBinding {
		return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "b"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "mallory"}}}
	}
	// ann (admin) may bind edit: she holds every rule of it there.
	if err := e.Check(ann, binding("edit"), nil); err != nil {
		t.Errorf("admin binding edit: %v", err)
	}
	// Nobody but cluster admins binds cluster-admin.
	err := e.Check(ann, binding("cluster-admin"), nil)
	if !apierrors.IsForbidden(err) {
		t.Fatalf("admin binding cluster-admin: %v", err)
	}
	want := `rolebindings.rbac.authorization.k8s.io "b" is forbidden: user "ann" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:
{APIGroups:["*"], Resources:["*"], Verbs:["*"]}
{NonResourceURLs:["*"], Verbs:["*"]}`
	if err.Error() != want {
		t.Errorf("message\n got %s\nwant %s", err, want)
	}
	// eve holds edit, not admin's rights over roles.
	err = e.Check(eve, binding("admin"), nil)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `{APIGroups:["rbac.authorization.k8s.io"], Resources:["rolebindings"], Verbs:["get" "list" "watch" "create" "update" "patch" "delete" "deletecollection"]}`) {
		t.Errorf("edit binding admin: %v", err)
	}
	// bind on view lets eve bind it whatever she holds.
	if err := e.Check(eve, binding("view"), nil); err != nil {
		t.Errorf("bind verb: %v", err)
	}
	// A binding to a missing role is 404, as upstream's.
	if err := e.Check(ann, binding("nope"), nil); !apierrors.IsNotFound(err) {
		t.Errorf("missing role: %v", err)
	}
	// Roles: within what one holds, or not.
	small := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "r"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"secrets"}}}}
	if err := e.Check(eve, small, nil); err != nil {
		t.Errorf("edit creating a role within edit: %v", err)
	}
	big := small.DeepCopy()
	big.Rules = append(big.Rules, rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"nodes"}})
	if err := e.Check(eve, big, small); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `{APIGroups:[""], Resources:["nodes"], Verbs:["get"]}`) {
		t.Errorf("update adding nodes: %v", err)
	}
	// The garbage collector's writes (owner references, finalizers) are
	// not checked.
	gc := big.DeepCopy()
	gc.Finalizers = []string{"x"}
	if err := e.Check(authd("system:kube-controller-manager"), gc, big); err != nil {
		t.Errorf("finalizer-only update: %v", err)
	}
	// aggregationRule needs full authority.
	agg := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "agg"}, AggregationRule: &rbacv1.AggregationRule{
		ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"a": "b"}}}}}
	if err := e.Check(ann, agg, nil); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "must have cluster-admin privileges to use the aggregationRule") {
		t.Errorf("aggregationRule: %v", err)
	}
	// The aggregation controller may escalate ClusterRoles.
	if err := e.Check(authd("system:kube-controller-manager"), agg, nil); err != nil {
		t.Errorf("escalate verb: %v", err)
	}
	if err := e.Check(authd("kelp-admin", "system:masters"), binding("cluster-admin"), nil); err != nil {
		t.Errorf("masters: %v", err)
	}
}

func TestCompactString(t *testing.T) {
	r := rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"a"}}
	if got, want := compactString(r), `{APIGroups:[""], Resources:["configmaps"], ResourceNames:["a"], Verbs:["get"]}`; got != want {
		t.Errorf("got %s want %s", got, want)
	}
}
