// Package conntrack deletes connection-tracking entries that would keep
// UDP flows on a translation that no longer holds: UDP has no connection
// end, so an entry lives as long as its client keeps sending. The service
// proxy drops the flows of vanished backends; the host-port mapper the
// flows to a port it has just mapped.
package conntrack

import (
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// UDPTo matches UDP flows sent to port, and to ip when it is valid (any
// address otherwise).
func UDPTo(ip netip.Addr, port uint16) *netlink.ConntrackFilter {
	f := &netlink.ConntrackFilter{}
	// The adders fail only when a field is given twice, which a fresh
	// filter rules out.
	_ = f.AddProtocol(unix.IPPROTO_UDP)
	_ = f.AddPort(netlink.ConntrackOrigDstPort, port)
	if ip.IsValid() {
		_ = f.AddIP(netlink.ConntrackOrigDstIP, net.IP(ip.AsSlice()))
	}
	return f
}

// Delete deletes the IPv4 entries matching any of filters in the network
// namespace ns (-1: the caller's).
func Delete(ns netns.NsHandle, filters []netlink.CustomConntrackFilter) error {
	if len(filters) == 0 {
		return nil
	}
	var h *netlink.Handle
	var err error
	if ns >= 0 {
		h, err = netlink.NewHandleAt(ns, unix.NETLINK_NETFILTER)
	} else {
		h, err = netlink.NewHandle(unix.NETLINK_NETFILTER)
	}
	if err != nil {
		return err
	}
	defer h.Close()
	_, err = h.ConntrackDeleteFilters(netlink.ConntrackTable, unix.AF_INET, filters...)
	return err
}
