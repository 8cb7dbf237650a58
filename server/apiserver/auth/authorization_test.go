package auth

import (
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

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
// empty, as RBAC's is when it has no opinion.
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
