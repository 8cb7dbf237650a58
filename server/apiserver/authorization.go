package apiserver

import (
	"fmt"
	"slices"
	"strings"
)

// Authorizer decides whether a user may perform a request. RBAC will be
// another implementation of this same interface.
type Authorizer interface {
	Authorize(u *User, info requestInfo) (allowed bool, reason string)
}

// adminAuthorizer allows cluster admins (system:masters) and kelp's own
// components, whose identities are fixed by their client certificates.
// Everyone else is denied until RBAC exists.
type adminAuthorizer struct{}

var componentUsers = []string{"system:kube-controller-manager", "system:kube-scheduler", "system:kube-proxy"}

func (adminAuthorizer) Authorize(u *User, info requestInfo) (bool, string) {
	if slices.Contains(u.Groups, "system:masters") || slices.Contains(componentUsers, u.Name) ||
		(strings.HasPrefix(u.Name, "system:node:") && slices.Contains(u.Groups, "system:nodes")) {
		return true, ""
	}
	if !info.IsResource && anonymousAllowed(info.Path) {
		return true, ""
	}
	// Discovery and OpenAPI are readable by any authenticated user, as
	// upstream's system:discovery role allows.
	if !info.IsResource && slices.Contains(u.Groups, "system:authenticated") && info.Verb == "get" {
		return true, ""
	}
	return false, "only cluster administrators are authorized"
}

// forbiddenMessage is upstream's 403 text.
func forbiddenMessage(u *User, info requestInfo) string {
	if !info.IsResource {
		return fmt.Sprintf("forbidden: User %q cannot %s path %q", u.Name, info.Verb, info.Path)
	}
	res := info.Resource
	if info.Subresource != "" {
		res += "/" + info.Subresource
	}
	subject := res
	if info.Name != "" {
		subject = fmt.Sprintf("%s %q", info.Resource, info.Name)
	}
	msg := fmt.Sprintf("%s is forbidden: User %q cannot %s resource %q in API group %q", subject, u.Name, info.Verb, res, info.Group)
	if info.Namespace != "" {
		msg += fmt.Sprintf(" in the namespace %q", info.Namespace)
	} else {
		msg += " at the cluster scope"
	}
	return msg
}
