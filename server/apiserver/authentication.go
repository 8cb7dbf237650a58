package apiserver

import (
	"crypto/subtle"
	"net/http"
	"strings"
)

// User is an authenticated identity.
type User struct {
	Name   string
	Groups []string
}

// Authenticator establishes who sent a request. ok=false means these
// credentials are not its kind (the next authenticator may know them);
// an error means they were its kind and were wrong.
type Authenticator interface {
	Authenticate(r *http.Request) (u *User, ok bool, err error)
}

// certAuthenticator trusts client certificates verified by the TLS layer
// against the cluster CA: CN is the user, O the groups.
type certAuthenticator struct{}

func (certAuthenticator) Authenticate(r *http.Request) (*User, bool, error) {
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
	return nil, false, errUnauthorized
}

// anonymousPaths may be read without credentials, as upstream's
// system:public-info-viewer role allows.
var anonymousPaths = map[string]bool{"/healthz": true, "/livez": true, "/readyz": true, "/version": true}

func anonymousAllowed(path string) bool {
	if anonymousPaths[path] {
		return true
	}
	for p := range anonymousPaths {
		if strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

// authenticate runs the authenticators in order. Anonymous requests get
// system:anonymous only for the public paths; everything else is 401.
func (s *Server) authenticate(r *http.Request) (*User, error) {
	for _, a := range s.authenticators {
		u, ok, err := a.Authenticate(r)
		if err != nil {
			return nil, err
		}
		if ok {
			return u, nil
		}
	}
	if anonymousAllowed(r.URL.Path) {
		return &User{Name: "system:anonymous", Groups: []string{"system:unauthenticated"}}, nil
	}
	return nil, errUnauthorized
}
