package apiserver

import (
	"net"
	"net/http"
	"slices"
	"strconv"

	"github.com/kelp-project/kelp/server/apiserver/registry"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The legacy discovery documents: /api, /apis, each group and each
// group-version. /api and /apis also answer the aggregated form
// (aggregateddiscovery.go), built from the same entries.

func (s *Server) addresses() []metav1.ServerAddressByClientCIDR {
	return []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0",
		ServerAddress: net.JoinHostPort(s.cfg.PublicAddress, strconv.Itoa(s.cfg.PublicPort))}}
}

func (s *Server) serveAPIVersions(w http.ResponseWriter, r *http.Request) {
	s.writeObject(w, r, http.StatusOK, &metav1.APIVersions{
		TypeMeta: metav1.TypeMeta{Kind: "APIVersions"},
		Versions: []string{"v1"}, ServerAddressByClientCIDRs: s.addresses(),
	})
}

// versionsOf lists a group's served versions, the preferred one first:
// the order in which the table first served them.
func (t *servedTable) versionsOf(group string) []schema.GroupVersion {
	var out []schema.GroupVersion
	for _, gv := range t.groupVersions {
		if gv.Group == group {
			out = append(out, gv)
		}
	}
	return out
}

func (t *servedTable) apiGroup(name string) *metav1.APIGroup {
	if name == "" {
		return nil
	}
	var g *metav1.APIGroup
	for _, gv := range t.versionsOf(name) {
		gvd := metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: gv.Version}
		if g == nil {
			g = &metav1.APIGroup{TypeMeta: metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}, Name: name, PreferredVersion: gvd}
		}
		g.Versions = append(g.Versions, gvd)
	}
	return g
}

func (s *Server) serveAPIGroupList(w http.ResponseWriter, r *http.Request) {
	list := &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}}
	seen := map[string]bool{}
	t := s.live()
	for _, gv := range t.groupVersions {
		if gv.Group == "" || seen[gv.Group] {
			continue
		}
		seen[gv.Group] = true
		list.Groups = append(list.Groups, *t.apiGroup(gv.Group))
	}
	// The aggregated groups follow (remotediscovery.go); a version of a
	// group kelp serves joins that group.
	remote := s.remoteVersions()
	for _, name := range remoteGroupNames(remote) {
		g := remoteGroup(remote, name)
		if i := slices.IndexFunc(list.Groups, func(lg metav1.APIGroup) bool { return lg.Name == name }); i >= 0 {
			list.Groups[i].Versions = append(list.Groups[i].Versions, g.Versions...)
			continue
		}
		list.Groups = append(list.Groups, *g)
	}
	s.writeObject(w, r, http.StatusOK, list)
}

func (s *Server) serveAPIGroup(w http.ResponseWriter, r *http.Request, group string) {
	g := s.live().apiGroup(group)
	if rg := remoteGroup(s.remoteVersions(), group); rg != nil {
		if g == nil {
			g = rg
		} else {
			g.Versions = append(g.Versions, rg.Versions...)
		}
	}
	if g == nil {
		s.writeError(w, r, apierrors.NewNotFound(schema.GroupResource{}, ""))
		return
	}
	s.writeObject(w, r, http.StatusOK, g)
}

func (s *Server) serveResourceList(w http.ResponseWriter, r *http.Request, gv string) {
	resources, ok := s.live().byGroup[gv]
	if !ok {
		s.writeError(w, r, apierrors.NewNotFound(schema.GroupResource{}, ""))
		return
	}
	list := &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv}
	for _, sv := range resources {
		list.APIResources = append(list.APIResources, discoveryEntries(sv)...)
	}
	s.writeObject(w, r, http.StatusOK, list)
}

// discoveryEntries returns the resource and its subresources as discovery
// lists them.
func discoveryEntries(sv *served) []metav1.APIResource {
	main := metav1.APIResource{
		Name: sv.GVR.Resource, SingularName: sv.Singular, Namespaced: sv.Namespaced, Kind: sv.Kind,
		Verbs: sv.AllVerbs(), ShortNames: sv.ShortNames, Categories: sv.Categories,
	}
	out := []metav1.APIResource{main}
	sub := func(name string, verbs []string, group, version, kind string) {
		out = append(out, metav1.APIResource{Name: sv.GVR.Resource + "/" + name, Namespaced: sv.Namespaced,
			Group: group, Version: version, Kind: kind, Verbs: verbs})
	}
	for _, s := range subresourcesOf(sv) {
		sub(s.name, s.verbs, s.gvk.Group, s.gvk.Version, s.gvk.Kind)
	}
	return out
}

type subresourceInfo struct {
	name  string
	verbs []string
	gvk   schema.GroupVersionKind
	kind  registry.SubresourceKind
}

// status and scale are every kind's that declares them; the rest are the
// kind's own (registry.Subresource).
const (
	statusSubresource registry.SubresourceKind = -1 - iota
	scaleSubresource
)

// subresourcesOf lists what serveSubresource implements for a resource.
func subresourcesOf(sv *served) []subresourceInfo {
	var out []subresourceInfo
	rw := []string{"get", "patch", "update"}
	if sv.Status {
		out = append(out, subresourceInfo{"status", rw, schema.GroupVersionKind{Kind: sv.Kind}, statusSubresource})
	}
	if sv.Scale != nil {
		out = append(out, subresourceInfo{"scale", rw, schema.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}, scaleSubresource})
	}
	for _, sub := range sv.Subresources {
		out = append(out, subresourceInfo{sub.Name, sub.Verbs, sub.GVK, sub.Kind})
	}
	return out
}
