package garbagecollector

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// objectRef identifies an object the way an ownerReference does, plus the
// namespace.
type objectRef struct {
	APIVersion string
	Kind       string
	Namespace  string
	Name       string
	UID        types.UID
}

// node is one object in the owner/dependent graph. A virtual node has only
// been seen in some ownerReference: its identity is a guess and it may not
// exist at all, so nothing is ever decided from a virtual node alone.
type node struct {
	identity objectRef
	// resource is the monitored resource the object was observed through;
	// empty for virtual nodes.
	resource           schema.GroupVersionResource
	owners             []metav1.OwnerReference
	dependents         map[types.UID]*node
	virtual            bool
	beingDeleted       bool
	deletingDependents bool
}

// nodeInfo is a copy of a node taken under the graph lock, safe to use by
// workers while the graph keeps changing.
type nodeInfo struct {
	identity           objectRef
	resource           schema.GroupVersionResource
	virtual            bool
	beingDeleted       bool
	deletingDependents bool
}

func (n *node) info() nodeInfo {
	return nodeInfo{identity: n.identity, resource: n.resource, virtual: n.virtual,
		beingDeleted: n.beingDeleted, deletingDependents: n.deletingDependents}
}

// blocks reports whether n has an ownerReference to owner with
// blockOwnerDeletion set.
func (n *node) blocks(owner types.UID) bool {
	for _, r := range n.owners {
		if r.UID == owner && r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion {
			return true
		}
	}
	return false
}

// graph is the owner → dependents graph built from the monitors' events.
// It only tells the workers where to look: every decision to delete or
// patch is taken on live objects.
type graph struct {
	mu    sync.Mutex
	nodes map[types.UID]*node

	// toDelete and toOrphan receive UIDs for the two worker queues.
	toDelete func(types.UID)
	toOrphan func(types.UID)
}

func newGraph(toDelete, toOrphan func(types.UID)) *graph {
	return &graph{nodes: map[types.UID]*node{}, toDelete: toDelete, toOrphan: toOrphan}
}

// observe records the current state of an object seen through resource gvr
// of kind gvk.
func (g *graph) observe(gvr schema.GroupVersionResource, gvk schema.GroupVersionKind, obj interface{}) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()

	n := g.nodes[m.UID]
	var oldOwners []metav1.OwnerReference
	wasDeletingDependents := false
	if n == nil {
		n = &node{dependents: map[types.UID]*node{}}
		g.nodes[m.UID] = n
	} else if !n.virtual {
		oldOwners = n.owners
		wasDeletingDependents = n.deletingDependents
	}
	apiVersion, kind := gvk.ToAPIVersionAndKind()
	n.identity = objectRef{APIVersion: apiVersion, Kind: kind, Namespace: m.Namespace, Name: m.Name, UID: m.UID}
	n.resource = gvr
	n.virtual = false
	n.owners = append([]metav1.OwnerReference(nil), m.OwnerReferences...)
	n.beingDeleted = m.DeletionTimestamp != nil
	n.deletingDependents = n.beingDeleted && hasFinalizer(m.Finalizers, metav1.FinalizerDeleteDependents)

	added, removed, changed := diffOwners(oldOwners, n.owners)
	for _, r := range removed {
		g.unlink(n, r.UID)
	}
	for _, r := range changed {
		// A blockOwnerDeletion flip may be what a foreground owner waits for.
		if o := g.nodes[r.UID]; o != nil && o.deletingDependents {
			g.toDelete(o.identity.UID)
		}
	}
	for _, r := range added {
		o := g.nodes[r.UID]
		if o == nil {
			o = &node{virtual: true, dependents: map[types.UID]*node{},
				identity: objectRef{APIVersion: r.APIVersion, Kind: r.Kind, Namespace: m.Namespace, Name: r.Name, UID: r.UID}}
			g.nodes[r.UID] = o
		}
		o.dependents[n.identity.UID] = n
		if o.virtual {
			// The owner may never have existed; the dependent's worker
			// checks it live.
			g.toDelete(n.identity.UID)
		}
	}

	if n.deletingDependents {
		g.toDelete(n.identity.UID)
		if !wasDeletingDependents {
			for uid := range n.dependents {
				g.toDelete(uid)
			}
		}
	}
	if n.beingDeleted && hasFinalizer(m.Finalizers, metav1.FinalizerOrphanDependents) {
		g.toOrphan(n.identity.UID)
	}
}

// seenThrough returns the UIDs of the objects last observed through
// resource gvr.
func (g *graph) seenThrough(gvr schema.GroupVersionResource) []types.UID {
	g.mu.Lock()
	defer g.mu.Unlock()
	var uids []types.UID
	for uid, n := range g.nodes {
		if !n.virtual && n.resource == gvr {
			uids = append(uids, uid)
		}
	}
	return uids
}

// forget handles the deletion of an object: its dependents lost an owner
// and are looked at, and owners waiting for it are looked at again.
func (g *graph) forget(obj interface{}) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	n := g.nodes[m.UID]
	if n == nil || n.virtual {
		return
	}
	for _, r := range n.owners {
		g.unlink(n, r.UID)
	}
	n.owners = nil
	if len(n.dependents) == 0 {
		delete(g.nodes, m.UID)
		return
	}
	// Keep the edges to the dependents that still point here until their
	// references go away; the node is only a name now.
	n.virtual, n.beingDeleted, n.deletingDependents = true, false, false
	n.resource = schema.GroupVersionResource{}
	for uid := range n.dependents {
		g.toDelete(uid)
	}
}

// unlink removes the edge owner → n. Called with g.mu held.
func (g *graph) unlink(n *node, owner types.UID) {
	o := g.nodes[owner]
	if o == nil {
		return
	}
	delete(o.dependents, n.identity.UID)
	switch {
	case o.virtual && len(o.dependents) == 0:
		delete(g.nodes, owner)
	case o.deletingDependents:
		g.toDelete(owner)
	}
}

func (g *graph) get(uid types.UID) (nodeInfo, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := g.nodes[uid]
	if n == nil {
		return nodeInfo{}, false
	}
	return n.info(), true
}

// dependents returns the observed dependents of uid and how many of them
// block its deletion (blockOwnerDeletion=true); dependents that are being
// deleted still count until they are gone.
func (g *graph) dependents(uid types.UID) (deps []nodeInfo, blocking int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := g.nodes[uid]
	if n == nil {
		return nil, 0
	}
	for _, d := range n.dependents {
		deps = append(deps, d.info())
		if d.blocks(uid) {
			blocking++
		}
	}
	return deps, blocking
}

// diffOwners compares two ownerReference lists by UID; changed lists the
// new version of references whose blockOwnerDeletion differs.
func diffOwners(old, cur []metav1.OwnerReference) (added, removed, changed []metav1.OwnerReference) {
	oldByUID := make(map[types.UID]metav1.OwnerReference, len(old))
	for _, r := range old {
		oldByUID[r.UID] = r
	}
	curUIDs := make(map[types.UID]bool, len(cur))
	for _, r := range cur {
		curUIDs[r.UID] = true
		o, ok := oldByUID[r.UID]
		switch {
		case !ok:
			added = append(added, r)
		case isTrue(o.BlockOwnerDeletion) != isTrue(r.BlockOwnerDeletion):
			changed = append(changed, r)
		}
	}
	for _, r := range old {
		if !curUIDs[r.UID] {
			removed = append(removed, r)
		}
	}
	return added, removed, changed
}

func isTrue(b *bool) bool { return b != nil && *b }

func hasFinalizer(finalizers []string, f string) bool {
	for _, x := range finalizers {
		if x == f {
			return true
		}
	}
	return false
}
