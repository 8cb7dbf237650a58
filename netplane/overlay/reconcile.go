package overlay

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sort"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// peer is what one other node needs programmed. It is comparable: a Node
// update that changes none of these fields changes nothing on the node.
type peer struct {
	Name    string
	PodCIDR netip.Prefix
	// IP is where the peer's pods are reached: its public IP (vxlan, the
	// FDB entry's destination) or its InternalIP (host-gw, the gateway).
	IP netip.Addr
	// MAC is the peer's VTEP MAC (vxlan only), in net.HardwareAddr form.
	MAC string
}

// plane is one backend's netlink side. add and del are idempotent; prune
// removes what belongs to no peer in keep; repair restores the backend's
// own side (vxlan: kelp.1, deleted or changed behind its back).
type plane interface {
	add(peer) error
	del(peer) error
	prune(keep []peer) error
	repair() error
}

// peerOf returns the peer Node n describes for backend, or why it is not
// one (yet): no podCIDR, another backend, annotations missing or invalid.
func peerOf(backend string, n *corev1.Node) (peer, error) {
	p := peer{Name: n.Name}
	if n.Spec.PodCIDR == "" {
		return p, errors.New("no podCIDR yet")
	}
	cidr, err := netip.ParsePrefix(n.Spec.PodCIDR)
	if err != nil || !cidr.Addr().Is4() {
		return p, fmt.Errorf("podCIDR %q is not an IPv4 prefix", n.Spec.PodCIDR)
	}
	p.PodCIDR = cidr.Masked()
	switch b := n.Annotations[AnnotationBackend]; b {
	case backend:
	case "":
		return p, fmt.Errorf("no %s annotation yet", AnnotationBackend)
	default:
		return p, fmt.Errorf("it runs backend %q, this node %q", b, backend)
	}
	switch backend {
	case VXLAN:
		ip, err := netip.ParseAddr(n.Annotations[AnnotationPublicIP])
		if err != nil || !ip.Is4() {
			return p, fmt.Errorf("%s %q is not an IPv4 address", AnnotationPublicIP, n.Annotations[AnnotationPublicIP])
		}
		mac, err := net.ParseMAC(n.Annotations[AnnotationVTEPMAC])
		if err != nil || len(mac) != 6 {
			return p, fmt.Errorf("%s %q is not a MAC address", AnnotationVTEPMAC, n.Annotations[AnnotationVTEPMAC])
		}
		p.IP, p.MAC = ip, mac.String()
	case HostGW:
		for _, a := range n.Status.Addresses {
			if a.Type != corev1.NodeInternalIP {
				continue
			}
			if ip, err := netip.ParseAddr(a.Address); err == nil && ip.Is4() {
				p.IP = ip
				break
			}
		}
		if !p.IP.IsValid() {
			return p, errors.New("no IPv4 InternalIP")
		}
	}
	return p, nil
}

// reconciler holds what has been programmed, by node name, and brings it
// to the Nodes it is given. It is used by one goroutine at a time.
type reconciler struct {
	backend string
	self    string
	ownCIDR netip.Prefix
	plane   plane
	applied map[string]peer
	// skipped remembers why a node is not a peer, so the reason is logged
	// once per change rather than on every pass.
	skipped map[string]string
}

func newReconciler(backend, self string, ownCIDR netip.Prefix, p plane) *reconciler {
	return &reconciler{backend: backend, self: self, ownCIDR: ownCIDR, plane: p,
		applied: map[string]peer{}, skipped: map[string]string{}}
}

// sync makes the programmed peers those among nodes: a deleted node's or
// changed peer's old entries go first (a podCIDR handed to another node
// must not be routed twice), then new and changed peers are added. A full
// pass also repairs the own side, adds every peer again (add is
// idempotent: this restores entries removed behind the reconciler's back,
// such as host-gw routes the kernel flushed with a link that went down)
// and prunes entries it did not program (an earlier agent's, a deleted
// node's). A failed step is reported and left for the next pass; applied
// holds exactly what succeeded.
func (r *reconciler) sync(nodes []*corev1.Node, full bool) error {
	want := map[string]peer{}
	for _, n := range nodes {
		if n.Name == r.self {
			continue
		}
		p, err := peerOf(r.backend, n)
		if err == nil && p.PodCIDR.Overlaps(r.ownCIDR) {
			err = fmt.Errorf("its podCIDR %s overlaps this node's %s", p.PodCIDR, r.ownCIDR)
		}
		if err != nil {
			if r.skipped[n.Name] != err.Error() {
				logrus.Infof("overlay: node %s is not a peer: %v", n.Name, err)
				r.skipped[n.Name] = err.Error()
			}
			continue
		}
		delete(r.skipped, n.Name)
		want[n.Name] = p
	}
	for name := range r.skipped {
		if !hasNode(nodes, name) {
			delete(r.skipped, name)
		}
	}
	// Two peers claiming one podCIDR (a stale Node): neither is
	// programmed until it is resolved, rather than one at random.
	byCIDR := map[netip.Prefix][]string{}
	for name, p := range want {
		byCIDR[p.PodCIDR] = append(byCIDR[p.PodCIDR], name)
	}
	for cidr, names := range byCIDR {
		if len(names) > 1 {
			sort.Strings(names)
			logrus.Warnf("overlay: nodes %v all claim podCIDR %s; routing to none of them", names, cidr)
			for _, n := range names {
				delete(want, n)
			}
		}
	}

	var errs []error
	if full {
		if err := r.plane.repair(); err != nil {
			return fmt.Errorf("repair: %w", err)
		}
		// Whatever the kernel holds now, add everything wanted; prune
		// below removes the rest, old entries of changed peers included.
		r.applied = map[string]peer{}
	}
	for name, old := range r.applied {
		if p, ok := want[name]; ok && p == old {
			continue
		}
		if err := r.plane.del(old); err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", name, err))
			continue
		}
		delete(r.applied, name)
		logrus.Debugf("overlay: removed peer %s (%s)", name, old.PodCIDR)
	}
	names := make([]string, 0, len(want))
	for name := range want {
		names = append(names, name)
	}
	sort.Strings(names) // a stable order, for logs and tests
	for _, name := range names {
		p := want[name]
		if _, ok := r.applied[name]; ok {
			continue // unchanged, or its old entries failed to go: next pass
		}
		if err := r.plane.add(p); err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", name, err))
			continue
		}
		r.applied[name] = p
		logrus.Debugf("overlay: added peer %s (%s via %s)", name, p.PodCIDR, p.IP)
	}
	if full {
		keep := make([]peer, 0, len(r.applied))
		for _, p := range r.applied {
			keep = append(keep, p)
		}
		if err := r.plane.prune(keep); err != nil {
			errs = append(errs, fmt.Errorf("prune: %w", err))
		}
	}
	return errors.Join(errs...)
}

func hasNode(nodes []*corev1.Node, name string) bool {
	for _, n := range nodes {
		if n.Name == name {
			return true
		}
	}
	return false
}

// run watches the Nodes and reconciles until ctx ends. Events only mark
// the peer set dirty (a channel of one), so a burst of them costs one pass
// over the cache. The first pass and one every resync period are full
// (see sync); a pass with errors is repeated, full, with backoff (100 ms
// doubling to 30 s).
func (o *Overlay) run(ctx context.Context, client kubernetes.Interface, resyncPeriod time.Duration) {
	factory := informers.NewSharedInformerFactory(client, 0)
	nodes := factory.Core().V1().Nodes()
	dirty := make(chan struct{}, 1)
	poke := func(any) {
		select {
		case dirty <- struct{}{}:
		default:
		}
	}
	_, _ = nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    poke,
		UpdateFunc: func(_, n any) { poke(n) },
		DeleteFunc: poke,
	})
	lister := nodes.Lister()
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), nodes.Informer().HasSynced) {
		return
	}

	const minBackoff, maxBackoff = 100 * time.Millisecond, 30 * time.Second
	backoff := minBackoff
	retry := time.NewTimer(0) // the first pass, full
	defer retry.Stop()
	resync := time.NewTicker(resyncPeriod)
	defer resync.Stop()
	full, first := true, true
	for {
		select {
		case <-ctx.Done():
			return
		case <-dirty:
		case <-retry.C:
		case <-resync.C:
			full = true
		}
		all, err := lister.List(labels.Everything())
		if err == nil {
			err = o.rec.sync(all, full)
		}
		if first {
			close(o.synced)
			first = false
		}
		if err != nil {
			logrus.WithError(err).Warnf("overlay: reconcile failed; retrying in %s", backoff)
			retry.Reset(backoff)
			backoff = min(2*backoff, maxBackoff)
			full = true
			continue
		}
		full, backoff = false, minBackoff
	}
}
