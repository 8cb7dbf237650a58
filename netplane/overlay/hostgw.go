package overlay

import (
	"errors"
	"fmt"
	"net"
	"syscall"

	"github.com/sirupsen/logrus"
	"github.com/vishvananda/netlink"
)

// hostGWPlane programs a plain route per peer: its pod CIDR via its
// InternalIP. The kernel picks the interface; a peer that is not on a
// directly connected network cannot be reached this way and fails (and
// is retried) with a message saying so.
type hostGWPlane struct {
	nl *netlink.Handle
}

func (g *hostGWPlane) route(p peer) *netlink.Route {
	return &netlink.Route{Dst: prefixNet(p.PodCIDR), Gw: net.IP(p.IP.AsSlice()), Protocol: RouteProtocol}
}

// repair: host-gw has no own side.
func (g *hostGWPlane) repair() error { return nil }

func (g *hostGWPlane) add(p peer) error {
	if err := g.nl.RouteReplace(g.route(p)); err != nil {
		if errors.Is(err, syscall.ENETUNREACH) {
			return fmt.Errorf("route %s via %s: %s is not on a directly connected network (host-gw needs the nodes on one L2 segment; use vxlan otherwise): %w", p.PodCIDR, p.IP, p.IP, err)
		}
		return fmt.Errorf("route %s via %s: %w", p.PodCIDR, p.IP, err)
	}
	return nil
}

func (g *hostGWPlane) del(p peer) error {
	if err := g.nl.RouteDel(g.route(p)); err != nil && !gone(err) {
		return fmt.Errorf("delete route %s via %s: %w", p.PodCIDR, p.IP, err)
	}
	return nil
}

// prune removes the main table's RouteProtocol routes that match no peer
// in keep (nil: all of them, for Cleanup).
func (g *hostGWPlane) prune(keep []peer) error {
	want := map[string]bool{}
	for _, p := range keep {
		want[p.PodCIDR.String()+" "+p.IP.String()] = true
	}
	rs, err := g.nl.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Protocol: RouteProtocol}, netlink.RT_FILTER_PROTOCOL)
	if err != nil {
		return fmt.Errorf("list routes: %w", err)
	}
	var errs []error
	for _, r := range rs {
		if r.Dst != nil && want[r.Dst.String()+" "+r.Gw.String()] {
			continue
		}
		logrus.Infof("overlay: removing stale route %s via %s", r.Dst, r.Gw)
		if err := g.nl.RouteDel(&r); err != nil && !gone(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
