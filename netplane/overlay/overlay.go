// Package overlay connects the pods of several nodes: the vxlan and
// host-gw backends of --flannel-backend, built the way flannel builds
// them. Each wraps netplane/bridge for the node-local part (cni0, veths,
// IPAM, masquerade) and adds, for every other node that has a podCIDR and
// publishes the same backend, what reaches that node's pods:
//
//   - vxlan: one VTEP per node, device kelp.1 (VNI 1, UDP 8472, no
//     learning) on the node's interface, holding <own podCIDR>.0/32; per
//     peer a route `<podCIDR> via <podCIDR>.0 dev kelp.1 onlink`, a
//     permanent neighbour entry <podCIDR>.0 → the peer's VTEP MAC, and an
//     FDB entry VTEP MAC → the peer's public IP. Pod MTU is the
//     interface's minus 50 (the VXLAN encapsulation).
//   - host-gw: per peer a route `<podCIDR> via <InternalIP>`; the nodes
//     must share an L2 segment.
//
// A node publishes what its peers need as annotations on its own Node
// (kelp.io/backend, kelp.io/public-ip, kelp.io/vtep-mac) and learns its
// peers from a Node informer. Reconciliation is level-triggered: every
// Node event marks the peer set dirty, and one loop compares the Nodes in
// the cache with what it has programmed and applies the difference, so a
// burst of events costs one pass and a failed netlink call is retried.
//
// Traffic between pods of different nodes keeps its source address: the
// bridge's masquerade chain returns for destinations inside the cluster
// CIDR, and the overlay adds no nftables objects of its own.
package overlay

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/kelp-project/kelp/config"
	"github.com/kelp-project/kelp/netplane/bridge"
)

// The backends, by their --flannel-backend names.
const (
	VXLAN  = "vxlan"
	HostGW = "host-gw"
)

// VXLAN parameters: flannel's, so that the wire format is the one people
// know (tcpdump's default VXLAN port is 8472 too).
const (
	DeviceName = "kelp.1"
	VNI        = 1
	Port       = config.VXLANPort
	// Overhead is what VXLAN adds to each packet over IPv4: outer IP (20),
	// UDP (8), VXLAN (8) and inner Ethernet (14) headers.
	Overhead = 50
)

// RouteProtocol marks every route the overlay installs (rtnetlink's
// protocol field; the kernel does not interpret values above 4). Cleanup
// and the reconciler's prune find kelp's routes by it and touch no other.
// 75 is not among iproute2's rt_protos (bird 12, zebra 11, babel 42, bgp
// 186...).
const RouteProtocol netlink.RouteProtocol = 75

// Node annotations a node publishes for its peers.
const (
	AnnotationBackend  = "kelp.io/backend"
	AnnotationPublicIP = "kelp.io/public-ip"
	AnnotationVTEPMAC  = "kelp.io/vtep-mac"
)

// ResyncPeriod is the default interval of the reconciler's full passes
// (see reconciler.sync): the own side repaired, every peer's entries
// added again, stale ones pruned. Flannel checks its routes every 10 s.
const ResyncPeriod = 10 * time.Second

// Config configures a node's overlay.
type Config struct {
	// Backend is VXLAN or HostGW.
	Backend string
	// Bridge is the node-local part. Its NodeNetNS is the overlay's too;
	// for VXLAN its MTU is set to the interface's minus Overhead.
	Bridge bridge.Config
	// NodeName is the own Node, annotated and left out of the peers.
	NodeName string
	// NodeIP is the node's InternalIP; the interface holding it carries
	// the overlay unless Iface names another.
	NodeIP string
	// Iface is --flannel-iface ("" = the interface holding NodeIP).
	Iface string
	// Client watches every Node (the proxy's identity: a node may read
	// only its own Node); NodeClient annotates the own Node (the node's
	// identity, which NodeRestriction lets write its own annotations). A nil
	// NodeClient uses Client.
	Client, NodeClient kubernetes.Interface
	// ResyncPeriod is the interval of full passes (0 = ResyncPeriod).
	ResyncPeriod time.Duration
}

// Overlay is a node's pod network with the overlay: the bridge's Network
// methods (Setup, Teardown, Recover, InNetNS) plus the peer routes, which
// a goroutine keeps in line with the Nodes until the context given to New
// ends.
type Overlay struct {
	*bridge.Bridge
	cfg      Config
	iface    string
	publicIP netip.Addr
	mac      net.HardwareAddr // VXLAN only
	mtu      int

	nodeNS netns.NsHandle
	nl     *netlink.Handle
	rec    *reconciler
	synced chan struct{} // closed after the first full pass
}

// New sets up the overlay's own side (the VXLAN device; the bridge with
// the matching MTU), annotates the own Node, and starts reconciling peers
// from a Node informer until ctx ends. An overlay that cannot be set up
// (no such interface, port 8472 taken) is an error: the agent stops
// rather than run pods that cannot reach the other nodes.
func New(ctx context.Context, cfg Config) (*Overlay, error) {
	if cfg.Backend != VXLAN && cfg.Backend != HostGW {
		return nil, fmt.Errorf("overlay: unknown backend %q", cfg.Backend)
	}
	if cfg.Client == nil || cfg.NodeName == "" {
		return nil, errors.New("overlay: needs the API client and the node name")
	}
	nodeIP, err := netip.ParseAddr(cfg.NodeIP)
	if err != nil || !nodeIP.Is4() {
		return nil, fmt.Errorf("overlay: node IP %q is not an IPv4 address", cfg.NodeIP)
	}
	podCIDR, err := netip.ParsePrefix(cfg.Bridge.PodCIDR)
	if err != nil || !podCIDR.Addr().Is4() {
		return nil, fmt.Errorf("overlay: invalid pod CIDR %q", cfg.Bridge.PodCIDR)
	}
	podCIDR = podCIDR.Masked()

	o := &Overlay{cfg: cfg, synced: make(chan struct{})}
	ok := false
	defer func() {
		if !ok {
			o.close()
		}
	}()
	if o.nodeNS, o.nl, err = openNetNS(cfg.Bridge.NodeNetNS); err != nil {
		return nil, err
	}
	link, publicIP, err := pickInterface(o.nl, cfg.Iface, nodeIP)
	if err != nil {
		return nil, fmt.Errorf("overlay: %w", err)
	}
	o.iface, o.publicIP = link.Attrs().Name, publicIP

	var p plane
	switch cfg.Backend {
	case VXLAN:
		o.mtu = link.Attrs().MTU - Overhead
		o.mac = vtepMAC(cfg.NodeName)
		vp := &vxlanPlane{nl: o.nl, ensure: func() (netlink.Link, error) {
			return ensureVXLAN(o.nl, link, publicIP, o.mac, o.mtu, podCIDR)
		}}
		if err := vp.repair(); err != nil {
			return nil, fmt.Errorf("overlay: %w", err)
		}
		cfg.Bridge.MTU = o.mtu
		p = vp
	case HostGW:
		if cfg.Bridge.MTU == 0 {
			cfg.Bridge.MTU = link.Attrs().MTU
		}
		o.mtu = cfg.Bridge.MTU
		// A node switched from vxlan: its VTEP would only hold the port
		// (the routes through it go at the first prune).
		if err := deleteVXLAN(o.nl); err != nil {
			return nil, fmt.Errorf("overlay: %w", err)
		}
		p = &hostGWPlane{nl: o.nl}
	}
	if o.Bridge, err = bridge.New(cfg.Bridge); err != nil {
		return nil, err
	}
	if err := o.annotate(ctx); err != nil {
		return nil, err
	}
	o.rec = newReconciler(cfg.Backend, cfg.NodeName, podCIDR, p)
	logrus.Infof("overlay: %s on %s (public IP %s, pod MTU %d)", cfg.Backend, o.iface, publicIP, cfg.Bridge.MTU)
	ok = true
	resync := cfg.ResyncPeriod
	if resync <= 0 {
		resync = ResyncPeriod
	}
	go func() {
		o.run(ctx, cfg.Client, resync)
		// The loop was the handles' last user. The bridge's stay open: the
		// kubelet may still tear pods down while it stops.
		o.closeOwn()
	}()
	return o, nil
}

// close releases every handle after a failed New (the data plane stays).
func (o *Overlay) close() {
	if o.Bridge != nil {
		o.Bridge.Close()
	}
	o.closeOwn()
}

func (o *Overlay) closeOwn() {
	if o.nl != nil {
		o.nl.Close()
	}
	if o.nodeNS.IsOpen() {
		o.nodeNS.Close()
	}
}

// Interface is the link carrying the overlay, PublicIP the address peers
// send to, MTU the pods' MTU.
func (o *Overlay) Interface() string       { return o.iface }
func (o *Overlay) PublicIP() netip.Addr    { return o.publicIP }
func (o *Overlay) MTU() int                { return o.mtu }
func (o *Overlay) VTEPMAC() string         { return o.mac.String() }
func (o *Overlay) Synced() <-chan struct{} { return o.synced }

// openNetNS opens the network namespace at path, "" meaning the calling
// thread's (netns.Get, not /proc/self/ns/net: that is the main thread's,
// and Go wedges the main thread, rather than ending it, when a goroutine
// locked to it exits, possibly inside a pod netns PinNewNetNS made).
func openNetNS(path string) (netns.NsHandle, *netlink.Handle, error) {
	var ns netns.NsHandle
	var err error
	if path == "" {
		path = "the current network namespace"
		ns, err = netns.Get()
	} else {
		ns, err = netns.GetFromPath(path)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("overlay: open node netns %s: %w", path, err)
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		ns.Close()
		return 0, nil, fmt.Errorf("overlay: netlink handle in node netns: %w", err)
	}
	return ns, h, nil
}

// pickInterface returns the link named iface, or the one holding nodeIP,
// and the address peers reach this node at: nodeIP if that link holds it,
// else the link's first global IPv4 address (flannel's --iface rule).
func pickInterface(h *netlink.Handle, iface string, nodeIP netip.Addr) (netlink.Link, netip.Addr, error) {
	holds := func(l netlink.Link) (netip.Addr, bool, error) {
		addrs, err := h.AddrList(l, netlink.FAMILY_V4)
		if err != nil {
			return netip.Addr{}, false, fmt.Errorf("addresses of %s: %w", l.Attrs().Name, err)
		}
		var first netip.Addr
		for _, a := range addrs {
			ip, _ := netip.AddrFromSlice(a.IP.To4())
			if ip == nodeIP {
				return ip, true, nil
			}
			if !first.IsValid() && a.Scope == int(netlink.SCOPE_UNIVERSE) {
				first = ip
			}
		}
		return first, false, nil
	}
	if iface != "" {
		l, err := h.LinkByName(iface)
		if err != nil {
			return nil, netip.Addr{}, fmt.Errorf("--flannel-iface %s: %w", iface, err)
		}
		ip, _, err := holds(l)
		if err != nil {
			return nil, netip.Addr{}, err
		}
		if !ip.IsValid() {
			return nil, netip.Addr{}, fmt.Errorf("--flannel-iface %s has no IPv4 address", iface)
		}
		return l, ip, nil
	}
	links, err := h.LinkList()
	if err != nil {
		return nil, netip.Addr{}, fmt.Errorf("list links: %w", err)
	}
	for _, l := range links {
		if _, ok, err := holds(l); err == nil && ok {
			return l, nodeIP, nil
		}
	}
	return nil, netip.Addr{}, fmt.Errorf("no interface holds the node IP %s (name one with --flannel-iface)", nodeIP)
}

// vtepMAC is the node's VTEP MAC address: derived from the node name, so
// that a recreated device (or a restarted agent) keeps the address its
// peers have programmed. Locally administered, unicast.
func vtepMAC(nodeName string) net.HardwareAddr {
	sum := sha256.Sum256([]byte("kelp vtep " + nodeName))
	mac := net.HardwareAddr(sum[:6])
	mac[0] = mac[0]&^0x01 | 0x02
	return mac
}

// annotate publishes what peers need on the own Node, retrying conflicts
// and transient errors for a while. Keys the backend does not use are
// removed (a node switched from vxlan to host-gw has no VTEP any more).
func (o *Overlay) annotate(ctx context.Context) error {
	ann := map[string]any{
		AnnotationBackend:  o.cfg.Backend,
		AnnotationPublicIP: o.publicIP.String(),
		AnnotationVTEPMAC:  nil,
	}
	if o.cfg.Backend == VXLAN {
		ann[AnnotationVTEPMAC] = o.mac.String()
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
	err := retry.OnError(wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Steps: 6, Cap: 5 * time.Second},
		func(error) bool { return ctx.Err() == nil },
		func() error {
			_, err := o.nodeClient().CoreV1().Nodes().Patch(ctx, o.cfg.NodeName, types.MergePatchType, patch, metav1.PatchOptions{})
			return err
		})
	if err != nil {
		return fmt.Errorf("overlay: annotate node %s: %w", o.cfg.NodeName, err)
	}
	return nil
}

// Cleanup removes what the overlays left in the network namespace at
// nodeNetNS ("" = the caller's), for kelp killall: the kelp.1 device (its
// routes, neighbour and FDB entries go with it) and every route marked
// RouteProtocol (host-gw's). Both are kelp's by name and mark, so nothing
// else is touched; there are no nftables objects to remove. It is
// idempotent and needs neither the API nor a running Overlay.
func Cleanup(nodeNetNS string) error {
	ns, h, err := openNetNS(nodeNetNS)
	if err != nil {
		return err
	}
	defer ns.Close()
	defer h.Close()
	return errors.Join(deleteVXLAN(h), (&hostGWPlane{nl: h}).prune(nil))
}

// deleteVXLAN deletes kelp.1 if it is a VXLAN device (the name is kelp's;
// anything else of that name is left, with a warning).
func deleteVXLAN(h *netlink.Handle) error {
	l, err := h.LinkByName(DeviceName)
	if err != nil {
		return nil
	}
	if l.Type() != "vxlan" {
		logrus.Warnf("overlay: %s is a %s, not kelp's VXLAN device; leaving it", DeviceName, l.Type())
		return nil
	}
	if err := h.LinkDel(l); err != nil && !gone(err) {
		return fmt.Errorf("delete %s: %w", DeviceName, err)
	}
	logrus.Infof("overlay: deleted %s", DeviceName)
	return nil
}

func (o *Overlay) nodeClient() kubernetes.Interface {
	if o.cfg.NodeClient != nil {
		return o.cfg.NodeClient
	}
	return o.cfg.Client
}
