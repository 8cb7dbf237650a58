package conntrack

import (
	"net"
	"net/netip"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

func flow(proto uint8, dst string, port uint16) *netlink.ConntrackFlow {
	f := &netlink.ConntrackFlow{FamilyType: unix.AF_INET}
	f.Forward.Protocol = proto
	f.Forward.SrcIP = net.ParseIP("10.42.0.9")
	f.Forward.DstIP = net.ParseIP(dst)
	f.Forward.SrcPort = 40000
	f.Forward.DstPort = port
	return f
}

// UDPTo matches UDP to its port, at its address when given, else at any.
func TestUDPTo(t *testing.T) {
	at := UDPTo(netip.MustParseAddr("10.0.0.5"), 53)
	anyAddr := UDPTo(netip.Addr{}, 53)
	for _, tc := range []struct {
		name      string
		flow      *netlink.ConntrackFlow
		at, anyIP bool
	}{
		{"udp to the address and port", flow(unix.IPPROTO_UDP, "10.0.0.5", 53), true, true},
		{"udp to another address", flow(unix.IPPROTO_UDP, "10.0.0.6", 53), false, true},
		{"udp to another port", flow(unix.IPPROTO_UDP, "10.0.0.5", 54), false, false},
		{"tcp to the address and port", flow(unix.IPPROTO_TCP, "10.0.0.5", 53), false, false},
	} {
		if got := at.MatchConntrackFlow(tc.flow); got != tc.at {
			t.Errorf("%s: filter with an address matched %v, want %v", tc.name, got, tc.at)
		}
		if got := anyAddr.MatchConntrackFlow(tc.flow); got != tc.anyIP {
			t.Errorf("%s: filter without an address matched %v, want %v", tc.name, got, tc.anyIP)
		}
	}
}

// Nothing to delete opens no netlink socket (and needs no privilege).
func TestDeleteNothing(t *testing.T) {
	if err := Delete(-1, nil); err != nil {
		t.Fatal(err)
	}
}
