package auth

import "testing"

// Upstream names the resource of a 403 with its group (deployments.apps),
// and without the subresource: apierrors.NewForbidden of the request's
// GroupResource. ForbiddenMessage currently writes the bare resource name,
// and "pods/exec" when a subresource request has no name.
func TestForbiddenMessageGroupQualified(t *testing.T) {
	bob := &User{Name: "bob", Groups: []string{"system:authenticated"}}
	for _, tc := range []struct {
		name  string
		attrs Attributes
		want  string
	}{
		{"grouped, namespaced, named",
			Attributes{IsResource: true, Verb: "get", Group: "apps", Version: "v1", Namespace: "default", Resource: "deployments", Name: "web"},
			`deployments.apps "web" is forbidden: User "bob" cannot get resource "deployments" in API group "apps" in the namespace "default"`},
		{"grouped subresource",
			Attributes{IsResource: true, Verb: "update", Group: "apps", Version: "v1", Namespace: "default", Resource: "deployments", Name: "web", Subresource: "scale"},
			`deployments.apps "web" is forbidden: User "bob" cannot update resource "deployments/scale" in API group "apps" in the namespace "default"`},
		{"grouped, cluster scope",
			Attributes{IsResource: true, Verb: "list", Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
			`clusterroles.rbac.authorization.k8s.io is forbidden: User "bob" cannot list resource "clusterroles" in API group "rbac.authorization.k8s.io" at the cluster scope`},
		{"subresource without a name",
			Attributes{IsResource: true, Verb: "list", Version: "v1", Namespace: "default", Resource: "pods", Subresource: "status"},
			`pods is forbidden: User "bob" cannot list resource "pods/status" in API group "" in the namespace "default"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := upstreamForbidden(bob, tc.attrs); got != tc.want {
				t.Fatalf("test's upstream model disagrees:\n got %s\nwant %s", got, tc.want)
			}
			if got := ForbiddenMessage(bob, tc.attrs); got != tc.want {
				t.Errorf("\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}
