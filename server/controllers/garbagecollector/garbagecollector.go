// Package garbagecollector implements kelp's garbage collector, the
// equivalent of kube-controller-manager's: it deletes objects whose owners
// (metadata.ownerReferences) are gone, and carries out the client side of
// foreground and orphan deletion by removing the foregroundDeletion and
// orphan finalizers the API server puts on owners.
//
// Like the namespace controller it is an ordinary API client: discovery
// tells it which resources exist, a metadata-only list-then-watch loop
// per resource (monitor) feeds the graph, and the metadata client reads,
// patches and deletes generically, so custom resources are handled like
// built-in ones.
package garbagecollector

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/kelp-project/kelp/server/controllers"
)

// DefaultDiscoveryPeriod is how often resources are re-discovered when New
// is given no period.
const DefaultDiscoveryPeriod = 30 * time.Second

// notSyncedRequeue is how soon an item is looked at again when some
// monitor has not synced yet.
const notSyncedRequeue = time.Second

// ignoredResources are never watched, as upstream: events are numerous and
// never owners.
var ignoredResources = sets.New(
	schema.GroupResource{Resource: "events"},
	schema.GroupResource{Group: "events.k8s.io", Resource: "events"},
)

// GarbageCollector watches every deletable resource and collects dependents.
type GarbageCollector struct {
	discovery discovery.DiscoveryInterface
	metadata  metadata.Interface
	watches   watchSource
	period    time.Duration

	graph           *graph
	attemptToDelete workqueue.TypedRateLimitingInterface[string]
	attemptToOrphan workqueue.TypedRateLimitingInterface[string]

	// absent remembers owners a live GET found missing. UIDs are never
	// reused, so an owner once absent stays absent; the key includes the
	// namespace it was looked up in.
	absent *absentOwners

	mu         sync.RWMutex
	mapper     meta.RESTMapper
	monitors   map[schema.GroupVersionResource]*monitor
	discovered bool
	monitorWG  sync.WaitGroup
}

// New returns a garbage collector. disco finds the resources to watch and
// maps ownerReference kinds to resources; meta watches, reads, patches and
// deletes objects; its watches are read through their channels
// (NewForConfig reads the streams itself, see monitor). Resources are
// re-discovered every discoveryPeriod (DefaultDiscoveryPeriod if zero).
func New(disco discovery.DiscoveryInterface, meta metadata.Interface, discoveryPeriod time.Duration) *GarbageCollector {
	if discoveryPeriod <= 0 {
		discoveryPeriod = DefaultDiscoveryPeriod
	}
	gc := &GarbageCollector{
		discovery:       disco,
		metadata:        meta,
		watches:         clientWatches{meta},
		period:          discoveryPeriod,
		attemptToDelete: controllers.NewQueue("garbage_collector_attempt_to_delete"),
		attemptToOrphan: controllers.NewQueue("garbage_collector_attempt_to_orphan"),
		monitors:        map[schema.GroupVersionResource]*monitor{},
		absent:          &absentOwners{},
	}
	gc.graph = newGraph(
		func(uid types.UID) { gc.attemptToDelete.Add(string(uid)) },
		func(uid types.UID) { gc.attemptToOrphan.Add(string(uid)) },
	)
	return gc
}

// NewForConfig builds the discovery and metadata clients from cfg and
// returns New(...) whose monitors read their watch streams themselves,
// over the metadata client's connections or, if inProcess is not nil,
// from that handler: the API server's, in its own process, called as
// cfg's user (see streamWatches).
func NewForConfig(cfg *rest.Config, discoveryPeriod time.Duration, inProcess http.Handler) (*GarbageCollector, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("garbage collector: discovery client: %w", err)
	}
	// Cached so that one discovery round serves both the resource list and
	// the REST mapping; it is invalidated at the start of every round.
	disco := memory.NewMemCacheClient(dc)
	httpClient, err := rest.HTTPClientFor(metadata.ConfigFor(cfg))
	if err != nil {
		return nil, fmt.Errorf("garbage collector: HTTP client: %w", err)
	}
	meta, err := metadata.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("garbage collector: metadata client: %w", err)
	}
	watches, err := newStreamWatches(cfg, httpClient, inProcess)
	if err != nil {
		return nil, fmt.Errorf("garbage collector: watch client: %w", err)
	}
	gc := New(disco, meta, discoveryPeriod)
	gc.watches = watches
	return gc, nil
}

// Run discovers resources, starts their monitors and runs workers on each
// of the two queues until ctx is done. It returns once the workers and
// monitors have stopped.
func (gc *GarbageCollector) Run(ctx context.Context, workers int) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		wait.UntilWithContext(ctx, gc.resyncMonitors, gc.period)
	}()
	loops := []*controllers.Loop{
		{Name: "garbagecollector-delete", Queue: gc.attemptToDelete, Synced: []cache.InformerSynced{gc.synced}, Sync: gc.syncAttemptToDelete},
		{Name: "garbagecollector-orphan", Queue: gc.attemptToOrphan, Synced: []cache.InformerSynced{gc.synced}, Sync: gc.syncAttemptToOrphan},
	}
	for _, l := range loops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.Run(ctx, workers)
		}()
	}
	wg.Wait()

	gc.mu.Lock()
	for gvr, m := range gc.monitors {
		m.cancel()
		delete(gc.monitors, gvr)
	}
	gc.mu.Unlock()
	gc.monitorWG.Wait()
}

// synced is true once discovery succeeded and every monitor has listed its
// resource: before that a missing owner may only be missing from the
// cache, and the graph is incomplete.
func (gc *GarbageCollector) synced() bool {
	gc.mu.RLock()
	defer gc.mu.RUnlock()
	if !gc.discovered {
		return false
	}
	for _, m := range gc.monitors {
		if !m.store.synced.Load() {
			return false
		}
	}
	return true
}

// resyncMonitors discovers the deletable resources, refreshes the REST
// mapping and starts or stops monitors to match.
func (gc *GarbageCollector) resyncMonitors(ctx context.Context) {
	if cached, ok := gc.discovery.(discovery.CachedDiscoveryInterface); ok {
		cached.Invalidate()
	}
	lists, err := discovery.ServerPreferredResources(gc.discovery)
	if err != nil && len(lists) == 0 {
		logrus.WithError(err).Debug("garbage collector: discovery failed")
		return
	}
	// Resources of group versions whose discovery failed keep their
	// monitors: a transient failure must not forget them.
	failed, _ := discovery.GroupDiscoveryFailedErrorGroups(err)
	wanted := deletableResources(lists)

	groups, gerr := restmapper.GetAPIGroupResources(gc.discovery)
	if gerr != nil {
		logrus.WithError(gerr).Debug("garbage collector: partial discovery for REST mapping")
	}

	gc.mu.Lock()
	if len(groups) > 0 {
		gc.mapper = restmapper.NewDiscoveryRESTMapper(groups)
	}
	for gvr, m := range gc.monitors {
		if _, ok := wanted[gvr]; ok {
			continue
		}
		if _, ok := failed[gvr.GroupVersion()]; ok {
			continue
		}
		logrus.Debugf("garbage collector: stop monitoring %s", gvr)
		m.cancel()
		delete(gc.monitors, gvr)
	}
	var missing []schema.GroupVersionResource
	for gvr := range wanted {
		if _, ok := gc.monitors[gvr]; !ok {
			missing = append(missing, gvr)
		}
	}
	gc.mu.Unlock()

	for _, gvr := range missing {
		// A resource that cannot be listed would never sync and would hold
		// the whole collector back; it is tried again next round.
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := gc.metadata.Resource(gvr).List(lctx, metav1.ListOptions{Limit: 1})
		cancel()
		if err != nil {
			logrus.WithError(err).Debugf("garbage collector: not monitoring %s, list failed", gvr)
			continue
		}
		gc.startMonitor(ctx, gvr, wanted[gvr])
	}

	gc.mu.Lock()
	gc.discovered = true
	gc.mu.Unlock()
}

func (gc *GarbageCollector) startMonitor(ctx context.Context, gvr schema.GroupVersionResource, gvk schema.GroupVersionKind) {
	m, run := newMonitor(ctx, gc.metadata, gc.watches, gc.graph, gvr, gvk)
	gc.mu.Lock()
	defer gc.mu.Unlock()
	if ctx.Err() != nil {
		m.cancel()
		return
	}
	gc.monitors[gvr] = m
	gc.monitorWG.Add(1)
	go func() {
		defer gc.monitorWG.Done()
		run()
	}()
	logrus.Debugf("garbage collector: monitoring %s", gvr)
}

// deletableResources returns the top-level resources that support list,
// watch and delete, with their kinds.
func deletableResources(lists []*metav1.APIResourceList) map[schema.GroupVersionResource]schema.GroupVersionKind {
	out := map[schema.GroupVersionResource]schema.GroupVersionKind{}
	for _, l := range lists {
		if l == nil {
			continue
		}
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if len(r.Name) == 0 || strings.Contains(r.Name, "/") || !sets.New(r.Verbs...).HasAll("list", "watch", "delete") {
				continue
			}
			gvr := gv.WithResource(r.Name)
			if ignoredResources.Has(gvr.GroupResource()) {
				continue
			}
			out[gvr] = gv.WithKind(r.Kind)
		}
	}
	return out
}

// unmappableError is returned for an ownerReference whose kind has no
// resource (yet). The item is looked at again after the next discovery.
type unmappableError struct {
	ref   metav1.OwnerReference
	after time.Duration
	err   error
}

func (e *unmappableError) Error() string {
	return fmt.Sprintf("cannot map owner kind %s %s: %v", e.ref.APIVersion, e.ref.Kind, e.err)
}

func (e *unmappableError) RequeueDelay() time.Duration { return e.after }

// requeue asks the loop to look at an item again later without counting it
// as a failure.
type requeue struct {
	reason string
	after  time.Duration
}

func (r *requeue) Error() string               { return r.reason }
func (r *requeue) RequeueDelay() time.Duration { return r.after }

// mapping resolves an apiVersion/kind to its resource and scope.
func (gc *GarbageCollector) mapping(apiVersion, kind string) (schema.GroupVersionResource, bool, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return schema.GroupVersionResource{}, false, err
	}
	gc.mu.RLock()
	mapper := gc.mapper
	gc.mu.RUnlock()
	if mapper == nil {
		return schema.GroupVersionResource{}, false, fmt.Errorf("no REST mapping discovered yet")
	}
	m, err := mapper.RESTMapping(gv.WithKind(kind).GroupKind(), gv.Version)
	if err != nil {
		return schema.GroupVersionResource{}, false, err
	}
	return m.Resource, m.Scope.Name() == meta.RESTScopeNameNamespace, nil
}

// maxAbsentOwners bounds the absent-owner memory; it is simply emptied when
// full.
const maxAbsentOwners = 1000

type absentKey struct {
	uid       types.UID
	namespace string
}

type absentOwners struct {
	mu   sync.Mutex
	uids map[absentKey]struct{}
}

func (a *absentOwners) has(uid types.UID, ns string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.uids[absentKey{uid, ns}]
	return ok
}

func (a *absentOwners) add(uid types.UID, ns string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.uids == nil || len(a.uids) >= maxAbsentOwners {
		a.uids = map[absentKey]struct{}{}
	}
	a.uids[absentKey{uid, ns}] = struct{}{}
}
