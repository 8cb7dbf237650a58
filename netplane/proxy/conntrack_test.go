package proxy

import (
	"net"
	"net/netip"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

func TestStaleUDPConntrack(t *testing.T) {
	n := newTestNS(t)
	h, err := netns.GetFromPath(n.path)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	nh, err := netlink.NewHandleAt(h, unix.NETLINK_NETFILTER)
	if err != nil {
		t.Fatal(err)
	}
	defer nh.Close()
	flow := func(sport uint16, backend string) *netlink.ConntrackFlow {
		return &netlink.ConntrackFlow{
			FamilyType: unix.AF_INET,
			Forward: netlink.IPTuple{Protocol: unix.IPPROTO_UDP, SrcIP: net.ParseIP("10.42.0.9").To4(), SrcPort: sport,
				DstIP: net.ParseIP("10.43.0.50").To4(), DstPort: 53},
			Reverse: netlink.IPTuple{Protocol: unix.IPPROTO_UDP, SrcIP: net.ParseIP(backend).To4(), SrcPort: 53,
				DstIP: net.ParseIP("10.42.0.9").To4(), DstPort: sport},
			TimeOut: 120,
		}
	}
	count := func(backend string) int {
		flows, err := nh.ConntrackTableList(netlink.ConntrackTable, nl.FAMILY_V4)
		if err != nil {
			t.Fatal(err)
		}
		c := 0
		for _, f := range flows {
			if f.Reverse.SrcIP.Equal(net.ParseIP(backend)) {
				c++
			}
		}
		return c
	}

	p := n.proxier()
	dns := sp("dns", "10.43.0.50", 53, "10.42.0.7:53", "10.42.0.8:53")
	dns.Proto = protoUDP
	if err := p.syncState(&state{Ports: []servicePort{dns}}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []*netlink.ConntrackFlow{flow(40001, "10.42.0.7"), flow(40002, "10.42.0.8")} {
		if err := nh.ConntrackCreate(netlink.ConntrackTable, nl.FAMILY_V4, f); err != nil {
			t.Fatalf("create conntrack entry: %v", err)
		}
	}
	if count("10.42.0.7") != 1 || count("10.42.0.8") != 1 {
		flows, _ := nh.ConntrackTableList(netlink.ConntrackTable, nl.FAMILY_V4)
		for _, f := range flows {
			t.Log(f)
		}
		t.Fatal("conntrack entries not created")
	}
	// Backend 10.42.0.7 goes away: its flows are deleted, the other's stay.
	dns.Endpoints = []endpoint{{IP: netip.MustParseAddr("10.42.0.8"), Port: 53, Ready: true}}
	if err := p.syncState(&state{Ports: []servicePort{dns}}); err != nil {
		t.Fatal(err)
	}
	if got := count("10.42.0.7"); got != 0 {
		t.Fatalf("%d stale conntrack entries for the removed backend", got)
	}
	if got := count("10.42.0.8"); got != 1 {
		t.Fatalf("%d conntrack entries for the remaining backend, want 1", got)
	}
}
