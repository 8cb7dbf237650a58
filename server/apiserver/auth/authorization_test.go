package auth

import (
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestAdminAuthorizer(t *testing.T) {
	getPods := Attributes{IsResource: true, Verb: "get", Version: "v1", Namespace: "default", Resource: "pods", Name: "x"}
	deleteNodes := Attributes{IsResource: true, Verb: "deletecollection", Version: "v1", Resource: "nodes"}
	getAPIs := Attributes{Verb: "get", Path: "/apis"}
	postAPIs := Attributes{Verb: "post", Path: "/apis"}
	getHealth := Attributes{Verb: "get", Path: "/healthz/etcd"}
	authd := func(name string, groups ...string) *User {
		return &User{Name: name, Groups: append(groups, "system:authenticated")}
	}
	anonymous := &User{Name: "system:anonymous", Groups: []string{"system:unauthenticated"}}
	for _, tc := range []struct {
		name  string
		user  *User
		attrs []Attributes
		want  bool
	}{
		{"masters", authd("kelp-admin", "system:masters"), []Attributes{getPods, deleteNodes, getAPIs, postAPIs}, true},
		{"controller manager", authd("system:kube-controller-manager"), []Attributes{getPods, deleteNodes, postAPIs}, true},
		{"scheduler", authd("system:kube-scheduler"), []Attributes{getPods, deleteNodes}, true},
		{"proxy", authd("system:kube-proxy"), []Attributes{getPods, deleteNodes}, true},
		// Nodes are the Node authorizer's to decide, not components.
		{"node", authd("system:node:n1", "system:nodes"), []Attributes{getPods, deleteNodes}, false},
		{"node: discovery", authd("system:node:n1", "system:nodes"), []Attributes{getAPIs}, true},
		{"user: self reviews", authd("bob"), []Attributes{
			{IsResource: true, Verb: "create", Group: "authorization.k8s.io", Version: "v1", Resource: "selfsubjectaccessreviews"},
			{IsResource: true, Verb: "create", Group: "authorization.k8s.io", Version: "v1", Resource: "selfsubjectrulesreviews"},
			{IsResource: true, Verb: "create", Group: "authentication.k8s.io", Version: "v1", Resource: "selfsubjectreviews"}}, true},
		{"user: others' reviews", authd("bob"), []Attributes{
			{IsResource: true, Verb: "create", Group: "authorization.k8s.io", Version: "v1", Resource: "subjectaccessreviews"},
			{IsResource: true, Verb: "list", Group: "authorization.k8s.io", Version: "v1", Resource: "selfsubjectaccessreviews"}}, false},
		{"anonymous: self reviews", anonymous, []Attributes{
			{IsResource: true, Verb: "create", Group: "authorization.k8s.io", Version: "v1", Resource: "selfsubjectaccessreviews"}}, false},
		{"node name without the nodes group", authd("system:node:n1"), []Attributes{getPods, deleteNodes}, false},
		{"nodes group without a node name", authd("bob", "system:nodes"), []Attributes{getPods, deleteNodes}, false},
		{"a component's name as a group", authd("bob", "system:kube-scheduler"), []Attributes{getPods}, false},
		{"user: resources", authd("bob", "dev"), []Attributes{getPods, deleteNodes}, false},
		{"user: discovery", authd("bob", "dev"), []Attributes{getAPIs, {Verb: "get", Path: "/openapi/v3"}}, true},
		{"user: non-GET path", authd("bob", "dev"), []Attributes{postAPIs, {Verb: "put", Path: "/api"}}, false},
		{"user: public paths", authd("bob"), []Attributes{getHealth, {Verb: "get", Path: "/version"}}, true},
		{"anonymous: public paths", anonymous, []Attributes{getHealth, {Verb: "get", Path: "/livez"}, {Verb: "get", Path: "/readyz"}}, true},
		{"anonymous: discovery", anonymous, []Attributes{getAPIs}, false},
		{"anonymous: resources", anonymous, []Attributes{getPods}, false},
		// A resource request is never a public path, whatever its Path.
		{"user: resource request with a public path", authd("bob"), []Attributes{{IsResource: true, Verb: "get", Resource: "pods", Path: "/healthz"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, a := range tc.attrs {
				d, reason := AdminAuthorizer{}.Authorize(tc.user, a)
				want := DecisionNoOpinion
				if tc.want {
					want = DecisionAllow
				}
				if d != want {
					t.Errorf("%s %s%s: %s, want %s", a.Verb, a.Resource, a.Path, d, want)
				}
				// Like RBAC, it explains nothing: a 403 says only what
				// was refused.
				if reason != "" {
					t.Errorf("%s %s%s: reason %q, want none", a.Verb, a.Resource, a.Path, reason)
				}
			}
		})
	}
}

func TestForbiddenMessage(t *testing.T) {
	bob := &User{Name: "bob", Groups: []string{"system:authenticated"}}
	for _, tc := range []struct {
		name  string
		attrs Attributes
		want  string
	}{
		{"namespaced resource with a name",
			Attributes{IsResource: true, Verb: "get", Version: "v1", Namespace: "default", Resource: "pods", Name: "x"},
			`pods "x" is forbidden: User "bob" cannot get resource "pods" in API group "" in the namespace "default"`},
		{"namespaced list",
			Attributes{IsResource: true, Verb: "list", Version: "v1", Namespace: "default", Resource: "pods"},
			`pods is forbidden: User "bob" cannot list resource "pods" in API group "" in the namespace "default"`},
		{"subresource",
			Attributes{IsResource: true, Verb: "create", Version: "v1", Namespace: "default", Resource: "pods", Name: "x", Subresource: "exec"},
			`pods "x" is forbidden: User "bob" cannot create resource "pods/exec" in API group "" in the namespace "default"`},
		{"cluster scope",
			Attributes{IsResource: true, Verb: "list", Version: "v1", Resource: "nodes"},
			`nodes is forbidden: User "bob" cannot list resource "nodes" in API group "" at the cluster scope`},
		{"cluster-scoped object",
			Attributes{IsResource: true, Verb: "delete", Version: "v1", Resource: "namespaces", Name: "kube-system"},
			`namespaces "kube-system" is forbidden: User "bob" cannot delete resource "namespaces" in API group "" at the cluster scope`},
		{"cluster-scoped status",
			Attributes{IsResource: true, Verb: "update", Version: "v1", Resource: "nodes", Name: "n1", Subresource: "status"},
			`nodes "n1" is forbidden: User "bob" cannot update resource "nodes/status" in API group "" at the cluster scope`},
		{"non-resource path",
			Attributes{Verb: "post", Path: "/apis"},
			`forbidden: User "bob" cannot post path "/apis"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ForbiddenMessage(bob, tc.attrs); got != tc.want {
				t.Errorf("\n got %s\nwant %s", got, tc.want)
			}
			// The same text as upstream's responsewriters.Forbidden builds.
			if got := upstreamForbidden(bob, tc.attrs); got != tc.want {
				t.Errorf("test's upstream model disagrees:\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// upstreamForbidden is k8s.io/apiserver's responsewriters.Forbidden text:
// forbiddenMessage, wrapped in apierrors.NewForbidden of the request's
// group and resource (without the subresource) and name. The reason is
// empty, as AdminAuthorizer's is not shown.
func upstreamForbidden(u *User, a Attributes) string {
	var msg string
	switch {
	case !a.IsResource:
		msg = fmt.Sprintf("User %q cannot %s path %q", u.Name, a.Verb, a.Path)
	default:
		res := a.Resource
		if a.Subresource != "" {
			res += "/" + a.Subresource
		}
		if a.Namespace != "" {
			msg = fmt.Sprintf("User %q cannot %s resource %q in API group %q in the namespace %q", u.Name, a.Verb, res, a.Group, a.Namespace)
		} else {
			msg = fmt.Sprintf("User %q cannot %s resource %q in API group %q at the cluster scope", u.Name, a.Verb, res, a.Group)
		}
	}
	return apierrors.NewForbidden(schema.GroupResource{Group: a.Group, Resource: a.Resource}, a.Name, fmt.Errorf("%s", msg)).Error()
}
