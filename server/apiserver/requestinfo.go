package apiserver

import (
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/api/validation/path"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/kelp-project/kelp/server/apiserver/auth"
)

// requestInfo is what a URL and method say about a request; the
// authorizers read the same attributes.
type requestInfo = auth.Attributes

// parseRequest reads /api/v1/... and /apis/<group>/<version>/... paths:
//
//	[/namespaces/{ns}]/{resource}[/{name}[/{subresource}]]
//
// Anything else is a non-resource path (discovery, health, openapi).
func parseRequest(r *http.Request) requestInfo {
	info := requestInfo{Path: r.URL.Path}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		info.Version = parts[1]
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		info.Group, info.Version = parts[1], parts[2]
		parts = parts[3:]
	default:
		info.Verb = strings.ToLower(r.Method)
		return info
	}
	info.IsResource = true
	// "namespaces/{ns}/{resource}..." is a namespaced request, but
	// "namespaces/{name}" alone (or with /status, /finalize) is the
	// namespace itself: the URL grammar upstream's RequestInfoFactory parses.
	if parts[0] == "namespaces" && len(parts) >= 3 && parts[2] != "status" && parts[2] != "finalize" {
		info.Namespace = parts[1]
		parts = parts[2:]
	} else if parts[0] == "namespaces" && len(parts) >= 2 {
		info.Namespace = ""
	}
	info.Resource = parts[0]
	if len(parts) > 1 {
		info.Name = parts[1]
	}
	if len(parts) > 2 {
		info.Subresource = strings.Join(parts[2:], "/")
		// What follows /proxy is the path on the proxied-to server, not
		// part of the subresource (upstream's RequestInfo: Parts).
		if parts[2] == "proxy" {
			info.Subresource = "proxy"
		}
	}
	q := r.URL.Query()
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		switch {
		case info.Name == "" && isWatch(q["watch"]):
			info.Verb = "watch"
		case info.Name == "":
			info.Verb = "list"
		default:
			info.Verb = "get"
		}
	case http.MethodPost:
		info.Verb = "create"
	case http.MethodPut:
		info.Verb = "update"
	case http.MethodPatch:
		info.Verb = "patch"
	case http.MethodDelete:
		info.Verb = "delete"
		if info.Name == "" {
			info.Verb = "deletecollection"
		}
	default:
		info.Verb = strings.ToLower(r.Method)
	}
	if info.Verb == "list" || info.Verb == "watch" {
		// A selector that does not parse is the list handler's 400; the
		// authorizers then see none, which grants nothing extra.
		if sel, err := fields.ParseSelector(q.Get("fieldSelector")); err == nil {
			info.FieldSelector = sel.Requirements()
			// As upstream's RequestInfo: a list or watch of one object by
			// metadata.name is authorized as a read of that object.
			if name, ok := sel.RequiresExactMatch("metadata.name"); ok && len(path.IsValidPathSegmentName(name)) == 0 {
				info.Name = name
			}
		}
	}
	return info
}

func isTrue(s string) bool { return s == "true" || s == "1" }

// isWatch follows upstream: any value of "watch" but false or 0, even an
// empty one, asks for a watch.
func isWatch(vals []string) bool {
	if len(vals) == 0 {
		return false
	}
	v := strings.ToLower(vals[0])
	return v != "false" && v != "0"
}
