package auth

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kelp-project/kelp/server/bootstrappolicy"
	"github.com/kelp-project/kelp/server/controllers/clusterroleaggregation"
)

// policyIndex is an index holding upstream's bootstrap policy, with the
// aggregated roles (admin, edit, view) filled in as the aggregation
// controller fills them.
func policyIndex(t testing.TB) *RBACIndex {
	t.Helper()
	idx := NewRBACIndex()
	var crs []*rbacv1.ClusterRole
	for _, r := range bootstrappolicy.ClusterRoles() {
		crs = append(crs, &r)
	}
	// Aggregation is transitive (view into edit into admin): repeat until
	// nothing changes, as the controller's resyncs do.
	for changed := true; changed; {
		changed = false
		for _, r := range crs {
			if r.AggregationRule == nil {
				continue
			}
			rules, err := clusterroleaggregation.Aggregate(r, crs)
			if err != nil {
				t.Fatal(err)
			}
			if len(rules) != len(r.Rules) {
				r.Rules, changed = rules, true
			}
		}
	}
	for _, r := range crs {
		idx.Set(r)
	}
	for _, b := range bootstrappolicy.ClusterRoleBindings() {
		idx.Set(&b)
	}
	for _, r := range bootstrappolicy.Roles() {
		idx.Set(&r)
	}
	for _, b := range bootstrappolicy.RoleBindings() {
		idx.Set(&b)
	}
	return idx
}

func path(verb, p string) Attributes { return Attributes{Verb: verb, Path: p} }

func authd(name string, groups ...string) *User {
	return &User{Name: name, Groups: append(groups, "system:authenticated")}
}

func TestRuleAllows(t *testing.T) {
	r := func(verbs, groups, resources, names []string) *rbacv1.PolicyRule {
		return &rbacv1.PolicyRule{Verbs: verbs, APIGroups: groups, Resources: resources, ResourceNames: names}
	}
	l := func(s ...string) []string { return s }
	for _, tc := range []struct {
		name string
		rule *rbacv1.PolicyRule
		a    Attributes
		want bool
	}{
		{"exact", r(l("get"), l(""), l("pods"), nil), res("get", "", "ns", "pods", "p", ""), true},
		{"other verb", r(l("get"), l(""), l("pods"), nil), res("list", "", "ns", "pods", "", ""), false},
		{"other group", r(l("get"), l("apps"), l("pods"), nil), res("get", "", "ns", "pods", "p", ""), false},
		{"verb wildcard", r(l("*"), l(""), l("pods"), nil), res("delete", "", "ns", "pods", "p", ""), true},
		{"group wildcard", r(l("get"), l("*"), l("deployments"), nil), res("get", "apps", "ns", "deployments", "d", ""), true},
		{"resource wildcard", r(l("get"), l(""), l("*"), nil), res("get", "", "ns", "pods", "p", "log"), true},
		{"subresource needs its own rule", r(l("get"), l(""), l("pods"), nil), res("get", "", "ns", "pods", "p", "log"), false},
		{"resource/subresource", r(l("get"), l(""), l("pods/log"), nil), res("get", "", "ns", "pods", "p", "log"), true},
		{"resource/subresource of another resource", r(l("get"), l(""), l("pods/log"), nil), res("get", "", "ns", "nodes", "p", "log"), false},
		{"resource/subresource is not the resource", r(l("get"), l(""), l("pods/log"), nil), res("get", "", "ns", "pods", "p", ""), false},
		{"*/subresource", r(l("get"), l("*"), l("*/scale"), nil), res("get", "apps", "ns", "deployments", "d", "scale"), true},
		{"*/subresource, other subresource", r(l("get"), l("*"), l("*/scale"), nil), res("get", "apps", "ns", "deployments", "d", "status"), false},
		{"prefix is not a resource", r(l("get"), l(""), l("pod"), nil), res("get", "", "ns", "pods", "p", ""), false},
		{"resourceNames match", r(l("get"), l(""), l("configmaps"), l("a", "b")), res("get", "", "ns", "configmaps", "b", ""), true},
		{"resourceNames other", r(l("get"), l(""), l("configmaps"), l("a")), res("get", "", "ns", "configmaps", "c", ""), false},
		{"resourceNames, no name (create, list)", r(l("create", "list"), l(""), l("configmaps"), l("a")), res("list", "", "ns", "configmaps", "", ""), false},
		{"non-resource exact", &rbacv1.PolicyRule{Verbs: l("get"), NonResourceURLs: l("/healthz")}, path("get", "/healthz"), true},
		{"non-resource prefix *", &rbacv1.PolicyRule{Verbs: l("get"), NonResourceURLs: l("/healthz/*")}, path("get", "/healthz/etcd"), true},
		{"non-resource prefix * is not the parent", &rbacv1.PolicyRule{Verbs: l("get"), NonResourceURLs: l("/healthz/*")}, path("get", "/healthz"), false},
		{"non-resource all", &rbacv1.PolicyRule{Verbs: l("*"), NonResourceURLs: l("*")}, path("post", "/anything"), true},
		{"non-resource other verb", &rbacv1.PolicyRule{Verbs: l("get"), NonResourceURLs: l("/api")}, path("post", "/api"), false},
		{"non-resource rule, resource request", &rbacv1.PolicyRule{Verbs: l("get"), NonResourceURLs: l("*")}, res("get", "", "ns", "pods", "", ""), false},
		{"resource rule, non-resource request", r(l("get"), l("*"), l("*"), nil), path("get", "/api"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := RuleAllows(tc.a, tc.rule); got != tc.want {
				t.Errorf("RuleAllows = %v, want %v", got, tc.want)
			}
		})
	}
}

// The chain kelp serves, over upstream's bootstrap policy: what each
// identity may do.
func TestPolicyChain(t *testing.T) {
	c := Chain{PrivilegedGroup{}, NodeAuthorizer{Objects: testObjects()}, RBAC{Index: policyIndex(t)}}
	anonymous := &User{Name: AnonymousUser, Groups: []string{UnauthenticatedGroup}}
	getPods := res("get", "", "default", "pods", "x", "")
	deleteNodes := res("deletecollection", "", "", "nodes", "", "")
	for _, tc := range []struct {
		name  string
		user  *User
		attrs []Attributes
		want  bool
	}{
		{"masters", authd("kelp-admin", "system:masters"), []Attributes{getPods, deleteNodes, path("get", "/apis"), path("post", "/apis")}, true},
		{"controller manager: its informers", authd("system:kube-controller-manager"), []Attributes{
			res("list", "", "", "pods", "", ""), res("watch", "apps", "", "deployments", "", "")}, true},
		{"controller manager: its controllers' writes", authd("system:kube-controller-manager"), []Attributes{
			res("create", "apps", "ns", "replicasets", "", ""), res("update", "apps", "ns", "deployments", "d", "status"),
			res("create", "", "ns", "pods", "", ""), res("create", "", "ns", "serviceaccounts", "", ""),
			res("update", "", "ns", "configmaps", "kube-root-ca.crt", ""), res("delete", "", "ns", "pods", "p", ""),
			res("patch", "", "", "nodes", "n", ""), res("update", "", "", "namespaces", "ns", "finalize"),
			res("update", "", "ns", "services", "s", "status"), res("create", "discovery.k8s.io", "ns", "endpointslices", "", ""),
			res("update", "coordination.k8s.io", "kube-system", "leases", "kube-controller-manager", ""),
			res("create", "", "kube-system", "services", "", ""),
			res("update", "rbac.authorization.k8s.io", "", "clusterroles", "admin", ""),
			res("escalate", "rbac.authorization.k8s.io", "", "clusterroles", "admin", "")}, true},
		{"controller manager: not everything", authd("system:kube-controller-manager"), []Attributes{
			res("create", "apps", "ns", "deployments", "", ""), res("create", "", "ns", "pods", "p", "exec"),
			res("create", "rbac.authorization.k8s.io", "", "clusterrolebindings", "", ""),
			res("impersonate", "", "", "users", "alice", ""), res("bind", "rbac.authorization.k8s.io", "", "clusterroles", "cluster-admin", "")}, false},
		{"scheduler", authd("system:kube-scheduler"), []Attributes{
			res("create", "", "ns", "pods", "p", "binding"), res("list", "", "", "nodes", "", ""),
			res("update", "coordination.k8s.io", "kube-system", "leases", "kube-scheduler", ""), res("patch", "", "ns", "pods", "p", "status")}, true},
		{"scheduler: no writes beyond binding", authd("system:kube-scheduler"), []Attributes{
			res("create", "", "ns", "pods", "", ""), res("update", "", "", "nodes", "n", ""), getPodsSecret()}, false},
		{"proxy", authd("system:kube-proxy"), []Attributes{
			res("list", "", "", "services", "", ""), res("watch", "discovery.k8s.io", "", "endpointslices", "", ""),
			res("get", "", "", "nodes", "n", ""), res("update", "discovery.k8s.io", "kube-system", "endpointslices", "kube-dns-n", "")}, true},
		{"proxy: no writes elsewhere", authd("system:kube-proxy"), []Attributes{
			res("update", "discovery.k8s.io", "default", "endpointslices", "x", ""), res("create", "", "ns", "services", "", "")}, false},
		// Nodes are the Node authorizer's to decide; RBAC's system:node is
		// bound to nobody.
		{"node: unrelated", authd("system:node:n1", "system:nodes"), []Attributes{getPods, deleteNodes}, false},
		{"node: discovery", authd("system:node:n1", "system:nodes"), []Attributes{path("get", "/apis")}, true},
		{"user: self reviews", authd("bob"), []Attributes{
			res("create", "authorization.k8s.io", "", "selfsubjectaccessreviews", "", ""),
			res("create", "authorization.k8s.io", "", "selfsubjectrulesreviews", "", ""),
			res("create", "authentication.k8s.io", "", "selfsubjectreviews", "", "")}, true},
		{"user: others' reviews", authd("bob"), []Attributes{
			res("create", "authorization.k8s.io", "", "subjectaccessreviews", "", ""),
			res("list", "authorization.k8s.io", "", "selfsubjectaccessreviews", "", "")}, false},
		{"a component's name as a group", authd("bob", "system:kube-scheduler"), []Attributes{res("list", "", "", "nodes", "", "")}, false},
		{"user: resources", authd("bob", "dev"), []Attributes{getPods, deleteNodes}, false},
		{"user: discovery", authd("bob"), []Attributes{path("get", "/apis"), path("get", "/api/v1"), path("get", "/openapi/v3")}, true},
		{"user: non-GET path", authd("bob"), []Attributes{path("post", "/apis"), path("put", "/api")}, false},
		{"user: public paths", authd("bob"), []Attributes{path("get", "/healthz"), path("get", "/version")}, true},
		{"anonymous: public paths", anonymous, []Attributes{path("get", "/healthz"), path("get", "/livez"), path("get", "/readyz"), path("get", "/version")}, true},
		// /healthz/<check> is system:monitoring's, not public.
		{"anonymous: discovery and details", anonymous, []Attributes{path("get", "/api"), path("get", "/apis"), path("get", "/healthz/etcd"), path("get", "/openapi/v2")}, false},
		{"anonymous: resources and reviews", anonymous, []Attributes{getPods, res("create", "authorization.k8s.io", "", "selfsubjectaccessreviews", "", "")}, false},
		{"monitoring group", authd("prom", "system:monitoring"), []Attributes{path("get", "/healthz/etcd"), path("get", "/metrics")}, true},
		{"service account: discovery of issuer", authd("system:serviceaccount:default:app", "system:serviceaccounts", "system:serviceaccounts:default"),
			[]Attributes{path("get", "/openid/v1/jwks")}, true},
		{"service account: nothing by default", authd("system:serviceaccount:default:app", "system:serviceaccounts", "system:serviceaccounts:default"),
			[]Attributes{res("list", "", "default", "pods", "", "")}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, a := range tc.attrs {
				d, _ := c.Authorize(tc.user, a)
				if got := d == DecisionAllow; got != tc.want {
					t.Errorf("%s %s %s/%s %s%s: %s, want allowed=%v", a.Verb, a.Group, a.Resource, a.Subresource, a.Name, a.Path, d, tc.want)
				}
			}
		})
	}
}

func getPodsSecret() Attributes { return res("get", "", "default", "secrets", "s", "") }

// The upstream user-facing roles: view reads but not Secrets, edit
// writes but not roles, admin manages roles in its namespace.
func TestAggregatedRoles(t *testing.T) {
	idx := policyIndex(t)
	for _, name := range []string{"view", "edit", "admin"} {
		b := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name + "s"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name + "-user"}}}
		idx.Set(b)
	}
	az := RBAC{Index: idx}
	for _, tc := range []struct {
		user string
		a    Attributes
		want bool
	}{
		{"view-user", res("list", "", "team", "pods", "", ""), true},
		{"view-user", res("get", "apps", "team", "deployments", "d", ""), true},
		{"view-user", res("get", "", "team", "pods", "p", "log"), true},
		{"view-user", res("get", "", "team", "secrets", "s", ""), false},
		{"view-user", res("list", "", "team", "secrets", "", ""), false},
		{"view-user", res("create", "", "team", "pods", "", ""), false},
		{"view-user", res("list", "", "other", "pods", "", ""), false},
		{"view-user", res("list", "rbac.authorization.k8s.io", "team", "roles", "", ""), false},
		{"edit-user", res("get", "", "team", "secrets", "s", ""), true},
		{"edit-user", res("create", "apps", "team", "deployments", "", ""), true},
		{"edit-user", res("create", "", "team", "pods", "p", "exec"), true},
		{"edit-user", res("create", "rbac.authorization.k8s.io", "team", "roles", "", ""), false},
		{"edit-user", res("update", "rbac.authorization.k8s.io", "team", "rolebindings", "x", ""), false},
		{"edit-user", res("update", "", "team", "resourcequotas", "q", ""), false},
		{"admin-user", res("create", "rbac.authorization.k8s.io", "team", "rolebindings", "", ""), true},
		{"admin-user", res("list", "", "team", "secrets", "", ""), true},
		{"admin-user", res("create", "rbac.authorization.k8s.io", "", "clusterrolebindings", "", ""), false},
	} {
		d, reason := az.Authorize(authd(tc.user), tc.a)
		if got := d == DecisionAllow; got != tc.want {
			t.Errorf("%s: %s %s/%s in %s: %s, want %v", tc.user, tc.a.Verb, tc.a.Resource, tc.a.Subresource, tc.a.Namespace, d, tc.want)
		}
		if d == DecisionAllow && !strings.HasPrefix(reason, `RBAC: allowed by RoleBinding "`) {
			t.Errorf("reason %q", reason)
		}
	}
	// Upstream's allow reason names the binding, role and subject.
	_, reason := az.Authorize(authd("view-user"), res("list", "", "team", "pods", "", ""))
	if want := `RBAC: allowed by RoleBinding "views/team" of ClusterRole "view" to User "view-user"`; reason != want {
		t.Errorf("reason\n got %s\nwant %s", reason, want)
	}
	_, reason = az.Authorize(authd("view-user"), path("get", "/version"))
	if want := `RBAC: allowed by ClusterRoleBinding "system:discovery" of ClusterRole "system:discovery" to Group "system:authenticated"`; reason != want &&
		reason != `RBAC: allowed by ClusterRoleBinding "system:public-info-viewer" of ClusterRole "system:public-info-viewer" to Group "system:authenticated"` {
		t.Errorf("reason\n got %s\nwant %s", reason, want)
	}
}

// A binding applies to service accounts by their user name, with a
// RoleBinding's namespace when the subject leaves it out; updates and
// deletes of bindings and roles take effect in the index at once.
func TestRBACIndexChanges(t *testing.T) {
	idx := NewRBACIndex()
	az := RBAC{Index: idx}
	sa := authd(ServiceAccountUsername("apps", "web"), "system:serviceaccounts", "system:serviceaccounts:apps")
	listPods := res("list", "", "apps", "pods", "", "")
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "pods"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"list"}, APIGroups: []string{""}, Resources: []string{"pods"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pods"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "web"}}}
	allowed := func() bool { d, _ := az.Authorize(sa, listPods); return d == DecisionAllow }
	idx.Set(binding)
	if allowed() {
		t.Fatal("allowed by a binding of a missing role")
	}
	idx.Set(role)
	if !allowed() {
		t.Fatal("not allowed after the role appeared")
	}
	_, reason := az.Authorize(sa, listPods)
	if want := `RBAC: allowed by RoleBinding "web/apps" of Role "pods" to ServiceAccount "web/apps"`; reason != want {
		t.Errorf("reason\n got %s\nwant %s", reason, want)
	}
	// The same binding, now for a group.
	b2 := binding.DeepCopy()
	b2.Subjects = []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:serviceaccounts:apps"}}
	idx.Set(b2)
	if !allowed() {
		t.Fatal("not allowed through the group")
	}
	if d, _ := az.Authorize(authd("bob"), listPods); d == DecisionAllow {
		t.Fatal("bob allowed through a group he is not in")
	}
	// Objects are never changed once set (they are the watch cache's):
	// an update is a new object.
	b3 := b2.DeepCopy()
	b3.Subjects = []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}}
	idx.Set(b3)
	if allowed() {
		t.Fatal("still allowed after the subject changed")
	}
	if d, _ := az.Authorize(authd("alice"), listPods); d != DecisionAllow {
		t.Fatal("alice not allowed after the subject changed to her")
	}
	idx.Delete(b3)
	if d, _ := az.Authorize(authd("alice"), listPods); d == DecisionAllow {
		t.Fatal("allowed after the binding was deleted")
	}
	idx.Replace(&rbacv1.RoleBinding{}, []runtime.Object{binding})
	if !allowed() {
		t.Fatal("Replace lost the binding")
	}
	idx.Replace(&rbacv1.Role{}, nil)
	if allowed() {
		t.Fatal("Replace kept the role")
	}
	// A cluster-wide rule from a ClusterRoleBinding applies in every
	// namespace and at the cluster scope.
	idx.Set(&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "reader"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"nodes", "pods"}}}})
	idx.Set(&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "readers"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "apps", Name: "web"}}})
	for _, a := range []Attributes{res("get", "", "", "nodes", "n", ""), res("get", "", "other", "pods", "p", "")} {
		if d, _ := az.Authorize(sa, a); d != DecisionAllow {
			t.Errorf("cluster-wide %s: %s", a.Resource, d)
		}
	}
	// RulesFor lists both.
	if got := idx.RulesFor(sa, "apps"); len(got) != 1 {
		t.Errorf("RulesFor = %v", got)
	}
}

// benchIndex is a cluster with n RoleBindings across namespaces and m
// ClusterRoles (each with a handful of rules), plus the bootstrap policy.
func benchIndex(b *testing.B, n, m int) *RBACIndex {
	idx := policyIndex(b)
	for i := range m {
		idx.Set(&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("role-%d", i)}, Rules: []rbacv1.PolicyRule{
			{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"pods", "services", "endpoints"}},
			{Verbs: []string{"get"}, APIGroups: []string{"apps"}, Resources: []string{"deployments", "statefulsets"}},
			{Verbs: []string{"create", "update"}, APIGroups: []string{""}, Resources: []string{fmt.Sprintf("widgets%d", i)}},
			{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"cfg"}},
		}})
	}
	for i := range n {
		idx.Set(&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns-%d", i%50), Name: fmt.Sprintf("rb-%d", i)},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: fmt.Sprintf("role-%d", i%m)},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: fmt.Sprintf("user-%d", i%100)},
				{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: fmt.Sprintf("team-%d", i%20)}}})
	}
	return idx
}

// BenchmarkRBACDecision is one authorization decision through the chain
// kelp serves, with 1,000 RoleBindings and 200 ClusterRoles: a user with
// bindings in the namespace, allowed by the last rule it reaches, and
// refused (every rule of its bindings visited). Reports p99 per decision.
func BenchmarkRBACDecision(b *testing.B) {
	idx := benchIndex(b, 1000, 200)
	c := Chain{PrivilegedGroup{}, NodeAuthorizer{Objects: testObjects()}, RBAC{Index: idx}}
	u := authd("user-7", "team-7")
	for _, bc := range []struct {
		name string
		a    Attributes
		want Decision
	}{
		{"allow", res("update", "", "ns-7", "widgets7", "w", ""), DecisionAllow},
		{"deny", res("delete", "", "ns-7", "secrets", "s", ""), DecisionNoOpinion},
	} {
		b.Run(bc.name, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				d, _ := c.Authorize(u, bc.a)
				lat = append(lat, time.Since(start))
				if d != bc.want {
					b.Fatalf("decision %s, want %s", d, bc.want)
				}
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1000, "p99-µs")
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1000, "p50-µs")
		})
	}
}
