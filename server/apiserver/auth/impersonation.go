package auth

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Impersonate is upstream's impersonation stage, between authentication
// and authorization: a request carrying Impersonate-User (and optionally
// Impersonate-Group, Impersonate-Uid, Impersonate-Extra-<key>) is served
// as that user, provided the authenticated user may `impersonate` each of
// them: users, groups (core group), serviceaccounts (a user named
// system:serviceaccount:<ns>:<name>, in its namespace), uids and
// userextras/<key> (authentication.k8s.io). The first refusal is upstream's
// 403, naming what was to be impersonated. Groups, a UID or extras
// without a user are a 400. Without the headers u is returned as it is.
//
// The headers are removed from r once used, so nothing downstream (the
// kubelet proxy) sees them.
func Impersonate(az Authorizer, u *User, r *http.Request) (*User, error) {
	reqs, err := impersonationRequests(r.Header)
	if err != nil || len(reqs) == 0 {
		return u, err
	}
	groupsSpecified := len(r.Header[authenticationv1.ImpersonateGroupHeader]) > 0
	out := &User{Groups: []string{}}
	for _, req := range reqs {
		attrs := Attributes{IsResource: true, Verb: "impersonate", Resource: req.resource, Name: req.name}
		switch req.resource {
		case "serviceaccounts":
			attrs.Namespace = req.namespace
			out.Name = ServiceAccountUsername(req.namespace, req.name)
			if !groupsSpecified {
				out.Groups = []string{"system:serviceaccounts", "system:serviceaccounts:" + req.namespace}
			}
		case "users":
			out.Name = req.name
		case "groups":
			out.Groups = append(out.Groups, req.name)
		case "userextras":
			attrs.Group, attrs.Version, attrs.Subresource = authenticationv1.GroupName, "v1", req.extraKey
			if out.Extra == nil {
				out.Extra = map[string][]string{}
			}
			out.Extra[req.extraKey] = append(out.Extra[req.extraKey], req.name)
		case "uids":
			attrs.Group, attrs.Version = authenticationv1.GroupName, "v1"
			out.UID = req.name
		}
		if d, reason := az.Authorize(u, attrs); d != DecisionAllow {
			return nil, Forbidden(u, attrs, reason)
		}
	}
	// As upstream: every impersonated user but anonymous is
	// authenticated, unless the groups say otherwise.
	if out.Name != AnonymousUser {
		if !slices.Contains(out.Groups, authenticatedGroup) && !slices.Contains(out.Groups, UnauthenticatedGroup) {
			out.Groups = append(out.Groups, authenticatedGroup)
		}
	} else if !slices.Contains(out.Groups, UnauthenticatedGroup) {
		out.Groups = append(out.Groups, UnauthenticatedGroup)
	}
	r.Header.Del(authenticationv1.ImpersonateUserHeader)
	r.Header.Del(authenticationv1.ImpersonateGroupHeader)
	r.Header.Del(authenticationv1.ImpersonateUIDHeader)
	for h := range r.Header {
		if strings.HasPrefix(h, authenticationv1.ImpersonateUserExtraHeaderPrefix) {
			r.Header.Del(h)
		}
	}
	return out, nil
}

const authenticatedGroup = "system:authenticated"

// impersonationRequest is one thing a request asks to act as.
type impersonationRequest struct {
	resource        string // users, groups, serviceaccounts, userextras, uids
	namespace, name string
	extraKey        string
}

func impersonationRequests(h http.Header) ([]impersonationRequest, error) {
	var reqs []impersonationRequest
	userName := h.Get(authenticationv1.ImpersonateUserHeader)
	if userName != "" {
		if ns, name, ok := splitServiceAccount(userName); ok {
			reqs = append(reqs, impersonationRequest{resource: "serviceaccounts", namespace: ns, name: name})
		} else {
			reqs = append(reqs, impersonationRequest{resource: "users", name: userName})
		}
	}
	others := false
	for _, g := range h[authenticationv1.ImpersonateGroupHeader] {
		others = true
		reqs = append(reqs, impersonationRequest{resource: "groups", name: g})
	}
	// Header names are canonical (Impersonate-Extra-Scopes); the key is
	// lower-cased and %-decoded, as upstream's.
	var extraHeaders []string
	for name := range h {
		if strings.HasPrefix(name, authenticationv1.ImpersonateUserExtraHeaderPrefix) {
			extraHeaders = append(extraHeaders, name)
		}
	}
	slices.Sort(extraHeaders)
	for _, name := range extraHeaders {
		others = true
		key := strings.ToLower(name[len(authenticationv1.ImpersonateUserExtraHeaderPrefix):])
		if k, err := url.PathUnescape(key); err == nil {
			key = k
		}
		for _, v := range h[name] {
			reqs = append(reqs, impersonationRequest{resource: "userextras", name: v, extraKey: key})
		}
	}
	if uid := h.Get(authenticationv1.ImpersonateUIDHeader); uid != "" {
		others = true
		reqs = append(reqs, impersonationRequest{resource: "uids", name: uid})
	}
	if others && userName == "" {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("requested %s without impersonating a user", describeRequests(reqs)))
	}
	return reqs, nil
}

// describeRequests names what was asked for in a 400.
func describeRequests(reqs []impersonationRequest) string {
	parts := make([]string, len(reqs))
	for i, r := range reqs {
		parts[i] = r.resource + "/" + r.name
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// splitServiceAccount parses system:serviceaccount:<ns>:<name>.
func splitServiceAccount(user string) (namespace, name string, ok bool) {
	rest, ok := strings.CutPrefix(user, serviceAccountPrefix)
	if !ok {
		return "", "", false
	}
	namespace, name, ok = strings.Cut(rest, ":")
	if !ok || namespace == "" || name == "" || strings.Contains(name, ":") {
		return "", "", false
	}
	return namespace, name, true
}
