package apiserver

import (
	"net/http"

	"github.com/kelp-project/kelp/server/apiserver/auth"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
)

// review answers the self-review resources: `kubectl auth whoami` and
// `kubectl auth can-i`. Nothing is stored; the answer comes from the same
// authentication and authorization the request itself passed.
func (s *Server) review(w http.ResponseWriter, r *http.Request, sv *served) {
	obj := sv.New()
	if err := decodeBody(w, r, sv.GVK(), obj); err != nil {
		s.writeError(w, r, err)
		return
	}
	u := auth.UserFrom(r.Context())
	switch rev := obj.(type) {
	case *authenticationv1.SelfSubjectReview:
		rev.Status.UserInfo = authenticationv1.UserInfo{Username: u.Name, UID: u.UID, Groups: u.Groups}
		for k, v := range u.Extra {
			if rev.Status.UserInfo.Extra == nil {
				rev.Status.UserInfo.Extra = map[string]authenticationv1.ExtraValue{}
			}
			rev.Status.UserInfo.Extra[k] = v
		}
	case *authorizationv1.SelfSubjectAccessReview:
		info := requestInfo{}
		if ra := rev.Spec.ResourceAttributes; ra != nil {
			info = requestInfo{IsResource: true, Verb: ra.Verb, Group: ra.Group, Version: ra.Version,
				Namespace: ra.Namespace, Resource: ra.Resource, Subresource: ra.Subresource, Name: ra.Name}
			// A review may ask about a list scoped by a field selector (a
			// node's own pods). Only rawSelector is read: a review that
			// gives structured requirements is answered as unscoped,
			// which can only refuse more, never allow more.
			if fs := ra.FieldSelector; fs != nil && fs.RawSelector != "" {
				if sel, err := fields.ParseSelector(fs.RawSelector); err == nil {
					info.FieldSelector = sel.Requirements()
				}
			}
		} else if na := rev.Spec.NonResourceAttributes; na != nil {
			info = requestInfo{Verb: na.Verb, Path: na.Path}
		} else {
			s.writeError(w, r, apierrors.NewBadRequest("exactly one of spec.resourceAttributes and spec.nonResourceAttributes must be set"))
			return
		}
		// As upstream: Denied only for an explicit Deny; a request nobody
		// allows is neither allowed nor denied.
		d, reason := s.authorizer.Authorize(u, info)
		rev.Status = authorizationv1.SubjectAccessReviewStatus{Allowed: d == auth.DecisionAllow, Denied: d == auth.DecisionDeny, Reason: reason}
	}
	obj.GetObjectKind().SetGroupVersionKind(sv.GVK())
	s.writeObject(w, r, http.StatusCreated, obj)
}
