package apiserver

import (
	"bytes"
	"crypto/sha512"
	"fmt"
	"mime"
	"net/http"
	"strings"

	"github.com/sirupsen/logrus"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Aggregated discovery (apidiscovery.k8s.io/v2): /api and /apis answer all
// of discovery in one document when the Accept header asks for it first,
// which client-go and kubectl do since 1.30; anything else gets the legacy
// documents. The aggregated document is built from the same served table
// and the same discoveryEntries as the legacy ones, so the two cannot
// disagree. It is built once per table, on the first request that finds
// the table changed, not per request, because clients poll it: its ETag
// lets them do so with If-None-Match and a 304. Nor is it built per
// change: a burst of 100 CRDs changes the table some 200 times.
//
// Upstream's handler (k8s.io/apiserver/pkg/endpoints/discovery/aggregated)
// is not used: it negotiates through apiserver's codec factories and
// response writers, which link admission, audit, CEL and the global
// feature gates, and it keeps its own copy of the groups with priorities
// and sources (built-in, CRD, aggregator) where kelp has one table in one
// order.

var aggregatedGVK = apidiscoveryv2.SchemeGroupVersion.WithKind("APIGroupDiscoveryList")

// discoveryDoc is one aggregated document, encoded once per build.
type discoveryDoc struct {
	list  *apidiscoveryv2.APIGroupDiscoveryList
	etag  string // quoted, as the header carries it
	json  []byte
	proto []byte
}

// discoveryDocs are /api's document (the core group) and /apis' (the
// others), swapped together, and the served table they describe.
type discoveryDocs struct {
	table        *servedTable
	remote       *[]*remoteVersion // the aggregated versions' snapshot (remotediscovery.go)
	core, groups *discoveryDoc
}

// discoveryDocs returns the documents of the live table, building them if
// the table changed since they were built. Readers of an unchanged table
// load them atomically and never wait; builds are serialized, so one
// change costs one build however many clients ask at once.
func (s *Server) discoveryDocs() *discoveryDocs {
	t, remote := s.live(), s.remoteSnapshot()
	if d := s.discovery.Load(); d != nil && d.table == t && d.remote == remote {
		return d
	}
	s.discoveryMu.Lock()
	defer s.discoveryMu.Unlock()
	t, remote = s.live(), s.remoteSnapshot()
	if d := s.discovery.Load(); d != nil && d.table == t && d.remote == remote {
		return d
	}
	d := &discoveryDocs{table: t, remote: remote, core: s.buildDiscovery(t, nil, true), groups: s.buildDiscovery(t, versionsOf(remote), false)}
	s.discovery.Store(d)
	return d
}

// buildDiscovery makes the document for the core group (/api) or for the
// named groups (/apis): groups in the legacy /apis order, each group's
// versions preferred first.
func (s *Server) buildDiscovery(t *servedTable, remote []*remoteVersion, core bool) *discoveryDoc {
	list := &apidiscoveryv2.APIGroupDiscoveryList{TypeMeta: metav1.TypeMeta{
		APIVersion: aggregatedGVK.GroupVersion().String(), Kind: aggregatedGVK.Kind}}
	seen := map[string]bool{}
	for _, gv := range t.groupVersions {
		if (gv.Group == "") != core || seen[gv.Group] {
			continue
		}
		seen[gv.Group] = true
		g := apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: gv.Group}}
		for _, v := range t.versionsOf(gv.Group) {
			g.Versions = append(g.Versions, t.versionDiscovery(v))
		}
		list.Items = append(list.Items, g)
	}
	// The aggregated group/versions follow kelp's own, in upstream's
	// priority order; a version of a group kelp serves joins that group.
	groupAt := map[string]int{}
	for i, g := range list.Items {
		groupAt[g.Name] = i
	}
	for _, v := range remote {
		i, ok := groupAt[v.group]
		if !ok {
			i = len(list.Items)
			groupAt[v.group] = i
			list.Items = append(list.Items, apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: v.group}})
		}
		list.Items[i].Versions = append(list.Items[i].Versions, v.aggregatedVersion())
	}
	doc := &discoveryDoc{list: list}
	var buf bytes.Buffer
	if err := encode(&buf, mediaJSON, list); err != nil {
		// Cannot happen for these types; without bytes the document is
		// encoded per request and carries no ETag.
		logrus.Errorf("encoding aggregated discovery: %v", err)
		return doc
	}
	doc.json = buf.Bytes()
	doc.etag = fmt.Sprintf("%q", fmt.Sprintf("%X", sha512.Sum512(doc.json)))
	var pb bytes.Buffer
	if err := encode(&pb, mediaProtobuf, list); err != nil {
		logrus.Errorf("encoding aggregated discovery: %v", err)
	} else {
		doc.proto = pb.Bytes()
	}
	return doc
}

// versionDiscovery lists a group-version's resources with their
// subresources nested, from the legacy entries: a kind with an empty
// group and version means the resource's own, in both forms, and client-go
// turns one into the other field by field.
func (t *servedTable) versionDiscovery(gv schema.GroupVersion) apidiscoveryv2.APIVersionDiscovery {
	var entries []metav1.APIResource
	for _, sv := range t.byGroup[gv.String()] {
		entries = append(entries, discoveryEntries(sv)...)
	}
	return apidiscoveryv2.APIVersionDiscovery{Version: gv.Version, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent,
		Resources: resourcesDiscovery(entries)}
}

// resourcesDiscovery nests the legacy entries of a group-version
// (resources, and subresources named <resource>/<sub>) into the
// aggregated form. An entry whose kind has an empty group and version
// means the resource's own, in both forms, and client-go turns one into
// the other field by field.
func resourcesDiscovery(entries []metav1.APIResource) []apidiscoveryv2.APIResourceDiscovery {
	var out []apidiscoveryv2.APIResourceDiscovery
	index := map[string]int{}
	for _, main := range entries {
		if strings.Contains(main.Name, "/") {
			continue
		}
		scope := apidiscoveryv2.ScopeCluster
		if main.Namespaced {
			scope = apidiscoveryv2.ScopeNamespace
		}
		index[main.Name] = len(out)
		out = append(out, apidiscoveryv2.APIResourceDiscovery{
			Resource:         main.Name,
			ResponseKind:     &metav1.GroupVersionKind{Group: main.Group, Version: main.Version, Kind: main.Kind},
			Scope:            scope,
			SingularResource: main.SingularName,
			Verbs:            main.Verbs,
			ShortNames:       main.ShortNames,
			Categories:       main.Categories,
		})
	}
	for _, e := range entries {
		resource, name, ok := strings.Cut(e.Name, "/")
		if !ok {
			continue
		}
		i, found := index[resource]
		if !found {
			continue // a subresource without its resource: aggregated discovery cannot carry it
		}
		out[i].Subresources = append(out[i].Subresources, apidiscoveryv2.APISubresourceDiscovery{
			Subresource:  name,
			ResponseKind: &metav1.GroupVersionKind{Group: e.Group, Version: e.Version, Kind: e.Kind},
			Verbs:        e.Verbs,
		})
	}
	return out
}

// serveAggregated answers /api (core) or /apis with the aggregated
// document if the request's first acceptable Accept entry asks for it, and
// reports whether it did.
func (s *Server) serveAggregated(w http.ResponseWriter, r *http.Request, core bool) bool {
	media, ok := negotiateAggregated(r.Header.Get("Accept"))
	if !ok {
		return false
	}
	docs := s.discoveryDocs()
	doc := docs.groups
	if core {
		doc = docs.core
	}
	h := w.Header()
	// Vary: the same URL answers legacy and aggregated documents, JSON and
	// protobuf, under one ETag.
	h.Set("Vary", "Accept")
	h.Set("Cache-Control", "public")
	if doc.etag != "" {
		h.Set("ETag", doc.etag)
		if etagMatches(r.Header.Get("If-None-Match"), doc.etag) {
			w.WriteHeader(http.StatusNotModified)
			return true
		}
	}
	var body []byte
	switch {
	case media == mediaJSON && doc.json != nil:
		body = doc.json
	case media == mediaProtobuf && doc.proto != nil:
		body = doc.proto
	default:
		var buf bytes.Buffer
		if err := encode(&buf, media, doc.list); err != nil {
			s.writeError(w, r, err)
			return true
		}
		body = buf.Bytes()
	}
	// client-go tells the aggregated document from the legacy one by
	// these Content-Type parameters alone.
	h.Set("Content-Type", fmt.Sprintf("%s;g=%s;v=%s;as=%s", media, aggregatedGVK.Group, aggregatedGVK.Version, aggregatedGVK.Kind))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
	return true
}

// negotiateAggregated reads Accept in order: an entry asking for
// apidiscovery.k8s.io/v2 APIGroupDiscoveryList gives its media type; a
// plain entry kelp serves, before any such, means the legacy document.
// v2beta1, which 1.35 removed, is not served, so a client asking only for
// it gets the legacy document, as from kube-apiserver. The nopeer profile
// is the same document: one server has no peers.
func negotiateAggregated(header string) (string, bool) {
	for _, part := range strings.Split(header, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		switch mt {
		case mediaJSON, mediaYAML, mediaProtobuf:
		case "*/*", "application/*":
			mt = mediaJSON
		default:
			continue
		}
		as := params["as"]
		if as == "" {
			return "", false
		}
		if as == aggregatedGVK.Kind && params["g"] == aggregatedGVK.Group && params["v"] == aggregatedGVK.Version &&
			(params["profile"] == "" || params["profile"] == "nopeer") {
			return mt, true
		}
	}
	return "", false
}

// etagMatches applies If-None-Match's weak comparison (RFC 9110 13.1.2):
// a list of tags, W/ ignored, * matching any.
func etagMatches(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == etag || t == "*" {
			return true
		}
	}
	return false
}
