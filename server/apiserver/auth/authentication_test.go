package auth

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

func certRequest(cn string, orgs ...string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "https://kelp/api/v1/pods", nil)
	cert := &x509.Certificate{Subject: pkix.Name{CommonName: cn, Organization: orgs}}
	r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}, VerifiedChains: [][]*x509.Certificate{{cert}}}
	return r
}

func TestCertAuthenticator(t *testing.T) {
	plain := httptest.NewRequest(http.MethodGet, "http://kelp/api/v1/pods", nil)
	plain.TLS = nil
	unverified := certRequest("mallory", "system:masters")
	unverified.TLS.VerifiedChains = nil
	for _, tc := range []struct {
		name       string
		r          *http.Request
		wantOK     bool
		wantName   string
		wantGroups []string
	}{
		{name: "no TLS", r: plain},
		{name: "TLS without a client certificate", r: func() *http.Request {
			r := httptest.NewRequest(http.MethodGet, "https://kelp/api", nil)
			r.TLS = &tls.ConnectionState{}
			return r
		}()},
		{name: "certificate not verified", r: unverified},
		{name: "admin", r: certRequest("kelp-admin", "system:masters"), wantOK: true,
			wantName: "kelp-admin", wantGroups: []string{"system:masters", "system:authenticated"}},
		{name: "node", r: certRequest("system:node:n1", "system:nodes"), wantOK: true,
			wantName: "system:node:n1", wantGroups: []string{"system:nodes", "system:authenticated"}},
		{name: "several organizations", r: certRequest("alice", "dev", "ops"), wantOK: true,
			wantName: "alice", wantGroups: []string{"dev", "ops", "system:authenticated"}},
		{name: "no organization", r: certRequest("system:kube-scheduler"), wantOK: true,
			wantName: "system:kube-scheduler", wantGroups: []string{"system:authenticated"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, ok, err := CertAuthenticator{}.Authenticate(tc.r)
			if err != nil {
				t.Fatalf("err = %v; a certificate is either its kind or not", err)
			}
			if ok != tc.wantOK {
				t.Fatalf("ok = %v, want %v", ok, tc.wantOK)
			}
			if !ok {
				if u != nil {
					t.Errorf("user %+v without ok", u)
				}
				return
			}
			if u.Name != tc.wantName || !slices.Equal(u.Groups, tc.wantGroups) {
				t.Errorf("user = %q %v, want %q %v", u.Name, u.Groups, tc.wantName, tc.wantGroups)
			}
		})
	}
	// The certificate's own Organization is not appended to in place.
	orgs := make([]string, 1, 4)
	orgs[0] = "dev"
	r := certRequest("alice")
	r.TLS.VerifiedChains[0][0].Subject.Organization = orgs
	if _, _, err := (CertAuthenticator{}).Authenticate(r); err != nil {
		t.Fatal(err)
	}
	if full := orgs[:cap(orgs)]; full[1] != "" || len(r.TLS.VerifiedChains[0][0].Subject.Organization) != 1 {
		t.Errorf("certificate organizations modified: %q", full)
	}
}

func TestTokenAuthenticator(t *testing.T) {
	groups := make([]string, 1, 8) // spare capacity: an in-place append would show
	groups[0] = "system:masters"
	tokens := TokenAuthenticator{
		"s3cret-admin":  {Name: "admin", Groups: groups},
		"s3cret-viewer": {Name: "viewer"},
	}
	for _, tc := range []struct {
		name       string
		header     string
		wantOK     bool
		wantErr    bool
		wantName   string
		wantGroups []string
	}{
		{name: "no header"},
		{name: "basic auth", header: "Basic YWRtaW46YWRtaW4="},
		{name: "empty bearer", header: "Bearer "},
		{name: "lower-case scheme", header: "bearer s3cret-admin"},
		{name: "admin token", header: "Bearer s3cret-admin", wantOK: true, wantName: "admin",
			wantGroups: []string{"system:masters", "system:authenticated"}},
		{name: "token without groups", header: "Bearer s3cret-viewer", wantOK: true, wantName: "viewer",
			wantGroups: []string{"system:authenticated"}},
		{name: "wrong token", header: "Bearer nope", wantErr: true},
		{name: "prefix of a token", header: "Bearer s3cret", wantErr: true},
		{name: "token with a suffix", header: "Bearer s3cret-admin2", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "https://kelp/api", nil)
			if tc.header != "" {
				r.Header.Set("Authorization", tc.header)
			}
			u, ok, err := tokens.Authenticate(r)
			if tc.wantErr {
				if !errors.Is(err, ErrUnauthorized) || ok || u != nil {
					t.Fatalf("= %v, %v, %v; want ErrUnauthorized", u, ok, err)
				}
				return
			}
			if err != nil || ok != tc.wantOK {
				t.Fatalf("ok = %v, err = %v; want ok %v", ok, err, tc.wantOK)
			}
			if !ok {
				return
			}
			if u.Name != tc.wantName || !slices.Equal(u.Groups, tc.wantGroups) {
				t.Errorf("user = %q %v, want %q %v", u.Name, u.Groups, tc.wantName, tc.wantGroups)
			}
		})
	}
	// Repeated use neither grows the map's groups nor writes past them.
	for range 3 {
		r := httptest.NewRequest(http.MethodGet, "https://kelp/api", nil)
		r.Header.Set("Authorization", "Bearer s3cret-admin")
		u, _, err := tokens.Authenticate(r)
		if err != nil {
			t.Fatal(err)
		}
		u.Groups[0] = "changed-by-caller"
	}
	if got := tokens["s3cret-admin"].Groups; !slices.Equal(got, []string{"system:masters"}) || groups[:2][1] != "" {
		t.Errorf("the map's groups changed: %v (backing %q)", got, groups[:cap(groups)])
	}
}

func TestAuthenticate(t *testing.T) {
	chain := []Authenticator{CertAuthenticator{}, TokenAuthenticator{"tok": {Name: "alice", Groups: []string{"dev"}}}}
	for _, tc := range []struct {
		path, header string
		wantUser     string // "" means 401; anonymous requests are RBAC's to refuse
	}{
		{path: "/healthz", wantUser: "system:anonymous"},
		{path: "/livez", wantUser: "system:anonymous"},
		{path: "/readyz", wantUser: "system:anonymous"},
		{path: "/version", wantUser: "system:anonymous"},
		{path: "/version/", wantUser: "system:anonymous"},
		{path: "/healthz/etcd", wantUser: "system:anonymous"},
		{path: "/livez/ping", wantUser: "system:anonymous"},
		{path: "/readyz/informer-sync", wantUser: "system:anonymous"},
		{path: "/healthzfoo", wantUser: "system:anonymous"},
		{path: "/versions", wantUser: "system:anonymous"},
		{path: "/", wantUser: "system:anonymous"},
		{path: "/api", wantUser: "system:anonymous"},
		{path: "/apis", wantUser: "system:anonymous"},
		{path: "/openapi/v2", wantUser: "system:anonymous"},
		{path: "/api/v1/namespaces/default/pods", wantUser: "system:anonymous"},
		{path: "/api/v1/namespaces/default/pods", header: "Bearer tok", wantUser: "alice"},
		{path: "/healthz", header: "Bearer tok", wantUser: "alice"},
		// Wrong credentials are rejected even where anonymous would do.
		{path: "/healthz", header: "Bearer wrong"},
		{path: "/api", header: "Bearer wrong"},
	} {
		t.Run(tc.path+" "+tc.header, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "https://kelp"+tc.path, nil)
			if tc.header != "" {
				r.Header.Set("Authorization", tc.header)
			}
			u, err := Authenticate(chain, r)
			if tc.wantUser == "" {
				if !apierrors.IsUnauthorized(err) || u != nil {
					t.Fatalf("= %v, %v; want 401", u, err)
				}
				if err.Error() != "Unauthorized" {
					t.Errorf("message %q", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if u.Name != tc.wantUser {
				t.Errorf("user %q, want %q", u.Name, tc.wantUser)
			}
			if u.Name == "system:anonymous" && !slices.Equal(u.Groups, []string{"system:unauthenticated"}) {
				t.Errorf("anonymous groups %v", u.Groups)
			}
		})
	}
	// A certificate wins over the token authenticator (first in the chain).
	r := certRequest("kelp-admin", "system:masters")
	r.Header.Set("Authorization", "Bearer wrong")
	if u, err := Authenticate(chain, r); err != nil || u.Name != "kelp-admin" {
		t.Errorf("certificate with a bad token: %v, %v", u, err)
	}
	// An empty chain still serves the public paths.
	if u, err := Authenticate(nil, httptest.NewRequest(http.MethodGet, "https://kelp/readyz", nil)); err != nil || u.Name != "system:anonymous" {
		t.Errorf("empty chain /readyz: %v, %v", u, err)
	}
}

func TestUserContext(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, "https://kelp/api", nil)
	if UserFrom(r.Context()) != nil {
		t.Error("user in a fresh context")
	}
	u := &User{Name: "alice"}
	if got := UserFrom(WithUser(r.Context(), u)); got != u {
		t.Errorf("UserFrom = %v", got)
	}
}
