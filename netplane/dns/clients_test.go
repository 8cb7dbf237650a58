package dns

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	mdns "github.com/miekg/dns"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

// The server answers the cluster's clients and REFUSES everyone else, for
// cluster names and for names it would forward.
func TestOnlyClusterClientsAreAnswered(t *testing.T) {
	cs := fake.NewClientset(testObjects()...)
	f := informers.NewSharedInformerFactory(cs, 0)
	s, err := New(Config{Listen: []string{"127.0.0.1:0"}, ResolvConf: emptyResolvConf(t),
		Clients: []netip.Prefix{netip.MustParsePrefix("10.42.0.0/16")}}, f)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.clients.hostAddrs = func() ([]net.Addr, error) {
		return []net.Addr{&net.IPNet{IP: net.ParseIP("192.168.77.11"), Mask: net.CIDRMask(24, 32)}}, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); f.Shutdown() }()
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())

	ask := func(from net.Addr, name string) int {
		w := &recorder{remote: from}
		s.ServeDNS(w, new(mdns.Msg).SetQuestion(name, mdns.TypeA))
		if w.msg == nil {
			t.Fatalf("%s from %s: no reply", name, from)
		}
		return w.msg.Rcode
	}
	for _, from := range []net.Addr{
		&net.UDPAddr{IP: net.ParseIP("10.42.3.4"), Port: 5353},     // a pod, any node
		&net.TCPAddr{IP: net.ParseIP("10.42.0.9"), Port: 5353},     // a pod over TCP
		&net.UDPAddr{IP: net.ParseIP("192.168.77.11"), Port: 5353}, // the node itself
		&net.UDPAddr{IP: net.ParseIP("::ffff:10.42.0.7"), Port: 1}, // v4-mapped
	} {
		if rc := ask(from, "web.default.svc.cluster.local."); rc != mdns.RcodeSuccess {
			t.Errorf("cluster name from %s: %s, want NOERROR", from, mdns.RcodeToString[rc])
		}
	}
	for _, from := range []net.Addr{
		&net.UDPAddr{IP: net.ParseIP("192.168.77.1"), Port: 5353}, // the LAN
		&net.TCPAddr{IP: net.ParseIP("203.0.113.5"), Port: 5353},
		&net.UDPAddr{IP: net.ParseIP("10.43.0.10"), Port: 5353}, // a ClusterIP is no client
	} {
		for _, name := range []string{"web.default.svc.cluster.local.", "example.com.", "10.0.42.10.in-addr.arpa."} {
			if rc := ask(from, name); rc != mdns.RcodeRefused {
				t.Errorf("%s from %s: %s, want REFUSED", name, from, mdns.RcodeToString[rc])
			}
		}
	}
}

// An address the host gains later is found after at most localRefresh,
// and a flood from outside reads the host's addresses once per period.
func TestClientFilterRereadsHostAddresses(t *testing.T) {
	now := time.Unix(1000, 0)
	reads := 0
	addrs := []net.Addr{}
	f := newClientFilter(nil)
	f.now = func() time.Time { return now }
	f.hostAddrs = func() ([]net.Addr, error) { reads++; return addrs, nil }
	node := &net.UDPAddr{IP: net.ParseIP("192.168.1.20")}
	if f.allows(node) {
		t.Fatal("an address the host does not have is allowed")
	}
	addrs = []net.Addr{&net.IPNet{IP: net.ParseIP("192.168.1.20"), Mask: net.CIDRMask(24, 32)}}
	for i := 0; i < 1000; i++ {
		f.allows(&net.UDPAddr{IP: net.ParseIP("198.51.100.7")})
	}
	if reads != 1 {
		t.Errorf("host addresses read %d times within one period, want 1", reads)
	}
	now = now.Add(localRefresh)
	if !f.allows(node) {
		t.Error("the node's new address is not allowed after a refresh period")
	}
	if !f.allows(&net.UDPAddr{IP: net.IPv6loopback}) || f.allows(&net.UnixAddr{Name: "x"}) {
		t.Error("loopback must be allowed, non-IP clients refused")
	}
}
