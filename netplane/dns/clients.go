package dns

// Who may ask. Cluster DNS listens on the node's address, which on an edge
// box faces the LAN; answering everyone would make it an open recursive
// resolver. As CoreDNS behind a ClusterIP is for k3s and kubeadm, it serves
// the pod network and the node itself: the cluster CIDR (pods of every
// node: their source addresses survive the overlay), loopback, and this
// host's own addresses (host-network pods, the node's processes, and
// queries the proxy sent to the kube-dns ClusterIP from the host). Anyone
// else is REFUSED, for cluster names and external names alike. The refusal
// echoes only the question, so it amplifies nothing.

import (
	"net"
	"net/netip"
	"sync"
	"time"
)

// localRefresh bounds how often an unknown source makes us re-read the
// host's addresses: a flood of outside queries costs one read per period.
const localRefresh = 10 * time.Second

type clientFilter struct {
	allowed []netip.Prefix

	mu        sync.Mutex
	local     map[netip.Addr]bool
	readAt    time.Time
	hostAddrs func() ([]net.Addr, error)
	now       func() time.Time
}

func newClientFilter(allowed []netip.Prefix) *clientFilter {
	return &clientFilter{allowed: allowed, hostAddrs: net.InterfaceAddrs, now: time.Now}
}

// allows reports whether a query from addr (the client's socket address)
// may be answered.
func (f *clientFilter) allows(addr net.Addr) bool {
	var ip netip.Addr
	switch a := addr.(type) {
	case *net.UDPAddr:
		ip = netipOf(a.IP)
	case *net.TCPAddr:
		ip = netipOf(a.IP)
	default:
		return false
	}
	if !ip.IsValid() {
		return false
	}
	if ip.IsLoopback() {
		return true
	}
	for _, p := range f.allowed {
		if p.Contains(ip) {
			return true
		}
	}
	return f.isLocal(ip)
}

// netipOf is ip as a netip.Addr, IPv4-mapped addresses unmapped (the
// zero Addr if ip is no address).
func netipOf(ip net.IP) netip.Addr {
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap()
}

// isLocal reports whether ip is one of this host's addresses, re-reading
// them when ip is unknown and the last read is older than localRefresh
// (an address added since, such as a new node IP, is found soon).
func (f *clientFilter) isLocal(ip netip.Addr) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.local[ip] {
		return true
	}
	if now := f.now(); f.local == nil || now.Sub(f.readAt) >= localRefresh {
		f.readAt = now
		addrs, err := f.hostAddrs()
		if err != nil {
			return false
		}
		f.local = map[netip.Addr]bool{}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				if la := netipOf(n.IP); la.IsValid() {
					f.local[la] = true
				}
			}
		}
	}
	return f.local[ip]
}
