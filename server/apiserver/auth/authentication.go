// Package auth holds the head of the API server's request path: who sent a
// request (authentication.go: client certificates, bearer tokens,
// anonymous; serviceaccount.go: service-account tokens) and whether they
// may do it (authorization.go: the Authorizer Chain and PrivilegedGroup;
// node.go: the Node authorizer; rbac.go: RBAC; escalation.go: RBAC's
// escalation checks; impersonation.go: Impersonate-* headers).
package auth

import (
	"context"
	"crypto/subtle"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// User is an authenticated identity.
type User struct {
	Name   string
	Groups []string
	// UID and Extra are upstream's user.Info uid and extra (a service
	// account's UID, pod and credential ID), set by authenticators that
	// know them and by impersonation (Impersonate-Uid, Impersonate-Extra-*).
	UID   string
	Extra map[string][]string
}

// Authenticator establishes who sent a request. ok=false means these
// credentials are not its kind (the next authenticator may know them);
// an error means they were its kind and were wrong.
type Authenticator interface {
	Authenticate(r *http.Request) (u *User, ok bool, err error)
}

// CertAuthenticator trusts client certificates verified by the TLS layer
// against the cluster CA: CN is the user, O the groups.
type CertAuthenticator struct{}

func (CertAuthenticator) Authenticate(r *http.Request) (*User, bool, error) {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
		return nil, false, nil
	}
	cert := r.TLS.VerifiedChains[0][0]
	groups := append([]string{}, cert.Subject.Organization...)
	return &User{Name: cert.Subject.CommonName, Groups: append(groups, "system:authenticated")}, true, nil
}

// TokenAuthenticator maps static bearer tokens to users.
type TokenAuthenticator map[string]User

func (t TokenAuthenticator) Authenticate(r *http.Request) (*User, bool, error) {
	h := r.Header.Get("Authorization")
	token, found := strings.CutPrefix(h, "Bearer ")
	if !found || token == "" {
		return nil, false, nil
	}
	for known, u := range t {
		if subtle.ConstantTimeCompare([]byte(known), []byte(token)) == 1 {
			user := u
			user.Groups = append(append([]string{}, u.Groups...), "system:authenticated")
			return &user, true, nil
		}
	}
	return nil, false, ErrUnauthorized
}

// ErrUnauthorized is the 401 every failed authentication gets: which
// check failed is not the client's business.
var ErrUnauthorized = apierrors.NewUnauthorized("Unauthorized")

// Authenticate runs the authenticators in order. A request without
// credentials is system:anonymous in system:unauthenticated (upstream's
// --anonymous-auth=true): RBAC lets it read the public paths
// (system:public-info-viewer) and refuses it everything else with 403.
func Authenticate(chain []Authenticator, r *http.Request) (*User, error) {
	for _, a := range chain {
		u, ok, err := a.Authenticate(r)
		if err != nil {
			return nil, err
		}
		if ok {
			return u, nil
		}
	}
	return &User{Name: AnonymousUser, Groups: []string{UnauthenticatedGroup}}, nil
}

// AnonymousUser and UnauthenticatedGroup are who a request without
// credentials is.
const (
	AnonymousUser        = "system:anonymous"
	UnauthenticatedGroup = "system:unauthenticated"
)

type userKey struct{}

// WithUser records the authenticated user in a request's context.
func WithUser(ctx context.Context, u *User) context.Context {
	return context.WithValue(ctx, userKey{}, u)
}

// UserFrom returns the authenticated user of a request context.
func UserFrom(ctx context.Context) *User {
	u, _ := ctx.Value(userKey{}).(*User)
	return u
}
