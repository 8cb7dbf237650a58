package apiserver

import (
	"net/http"

	"github.com/kelp-project/kelp/server/apiserver/auth"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
		rev.Status.UserInfo = authenticationv1.UserInfo{Username: u.Name, Groups: u.Groups}
	case *authorizationv1.SelfSubjectAccessReview:
		info := requestInfo{}
		if ra := rev.Spec.ResourceAttributes; ra != nil {
			info = requestInfo{IsResource: true, Verb: ra.Verb, Group: ra.Group, Version: ra.Version,
				Namespace: ra.Namespace, Resource: ra.Resource, Subresource: ra.Subresource, Name: ra.Name}
		} else if na := rev.Spec.NonResourceAttributes; na != nil {
			info = requestInfo{Verb: na.Verb, Path: na.Path}
		} else {
			s.writeError(w, r, apierrors.NewBadRequest("exactly one of spec.resourceAttributes and spec.nonResourceAttributes must be set"))
			return
		}
		allowed, reason := s.authorizer.Authorize(u, info)
		rev.Status = authorizationv1.SubjectAccessReviewStatus{Allowed: allowed, Denied: !allowed, Reason: reason}
		if allowed {
			rev.Status.Reason = ""
		}
	}
	obj.GetObjectKind().SetGroupVersionKind(sv.GVK())
	s.writeObject(w, r, http.StatusCreated, obj)
}
