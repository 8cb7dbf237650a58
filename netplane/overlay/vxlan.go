package overlay

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"syscall"

	"github.com/sirupsen/logrus"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// ensureVXLAN makes kelp.1 what New wants: VNI 1, UDP 8472, no learning,
// on link with source address publicIP, MAC mac, MTU mtu, holding the pod
// CIDR's network address as /32 (flannel's VTEP address: the peers' route
// to this node's pods goes via it), and up. A device with other VXLAN
// parameters (another interface, another address) is recreated; MTU, MAC
// and address are corrected in place.
func ensureVXLAN(h *netlink.Handle, link netlink.Link, publicIP netip.Addr, mac net.HardwareAddr, mtu int, podCIDR netip.Prefix) (netlink.Link, error) {
	src := net.IP(publicIP.AsSlice())
	if l, err := h.LinkByName(DeviceName); err == nil {
		v, ok := l.(*netlink.Vxlan)
		if !ok || v.VxlanId != VNI || v.Port != Port || v.VtepDevIndex != link.Attrs().Index || !v.SrcAddr.Equal(src) || v.Learning {
			logrus.Warnf("overlay: %s exists with other parameters (%s); recreating it", DeviceName, describe(l))
			if err := h.LinkDel(l); err != nil {
				return nil, fmt.Errorf("delete stale %s: %w", DeviceName, err)
			}
		}
	}
	dev, err := h.LinkByName(DeviceName)
	if err != nil {
		attrs := netlink.NewLinkAttrs()
		attrs.Name = DeviceName
		attrs.MTU = mtu
		attrs.HardwareAddr = mac
		want := &netlink.Vxlan{LinkAttrs: attrs, VxlanId: VNI, Port: Port, VtepDevIndex: link.Attrs().Index, SrcAddr: src, Learning: false}
		if err := h.LinkAdd(want); err != nil {
			if errors.Is(err, os.ErrExist) {
				return nil, fmt.Errorf("create %s (VNI %d, UDP %d): another VXLAN device already uses VNI %d on port %d in the node's network namespace (flannel.1?): %w", DeviceName, VNI, Port, VNI, Port, err)
			}
			return nil, fmt.Errorf("create %s (VNI %d, UDP %d on %s): %w", DeviceName, VNI, Port, link.Attrs().Name, err)
		}
		if dev, err = h.LinkByName(DeviceName); err != nil {
			return nil, fmt.Errorf("look up %s: %w", DeviceName, err)
		}
		logrus.Infof("overlay: created %s (VNI %d, UDP %d on %s, MTU %d)", DeviceName, VNI, Port, link.Attrs().Name, mtu)
	}
	if !bytes.Equal(dev.Attrs().HardwareAddr, mac) {
		// A VXLAN device's MAC can only change while it is down.
		if err := h.LinkSetDown(dev); err != nil {
			return nil, fmt.Errorf("set %s down: %w", DeviceName, err)
		}
		if err := h.LinkSetHardwareAddr(dev, mac); err != nil {
			return nil, fmt.Errorf("set %s MAC %s: %w", DeviceName, mac, err)
		}
	}
	if dev.Attrs().MTU != mtu {
		if err := h.LinkSetMTU(dev, mtu); err != nil {
			return nil, fmt.Errorf("set %s MTU %d: %w", DeviceName, mtu, err)
		}
	}
	want := &netlink.Addr{IPNet: &net.IPNet{IP: net.IP(podCIDR.Addr().AsSlice()), Mask: net.CIDRMask(32, 32)}}
	addrs, err := h.AddrList(dev, netlink.FAMILY_V4)
	if err != nil {
		return nil, fmt.Errorf("addresses of %s: %w", DeviceName, err)
	}
	have := false
	for _, a := range addrs {
		if a.IPNet.String() == want.IPNet.String() {
			have = true
			continue
		}
		if err := h.AddrDel(dev, &a); err != nil {
			return nil, fmt.Errorf("remove old address %s from %s: %w", a.IPNet, DeviceName, err)
		}
	}
	if !have {
		if err := h.AddrReplace(dev, want); err != nil {
			return nil, fmt.Errorf("add %s to %s: %w", want.IPNet, DeviceName, err)
		}
	}
	// Up opens the UDP socket: this is where a taken port shows.
	if err := h.LinkSetUp(dev); err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("set %s up: UDP port %d is already in use in the node's network namespace (another VXLAN device or a process holds it): %w", DeviceName, Port, err)
		}
		return nil, fmt.Errorf("set %s up: %w", DeviceName, err)
	}
	return h.LinkByName(DeviceName)
}

func describe(l netlink.Link) string {
	v, ok := l.(*netlink.Vxlan)
	if !ok {
		return "a " + l.Type()
	}
	return fmt.Sprintf("VNI %d, port %d, dev index %d, local %s, learning %v", v.VxlanId, v.Port, v.VtepDevIndex, v.SrcAddr, v.Learning)
}

// vxlanPlane programs peers on kelp.1 (index link).
type vxlanPlane struct {
	nl   *netlink.Handle
	link int
	// ensure is ensureVXLAN with New's parameters.
	ensure func() (netlink.Link, error)
}

// repair makes kelp.1 what New made it (ensureVXLAN changes nothing on a
// device that is right). A recreated device has lost its peer entries;
// the full pass that called repair adds them all again.
func (v *vxlanPlane) repair() error {
	dev, err := v.ensure()
	if err != nil {
		return err
	}
	if v.link != 0 && dev.Attrs().Index != v.link {
		logrus.Warnf("overlay: %s was recreated; programming the peers again", DeviceName)
	}
	v.link = dev.Attrs().Index
	return nil
}

// vtep is a peer's VTEP address: the network address of its pod CIDR.
func vtep(p peer) net.IP { return net.IP(p.PodCIDR.Addr().AsSlice()) }

func (v *vxlanPlane) neigh(p peer) *netlink.Neigh {
	mac, _ := net.ParseMAC(p.MAC)
	return &netlink.Neigh{LinkIndex: v.link, Family: netlink.FAMILY_V4, State: netlink.NUD_PERMANENT,
		Type: unix.RTN_UNICAST, IP: vtep(p), HardwareAddr: mac}
}

func (v *vxlanPlane) fdb(p peer) *netlink.Neigh {
	mac, _ := net.ParseMAC(p.MAC)
	return &netlink.Neigh{LinkIndex: v.link, Family: unix.AF_BRIDGE, State: netlink.NUD_PERMANENT,
		Flags: netlink.NTF_SELF, IP: net.IP(p.IP.AsSlice()), HardwareAddr: mac}
}

func (v *vxlanPlane) route(p peer) *netlink.Route {
	return &netlink.Route{LinkIndex: v.link, Dst: prefixNet(p.PodCIDR), Gw: vtep(p),
		Flags: int(netlink.FLAG_ONLINK), Protocol: RouteProtocol}
}

// add programs p in flannel's order: neighbour and FDB entries first, so
// that the route never sends into a VTEP without a resolved address.
func (v *vxlanPlane) add(p peer) error {
	if err := v.nl.NeighSet(v.neigh(p)); err != nil {
		return fmt.Errorf("neighbour %s → %s on %s: %w", vtep(p), p.MAC, DeviceName, err)
	}
	if err := v.nl.NeighSet(v.fdb(p)); err != nil {
		return fmt.Errorf("fdb %s → %s on %s: %w", p.MAC, p.IP, DeviceName, err)
	}
	if err := v.nl.RouteReplace(v.route(p)); err != nil {
		return fmt.Errorf("route %s via %s dev %s onlink: %w", p.PodCIDR, vtep(p), DeviceName, err)
	}
	return nil
}

// del removes p's entries, route first; entries already gone are fine.
func (v *vxlanPlane) del(p peer) error {
	var errs []error
	if err := v.nl.RouteDel(v.route(p)); err != nil && !gone(err) {
		errs = append(errs, fmt.Errorf("delete route %s: %w", p.PodCIDR, err))
	}
	if err := v.nl.NeighDel(v.neigh(p)); err != nil && !gone(err) {
		errs = append(errs, fmt.Errorf("delete neighbour %s: %w", vtep(p), err))
	}
	if err := v.nl.NeighDel(v.fdb(p)); err != nil && !gone(err) {
		errs = append(errs, fmt.Errorf("delete fdb %s → %s: %w", p.MAC, p.IP, err))
	}
	return errors.Join(errs...)
}

// prune removes the RouteProtocol routes, and the permanent neighbour and
// FDB entries on kelp.1, that belong to no peer in keep. Routes marked
// RouteProtocol elsewhere than on kelp.1 are host-gw's, left by the
// backend the node ran before, and go too.
func (v *vxlanPlane) prune(keep []peer) error {
	routes, neighs, fdbs := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, p := range keep {
		routes[p.PodCIDR.String()] = true
		neighs[vtep(p).String()+" "+p.MAC] = true
		fdbs[p.MAC+" "+p.IP.String()] = true
	}
	var errs []error
	rs, err := v.nl.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Protocol: RouteProtocol}, netlink.RT_FILTER_PROTOCOL)
	if err != nil {
		return fmt.Errorf("list routes: %w", err)
	}
	for _, r := range rs {
		if r.LinkIndex == v.link && r.Dst != nil && routes[r.Dst.String()] {
			continue
		}
		logrus.Infof("overlay: removing stale route %s via %s", r.Dst, r.Gw)
		if err := v.nl.RouteDel(&r); err != nil && !gone(err) {
			errs = append(errs, err)
		}
	}
	ns, err := v.nl.NeighList(v.link, netlink.FAMILY_V4)
	if err != nil {
		return fmt.Errorf("list neighbours on %s: %w", DeviceName, err)
	}
	for _, n := range ns {
		if n.State&netlink.NUD_PERMANENT == 0 || neighs[n.IP.String()+" "+n.HardwareAddr.String()] {
			continue
		}
		logrus.Infof("overlay: removing stale neighbour %s → %s", n.IP, n.HardwareAddr)
		if err := v.nl.NeighDel(&n); err != nil && !gone(err) {
			errs = append(errs, err)
		}
	}
	fs, err := v.nl.NeighList(v.link, unix.AF_BRIDGE)
	if err != nil {
		return fmt.Errorf("list fdb on %s: %w", DeviceName, err)
	}
	for _, n := range fs {
		if n.IP == nil || fdbs[n.HardwareAddr.String()+" "+n.IP.String()] {
			continue
		}
		logrus.Infof("overlay: removing stale fdb %s → %s", n.HardwareAddr, n.IP)
		n.LinkIndex, n.Family, n.Flags = v.link, unix.AF_BRIDGE, netlink.NTF_SELF
		if err := v.nl.NeighDel(&n); err != nil && !gone(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func prefixNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), 32)}
}

// gone reports a delete of something that is not there.
func gone(err error) bool {
	return errors.Is(err, syscall.ESRCH) || errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ENODEV)
}
