package apiserver

import (
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/kelp-project/kelp/server/apiserver/auth"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// review answers the review resources: `kubectl auth whoami`, `kubectl
// auth can-i` (with --list, a rules review) and the SubjectAccessReviews
// other components send. Nothing is stored; the answer comes from the
// same authentication and authorizer chain every request passes.
func (s *Server) review(w http.ResponseWriter, r *http.Request, info requestInfo, sv *served) {
	obj := sv.New()
	if err := decodeBody(w, r, sv.GVK(), obj); err != nil {
		s.writeError(w, r, err)
		return
	}
	u := auth.UserFrom(r.Context())
	var err error
	switch rev := obj.(type) {
	case *authenticationv1.TokenReview:
		if rev.Spec.Token == "" {
			err = apierrors.NewInvalid(schema.GroupKind{Group: authenticationv1.GroupName, Kind: "TokenReview"}, "",
				field.ErrorList{field.Required(field.NewPath("spec", "token"), "")})
			break
		}
		rev.Status = s.tokenReview(rev.Spec, time.Now())
	case *authenticationv1.SelfSubjectReview:
		rev.Status.UserInfo = authenticationv1.UserInfo{Username: u.Name, UID: u.UID, Groups: u.Groups, Extra: extraValues(u.Extra)}
	case *authorizationv1.SelfSubjectAccessReview:
		rev.Status, err = s.accessReview(u, rev.Spec.ResourceAttributes, rev.Spec.NonResourceAttributes)
	case *authorizationv1.SubjectAccessReview:
		rev.Status, err = s.subjectAccessReview(rev.Spec)
	case *authorizationv1.LocalSubjectAccessReview:
		// As upstream: only about resources, in the namespace of the path.
		switch ra := rev.Spec.ResourceAttributes; {
		case rev.Spec.NonResourceAttributes != nil:
			err = apierrors.NewBadRequest(fmt.Sprintf("disallowed on this kind of request: spec.nonResourceAttributes: %v", rev.Spec.NonResourceAttributes))
		case ra == nil || ra.Namespace != info.Namespace:
			err = apierrors.NewBadRequest(fmt.Sprintf("spec.resourceAttributes.namespace must match namespace: %v", info.Namespace))
		default:
			rev.Status, err = s.subjectAccessReview(rev.Spec)
		}
	case *authorizationv1.SelfSubjectRulesReview:
		rev.Status = s.rulesReview(u, rev.Spec.Namespace)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	obj.GetObjectKind().SetGroupVersionKind(sv.GVK())
	// Reviews have no table columns, as upstream's, whose review storage
	// converts nothing to a Table: a request for one is 406.
	if negotiate(r).as == "Table" {
		s.writeError(w, r, &apierrors.StatusError{ErrStatus: statusFailure(http.StatusNotAcceptable, metav1.StatusReasonNotAcceptable,
			fmt.Sprintf("the resource %s does not support being converted to a Table", sv.GVR.Resource))})
		return
	}
	s.writeObject(w, r, http.StatusCreated, obj)
}

// subjectAccessReview asks the chain about the user a review names.
func (s *Server) subjectAccessReview(spec authorizationv1.SubjectAccessReviewSpec) (authorizationv1.SubjectAccessReviewStatus, error) {
	if spec.User == "" && len(spec.Groups) == 0 {
		return authorizationv1.SubjectAccessReviewStatus{}, apierrors.NewBadRequest("at least one of user or group must be specified")
	}
	u := &auth.User{Name: spec.User, Groups: spec.Groups, UID: spec.UID}
	if len(spec.Extra) > 0 {
		u.Extra = map[string][]string{}
		for k, v := range spec.Extra {
			u.Extra[k] = v
		}
	}
	return s.accessReview(u, spec.ResourceAttributes, spec.NonResourceAttributes)
}

// accessReview decides one request's attributes for u, as the request
// itself would be decided.
func (s *Server) accessReview(u *auth.User, ra *authorizationv1.ResourceAttributes, na *authorizationv1.NonResourceAttributes) (authorizationv1.SubjectAccessReviewStatus, error) {
	var info requestInfo
	switch {
	case ra != nil && na != nil:
		return authorizationv1.SubjectAccessReviewStatus{}, apierrors.NewBadRequest("cannot specify both spec.resourceAttributes and spec.nonResourceAttributes")
	case ra != nil:
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
	case na != nil:
		info = requestInfo{Verb: na.Verb, Path: na.Path}
	default:
		return authorizationv1.SubjectAccessReviewStatus{}, apierrors.NewBadRequest("exactly one of spec.resourceAttributes and spec.nonResourceAttributes must be set")
	}
	// As upstream: Denied only for an explicit Deny; a request nobody
	// allows is neither allowed nor denied.
	d, reason := s.authorizer.Authorize(u, info)
	return authorizationv1.SubjectAccessReviewStatus{Allowed: d == auth.DecisionAllow, Denied: d == auth.DecisionDeny, Reason: reason}, nil
}

// rulesReview lists what RBAC grants u in namespace (`kubectl auth can-i
// --list`). What the Node authorizer decides cannot be listed: for a
// node the answer is incomplete, as upstream's.
func (s *Server) rulesReview(u *auth.User, namespace string) authorizationv1.SubjectRulesReviewStatus {
	st := authorizationv1.SubjectRulesReviewStatus{ResourceRules: []authorizationv1.ResourceRule{}, NonResourceRules: []authorizationv1.NonResourceRule{}}
	for _, r := range s.rbac.RulesFor(u, namespace) {
		if len(r.NonResourceURLs) > 0 {
			st.NonResourceRules = append(st.NonResourceRules, authorizationv1.NonResourceRule{Verbs: r.Verbs, NonResourceURLs: r.NonResourceURLs})
			continue
		}
		st.ResourceRules = append(st.ResourceRules, authorizationv1.ResourceRule{Verbs: r.Verbs, APIGroups: r.APIGroups,
			Resources: r.Resources, ResourceNames: r.ResourceNames})
	}
	if _, isNode := auth.NodeIdentity(u); isNode {
		st.Incomplete = true
		st.EvaluationError = "node authorizer does not support user rule resolution"
	}
	return st
}

func extraValues(extra map[string][]string) map[string]authenticationv1.ExtraValue {
	if len(extra) == 0 {
		return nil
	}
	out := make(map[string]authenticationv1.ExtraValue, len(extra))
	for k, v := range extra {
		out[k] = v
	}
	return out
}

// tokenReview authenticates a bearer token for a TokenReview (webhook
// token authentication: metrics servers, dashboards and proxies ask it
// about the tokens their clients send). A service-account token is
// checked for the audiences asked (the API server's by default); any
// other bearer token the API server knows is valid for its own audiences
// only. Nothing about the reviewer is used: RBAC decided who may ask.
func (s *Server) tokenReview(spec authenticationv1.TokenReviewSpec, now time.Time) authenticationv1.TokenReviewStatus {
	var u *auth.User
	var audiences []string
	ours := false
	var err error
	if s.serviceAccountTokens != nil {
		u, audiences, ours, err = s.serviceAccountTokens.ReviewToken(spec.Token, spec.Audiences, now)
	}
	if !ours {
		audiences = s.apiAudiences
		if len(spec.Audiences) > 0 {
			audiences = nil
			for _, a := range spec.Audiences {
				if slices.Contains(s.apiAudiences, a) {
					audiences = append(audiences, a)
				}
			}
		}
		r := &http.Request{Header: http.Header{"Authorization": []string{"Bearer " + spec.Token}}}
		u, err = auth.Authenticate(s.authenticators, r)
		if err == nil && (u.Name == auth.AnonymousUser || len(audiences) == 0) {
			err = auth.ErrUnauthorized
		}
	}
	if err != nil {
		return authenticationv1.TokenReviewStatus{Error: "invalid bearer token"}
	}
	return authenticationv1.TokenReviewStatus{Authenticated: true, Audiences: audiences,
		User: authenticationv1.UserInfo{Username: u.Name, UID: u.UID, Groups: u.Groups, Extra: extraValues(u.Extra)}}
}
