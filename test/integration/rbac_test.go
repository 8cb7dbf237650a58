package integration

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// rbacFixture: alice edits team and views other; she reads nodes; bob
// reads one ConfigMap of team.
const rbacFixture = `
apiVersion: v1
kind: Namespace
metadata: {name: team}
---
apiVersion: v1
kind: Namespace
metadata: {name: other}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: robot, namespace: team}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: alice-edit, namespace: team}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: edit}
subjects: [{kind: User, name: alice}, {kind: ServiceAccount, name: robot, namespace: team}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: alice-view, namespace: other}
roleRef: {kind: ClusterRole, name: view}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}, {kind: ServiceAccount, name: robot, namespace: team}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: node-reader}
rules:
- {apiGroups: [""], resources: [nodes], verbs: [get, list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: alice-node-reader}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: node-reader}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}, {kind: ServiceAccount, name: robot, namespace: team}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: settings-reader, namespace: team}
rules:
- {apiGroups: [""], resources: [configmaps], resourceNames: [settings], verbs: [get]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: bob-settings, namespace: team}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: settings-reader}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: bob}]
`

// canI runs `kubectl auth can-i` as an impersonated user; args end with
// the --as flags.
func (s *testServer) canI(args ...string) bool {
	s.t.Helper()
	out, err := s.kubectl(append([]string{"auth", "can-i"}, args...)...)
	// The answer is the last line; warnings (a cluster-scoped resource
	// asked with -n) come before it.
	lines := strings.Split(strings.TrimSpace(out), "\n")
	answer := strings.TrimSpace(lines[len(lines)-1])
	switch {
	case answer == "yes" && err == nil:
		return true
	case strings.HasPrefix(answer, "no") && err != nil:
		return false
	}
	s.t.Fatalf("kubectl auth can-i %s: %v\n%s", strings.Join(args, " "), err, out)
	return false
}

// waitAggregated waits for the aggregation controller to fill view, edit
// and admin.
func (s *testServer) waitAggregated() {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		ok := true
		for _, name := range []string{"view", "edit", "admin"} {
			r, err := s.client().RbacV1().ClusterRoles().Get(ctxT(s.t), name, metav1.GetOptions{})
			ok = ok && err == nil && len(r.Rules) > 0
		}
		if ok {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.t.Fatal("view, edit and admin were not aggregated within 30s")
}

// impersonating is the admin's client acting as user (kubectl --as).
func (s *testServer) impersonating(user string, groups ...string) *kubernetes.Clientset {
	s.t.Helper()
	cfg := rest.CopyConfig(s.config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		s.t.Fatal(err)
	}
	return cs
}

// grantRole gives user rules in namespace ns through a Role and a
// RoleBinding named name.
func (s *testServer) grantRole(ctx context.Context, ns, name, user string, rules ...rbacv1.PolicyRule) {
	s.t.Helper()
	cs := s.client()
	if _, err := cs.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		s.t.Fatal(err)
	}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: user}}}, metav1.CreateOptions{}); err != nil {
		s.t.Fatal(err)
	}
}

// The upstream bootstrap roles through kubectl auth can-i --as: edit,
// view, a cluster role, resourceNames, non-resource paths, the self
// reviews every user has, and what nobody was given.
func TestRBACCanIImpersonated(t *testing.T) {
	s := startServer(t)
	if out, err := s.kubectlIn(rbacFixture, nil, "apply", "-f", "-"); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	s.waitAggregated()
	// The ServiceAccount robot has alice's bindings; it asks with its own
	// token, alice through impersonation.
	token := strings.TrimSpace(s.mustKubectl("create", "token", "robot", "-n", "team"))
	robot := "--kubeconfig=" + s.writeTokenKubeconfig(t, token)
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"get", "pods", "-n", "team"}, true},
		{[]string{"create", "deployments.apps", "-n", "team"}, true},
		{[]string{"update", "deployments.apps/scale", "-n", "team"}, true},
		{[]string{"delete", "services", "-n", "team"}, true},
		{[]string{"get", "secrets", "-n", "team"}, true},
		{[]string{"create", "pods/exec", "-n", "team"}, true},
		{[]string{"get", "pods/log", "-n", "team"}, true},
		{[]string{"create", "roles.rbac.authorization.k8s.io", "-n", "team"}, false},
		{[]string{"create", "rolebindings.rbac.authorization.k8s.io", "-n", "team"}, false},
		{[]string{"update", "resourcequotas", "-n", "team"}, false},
		{[]string{"list", "pods", "-n", "other"}, true},
		{[]string{"watch", "deployments.apps", "-n", "other"}, true},
		{[]string{"create", "pods", "-n", "other"}, false},
		{[]string{"get", "secrets", "-n", "other"}, false},
		{[]string{"list", "pods", "-n", "default"}, false},
		{[]string{"list", "nodes"}, true},
		{[]string{"delete", "nodes"}, false},
		{[]string{"list", "namespaces"}, false},
		{[]string{"list", "pods", "--all-namespaces"}, false},
		{[]string{"create", "selfsubjectaccessreviews.authorization.k8s.io"}, true},
		{[]string{"create", "subjectaccessreviews.authorization.k8s.io"}, false},
		{[]string{"impersonate", "users"}, false},
		{[]string{"get", "/healthz"}, true},
		{[]string{"get", "/api"}, true},
		{[]string{"post", "/api"}, false},
	} {
		if got := s.canI(append(tc.args, "--as=alice")...); got != tc.want {
			t.Errorf("alice: can-i %s = %v, want %v", strings.Join(tc.args, " "), got, tc.want)
		}
		if got := s.canI(append(tc.args, robot)...); got != tc.want {
			t.Errorf("ServiceAccount team/robot: can-i %s = %v, want %v", strings.Join(tc.args, " "), got, tc.want)
		}
	}
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"get", "configmaps/settings", "-n", "team"}, true},
		{[]string{"get", "configmaps/other", "-n", "team"}, false},
		{[]string{"list", "configmaps", "-n", "team"}, false},
		{[]string{"get", "configmaps/settings", "-n", "other"}, false},
	} {
		if got := s.canI(append(tc.args, "--as=bob")...); got != tc.want {
			t.Errorf("bob: can-i %s = %v, want %v", strings.Join(tc.args, " "), got, tc.want)
		}
	}
	// A group binding applies to --as-group.
	if !s.canI("list", "pods", "-n", "other", "--as=carol", "--as-group=system:masters") {
		t.Error("carol in system:masters cannot list pods")
	}
	// --list is RBAC's rules in the namespace.
	out := s.mustKubectl("auth", "can-i", "--list", "-n", "team", "--as=bob")
	if !strings.Contains(out, "configmaps") || !strings.Contains(out, "[settings]") || !strings.Contains(out, "selfsubjectaccessreviews.authorization.k8s.io") {
		t.Errorf("can-i --list for bob:\n%s", out)
	}
	if strings.Contains(out, "deployments") {
		t.Errorf("can-i --list for bob shows alice's rights:\n%s", out)
	}
	// A SubjectAccessReview about alice, from the admin.
	for _, tc := range []struct {
		ns, resource string
		want         bool
	}{{"team", "secrets", true}, {"other", "secrets", false}} {
		sar, err := s.client().AuthorizationV1().SubjectAccessReviews().Create(ctxT(t), &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: "alice", ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: "get", Namespace: tc.ns, Resource: tc.resource}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed != tc.want {
			t.Errorf("SubjectAccessReview alice get %s in %s: %+v", tc.resource, tc.ns, sar.Status)
		}
	}
	if _, err := s.client().AuthorizationV1().SubjectAccessReviews().Create(ctxT(t), &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get"}}}, metav1.CreateOptions{}); !apierrors.IsBadRequest(err) {
		t.Errorf("SubjectAccessReview without a user: %v", err)
	}
	// A LocalSubjectAccessReview is about its own namespace only.
	lsar := func(ns string) (*authorizationv1.LocalSubjectAccessReview, error) {
		return s.client().AuthorizationV1().LocalSubjectAccessReviews("team").Create(ctxT(t), &authorizationv1.LocalSubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: "alice", ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: "delete", Namespace: ns, Resource: "pods"}}}, metav1.CreateOptions{})
	}
	if r, err := lsar("team"); err != nil || !r.Status.Allowed {
		t.Errorf("LocalSubjectAccessReview in team: %+v %v", r, err)
	}
	if _, err := lsar("other"); !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "spec.resourceAttributes.namespace must match namespace: team") {
		t.Errorf("LocalSubjectAccessReview about another namespace: %v", err)
	}
}

// view reads a namespace but not its Secrets; edit writes it but not its
// Roles; a user who may create RoleBindings still cannot bind a role
// with more than they hold, and gets upstream's escalation message.
func TestRBACBootstrapRoles(t *testing.T) {
	s := startServer(t)
	if out, err := s.kubectlIn(rbacFixture+`
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: binder, namespace: team}
rules:
- {apiGroups: [rbac.authorization.k8s.io], resources: [rolebindings], verbs: [create]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: alice-binder, namespace: team}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: binder}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}, {kind: ServiceAccount, name: robot, namespace: team}]
`, nil, "apply", "-f", "-"); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	s.waitAggregated()
	alice := s.impersonating("alice")
	if _, err := alice.CoreV1().Pods("other").List(ctxT(t), metav1.ListOptions{}); err != nil {
		t.Errorf("view listing pods: %v", err)
	}
	_, err := alice.CoreV1().Secrets("other").List(ctxT(t), metav1.ListOptions{})
	wantForbidden(t, "view listing secrets", err, `secrets is forbidden: User "alice" cannot list resource "secrets" in API group "" in the namespace "other"`)
	_, err = alice.CoreV1().Secrets("other").Get(ctxT(t), "any", metav1.GetOptions{})
	wantForbidden(t, "view reading a secret", err, `secrets "any" is forbidden: User "alice" cannot get resource "secrets"`)

	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "mine"}, Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}}}
	_, err = alice.RbacV1().Roles("team").Create(ctxT(t), role, metav1.CreateOptions{})
	wantForbidden(t, "edit creating a Role", err, `roles.rbac.authorization.k8s.io is forbidden: User "alice" cannot create resource "roles" in API group "rbac.authorization.k8s.io" in the namespace "team"`)
	if err := alice.RbacV1().Roles("team").Delete(ctxT(t), "settings-reader", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("edit deleting a Role: %v", err)
	}
	// A plain edit user cannot create RoleBindings at all (other has no
	// binder role); with the binder role in team, binding cluster-admin is
	// an escalation.
	toClusterAdmin := func(ns string) error {
		_, err := alice.RbacV1().RoleBindings(ns).Create(ctxT(t), &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "root"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}}}, metav1.CreateOptions{})
		return err
	}
	wantForbidden(t, "view binding cluster-admin", toClusterAdmin("other"), `User "alice" cannot create resource "rolebindings"`)
	err = toClusterAdmin("team")
	wantForbidden(t, "edit binding cluster-admin", err, `rolebindings.rbac.authorization.k8s.io "root" is forbidden: user "alice" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:
{APIGroups:["*"], Resources:["*"], Verbs:["*"]}
{NonResourceURLs:["*"], Verbs:["*"]}`)
	// The same through kubectl, as a user would see it.
	out, err := s.kubectl("create", "rolebinding", "root2", "-n", "team", "--clusterrole=cluster-admin", "--user=alice", "--as=alice")
	if err == nil || !strings.Contains(out, "is attempting to grant RBAC permissions not currently held") {
		t.Errorf("kubectl create rolebinding as alice: %v\n%s", err, out)
	}
	// Binding view, which she holds in team through edit, is fine.
	if _, err := alice.RbacV1().RoleBindings("team").Create(ctxT(t), &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "dave-view"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "dave"}}}, metav1.CreateOptions{}); err != nil {
		t.Errorf("edit binding view: %v", err)
	}
	// kube-system's Secrets are nobody's but the admins'.
	out, err = s.kubectl("get", "secrets", "-n", "kube-system", "--as=bob")
	if err == nil || !strings.Contains(out, `secrets is forbidden: User "bob" cannot list resource "secrets" in API group "" in the namespace "kube-system"`) {
		t.Errorf("--as=bob get secrets -n kube-system: %v\n%s", err, out)
	}
	if out, err := s.kubectl("auth", "can-i", "list", "secrets", "-n", "kube-system", "--as=bob"); err == nil || !strings.HasPrefix(out, "no") {
		t.Errorf("can-i list secrets --as=bob: %v %s", err, out)
	}
}

// A Helm-style manifest (ServiceAccount, Role, RoleBinding) applies and
// its rights hold for the very next request: the authorizer reads the
// watch caches, so there is no resync to wait for.
func TestRBACHelmManifestTakesEffectAtOnce(t *testing.T) {
	s := startServer(t)
	manifest := `
apiVersion: v1
kind: Namespace
metadata: {name: helm}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: app, namespace: helm}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: pod-reader, namespace: helm}
rules:
- {apiGroups: [""], resources: [pods], verbs: [get, list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: app-pod-reader, namespace: helm}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: pod-reader}
subjects: [{kind: ServiceAccount, name: app, namespace: helm}]
`
	sa := "system:serviceaccount:helm:app"
	app := s.impersonating(sa)
	if _, err := app.CoreV1().Pods("helm").List(ctxT(t), metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("before the manifest: %v", err)
	}
	if out, err := s.kubectlIn(manifest, nil, "apply", "-f", "-"); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	// No retries: the first answer after apply returns must be yes.
	if !s.canI("list", "pods", "-n", "helm", "--as="+sa) {
		t.Fatal("can-i list pods right after apply: no")
	}
	if _, err := app.CoreV1().Pods("helm").List(ctxT(t), metav1.ListOptions{}); err != nil {
		t.Fatalf("listing pods right after apply: %v", err)
	}
	_, err := app.CoreV1().Pods("default").List(ctxT(t), metav1.ListOptions{})
	wantForbidden(t, "another namespace", err, `pods is forbidden: User "system:serviceaccount:helm:app" cannot list resource "pods" in API group "" in the namespace "default"`)
	if s.canI("delete", "pods", "-n", "helm", "--as="+sa) {
		t.Error("can-i delete pods: yes")
	}
	// Taking the binding away takes the rights away.
	s.mustKubectl("delete", "rolebinding", "app-pod-reader", "-n", "helm")
	if s.canI("list", "pods", "-n", "helm", "--as="+sa) {
		t.Error("can-i list pods after the binding went: yes")
	}
	// The same manifest applied by a namespace admin (not a cluster
	// admin): the binding's escalation check finds the Role created a
	// moment before it in the same apply.
	if out, err := s.kubectlIn(`
apiVersion: v1
kind: Namespace
metadata: {name: helm2}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: ops-admin, namespace: helm2}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: admin}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: ops}]
`, nil, "apply", "-f", "-"); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	s.waitAggregated()
	if out, err := s.kubectlIn(strings.ReplaceAll(manifest[strings.Index(manifest, "---\napiVersion: v1\nkind: ServiceAccount"):], "helm", "helm2"), nil,
		"apply", "-f", "-", "--as=ops"); err != nil {
		t.Fatalf("apply as a namespace admin: %v\n%s", err, out)
	}
	if !s.canI("list", "pods", "-n", "helm2", "--as=system:serviceaccount:helm2:app") {
		t.Error("can-i list pods in helm2 after ops's apply: no")
	}
}

// Impersonation needs the impersonate verb: a user without it is refused
// with upstream's 403, one with it acts as the impersonated user.
func TestImpersonation(t *testing.T) {
	s := startServer(t)
	carol, _ := s.userClient("carol")
	carolCfg := s.userConfig("carol")
	carolCfg.Impersonate = rest.ImpersonationConfig{UserName: "kelp-admin", Groups: []string{"system:masters"}}
	asAdmin, err := kubernetes.NewForConfig(carolCfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = asAdmin.CoreV1().Secrets("kube-system").List(ctxT(t), metav1.ListOptions{})
	wantForbidden(t, "carol impersonating the admin", err, `users "kelp-admin" is forbidden: User "carol" cannot impersonate resource "users" in API group "" at the cluster scope`)
	_, err = carol.CoreV1().Secrets("kube-system").List(ctxT(t), metav1.ListOptions{})
	wantForbidden(t, "carol herself", err, `User "carol" cannot list resource "secrets"`)
	// Granted the right to impersonate dave (and only dave), carol acts
	// as dave, with dave's rights.
	if out, err := s.kubectlIn(`
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: impersonate-dave}
rules:
- {apiGroups: [""], resources: [users], verbs: [impersonate], resourceNames: [dave]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: carol-impersonates-dave}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: impersonate-dave}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: carol}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: dave-nodes}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:node-proxier}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: dave}]
`, nil, "apply", "-f", "-"); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	carolCfg.Impersonate = rest.ImpersonationConfig{UserName: "dave"}
	asDave, err := kubernetes.NewForConfig(carolCfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := asDave.CoreV1().Nodes().List(ctxT(t), metav1.ListOptions{}); err != nil {
		t.Errorf("carol as dave listing nodes: %v", err)
	}
	rev, err := asDave.AuthenticationV1().SelfSubjectReviews().Create(ctxT(t), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rev.Status.UserInfo.Username != "dave" || !slices.Equal(rev.Status.UserInfo.Groups, []string{"system:authenticated"}) {
		t.Errorf("whoami as dave: %+v", rev.Status.UserInfo)
	}
	// Groups need their own grant.
	carolCfg.Impersonate = rest.ImpersonationConfig{UserName: "dave", Groups: []string{"system:masters"}}
	asDaveAdmin, err := kubernetes.NewForConfig(carolCfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = asDaveAdmin.CoreV1().Nodes().List(ctxT(t), metav1.ListOptions{})
	wantForbidden(t, "carol impersonating a group", err, `groups "system:masters" is forbidden: User "carol" cannot impersonate resource "groups" in API group "" at the cluster scope`)
	// The admin impersonates anyone; kubectl's --as-uid and extras pass.
	out := s.mustKubectl("auth", "whoami", "--as=eve", "--as-group=devs", "--as-uid=1234", "-o", "jsonpath={.status.userInfo.username} {.status.userInfo.uid} {.status.userInfo.groups}")
	if out != `eve 1234 ["devs","system:authenticated"]` {
		t.Errorf("whoami --as=eve: %s", out)
	}
}

// Anonymous requests are system:anonymous: the health and version paths
// answer (system:public-info-viewer), discovery and the rest are 403, as
// upstream's --anonymous-auth.
func TestRBACAnonymous(t *testing.T) {
	s := startServer(t)
	for _, p := range []string{"/version", "/healthz", "/readyz", "/livez"} {
		if body, code := s.raw(p); code != 200 {
			t.Errorf("anonymous %s: %d %s", p, code, body)
		}
	}
	for _, p := range []string{"/api", "/apis", "/healthz/etcd", "/openapi/v2"} {
		body, code := s.raw(p)
		if code != 403 || !strings.Contains(body, `forbidden: User \"system:anonymous\" cannot get path \"`+p+`\"`) {
			t.Errorf("anonymous %s: %d %s", p, code, body)
		}
	}
}

// The bootstrap policy is reconciled at every start: a changed bootstrap
// role is restored, unless annotated autoupdate=false; added rules stay.
// An aggregated role follows what its selector matches.
func TestRBACBootstrapReconcile(t *testing.T) {
	s := startServer(t)
	c := s.client()
	piv, err := c.RbacV1().ClusterRoles().Get(ctxT(t), "system:public-info-viewer", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	piv.Rules = nil
	if _, err := c.RbacV1().ClusterRoles().Update(ctxT(t), piv, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	mon, err := c.RbacV1().ClusterRoles().Get(ctxT(t), "system:monitoring", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mon.Annotations["rbac.authorization.kubernetes.io/autoupdate"] = "false"
	mon.Rules = mon.Rules[:1]
	if _, err := c.RbacV1().ClusterRoles().Update(ctxT(t), mon, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Anonymous /healthz is refused once its rule is gone...
	if _, code := s.raw("/healthz"); code != 403 {
		t.Errorf("anonymous /healthz without public-info-viewer's rules: %d", code)
	}
	s.restart()
	// ...and back after a restart.
	if _, code := s.raw("/healthz"); code != 200 {
		t.Errorf("anonymous /healthz after restart: %d", code)
	}
	c = s.client()
	mon, err = c.RbacV1().ClusterRoles().Get(ctxT(t), "system:monitoring", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(mon.Rules) != 1 {
		t.Errorf("protected system:monitoring was reconciled: %d rules", len(mon.Rules))
	}
	// Aggregation: a role labelled aggregate-to-view adds to view (and so
	// to edit and admin).
	if _, err := c.RbacV1().ClusterRoles().Create(ctxT(t), &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets-view", Labels: map[string]string{"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
		Rules:      []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{"example.com"}, Resources: []string{"widgets"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		view, err := c.RbacV1().ClusterRoles().Get(ctxT(t), "admin", metav1.GetOptions{})
		if err == nil && slices.ContainsFunc(view.Rules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Resources, "widgets") }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("admin did not aggregate widgets-view: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Tables carry upstream's columns.
	out := s.mustKubectl("get", "clusterrolebinding", "system:node-proxier", "-o", "wide")
	if !strings.Contains(out, "ClusterRole/system:node-proxier") || !strings.Contains(out, "system:kube-proxy") {
		t.Errorf("kubectl get clusterrolebinding -o wide:\n%s", out)
	}
}
