// Package bridge is kelp's in-process, CNI-like pod network for one node: a
// Linux bridge holding the node's pod-CIDR gateway, one veth pair per pod
// (host end on the bridge, peer as eth0 in the pod's pinned network
// namespace), a persistent IP allocator and masquerade for traffic leaving
// the cluster CIDR. It uses netlink and nftables directly, no CNI plugins.
//
// Everything happens in the node's network namespace (Config.NodeNetNS),
// which is the host's by default; multi-node tests give each node its own.
package bridge

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/sirupsen/logrus"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Defaults for Config.
const (
	DefaultBridgeName = "cni0"
	DefaultNetNSDir   = "/run/kelp/netns"
	DefaultMTU        = 1500
	// PodInterface is the pod side of the veth pair.
	PodInterface = "eth0"
)

// Config configures a node's pod network.
type Config struct {
	BridgeName  string // default "cni0"
	PodCIDR     string // the node's /24 from node IPAM, e.g. "10.42.3.0/24"; gateway is .1 on the bridge
	ClusterCIDR string // "10.42.0.0/16": traffic from pods to outside it is masqueraded
	StateDir    string // IPAM state, e.g. <data-dir>/agent/ipam (persisted: survives agent restarts)
	NetNSDir    string // where pod netns are pinned, default /run/kelp/netns (file per pod UID)
	MTU         int    // default 1500 (1450 when an overlay is used later)
	// NodeNetNS is the network namespace the node lives in ("" = the
	// current/host one). Multi-node tests give each node its own.
	NodeNetNS string
}

// Bridge is a node's pod network. Its methods are safe for concurrent use;
// they are serialised by one mutex.
type Bridge struct {
	cfg         Config
	podCIDR     netip.Prefix
	clusterCIDR netip.Prefix
	gw          netip.Addr

	nodeNS netns.NsHandle
	nl     *netlink.Handle

	mu   sync.Mutex
	ipam *ipam
}

// VethName is the host-side interface name of a pod's veth: "veth" plus
// the first 8 hex digits of sha256(podUID).
func VethName(podUID string) string {
	sum := sha256.Sum256([]byte(podUID))
	return "veth" + hex.EncodeToString(sum[:])[:8]
}

// New ensures the bridge exists with the gateway address and is up, sets
// net.ipv4.ip_forward=1 in the node netns and installs masquerade for
// traffic from PodCIDR to destinations outside ClusterCIDR (table ip kelp,
// chain bridge-postrouting). It is idempotent; calling it again after an
// agent restart picks up the existing bridge and IPAM state.
func New(cfg Config) (*Bridge, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	podCIDR, err := netip.ParsePrefix(cfg.PodCIDR)
	if err != nil || !podCIDR.Addr().Is4() || podCIDR.Bits() > 30 {
		return nil, fmt.Errorf("bridge: invalid PodCIDR %q (want an IPv4 prefix of /30 or larger)", cfg.PodCIDR)
	}
	podCIDR = podCIDR.Masked()
	clusterCIDR, err := netip.ParsePrefix(cfg.ClusterCIDR)
	if err != nil || !clusterCIDR.Addr().Is4() {
		return nil, fmt.Errorf("bridge: invalid ClusterCIDR %q", cfg.ClusterCIDR)
	}
	clusterCIDR = clusterCIDR.Masked()
	if !clusterCIDR.Contains(podCIDR.Addr()) || clusterCIDR.Bits() > podCIDR.Bits() {
		return nil, fmt.Errorf("bridge: PodCIDR %s is not inside ClusterCIDR %s", podCIDR, clusterCIDR)
	}

	b, err := open(cfg, podCIDR)
	if err != nil {
		return nil, err
	}
	b.clusterCIDR = clusterCIDR
	ok := false
	defer func() {
		if !ok {
			b.Close()
		}
	}()
	// Record the pod CIDR before creating anything: it is Cleanup's
	// evidence that cni0 is kelp's, also on a node that never ran a pod
	// (ipam.json was otherwise first written by the first allocation).
	if err := b.ipam.save(); err != nil {
		return nil, fmt.Errorf("bridge: %w", err)
	}
	if err := b.ensureBridge(); err != nil {
		return nil, fmt.Errorf("bridge: %w", err)
	}
	if err := inNetNS(b.nodeNS, func() error {
		return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1\n"), 0o644)
	}); err != nil {
		return nil, fmt.Errorf("bridge: set net.ipv4.ip_forward=1: %w", err)
	}
	if err := installMasquerade(int(b.nodeNS), podCIDR, clusterCIDR); err != nil {
		return nil, fmt.Errorf("bridge: %w", err)
	}
	if _, err := ensureSharedMountDir(cfg.NetNSDir); err != nil {
		return nil, fmt.Errorf("bridge: netns dir: %w", err)
	}
	ok = true
	return b, nil
}

func (cfg *Config) setDefaults() error {
	if cfg.BridgeName == "" {
		cfg.BridgeName = DefaultBridgeName
	}
	if cfg.NetNSDir == "" {
		cfg.NetNSDir = DefaultNetNSDir
	}
	if cfg.MTU == 0 {
		cfg.MTU = DefaultMTU
	}
	if cfg.StateDir == "" {
		return errors.New("bridge: StateDir is required")
	}
	return nil
}

// open returns a Bridge for cfg (defaults set) and podCIDR with its
// handles in the node netns and its IPAM state loaded. It changes nothing
// on the node: New goes on to create what is missing, Cleanup to remove
// what is there.
func open(cfg Config, podCIDR netip.Prefix) (*Bridge, error) {
	b := &Bridge{cfg: cfg, podCIDR: podCIDR, gw: podCIDR.Addr().Next()}
	nsPath := cfg.NodeNetNS
	var err error
	if nsPath == "" {
		// The calling thread's, not /proc/self/ns/net: that is the main
		// thread's, and Go wedges the main thread (instead of ending it)
		// when a goroutine locked to it exits, possibly in a pod netns
		// PinNewNetNS created.
		nsPath = "the current network namespace"
		b.nodeNS, err = netns.Get()
	} else {
		b.nodeNS, err = netns.GetFromPath(nsPath)
	}
	if err != nil {
		return nil, fmt.Errorf("bridge: open node netns %s: %w", nsPath, err)
	}
	if b.nl, err = netlink.NewHandleAt(b.nodeNS); err != nil {
		b.Close()
		return nil, fmt.Errorf("bridge: netlink handle in node netns: %w", err)
	}
	if b.ipam, err = newIPAM(cfg.StateDir, podCIDR); err != nil {
		b.Close()
		return nil, fmt.Errorf("bridge: %w", err)
	}
	return b, nil
}

// Close releases the Bridge's handles. It changes nothing on the node: the
// bridge, pods and rules stay (the data plane outlives the agent).
func (b *Bridge) Close() error {
	if b.nl != nil {
		b.nl.Close()
		b.nl = nil
	}
	if b.nodeNS.IsOpen() {
		b.nodeNS.Close()
	}
	return nil
}

// Config returns the effective configuration (defaults filled in).
func (b *Bridge) Config() Config { return b.cfg }

// Gateway is the bridge's address, the pods' default gateway (.1 of PodCIDR).
func (b *Bridge) Gateway() netip.Addr { return b.gw }

// NetNSPath is where the pod's network namespace is (or would be) pinned.
func (b *Bridge) NetNSPath(podUID string) string {
	return filepath.Join(b.cfg.NetNSDir, podUID)
}

// PodIP returns the IP allocated to a pod, if any.
func (b *Bridge) PodIP(podUID string) (netip.Addr, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ipam.get(podUID)
}

func (b *Bridge) gatewayAddr() *netlink.Addr {
	return &netlink.Addr{IPNet: &net.IPNet{
		IP:   net.IP(b.gw.AsSlice()),
		Mask: net.CIDRMask(b.podCIDR.Bits(), 32),
	}}
}

func (b *Bridge) ensureBridge() error {
	name := b.cfg.BridgeName
	link, err := b.nl.LinkByName(name)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if !errors.As(err, &nf) {
			return fmt.Errorf("look up %s: %w", name, err)
		}
		attrs := netlink.NewLinkAttrs()
		attrs.Name = name
		attrs.MTU = b.cfg.MTU
		if err := b.nl.LinkAdd(&netlink.Bridge{LinkAttrs: attrs}); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("create bridge %s: %w", name, err)
		}
		if link, err = b.nl.LinkByName(name); err != nil {
			return fmt.Errorf("look up %s: %w", name, err)
		}
		logrus.Infof("bridge: created %s", name)
	}
	if link.Type() != "bridge" {
		return fmt.Errorf("%s exists but is a %s, not a bridge", name, link.Type())
	}
	want := b.gatewayAddr()
	addrs, err := b.nl.AddrList(link, netlink.FAMILY_V4)
	if err != nil {
		return fmt.Errorf("list addresses of %s: %w", name, err)
	}
	have := false
	for _, a := range addrs {
		if a.IPNet.String() == want.IPNet.String() {
			have = true
		}
	}
	if !have {
		if err := b.nl.AddrReplace(link, want); err != nil {
			return fmt.Errorf("add %s to %s: %w", want.IPNet, name, err)
		}
	}
	for _, a := range addrs {
		if a.IPNet.String() == want.IPNet.String() {
			continue
		}
		logrus.Warnf("bridge: %s had address %s, replacing it with %s (pod CIDR changed)", name, a.IPNet, want.IPNet)
		if err := b.nl.AddrDel(link, &a); err != nil {
			return fmt.Errorf("remove old address %s from %s: %w", a.IPNet, name, err)
		}
	}
	if link.Attrs().MTU != b.cfg.MTU {
		logrus.Infof("bridge: setting %s MTU %d -> %d", name, link.Attrs().MTU, b.cfg.MTU)
		if err := b.nl.LinkSetMTU(link, b.cfg.MTU); err != nil {
			return fmt.Errorf("set %s MTU %d: %w", name, b.cfg.MTU, err)
		}
	}
	if link.Attrs().Flags&net.FlagUp == 0 {
		if err := b.nl.LinkSetUp(link); err != nil {
			return fmt.Errorf("set %s up: %w", name, err)
		}
	}
	return nil
}

// Setup gives pod podUID its sandbox network: a network namespace pinned at
// NetNSDir/<podUID>, a veth whose host end (VethName) is on the bridge with
// hairpin on, and whose peer is eth0 in the pod netns with the allocated
// IP, MTU, a default route via the gateway, and lo up.
//
// It is idempotent: if the pod already has its pinned netns, its IP and a
// working veth (e.g. after an agent restart), it returns the same values
// without changing anything. A partial setup is repaired, keeping an
// existing netns (containers may already be in it) and IP.
func (b *Bridge) Setup(podUID string) (string, netip.Addr, error) {
	if err := validUID(podUID); err != nil {
		return "", netip.Addr{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()

	nsPath := b.NetNSPath(podUID)
	ip, haveIP := b.ipam.get(podUID)
	pinned := isNSPin(nsPath)
	if haveIP && pinned && b.podIsWired(podUID, nsPath, ip) {
		if err := b.ensurePodMTU(podUID, nsPath); err != nil {
			return "", netip.Addr{}, fmt.Errorf("bridge: pod %s: %w", podUID, err)
		}
		return nsPath, ip, nil
	}

	newNS := false
	if !pinned {
		if err := PinNewNetNS(nsPath); err != nil {
			return "", netip.Addr{}, fmt.Errorf("bridge: pod %s: %w", podUID, err)
		}
		newNS = true
	}
	fail := func(err error) (string, netip.Addr, error) {
		// Undo what this call created; leave what existed before.
		if l, lerr := b.nl.LinkByName(VethName(podUID)); lerr == nil {
			_ = b.nl.LinkDel(l)
		}
		if newNS {
			_ = UnpinNetNS(nsPath)
		}
		if !haveIP {
			_ = b.ipam.release(podUID)
		}
		return "", netip.Addr{}, fmt.Errorf("bridge: setup pod %s: %w", podUID, err)
	}
	var err error
	if !haveIP {
		if ip, err = b.ipam.allocate(podUID); err != nil {
			return fail(err)
		}
	}
	if err := b.wire(podUID, nsPath, ip); err != nil {
		return fail(err)
	}
	logrus.Debugf("bridge: pod %s: %s on %s in %s", podUID, ip, VethName(podUID), nsPath)
	return nsPath, ip, nil
}

// podIsWired checks, read-only, that the pod's veth is on the bridge and
// its eth0 holds ip.
func (b *Bridge) podIsWired(podUID, nsPath string, ip netip.Addr) bool {
	br, err := b.nl.LinkByName(b.cfg.BridgeName)
	if err != nil {
		return false
	}
	host, err := b.nl.LinkByName(VethName(podUID))
	if err != nil || host.Attrs().MasterIndex != br.Attrs().Index || host.Attrs().Flags&net.FlagUp == 0 {
		return false
	}
	pns, err := netns.GetFromPath(nsPath)
	if err != nil {
		return false
	}
	defer pns.Close()
	ph, err := netlink.NewHandleAt(pns)
	if err != nil {
		return false
	}
	defer ph.Close()
	eth, err := ph.LinkByName(PodInterface)
	if err != nil || eth.Attrs().Flags&net.FlagUp == 0 {
		return false
	}
	addrs, err := ph.AddrList(eth, netlink.FAMILY_V4)
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if a.IP.Equal(net.IP(ip.AsSlice())) {
			return true
		}
	}
	return false
}

// ensurePodMTU sets both ends of a wired pod's veth to the configured MTU
// in place, without touching its address or connections: a node whose
// backend changed (none → vxlan lowers it by 50) keeps its running pods,
// and the kubelet repeats Setup for them at start.
func (b *Bridge) ensurePodMTU(podUID, nsPath string) error {
	host, err := b.nl.LinkByName(VethName(podUID))
	if err != nil {
		return err
	}
	if host.Attrs().MTU != b.cfg.MTU {
		logrus.Infof("bridge: pod %s: MTU %d -> %d", podUID, host.Attrs().MTU, b.cfg.MTU)
		if err := b.nl.LinkSetMTU(host, b.cfg.MTU); err != nil {
			return fmt.Errorf("set %s MTU %d: %w", host.Attrs().Name, b.cfg.MTU, err)
		}
	}
	pns, err := netns.GetFromPath(nsPath)
	if err != nil {
		return err
	}
	defer pns.Close()
	ph, err := netlink.NewHandleAt(pns)
	if err != nil {
		return err
	}
	defer ph.Close()
	eth, err := ph.LinkByName(PodInterface)
	if err != nil {
		return err
	}
	if eth.Attrs().MTU != b.cfg.MTU {
		if err := ph.LinkSetMTU(eth, b.cfg.MTU); err != nil {
			return fmt.Errorf("set pod %s MTU %d: %w", PodInterface, b.cfg.MTU, err)
		}
	}
	return nil
}

// wire (re)creates the pod's veth pair and configures both ends.
func (b *Bridge) wire(podUID, nsPath string, ip netip.Addr) error {
	br, err := b.nl.LinkByName(b.cfg.BridgeName)
	if err != nil {
		return fmt.Errorf("look up bridge %s: %w", b.cfg.BridgeName, err)
	}
	pns, err := netns.GetFromPath(nsPath)
	if err != nil {
		return fmt.Errorf("open pod netns: %w", err)
	}
	defer pns.Close()
	ph, err := netlink.NewHandleAt(pns)
	if err != nil {
		return fmt.Errorf("netlink handle in pod netns: %w", err)
	}
	defer ph.Close()

	// Start from a clean pair: remove leftovers of a partial setup on
	// either side (deleting one end removes its peer too).
	hostName := VethName(podUID)
	if l, err := b.nl.LinkByName(hostName); err == nil {
		if err := b.nl.LinkDel(l); err != nil {
			return fmt.Errorf("delete stale %s: %w", hostName, err)
		}
	}
	if l, err := ph.LinkByName(PodInterface); err == nil {
		if err := ph.LinkDel(l); err != nil {
			return fmt.Errorf("delete stale pod %s: %w", PodInterface, err)
		}
	}

	attrs := netlink.NewLinkAttrs()
	attrs.Name = hostName
	attrs.MTU = b.cfg.MTU
	veth := &netlink.Veth{
		LinkAttrs:     attrs,
		PeerName:      PodInterface, // created directly in the pod netns
		PeerNamespace: netlink.NsFd(int(pns)),
		PeerMTU:       uint32(b.cfg.MTU),
	}
	if err := b.nl.LinkAdd(veth); err != nil {
		return fmt.Errorf("create veth %s: %w", hostName, err)
	}
	host, err := b.nl.LinkByName(hostName)
	if err != nil {
		return fmt.Errorf("look up %s: %w", hostName, err)
	}
	if err := b.nl.LinkSetMaster(host, br); err != nil {
		return fmt.Errorf("attach %s to %s: %w", hostName, b.cfg.BridgeName, err)
	}
	if err := b.nl.LinkSetHairpin(host, true); err != nil {
		return fmt.Errorf("hairpin on %s: %w", hostName, err)
	}
	if err := b.nl.LinkSetUp(host); err != nil {
		return fmt.Errorf("set %s up: %w", hostName, err)
	}

	if lo, err := ph.LinkByName("lo"); err != nil {
		return fmt.Errorf("pod lo: %w", err)
	} else if err := ph.LinkSetUp(lo); err != nil {
		return fmt.Errorf("set pod lo up: %w", err)
	}
	eth, err := ph.LinkByName(PodInterface)
	if err != nil {
		return fmt.Errorf("pod %s: %w", PodInterface, err)
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: net.IP(ip.AsSlice()), Mask: net.CIDRMask(b.podCIDR.Bits(), 32)}}
	if err := ph.AddrReplace(eth, addr); err != nil {
		return fmt.Errorf("add %s to pod %s: %w", addr.IPNet, PodInterface, err)
	}
	if err := ph.LinkSetUp(eth); err != nil {
		return fmt.Errorf("set pod %s up: %w", PodInterface, err)
	}
	route := &netlink.Route{
		LinkIndex: eth.Attrs().Index,
		Dst:       &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)},
		Gw:        net.IP(b.gw.AsSlice()),
	}
	if err := ph.RouteReplace(route); err != nil {
		return fmt.Errorf("default route via %s in pod: %w", b.gw, err)
	}
	return nil
}

// Teardown deletes the pod's veth, unmounts and removes its pinned netns
// and releases its IP. It is idempotent.
func (b *Bridge) Teardown(podUID string) error {
	if err := validUID(podUID); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.teardown(podUID)
}

func (b *Bridge) teardown(podUID string) error {
	var errs []error
	hostName := VethName(podUID)
	if l, err := b.nl.LinkByName(hostName); err == nil {
		if err := b.nl.LinkDel(l); err != nil {
			errs = append(errs, fmt.Errorf("delete %s: %w", hostName, err))
		}
	}
	if err := UnpinNetNS(b.NetNSPath(podUID)); err != nil {
		errs = append(errs, err)
	}
	if err := b.ipam.release(podUID); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("bridge: teardown pod %s: %w", podUID, err)
	}
	return nil
}

// Recover tears down every pod not in keep: pods holding an IP, pinned
// netns files in NetNSDir and pod veths on the bridge (named by VethName).
// Call it at agent start with the pods the node still runs.
func (b *Bridge) Recover(keep map[string]bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()

	stray := map[string]bool{}
	for _, pod := range b.ipam.pods() {
		if !keep[pod] {
			stray[pod] = true
		}
	}
	entries, err := os.ReadDir(b.cfg.NetNSDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("bridge: recover: %w", err)
	}
	for _, e := range entries {
		if !keep[e.Name()] && validUID(e.Name()) == nil && !e.IsDir() {
			stray[e.Name()] = true
		}
	}
	var errs []error
	for pod := range stray {
		logrus.Infof("bridge: recover: tearing down stale pod %s", pod)
		if err := b.teardown(pod); err != nil {
			errs = append(errs, err)
		}
	}

	// Veths left on the bridge by pods we know nothing about any more.
	keepVeth := map[string]bool{}
	for pod, k := range keep {
		if k {
			keepVeth[VethName(pod)] = true
		}
	}
	if br, err := b.nl.LinkByName(b.cfg.BridgeName); err == nil {
		links, err := b.nl.LinkList()
		if err != nil {
			errs = append(errs, fmt.Errorf("list links: %w", err))
		}
		for _, l := range links {
			a := l.Attrs()
			if l.Type() != "veth" || a.MasterIndex != br.Attrs().Index || keepVeth[a.Name] || !isPodVethName(a.Name) {
				continue
			}
			logrus.Infof("bridge: recover: deleting stale veth %s", a.Name)
			if err := b.nl.LinkDel(l); err != nil {
				errs = append(errs, fmt.Errorf("delete %s: %w", a.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// Destroy removes the whole pod network of the node: every pod known to
// IPAM or pinned in NetNSDir is torn down, then the bridge and this
// package's nftables chain are deleted (the kelp table itself is left for
// its other users). The Bridge must not be used afterwards except for
// Close. Cleanup does this without a running Bridge, for kelp killall.
func (b *Bridge) Destroy() error {
	if err := b.Recover(nil); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var errs []error
	if l, err := b.nl.LinkByName(b.cfg.BridgeName); err == nil {
		if err := b.nl.LinkDel(l); err != nil {
			errs = append(errs, fmt.Errorf("delete bridge %s: %w", b.cfg.BridgeName, err))
		}
	}
	if err := removeMasquerade(int(b.nodeNS)); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Cleanup removes what Bridges with cfg's BridgeName, StateDir, NetNSDir
// and NodeNetNS left on the node, for kelp killall (the data plane
// outlives the agent, so nothing else removes it): every pod netns pin and
// veth, the bridge, the bridge-postrouting chain (not table ip kelp, which
// nft.DropIfEmpty drops once everyone's Cleanup has run), and NetNSDir
// with its shared self bind mount. PodCIDR, ClusterCIDR and MTU are not
// needed: the pod CIDR comes from StateDir's ipam.json, which records it.
//
// Nothing is done to the network when ipam.json records no pod CIDR: the
// state file is the evidence that cni0 and the chain are kelp's (a host
// may have a cni0 of another CNI). It is idempotent and never creates
// anything, unlike New.
func Cleanup(cfg Config) error {
	if err := cfg.setDefaults(); err != nil {
		return err
	}
	var errs []error
	st, err := readIPAMState(cfg.StateDir)
	if err != nil {
		logrus.WithError(err).Warn("bridge: cleanup: no usable IPAM state; leaving the bridge alone")
	}
	if podCIDR, err := netip.ParsePrefix(st.PodCIDR); err == nil && podCIDR.Addr().Is4() {
		b, err := open(cfg, podCIDR.Masked())
		if err != nil {
			return err
		}
		errs = append(errs, b.Destroy())
		b.Close()
	}
	// The pin directory is a shared bind mount of itself (see
	// ensureSharedMountDir): detach it, pins below it included, then
	// remove it.
	_ = unix.Unmount(cfg.NetNSDir, unix.MNT_DETACH)
	errs = append(errs, os.RemoveAll(cfg.NetNSDir))
	return errors.Join(errs...)
}

// Ran reports whether a Bridge with cfg's StateDir has set up a pod
// network (its IPAM state records a pod CIDR): the evidence that this
// state's agent, and not another one, owns kelp's objects in the node's
// network namespace.
func Ran(cfg Config) bool {
	if err := cfg.setDefaults(); err != nil {
		return false
	}
	st, err := readIPAMState(cfg.StateDir)
	return err == nil && st.PodCIDR != ""
}

func isPodVethName(name string) bool {
	if len(name) != 12 || !strings.HasPrefix(name, "veth") {
		return false
	}
	_, err := hex.DecodeString(name[4:])
	return err == nil
}

// validUID rejects pod UIDs that cannot safely be used as a file name.
func validUID(uid string) error {
	if uid == "" || uid == "." || uid == ".." || strings.ContainsAny(uid, "/\x00") || strings.HasPrefix(uid, ".") {
		return fmt.Errorf("bridge: invalid pod UID %q", uid)
	}
	return nil
}
