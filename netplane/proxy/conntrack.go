package proxy

import (
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"

	"github.com/kelp-project/kelp/netplane/conntrack"
)

// clearStaleUDP deletes conntrack entries that would keep sending UDP
// clients to backends that are gone, or that were created while a service
// had no endpoints (as kube-proxy does). UDP has no connection end, so
// such entries would otherwise live on as long as the client keeps
// sending.
func (p *Proxier) clearStaleUDP(changes [][2]*udpService) {
	var filters []netlink.CustomConntrackFilter
	for _, ch := range changes {
		o, n := ch[0], ch[1]
		if o != nil {
			for be := range o.Backends {
				if n != nil && n.Backends[be] {
					continue
				}
				// Flows to the service that were DNATed to the vanished backend.
				for _, ip := range o.IPs {
					f := conntrack.UDPTo(ip, o.Port)
					_ = f.AddIP(netlink.ConntrackReplySrcIP, net.IP(be.Addr().AsSlice()))
					filters = append(filters, f)
				}
				if o.NodePort != 0 {
					f := conntrack.UDPTo(netip.Addr{}, o.NodePort)
					_ = f.AddIP(netlink.ConntrackReplySrcIP, net.IP(be.Addr().AsSlice()))
					filters = append(filters, f)
				}
			}
		}
		if n == nil || len(n.Backends) == 0 || (o != nil && len(o.Backends) > 0) {
			continue
		}
		// The service got its first backend: drop flows to the service
		// address that were created while it had none.
		for _, ip := range n.IPs {
			filters = append(filters, conntrack.UDPTo(ip, n.Port))
		}
		if n.NodePort != 0 {
			for _, ip := range p.ap.nodeIPs {
				filters = append(filters, conntrack.UDPTo(ip, n.NodePort))
			}
		}
	}
	if err := conntrack.Delete(p.nsHandle, filters); err != nil {
		log.WithError(err).Warn("conntrack: delete stale UDP entries")
	}
}
