package apiserver

import (
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/selection"
)

// Lists and watches carry their field selector to the authorizers, and
// one that requires metadata.name names the object, as upstream's
// RequestInfo: that is how a node's per-object watch of a Secret is
// authorized like a get of it.
func TestParseRequestFieldSelector(t *testing.T) {
	for _, tc := range []struct {
		method, target string
		verb, name     string
		selector       string
	}{
		{"GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1", "list", "", "spec.nodeName=n1"},
		{"GET", "/api/v1/pods?watch=1&fieldSelector=spec.nodeName%3Dn1,status.phase%3DRunning", "watch", "", "spec.nodeName=n1,status.phase=Running"},
		{"GET", "/api/v1/namespaces/default/secrets?fieldSelector=metadata.name%3Dcreds", "list", "creds", "metadata.name=creds"},
		{"GET", "/api/v1/namespaces/default/secrets?watch=true&fieldSelector=metadata.name%3D%3Dcreds", "watch", "creds", "metadata.name=creds"},
		// Not an exact match, or not a valid name: no name.
		{"GET", "/api/v1/namespaces/default/secrets?fieldSelector=metadata.name!%3Dcreds", "list", "", "metadata.name!=creds"},
		{"GET", "/api/v1/namespaces/default/secrets?fieldSelector=metadata.name%3D..", "list", "", "metadata.name=.."},
		// A selector that does not parse gives the authorizers none.
		{"GET", "/api/v1/pods?fieldSelector=spec.nodeName", "list", "", ""},
		// A get keeps its path's name and has no selector.
		{"GET", "/api/v1/namespaces/default/secrets/creds?fieldSelector=metadata.name%3Dother", "get", "creds", ""},
		{"DELETE", "/api/v1/namespaces/default/pods?fieldSelector=spec.nodeName%3Dn1", "deletecollection", "", ""},
	} {
		t.Run(tc.target, func(t *testing.T) {
			info := parseRequest(httptest.NewRequest(tc.method, tc.target, nil))
			if info.Verb != tc.verb || info.Name != tc.name {
				t.Errorf("verb %q name %q, want %q %q", info.Verb, info.Name, tc.verb, tc.name)
			}
			var terms []string
			for _, r := range info.FieldSelector {
				op := "="
				if r.Operator == selection.NotEquals {
					op = "!="
				}
				terms = append(terms, r.Field+op+r.Value)
			}
			got := strings.Join(terms, ",")
			if got != tc.selector {
				t.Errorf("selector %q, want %q", got, tc.selector)
			}
		})
	}
}

// The path after pods/<name>/proxy is the proxied-to path: the
// subresource the authorizers see is "proxy", as upstream's.
func TestParseRequestProxy(t *testing.T) {
	for _, tc := range []struct {
		method, target, verb, name, sub string
	}{
		{"GET", "/api/v1/namespaces/default/pods/web:8080/proxy/data.json", "get", "web:8080", "proxy"},
		{"POST", "/api/v1/namespaces/default/pods/web/proxy/a/b/", "create", "web", "proxy"},
		{"GET", "/api/v1/namespaces/default/pods/web/proxy", "get", "web", "proxy"},
		{"GET", "/api/v1/namespaces/default/pods/web/log", "get", "web", "log"},
	} {
		info := parseRequest(httptest.NewRequest(tc.method, tc.target, nil))
		if info.Verb != tc.verb || info.Name != tc.name || info.Subresource != tc.sub {
			t.Errorf("%s %s: verb %q name %q subresource %q", tc.method, tc.target, info.Verb, info.Name, info.Subresource)
		}
	}
}
