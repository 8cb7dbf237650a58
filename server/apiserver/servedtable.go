package apiserver

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kelp-project/kelp/server/apiserver/storage"
)

// servedTable is what the API server serves: routing (resources), legacy
// and aggregated discovery (byGroup, groupVersions) and the stores the
// compactor and re-encryption walk. A table is never changed once
// published: CRDs change what is served by publishing a changed copy
// (Server.changeTable), so a request, which loads the table once, sees
// one consistent set, and lookups take no lock.
type servedTable struct {
	resources     map[schema.GroupVersionResource]*served
	byGroup       map[string][]*served // "group/version" -> resources, in discovery order
	groupVersions []schema.GroupVersion
	stores        map[schema.GroupResource]*storage.Store // each stored resource once
}

func newServedTable() *servedTable {
	return &servedTable{
		resources: map[schema.GroupVersionResource]*served{},
		byGroup:   map[string][]*served{},
		stores:    map[schema.GroupResource]*storage.Store{},
	}
}

// live is the table being served now.
func (s *Server) live() *servedTable { return s.tbl.Load() }

// liveStores is the compactor's view: stores of CRDs added later are
// told about compactions too.
func (s *Server) liveStores() []*storage.Store {
	t := s.live()
	out := make([]*storage.Store, 0, len(t.stores))
	for _, st := range t.stores {
		out = append(out, st)
	}
	return out
}

// clone copies the table's maps and slices, so that the copy can be
// changed while readers hold the original.
func (t *servedTable) clone() *servedTable {
	c := &servedTable{
		resources:     make(map[schema.GroupVersionResource]*served, len(t.resources)),
		byGroup:       make(map[string][]*served, len(t.byGroup)),
		groupVersions: append([]schema.GroupVersion(nil), t.groupVersions...),
		stores:        make(map[schema.GroupResource]*storage.Store, len(t.stores)),
	}
	for k, v := range t.resources {
		c.resources[k] = v
	}
	for k, v := range t.byGroup {
		c.byGroup[k] = append([]*served(nil), v...)
	}
	for k, v := range t.stores {
		c.stores[k] = v
	}
	return c
}

// serve adds a resource to routing and discovery.
func (t *servedTable) serve(sv *served) {
	t.resources[sv.GVR] = sv
	gv := sv.GVR.GroupVersion()
	if _, ok := t.byGroup[gv.String()]; !ok {
		t.groupVersions = append(t.groupVersions, gv)
	}
	t.byGroup[gv.String()] = append(t.byGroup[gv.String()], sv)
}

// unserve removes a resource from routing and discovery; a group-version
// left empty leaves discovery too.
func (t *servedTable) unserve(gvr schema.GroupVersionResource) {
	delete(t.resources, gvr)
	gv := gvr.GroupVersion()
	list := t.byGroup[gv.String()]
	kept := list[:0]
	for _, sv := range list {
		if sv.GVR != gvr {
			kept = append(kept, sv)
		}
	}
	if len(kept) > 0 {
		t.byGroup[gv.String()] = kept
		return
	}
	delete(t.byGroup, gv.String())
	gvs := t.groupVersions[:0]
	for _, g := range t.groupVersions {
		if g != gv {
			gvs = append(gvs, g)
		}
	}
	t.groupVersions = gvs
}

// changeTable publishes a changed copy of the table: change edits the
// copy (an error publishes nothing), then discovery is rebuilt from it.
// Writers are serialized, so no change is lost between copy and publish.
func (s *Server) changeTable(change func(t *servedTable) error) error {
	s.tableMu.Lock()
	next := s.live().clone()
	if err := change(next); err != nil {
		s.tableMu.Unlock()
		return err
	}
	s.tbl.Store(next)
	s.tableMu.Unlock()
	return nil
}

// errBuiltin refuses a custom resource whose names a built-in holds:
// built-ins win, as upstream serves them in front of the CRD handler.
func errBuiltin(gvr schema.GroupVersionResource) error {
	return fmt.Errorf("%s is served by the API server itself", gvr)
}
