package auth

import (
	"errors"

	"fmt"
	"slices"
	"strings"

	"github.com/kelp-project/kelp/config"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Attributes are what a request asks to do: a verb on a resource (with
// group, namespace, name and subresource) or on a non-resource path.
type Attributes struct {
	IsResource  bool
	Verb        string // get list watch create update patch delete deletecollection
	Group       string
	Version     string
	Namespace   string
	Resource    string
	Name        string
	Subresource string
	Path        string
}

// Authorizer decides whether a user may perform a request. RBAC and the
// Node authorizer will be further implementations, chained in order.
type Authorizer interface {
	Authorize(u *User, a Attributes) (allowed bool, reason string)
}

// AdminAuthorizer allows cluster admins (system:masters) and kelp's own
// components, whose identities are fixed by their client certificates.
// Everyone else is denied until RBAC exists.
type AdminAuthorizer struct{}

var componentUsers = []string{config.ControllerManagerUser, config.SchedulerUser, config.ProxyUser}

func (AdminAuthorizer) Authorize(u *User, info Attributes) (bool, string) {
	if slices.Contains(u.Groups, config.MastersGroup) || slices.Contains(componentUsers, u.Name) ||
		(strings.HasPrefix(u.Name, config.NodeUserPrefix) && slices.Contains(u.Groups, config.NodesGroup)) {
		return true, ""
	}
	if !info.IsResource && AnonymousAllowed(info.Path) {
		return true, ""
	}
	// Discovery and OpenAPI are readable by any authenticated user, as
	// upstream's system:discovery role allows.
	if !info.IsResource && slices.Contains(u.Groups, "system:authenticated") && info.Verb == "get" {
		return true, ""
	}
	return false, "only cluster administrators are authorized"
}

// Forbidden is upstream's 403 for a request the authorizers refused: the
// resource named with its group (deployments.apps), the subresource only
// in the text.
func Forbidden(u *User, info Attributes) *apierrors.StatusError {
	gr := schema.GroupResource{}
	if info.IsResource {
		gr = schema.GroupResource{Group: info.Group, Resource: info.Resource}
	}
	return apierrors.NewForbidden(gr, info.Name, errors.New(forbiddenReason(u, info)))
}

// ForbiddenMessage is upstream's 403 text.
func ForbiddenMessage(u *User, info Attributes) string {
	return Forbidden(u, info).ErrStatus.Message
}

func forbiddenReason(u *User, info Attributes) string {
	if !info.IsResource {
		return fmt.Sprintf("User %q cannot %s path %q", u.Name, info.Verb, info.Path)
	}
	res := info.Resource
	if info.Subresource != "" {
		res += "/" + info.Subresource
	}
	if info.Namespace != "" {
		return fmt.Sprintf("User %q cannot %s resource %q in API group %q in the namespace %q", u.Name, info.Verb, res, info.Group, info.Namespace)
	}
	return fmt.Sprintf("User %q cannot %s resource %q in API group %q at the cluster scope", u.Name, info.Verb, res, info.Group)
}
