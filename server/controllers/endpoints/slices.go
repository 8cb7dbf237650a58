package endpoints

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"

	"github.com/kelp-project/kelp/server/controllers"
)

// errStale makes the loop retry a Service whose objects this controller
// wrote but the informers have not shown yet: acting on the old view
// would create a second slice for the same endpoints, or repeat an update.
var errStale = errors.New("informer cache is behind this controller's own writes")

// pendingTimeout bounds how long a write the informer never reflects (a
// watch that relisted past it) can hold a Service back.
const pendingTimeout = 30 * time.Second

// pendingWrites remembers, per Service key and object name, writes this
// controller made that the informer has not caught up with.
type pendingWrites struct {
	mu sync.Mutex
	m  map[string]map[string]pendingWrite
}

// pendingWrite is reflected once the object is present (created), absent
// (deleted), or present at another resourceVersion than the one the
// update replaced.
type pendingWrite struct {
	op     string // "create", "update" or "delete"
	fromRV string
	at     time.Time
}

func newPendingWrites() *pendingWrites {
	return &pendingWrites{m: map[string]map[string]pendingWrite{}}
}

func (p *pendingWrites) record(key, name, op, fromRV string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m[key] == nil {
		p.m[key] = map[string]pendingWrite{}
	}
	p.m[key][name] = pendingWrite{op: op, fromRV: fromRV, at: time.Now()}
}

// gone is called when the informer reports an object deleted: one created
// and then removed by someone else before this controller looked would
// otherwise never be seen and hold the Service until the timeout.
func (p *pendingWrites) gone(key, name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.m[key], name)
	if len(p.m[key]) == 0 {
		delete(p.m, key)
	}
}

// stale reports whether the cache, which holds the objects named in cached
// (name to resourceVersion) for key, still misses one of this
// controller's writes. Writes it reflects are forgotten.
func (p *pendingWrites) stale(key string, cached map[string]string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	stale := false
	for name, w := range p.m[key] {
		rv, present := cached[name]
		var seen bool
		switch w.op {
		case "create":
			seen = present
		case "delete":
			seen = !present
		default:
			seen = !present || rv != w.fromRV
		}
		if seen || time.Since(w.at) > pendingTimeout {
			delete(p.m[key], name)
			continue
		}
		stale = true
	}
	if len(p.m[key]) == 0 {
		delete(p.m, key)
	}
	return stale
}

func (c *Controller) managedSlices(ns, service string) ([]*discoveryv1.EndpointSlice, error) {
	return ManagedSlices(c.slices, ns, service, ManagedBy)
}

// ManagedSlices lists the slices of a Service that one controller
// (managedBy: this one, or the mirroring controller) keeps, by name, so
// that every sync keeps the same one of several.
func ManagedSlices(lister discoverylisters.EndpointSliceLister, ns, service, managedBy string) ([]*discoveryv1.EndpointSlice, error) {
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: service, discoveryv1.LabelManagedBy: managedBy})
	list, err := lister.EndpointSlices(ns).List(sel)
	if err != nil {
		return nil, err
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	return list, nil
}

func (c *Controller) deleteSlices(ctx context.Context, key, ns, service string) error {
	existing, err := c.managedSlices(ns, service)
	if err != nil {
		return err
	}
	var errs []error
	for _, s := range existing {
		errs = append(errs, c.deleteSlice(ctx, key, s))
	}
	return errors.Join(errs...)
}

func (c *Controller) deleteSlice(ctx context.Context, key string, s *discoveryv1.EndpointSlice) error {
	err := c.client.DiscoveryV1().EndpointSlices(s.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	c.pendingSlices.record(key, s.Name, "delete", "")
	return nil
}

// sliceLabels are the Service's labels plus the reserved ones, which the
// Service cannot override: consumers find slices by service-name, and
// managed-by decides which controller owns a slice.
func sliceLabels(svc *corev1.Service) map[string]string {
	out := make(map[string]string, len(svc.Labels)+3)
	for k, v := range svc.Labels {
		if k != discoveryv1.LabelServiceName && k != discoveryv1.LabelManagedBy && k != corev1.IsHeadlessService {
			out[k] = v
		}
	}
	out[discoveryv1.LabelServiceName] = svc.Name
	out[discoveryv1.LabelManagedBy] = ManagedBy
	if svc.Spec.ClusterIP == corev1.ClusterIPNone {
		out[corev1.IsHeadlessService] = ""
	}
	return out
}

// sliceGroup is the endpoints that share one address type and one resolved
// port list, and so may share slices.
type sliceGroup struct {
	addressType discoveryv1.AddressType
	ports       []resolvedPort
	byPod       map[string]discoveryv1.Endpoint
}

func groupKey(t discoveryv1.AddressType, ports []resolvedPort) string {
	return string(t) + "|" + portsKey(ports)
}

func desiredGroups(svc *corev1.Service, pods []*corev1.Pod) map[string]*sliceGroup {
	groups := map[string]*sliceGroup{}
	for _, fam := range serviceFamilies(svc) {
		at := discoveryv1.AddressType(fam)
		for _, pod := range pods {
			ip := podIP(pod, fam)
			if ip == "" {
				continue
			}
			ports := podPorts(svc, pod)
			k := groupKey(at, ports)
			g := groups[k]
			if g == nil {
				g = &sliceGroup{addressType: at, ports: ports, byPod: map[string]discoveryv1.Endpoint{}}
				groups[k] = g
			}
			g.byPod[pod.Name] = sliceEndpoint(svc, pod, ip)
		}
	}
	return groups
}

// keptSlice is an existing slice that still holds some wanted endpoints.
type keptSlice struct {
	orig    *discoveryv1.EndpointSlice
	eps     []discoveryv1.Endpoint
	changed bool
}

func endpointPod(ep discoveryv1.Endpoint) string {
	if ep.TargetRef == nil || ep.TargetRef.Kind != "Pod" {
		return ""
	}
	return ep.TargetRef.Name
}

// syncSlices converges the Service's slices with as few writes as it can:
// endpoints stay in the slice they are in, new ones fill slices that are
// written anyway before others, and a slice that would be deleted while
// another is created is rewritten in place instead.
func (c *Controller) syncSlices(ctx context.Context, key string, svc *corev1.Service, pods []*corev1.Pod) error {
	existing, err := c.managedSlices(svc.Namespace, svc.Name)
	if err != nil {
		return err
	}
	cached := make(map[string]string, len(existing))
	for _, s := range existing {
		cached[s.Name] = s.ResourceVersion
	}
	if c.pendingSlices.stale(key, cached) {
		return errStale
	}

	groups := desiredGroups(svc, pods)
	wantLabels := sliceLabels(svc)
	owner := []metav1.OwnerReference{*metav1.NewControllerRef(svc, corev1.SchemeGroupVersion.WithKind("Service"))}

	var deletes, creates []*discoveryv1.EndpointSlice
	kept := map[string][]*keptSlice{}
	placed := map[string]map[string]bool{}
	for _, s := range existing {
		k := groupKey(s.AddressType, fromSlicePorts(s.Ports))
		g := groups[k]
		if g == nil {
			deletes = append(deletes, s)
			continue
		}
		if placed[k] == nil {
			placed[k] = map[string]bool{}
		}
		ks := &keptSlice{orig: s}
		for _, ep := range s.Endpoints {
			pod := endpointPod(ep)
			want, ok := g.byPod[pod]
			// Duplicates (from an earlier stale view) and endpoints past a
			// lowered per-slice limit are dropped here and placed below.
			if !ok || placed[k][pod] || len(ks.eps) >= c.maxPerSlice {
				ks.changed = true
				continue
			}
			placed[k][pod] = true
			if !apiequality.Semantic.DeepEqual(ep, want) {
				ks.changed = true
			}
			ks.eps = append(ks.eps, want)
		}
		if len(ks.eps) == 0 {
			deletes = append(deletes, s)
			continue
		}
		kept[k] = append(kept[k], ks)
	}

	total := 0
	for _, k := range slices.Sorted(maps.Keys(groups)) {
		g := groups[k]
		total += len(g.byPod)
		var remaining []string
		for _, pod := range slices.Sorted(maps.Keys(g.byPod)) {
			if !placed[k][pod] {
				remaining = append(remaining, pod)
			}
		}
		for _, wantChanged := range []bool{true, false} {
			for _, ks := range kept[k] {
				if ks.changed != wantChanged {
					continue
				}
				for len(remaining) > 0 && len(ks.eps) < c.maxPerSlice {
					ks.eps = append(ks.eps, g.byPod[remaining[0]])
					remaining = remaining[1:]
					ks.changed = true
				}
			}
		}
		for len(remaining) > 0 {
			n := min(len(remaining), c.maxPerSlice)
			eps := make([]discoveryv1.Endpoint, 0, n)
			for _, pod := range remaining[:n] {
				eps = append(eps, g.byPod[pod])
			}
			remaining = remaining[n:]
			creates = append(creates, newSlice(svc, wantLabels, owner, g.addressType, g.ports, eps))
		}
	}
	// Consumers tell "no endpoints" from "not yet published" by an empty
	// slice, so a Service with no pods keeps one.
	if total == 0 && len(kept) == 0 {
		at := discoveryv1.AddressType(serviceFamilies(svc)[0])
		creates = append(creates, newSlice(svc, wantLabels, owner, at, nil, nil))
	}

	var updates []*discoveryv1.EndpointSlice
	for _, k := range slices.Sorted(maps.Keys(kept)) {
		for _, ks := range kept[k] {
			if !ks.changed && labels.Equals(ks.orig.Labels, wantLabels) && apiequality.Semantic.DeepEqual(ks.orig.OwnerReferences, owner) {
				continue
			}
			s := ks.orig.DeepCopy()
			s.Labels, s.OwnerReferences, s.Endpoints = wantLabels, owner, ks.eps
			updates = append(updates, s)
		}
	}
	// Reuse slices about to be deleted for slices about to be created.
	// addressType is immutable, so only a slice of the same type will do;
	// one that already has the wanted content is kept without a write.
	var toCreate []*discoveryv1.EndpointSlice
	for _, cr := range creates {
		i := slices.IndexFunc(deletes, func(d *discoveryv1.EndpointSlice) bool { return sameSliceContent(d, cr) })
		if i < 0 {
			i = slices.IndexFunc(deletes, func(d *discoveryv1.EndpointSlice) bool { return d.AddressType == cr.AddressType })
		}
		if i < 0 {
			toCreate = append(toCreate, cr)
			continue
		}
		d := deletes[i]
		deletes = slices.Delete(deletes, i, i+1)
		if sameSliceContent(d, cr) {
			continue
		}
		s := d.DeepCopy()
		s.Labels, s.OwnerReferences, s.Endpoints, s.Ports = cr.Labels, cr.OwnerReferences, cr.Endpoints, cr.Ports
		updates = append(updates, s)
	}

	// Creates and updates go first so that endpoints moving between slices
	// are never absent from all of them.
	var errs []error
	for _, s := range toCreate {
		created, err := c.client.DiscoveryV1().EndpointSlices(svc.Namespace).Create(ctx, s, metav1.CreateOptions{})
		if err != nil {
			if !controllers.NamespaceTerminating(err) {
				errs = append(errs, err)
			}
			continue
		}
		c.pendingSlices.record(key, created.Name, "create", "")
	}
	for _, s := range updates {
		fromRV := s.ResourceVersion
		updated, err := c.client.DiscoveryV1().EndpointSlices(svc.Namespace).Update(ctx, s, metav1.UpdateOptions{})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		// An update the server found to be a no-op keeps its
		// resourceVersion and sends no event; there is nothing to wait for.
		if updated.ResourceVersion != fromRV {
			c.pendingSlices.record(key, s.Name, "update", fromRV)
		}
	}
	if len(errs) > 0 {
		// Deleting now could drop endpoints whose new home failed to be written.
		return errors.Join(errs...)
	}
	for _, s := range deletes {
		errs = append(errs, c.deleteSlice(ctx, key, s))
	}
	return errors.Join(errs...)
}

func newSlice(svc *corev1.Service, lbls map[string]string, owner []metav1.OwnerReference, at discoveryv1.AddressType,
	ports []resolvedPort, eps []discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    svc.Name + "-",
			Namespace:       svc.Namespace,
			Labels:          lbls,
			OwnerReferences: owner,
		},
		AddressType: at,
		Endpoints:   eps,
		Ports:       slicePorts(ports),
	}
}

func sameSliceContent(a, b *discoveryv1.EndpointSlice) bool {
	return a.AddressType == b.AddressType && labels.Equals(a.Labels, b.Labels) &&
		apiequality.Semantic.DeepEqual(a.OwnerReferences, b.OwnerReferences) &&
		apiequality.Semantic.DeepEqual(a.Endpoints, b.Endpoints) &&
		apiequality.Semantic.DeepEqual(a.Ports, b.Ports)
}
