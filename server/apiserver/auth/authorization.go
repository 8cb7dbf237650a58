package auth

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kelp-project/kelp/config"
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
	// FieldSelector is a list or watch's fieldSelector, parsed: the Node
	// authorizer lets a node list pods only with spec.nodeName=<itself>.
	// A list or watch whose selector requires metadata.name=<x> also has
	// Name x, as upstream's RequestInfo does, so that per-object watches
	// are authorized like gets of that object.
	FieldSelector fields.Requirements
}

// Decision is an authorizer's answer. NoOpinion passes the request to the
// next authorizer of a Chain; a request nobody allows is refused.
type Decision int

const (
	DecisionNoOpinion Decision = iota
	DecisionAllow
	DecisionDeny
)

func (d Decision) String() string {
	switch d {
	case DecisionAllow:
		return "Allow"
	case DecisionDeny:
		return "Deny"
	}
	return "NoOpinion"
}

// Authorizer decides whether a user may perform a request. The reason
// explains a refusal (or, rarely, an allow); it ends the 403 message and
// fills a SubjectAccessReview's status.reason, as upstream's does.
type Authorizer interface {
	Authorize(u *User, a Attributes) (Decision, string)
}

// Chain asks each authorizer in order: the first Allow or Deny is the
// answer; if all have no opinion, the request is refused with their
// reasons, one per line (upstream's union authorizer).
type Chain []Authorizer

func (c Chain) Authorize(u *User, a Attributes) (Decision, string) {
	var reasons []string
	for _, az := range c {
		d, reason := az.Authorize(u, a)
		if d != DecisionNoOpinion {
			return d, reason
		}
		if reason != "" {
			reasons = append(reasons, reason)
		}
	}
	return DecisionNoOpinion, strings.Join(reasons, "\n")
}

// PrivilegedGroup allows every request of a member of system:masters,
// ahead of every other authorizer, as kube-apiserver's privileged-group
// authorizer does: an administrator keeps working whatever RBAC holds.
type PrivilegedGroup struct{}

func (PrivilegedGroup) Authorize(u *User, _ Attributes) (Decision, string) {
	if u != nil && slices.Contains(u.Groups, config.MastersGroup) {
		return DecisionAllow, ""
	}
	return DecisionNoOpinion, ""
}

// Forbidden is upstream's 403 for a request the authorizers refused: the
// resource named with its group (deployments.apps), the subresource only
// in the text, and the authorizers' reason, if any, after a colon.
func Forbidden(u *User, info Attributes, reason string) *apierrors.StatusError {
	gr := schema.GroupResource{}
	if info.IsResource {
		gr = schema.GroupResource{Group: info.Group, Resource: info.Resource}
	}
	msg := forbiddenReason(u, info)
	if reason != "" {
		msg += ": " + reason
	}
	return apierrors.NewForbidden(gr, info.Name, errors.New(msg))
}

// ForbiddenMessage is upstream's 403 text for a refusal without a reason.
func ForbiddenMessage(u *User, info Attributes) string {
	return Forbidden(u, info, "").ErrStatus.Message
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
