package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/transport"
	"k8s.io/client-go/util/workqueue"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	v1helper "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1/helper"
)

// Discovery of the aggregated (remote) group/versions, as
// kube-aggregator's discovery aggregation: each Available APIService that
// names a service has its /apis/<group>/<version> read from its server
// (as system:kube-aggregator in system:masters, upstream's identity for
// it; its aggregated /apis document if it serves one, else the legacy
// form), when the APIService changes and every minute; the legacy /apis
// and /apis/<group> documents and the aggregated /apis document list
// them after the groups kelp serves itself. A version whose APIService is
// not Available is left out; one whose server stopped answering keeps
// its last resources, marked Stale in the aggregated document.

// remoteRefreshInterval is upstream's discoveryRefreshInterval.
const remoteRefreshInterval = time.Minute

// remoteVersion is one remote group/version as discovery lists it.
type remoteVersion struct {
	group, version                 string
	groupPriority, versionPriority int32
	resources                      []apidiscoveryv2.APIResourceDiscovery
	stale                          bool
}

type remoteDiscovery struct {
	a     *aggregator
	queue workqueue.TypedRateLimitingInterface[string]
	mu    sync.Mutex
	byAPI map[string]*remoteVersion // by APIService name
	// snapshot is the sorted list the documents are built from, replaced
	// on every change; a discovery document built from another is
	// rebuilt.
	snapshot atomic.Pointer[[]*remoteVersion]
}

func newRemoteDiscovery(a *aggregator) *remoteDiscovery {
	d := &remoteDiscovery{a: a, byAPI: map[string]*remoteVersion{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "aggregator_discovery"})}
	d.snapshot.Store(&[]*remoteVersion{})
	return d
}

func (d *remoteDiscovery) enqueue(name string) { d.queue.Add(name) }

func (d *remoteDiscovery) enqueueAll() {
	list, err := d.a.apiServices.List(labels.Everything())
	if err != nil {
		return
	}
	for _, svc := range list {
		if svc.Spec.Service != nil {
			d.queue.Add(svc.Name)
		}
	}
	d.mu.Lock()
	for name := range d.byAPI {
		d.queue.Add(name)
	}
	d.mu.Unlock()
}

func (d *remoteDiscovery) run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		d.queue.ShutDown()
	}()
	go wait.UntilWithContext(ctx, func(context.Context) { d.enqueueAll() }, remoteRefreshInterval)
	for {
		name, quit := d.queue.Get()
		if quit {
			return
		}
		// A server that did not answer is asked again with backoff (and
		// by the periodic refresh), as upstream's.
		if err := d.sync(ctx, name); err != nil {
			logrus.Debugf("aggregator discovery of %s: %v", name, err)
			d.queue.AddRateLimited(name)
		} else {
			d.queue.Forget(name)
		}
		d.queue.Done(name)
	}
}

// sync reads one APIService's group/version from its server, or drops it.
func (d *remoteDiscovery) sync(ctx context.Context, name string) error {
	svc, err := d.a.apiServices.Get(name)
	if err != nil || svc.Spec.Service == nil || !v1helper.IsAPIServiceConditionTrue(svc, apiregistrationv1.Available) {
		d.set(name, nil)
		return nil
	}
	resources, err := d.fetch(ctx, svc)
	if err != nil {
		d.mu.Lock()
		prev := d.byAPI[name]
		d.mu.Unlock()
		if prev != nil && !prev.stale {
			stale := *prev
			stale.stale = true
			d.set(name, &stale)
		}
		return err
	}
	d.set(name, &remoteVersion{group: svc.Spec.Group, version: svc.Spec.Version,
		groupPriority: svc.Spec.GroupPriorityMinimum, versionPriority: svc.Spec.VersionPriority, resources: resources})
	return nil
}

// fetch reads the APIService's group/version from its server as
// upstream's discovery aggregation: the aggregated document of its /apis
// if it serves one, else the legacy /apis/<group>/<version>.
func (d *remoteDiscovery) fetch(ctx context.Context, svc *apiregistrationv1.APIService) ([]apidiscoveryv2.APIResourceDiscovery, error) {
	loc, err := d.a.location(svc)
	if err != nil {
		return nil, err
	}
	rt, err := d.a.transportFor(svc)
	if err != nil {
		return nil, err
	}
	rt = transport.NewAuthProxyRoundTripper("system:kube-aggregator", "", []string{"system:masters"}, nil, rt)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	get := func(path, accept string) ([]byte, string, error) {
		u := url.URL{Scheme: "https", Host: loc.Host, Path: path}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return nil, "", err
		}
		req.Header.Set("Accept", accept)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			return nil, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
		if err != nil {
			return nil, "", err
		}
		if resp.StatusCode != http.StatusOK {
			return nil, "", fmt.Errorf("GET %s: %s", path, resp.Status)
		}
		return body, resp.Header.Get("Content-Type"), nil
	}
	gv := svc.Spec.Group + "/" + svc.Spec.Version
	if body, ct, err := get("/apis", discovery.AcceptV2+","+discovery.AcceptV1); err == nil {
		if ok, _ := discovery.ContentTypeIsGVK(ct, aggregatedGVK); ok {
			var list apidiscoveryv2.APIGroupDiscoveryList
			if err := json.Unmarshal(body, &list); err != nil {
				return nil, fmt.Errorf("GET /apis: %w", err)
			}
			for _, g := range list.Items {
				for _, v := range g.Versions {
					if g.Name == svc.Spec.Group && v.Version == svc.Spec.Version {
						return v.Resources, nil
					}
				}
			}
			return nil, fmt.Errorf("GET /apis: the aggregated document lacks %s", gv)
		}
	}
	body, _, err := get("/apis/"+gv, "application/json")
	if err != nil {
		return nil, err
	}
	var list metav1.APIResourceList
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("GET /apis/%s: %w", gv, err)
	}
	return resourcesDiscovery(list.APIResources), nil
}

// set records one APIService's version (nil: none) and replaces the
// snapshot if that changed anything.
func (d *remoteDiscovery) set(name string, v *remoteVersion) {
	d.mu.Lock()
	defer d.mu.Unlock()
	prev := d.byAPI[name]
	if v == nil && prev == nil {
		return
	}
	if v != nil && prev != nil && reflect.DeepEqual(*prev, *v) {
		return
	}
	if v == nil {
		delete(d.byAPI, name)
	} else {
		d.byAPI[name] = v
	}
	snap := make([]*remoteVersion, 0, len(d.byAPI))
	for _, rv := range d.byAPI {
		snap = append(snap, rv)
	}
	sortRemoteVersions(snap)
	d.snapshot.Store(&snap)
}

// sortRemoteVersions orders as upstream's discovery: groups by the
// highest groupPriorityMinimum of their versions, then by name; a
// group's versions by versionPriority, then Kubernetes-aware version
// order (v2 > v1 > v1beta1), the first one preferred.
func sortRemoteVersions(vs []*remoteVersion) {
	groupPriority := map[string]int32{}
	for _, v := range vs {
		if p, ok := groupPriority[v.group]; !ok || v.groupPriority > p {
			groupPriority[v.group] = v.groupPriority
		}
	}
	slices.SortStableFunc(vs, func(a, b *remoteVersion) int {
		if a.group != b.group {
			if pa, pb := groupPriority[a.group], groupPriority[b.group]; pa != pb {
				return int(pb) - int(pa)
			}
			return strings.Compare(a.group, b.group)
		}
		if a.versionPriority != b.versionPriority {
			return int(b.versionPriority) - int(a.versionPriority)
		}
		return -version.CompareKubeAwareVersionStrings(a.version, b.version)
	})
}

// remoteSnapshot is the current snapshot (nil without an aggregation
// layer): every change stores a new one, so documents built from it are
// current while it is the one stored.
func (s *Server) remoteSnapshot() *[]*remoteVersion {
	a := s.agg.Load()
	if a == nil {
		return nil
	}
	return a.discovery.snapshot.Load()
}

// remoteVersions is the current snapshot's versions, sorted.
func (s *Server) remoteVersions() []*remoteVersion { return versionsOf(s.remoteSnapshot()) }

func versionsOf(snap *[]*remoteVersion) []*remoteVersion {
	if snap == nil {
		return nil
	}
	return *snap
}

// remoteGroup is a remote group as /apis/<group> lists it, nil if none
// of its versions is known.
func remoteGroup(vs []*remoteVersion, group string) *metav1.APIGroup {
	var g *metav1.APIGroup
	for _, v := range vs {
		if v.group != group {
			continue
		}
		gvd := metav1.GroupVersionForDiscovery{GroupVersion: v.group + "/" + v.version, Version: v.version}
		if g == nil {
			g = &metav1.APIGroup{TypeMeta: metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}, Name: group, PreferredVersion: gvd}
		}
		g.Versions = append(g.Versions, gvd)
	}
	return g
}

// remoteGroupNames lists the remote groups in discovery order.
func remoteGroupNames(vs []*remoteVersion) []string {
	var out []string
	for _, v := range vs {
		if len(out) == 0 || out[len(out)-1] != v.group {
			out = append(out, v.group)
		}
	}
	return out
}

// aggregatedVersion is a remote version in the aggregated document.
func (v *remoteVersion) aggregatedVersion() apidiscoveryv2.APIVersionDiscovery {
	out := apidiscoveryv2.APIVersionDiscovery{Version: v.version, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent,
		Resources: v.resources}
	if v.stale {
		out.Freshness = apidiscoveryv2.DiscoveryFreshnessStale
	}
	return out
}
