package endpointslicemirroring

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

const (
	// ManagedBy is the endpointslice.kubernetes.io/managed-by value of the
	// mirrored slices; it is upstream's, so clients that tell mirrored
	// slices from the selector controller's ones find kelp's.
	ManagedBy = "endpointslicemirroring-controller.k8s.io"
	// MaxEndpointsPerSubset is upstream's default cap on the addresses
	// mirrored from one (repacked) subset; the rest are not mirrored.
	MaxEndpointsPerSubset = 1000
	// leaderAnnotation marks Endpoints used as leader-election locks by old
	// components; they describe no backends and are never mirrored.
	leaderAnnotation = "control-plane.alpha.kubernetes.io/leader"
)

// ShouldMirror reports whether ep's addresses are published as slices:
// only for a Service that exists and has no selector (one with a selector
// has its slices written by the endpoints controller from its pods), and
// only if the user did not opt out with the skip-mirror label.
func ShouldMirror(ep *corev1.Endpoints, svc *corev1.Service) bool {
	if ep == nil || svc == nil || ep.Labels[discoveryv1.LabelSkipMirror] == "true" {
		return false
	}
	if _, ok := ep.Annotations[leaderAnnotation]; ok {
		return false
	}
	// len, not nil: kelp's endpoints controller treats an empty selector
	// as none, so exactly one of the two controllers owns the slices.
	return len(svc.Spec.Selector) == 0
}

// sliceKey groups endpoints that may share a slice: one address type and
// one port list (compared regardless of order).
type sliceKey struct {
	addressType discoveryv1.AddressType
	ports       string
}

func portsKey(ports []discoveryv1.EndpointPort) string {
	parts := make([]string, 0, len(ports))
	for _, p := range ports {
		app := "-"
		if p.AppProtocol != nil {
			app = "=" + *p.AppProtocol
		}
		parts = append(parts, fmt.Sprintf("%q/%d/%s%s", ptr.Deref(p.Name, ""), ptr.Deref(p.Port, 0), ptr.Deref(p.Protocol, ""), app))
	}
	sort.Strings(parts)
	return strings.Join(parts, ";")
}

func keyOf(s *discoveryv1.EndpointSlice) sliceKey {
	return sliceKey{addressType: s.AddressType, ports: portsKey(s.Ports)}
}

// sliceLabels are the Endpoints' labels plus the two reserved ones, which
// the Endpoints cannot override: consumers find slices by service-name and
// managed-by decides which controller owns a slice.
func sliceLabels(ep *corev1.Endpoints) map[string]string {
	out := make(map[string]string, len(ep.Labels)+2)
	for k, v := range ep.Labels {
		out[k] = v
	}
	out[discoveryv1.LabelServiceName] = ep.Name
	out[discoveryv1.LabelManagedBy] = ManagedBy
	return out
}

// sliceAnnotations are the Endpoints' annotations minus the two upstream
// leaves out: the trigger time describes the Endpoints' own write and the
// last-applied configuration is kubectl's record of the Endpoints.
func sliceAnnotations(ep *corev1.Endpoints) map[string]string {
	out := map[string]string{}
	for k, v := range ep.Annotations {
		if k == corev1.EndpointsLastChangeTriggerTime || k == corev1.LastAppliedConfigAnnotation {
			continue
		}
		out[k] = v
	}
	return out
}

// toEndpoint converts one address; an address that is not an IP cannot be
// in a slice and is skipped (ok false).
func toEndpoint(a corev1.EndpointAddress, ready bool) (discoveryv1.Endpoint, discoveryv1.AddressType, bool) {
	ip, err := netip.ParseAddr(a.IP)
	if err != nil || ip.Zone() != "" {
		return discoveryv1.Endpoint{}, "", false
	}
	at := discoveryv1.AddressTypeIPv6
	if ip.Unmap().Is4() {
		at, ip = discoveryv1.AddressTypeIPv4, ip.Unmap()
	}
	e := discoveryv1.Endpoint{
		Addresses:  []string{ip.String()},
		Conditions: discoveryv1.EndpointConditions{Ready: &ready},
		NodeName:   a.NodeName,
	}
	if a.TargetRef != nil {
		e.TargetRef = a.TargetRef.DeepCopy()
	}
	if a.Hostname != "" {
		h := a.Hostname
		e.Hostname = &h
	}
	return e, at, true
}

func slicePorts(ports []corev1.EndpointPort) []discoveryv1.EndpointPort {
	out := make([]discoveryv1.EndpointPort, 0, len(ports))
	for _, p := range ports {
		p := p
		ep := discoveryv1.EndpointPort{Name: &p.Name, Port: &p.Port, Protocol: &p.Protocol}
		if p.AppProtocol != nil {
			app := *p.AppProtocol
			ep.AppProtocol = &app
		}
		out = append(out, ep)
	}
	return out
}

// group is the wanted content of one slice.
type group struct {
	key   sliceKey
	ports []discoveryv1.EndpointPort
	eps   []discoveryv1.Endpoint
	seen  map[string]bool
}

// Desired computes the slices that mirror ep, one per address type and
// port list, in a stable order, without names (GenerateName is set).
// Subsets with the same ports are merged as upstream repacks them; an
// address listed twice counts once, as ready if it is ready anywhere.
// At most maxPerSubset addresses of each merged subset are mirrored,
// ready ones first.
func Desired(ep *corev1.Endpoints, maxPerSubset int) []*discoveryv1.EndpointSlice {
	type merged struct {
		ports    []corev1.EndpointPort
		ready    []corev1.EndpointAddress
		notReady []corev1.EndpointAddress
		state    map[string]bool // address key -> ready
	}
	var order []string
	bySubset := map[string]*merged{}
	addrKey := func(a corev1.EndpointAddress) string {
		uid := types.UID("")
		if a.TargetRef != nil {
			uid = a.TargetRef.UID
		}
		return a.IP + "|" + string(uid)
	}
	for _, ss := range ep.Subsets {
		pk := portsKey(slicePorts(ss.Ports))
		m := bySubset[pk]
		if m == nil {
			m = &merged{ports: ss.Ports, state: map[string]bool{}}
			bySubset[pk] = m
			order = append(order, pk)
		}
		for _, a := range ss.Addresses {
			if ready, ok := m.state[addrKey(a)]; ok && ready {
				continue
			}
			m.state[addrKey(a)] = true
			m.ready = append(m.ready, a)
		}
		for _, a := range ss.NotReadyAddresses {
			if _, ok := m.state[addrKey(a)]; ok {
				continue
			}
			m.state[addrKey(a)] = false
			m.notReady = append(m.notReady, a)
		}
	}

	var groups []*group
	byKey := map[sliceKey]*group{}
	for _, pk := range order {
		m := bySubset[pk]
		added := 0
		add := func(a corev1.EndpointAddress, ready bool) {
			if added >= maxPerSubset {
				return
			}
			e, at, ok := toEndpoint(a, ready)
			if !ok {
				return
			}
			added++
			k := sliceKey{addressType: at, ports: pk}
			g := byKey[k]
			if g == nil {
				g = &group{key: k, ports: slicePorts(m.ports), seen: map[string]bool{}}
				byKey[k] = g
				groups = append(groups, g)
			}
			id := e.Addresses[0] + "|" + addrKey(a)
			if g.seen[id] {
				return
			}
			g.seen[id] = true
			g.eps = append(g.eps, e)
		}
		for _, a := range m.ready {
			if m.state[addrKey(a)] {
				add(a, true)
			}
		}
		for _, a := range m.notReady {
			if !m.state[addrKey(a)] {
				add(a, false)
			}
		}
	}

	owner := metav1.NewControllerRef(ep, corev1.SchemeGroupVersion.WithKind("Endpoints"))
	out := make([]*discoveryv1.EndpointSlice, 0, len(groups))
	for _, g := range groups {
		out = append(out, &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{
				GenerateName:    ep.Name + "-",
				Namespace:       ep.Namespace,
				Labels:          sliceLabels(ep),
				Annotations:     sliceAnnotations(ep),
				OwnerReferences: []metav1.OwnerReference{*owner},
			},
			AddressType: g.key.addressType,
			Ports:       g.ports,
			Endpoints:   g.eps,
		})
	}
	return out
}
