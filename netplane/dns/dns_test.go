package dns

import (
	"context"
	"fmt"
	"k8s.io/utils/ptr"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	mdns "github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

func service(ns, name, clusterIP string, ports ...corev1.ServicePort) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: clusterIP, Ports: ports},
	}
	if clusterIP != "" {
		svc.Spec.ClusterIPs = []string{clusterIP}
	}
	return svc
}

type ep struct {
	ip       string
	hostname string
	ready    bool
}

func slice(ns, svc, name string, ports []discoveryv1.EndpointPort, eps ...ep) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name,
			Labels: map[string]string{discoveryv1.LabelServiceName: svc},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       ports,
	}
	for _, e := range eps {
		x := discoveryv1.Endpoint{Addresses: []string{e.ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(e.ready)}}
		if e.hostname != "" {
			x.Hostname = ptr.To(e.hostname)
		}
		es.Endpoints = append(es.Endpoints, x)
	}
	return es
}

func testObjects() []runtime.Object {
	web := service("default", "web", "10.43.0.20", corev1.ServicePort{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP})
	db := service("default", "db", corev1.ClusterIPNone, corev1.ServicePort{Name: "pg", Port: 5432, Protocol: corev1.ProtocolTCP})
	pub := service("default", "pub", corev1.ClusterIPNone)
	pub.Spec.PublishNotReadyAddresses = true
	ext := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "ext"},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com"},
	}
	pgPorts := []discoveryv1.EndpointPort{{Name: ptr.To("pg"), Port: ptr.To(int32(15432)), Protocol: ptr.To(corev1.ProtocolTCP)}}
	big := service("default", "big", corev1.ClusterIPNone)
	var bigEps []ep
	for i := 0; i < 100; i++ {
		bigEps = append(bigEps, ep{ip: fmt.Sprintf("10.42.%d.%d", 2+i/250, 1+i%250), ready: true})
	}
	return []runtime.Object{
		web, db, pub, ext, big,
		slice("default", "db", "db-1", pgPorts,
			ep{ip: "10.42.0.5", hostname: "db-0", ready: true},
			ep{ip: "10.42.0.6", ready: true},
			ep{ip: "10.42.0.7", ready: false}),
		slice("default", "pub", "pub-1", nil, ep{ip: "10.42.0.9", ready: false}),
		slice("default", "web", "web-1", nil, ep{ip: "10.42.0.11", ready: true}),
		slice("default", "big", "big-1", nil, bigEps...),
	}
}

func emptyResolvConf(t testing.TB) string {
	p := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(p, []byte("# none\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// startServer runs a Server with the test objects and returns it and its
// address.
func startServer(t testing.TB, cfg Config) (*Server, string) {
	t.Helper()
	cs := fake.NewClientset(testObjects()...)
	f := informers.NewSharedInformerFactory(cs, 0)
	if len(cfg.Listen) == 0 {
		cfg.Listen = []string{"127.0.0.1:0"}
	}
	if cfg.ResolvConf == "" {
		cfg.ResolvConf = emptyResolvConf(t)
	}
	s, err := New(cfg, f)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.Start(ctx.Done())
	for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("cache %v not synced", typ)
		}
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("Run did not return")
		}
		f.Shutdown()
	})
	return s, s.Addrs()[0].String()
}

// startUpstream runs a fake upstream resolver on 127.0.0.1 (UDP and TCP).
func startUpstream(t testing.TB, h mdns.HandlerFunc) string {
	t.Helper()
	l, err := bind("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &mdns.Server{PacketConn: l.pc, Handler: h}
	tc := &mdns.Server{Listener: l.ln, Handler: h}
	go u.ActivateAndServe()
	go tc.ActivateAndServe()
	t.Cleanup(func() { l.pc.Close(); l.ln.Close() })
	return l.pc.LocalAddr().String()
}

func exampleUpstream(t testing.TB, hits *atomic.Int32) string {
	return startUpstream(t, func(w mdns.ResponseWriter, r *mdns.Msg) {
		if hits != nil {
			hits.Add(1)
		}
		m := new(mdns.Msg).SetReply(r)
		q := r.Question[0]
		switch {
		case strings.EqualFold(q.Name, "example.com.") && q.Qtype == mdns.TypeA:
			m.Answer = append(m.Answer, &mdns.A{Hdr: mdns.RR_Header{Name: q.Name, Rrtype: mdns.TypeA, Class: mdns.ClassINET, Ttl: 60}, A: net.ParseIP("192.0.2.7")})
		case q.Qtype == mdns.TypePTR && q.Name == "7.2.0.192.in-addr.arpa.":
			m.Answer = append(m.Answer, &mdns.PTR{Hdr: mdns.RR_Header{Name: q.Name, Rrtype: mdns.TypePTR, Class: mdns.ClassINET, Ttl: 60}, Ptr: "example.com."})
		case strings.EqualFold(q.Name, "big.example.") && q.Qtype == mdns.TypeTXT:
			// 20 x 200 bytes: too big for UDP without EDNS.
			for i := 0; i < 20; i++ {
				m.Answer = append(m.Answer, &mdns.TXT{Hdr: mdns.RR_Header{Name: q.Name, Rrtype: mdns.TypeTXT, Class: mdns.ClassINET, Ttl: 60}, Txt: []string{strings.Repeat(string(rune('a'+i)), 200)}})
			}
		default:
			m.Rcode = mdns.RcodeNameError
		}
		if _, udp := w.RemoteAddr().(*net.UDPAddr); udp {
			size := mdns.MinMsgSize
			if o := r.IsEdns0(); o != nil {
				size = int(o.UDPSize())
			}
			m.Truncate(size)
		}
		w.WriteMsg(m)
	})
}

func query(t testing.TB, addr, netw, name string, qtype uint16, edns uint16) *mdns.Msg {
	t.Helper()
	m := new(mdns.Msg)
	m.SetQuestion(name, qtype)
	if edns > 0 {
		m.SetEdns0(edns, false)
	}
	c := &mdns.Client{Net: netw, Timeout: 5 * time.Second}
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatalf("query %s %s over %s: %v", name, mdns.TypeToString[qtype], netw, err)
	}
	return r
}

func addrs(rrs []mdns.RR) []string {
	var out []string
	for _, rr := range rrs {
		switch v := rr.(type) {
		case *mdns.A:
			out = append(out, v.A.String())
		case *mdns.AAAA:
			out = append(out, v.AAAA.String())
		}
	}
	sort.Strings(out)
	return out
}

func expect(t *testing.T, r *mdns.Msg, rcode int, aa bool) {
	t.Helper()
	if r.Rcode != rcode {
		t.Fatalf("rcode %s, want %s\n%v", mdns.RcodeToString[r.Rcode], mdns.RcodeToString[rcode], r)
	}
	if r.Authoritative != aa {
		t.Fatalf("AA=%v, want %v\n%v", r.Authoritative, aa, r)
	}
	if !r.RecursionAvailable {
		t.Fatalf("RA not set")
	}
}

func TestServiceA(t *testing.T) {
	_, addr := startServer(t, Config{})
	for _, netw := range []string{"udp", "tcp"} {
		r := query(t, addr, netw, "web.default.svc.cluster.local.", mdns.TypeA, 0)
		expect(t, r, mdns.RcodeSuccess, true)
		if got := addrs(r.Answer); fmt.Sprint(got) != "[10.43.0.20]" {
			t.Fatalf("%s: got %v", netw, got)
		}
		if r.Answer[0].Header().Ttl != 5 {
			t.Fatalf("ttl %d", r.Answer[0].Header().Ttl)
		}
	}
	// case-insensitive, answered in the question's case
	r := query(t, addr, "udp", "WEB.Default.SVC.cluster.LOCAL.", mdns.TypeA, 0)
	expect(t, r, mdns.RcodeSuccess, true)
	if len(r.Answer) != 1 || r.Answer[0].Header().Name != "WEB.Default.SVC.cluster.LOCAL." {
		t.Fatalf("case: %v", r.Answer)
	}
	// AAAA of an IPv4-only service: NOERROR, no data, SOA
	r = query(t, addr, "udp", "web.default.svc.cluster.local.", mdns.TypeAAAA, 0)
	expect(t, r, mdns.RcodeSuccess, true)
	if len(r.Answer) != 0 || len(r.Ns) != 1 || r.Ns[0].Header().Rrtype != mdns.TypeSOA {
		t.Fatalf("AAAA: %v", r)
	}
}

func TestHeadless(t *testing.T) {
	_, addr := startServer(t, Config{})
	r := query(t, addr, "udp", "db.default.svc.cluster.local.", mdns.TypeA, 0)
	expect(t, r, mdns.RcodeSuccess, true)
	if got := addrs(r.Answer); fmt.Sprint(got) != "[10.42.0.5 10.42.0.6]" {
		t.Fatalf("headless: %v", got)
	}
	r = query(t, addr, "udp", "pub.default.svc.cluster.local.", mdns.TypeA, 0)
	if got := addrs(r.Answer); fmt.Sprint(got) != "[10.42.0.9]" {
		t.Fatalf("publishNotReadyAddresses: %v", got)
	}
	for name, want := range map[string]string{
		"db-0.db.default.svc.cluster.local.":      "[10.42.0.5]",
		"10-42-0-6.db.default.svc.cluster.local.": "[10.42.0.6]",
	} {
		r = query(t, addr, "udp", name, mdns.TypeA, 0)
		expect(t, r, mdns.RcodeSuccess, true)
		if got := addrs(r.Answer); fmt.Sprint(got) != want {
			t.Fatalf("%s: %v", name, got)
		}
	}
	for _, name := range []string{
		"10-42-0-7.db.default.svc.cluster.local.", // not ready
		"db-1.db.default.svc.cluster.local.",
		"x.web.default.svc.cluster.local.", // not headless
	} {
		r = query(t, addr, "udp", name, mdns.TypeA, 0)
		expect(t, r, mdns.RcodeNameError, true)
	}
}

func TestSRV(t *testing.T) {
	_, addr := startServer(t, Config{})
	r := query(t, addr, "udp", "_http._tcp.web.default.svc.cluster.local.", mdns.TypeSRV, 0)
	expect(t, r, mdns.RcodeSuccess, true)
	if len(r.Answer) != 1 {
		t.Fatalf("srv: %v", r)
	}
	srv := r.Answer[0].(*mdns.SRV)
	if srv.Port != 80 || srv.Target != "web.default.svc.cluster.local." {
		t.Fatalf("srv: %v", srv)
	}
	if got := addrs(r.Extra); fmt.Sprint(got) != "[10.43.0.20]" {
		t.Fatalf("srv extra: %v", r.Extra)
	}

	r = query(t, addr, "udp", "_pg._tcp.db.default.svc.cluster.local.", mdns.TypeSRV, 0)
	expect(t, r, mdns.RcodeSuccess, true)
	var targets []string
	for _, rr := range r.Answer {
		s := rr.(*mdns.SRV)
		if s.Port != 15432 {
			t.Fatalf("headless srv port: %v", s)
		}
		targets = append(targets, s.Target)
	}
	sort.Strings(targets)
	if fmt.Sprint(targets) != "[10-42-0-6.db.default.svc.cluster.local. db-0.db.default.svc.cluster.local.]" {
		t.Fatalf("headless srv targets: %v", targets)
	}
	if got := addrs(r.Extra); fmt.Sprint(got) != "[10.42.0.5 10.42.0.6]" {
		t.Fatalf("headless srv extra: %v", r.Extra)
	}

	for _, name := range []string{"_http._udp.web.default.svc.cluster.local.", "_nope._tcp.web.default.svc.cluster.local."} {
		r = query(t, addr, "udp", name, mdns.TypeSRV, 0)
		expect(t, r, mdns.RcodeNameError, true)
	}
	// A query on an SRV name: exists, no data
	r = query(t, addr, "udp", "_http._tcp.web.default.svc.cluster.local.", mdns.TypeA, 0)
	expect(t, r, mdns.RcodeSuccess, true)
	if len(r.Answer) != 0 {
		t.Fatalf("A on srv name: %v", r)
	}
}

func TestExternalName(t *testing.T) {
	up := exampleUpstream(t, nil)
	_, addr := startServer(t, Config{Upstreams: []string{up}})
	r := query(t, addr, "udp", "ext.default.svc.cluster.local.", mdns.TypeCNAME, 0)
	expect(t, r, mdns.RcodeSuccess, true)
	if len(r.Answer) != 1 || r.Answer[0].(*mdns.CNAME).Target != "example.com." {
		t.Fatalf("cname: %v", r)
	}
	r = query(t, addr, "udp", "ext.default.svc.cluster.local.", mdns.TypeA, 0)
	expect(t, r, mdns.RcodeSuccess, true)
	if len(r.Answer) != 2 || r.Answer[0].Header().Rrtype != mdns.TypeCNAME || fmt.Sprint(addrs(r.Answer)) != "[192.0.2.7]" {
		t.Fatalf("cname chase: %v", r)
	}
}

func TestPodA(t *testing.T) {
	_, addr := startServer(t, Config{})
	r := query(t, addr, "udp", "10-42-1-5.default.pod.cluster.local.", mdns.TypeA, 0)
	expect(t, r, mdns.RcodeSuccess, true)
	if got := addrs(r.Answer); fmt.Sprint(got) != "[10.42.1.5]" {
		t.Fatalf("pod: %v", got)
	}
	r = query(t, addr, "udp", "not-an-ip.default.pod.cluster.local.", mdns.TypeA, 0)
	expect(t, r, mdns.RcodeNameError, true)
}

func TestPTR(t *testing.T) {
	up := exampleUpstream(t, nil)
	_, addr := startServer(t, Config{Upstreams: []string{up}})
	for name, want := range map[string]string{
		"20.0.43.10.in-addr.arpa.": "web.default.svc.cluster.local.",
		"5.0.42.10.in-addr.arpa.":  "db-0.db.default.svc.cluster.local.",
		"6.0.42.10.in-addr.arpa.":  "10-42-0-6.db.default.svc.cluster.local.",
	} {
		r := query(t, addr, "udp", name, mdns.TypePTR, 0)
		expect(t, r, mdns.RcodeSuccess, true)
		if len(r.Answer) != 1 || r.Answer[0].(*mdns.PTR).Ptr != want {
			t.Fatalf("%s: %v", name, r)
		}
	}
	// unknown IPs are forwarded
	r := query(t, addr, "udp", "7.2.0.192.in-addr.arpa.", mdns.TypePTR, 0)
	expect(t, r, mdns.RcodeSuccess, false)
	if len(r.Answer) != 1 || r.Answer[0].(*mdns.PTR).Ptr != "example.com." {
		t.Fatalf("forwarded ptr: %v", r)
	}
	// endpoint IP of a non-headless service: not ours
	r = query(t, addr, "udp", "11.0.42.10.in-addr.arpa.", mdns.TypePTR, 0)
	expect(t, r, mdns.RcodeNameError, false)
}

func TestNXDomain(t *testing.T) {
	_, addr := startServer(t, Config{})
	for _, name := range []string{
		"nope.default.svc.cluster.local.",
		"web.other.svc.cluster.local.",
		"other.svc.cluster.local.",
		"foo.cluster.local.",
		"a.b.c.d.e.f.svc.cluster.local.",
	} {
		r := query(t, addr, "udp", name, mdns.TypeA, 0)
		expect(t, r, mdns.RcodeNameError, true)
		if len(r.Ns) != 1 {
			t.Fatalf("%s: no SOA: %v", name, r)
		}
		soa, ok := r.Ns[0].(*mdns.SOA)
		if !ok || soa.Hdr.Name != "cluster.local." {
			t.Fatalf("%s: bad SOA: %v", name, r.Ns)
		}
	}
	for _, name := range []string{"default.svc.cluster.local.", "svc.cluster.local.", "cluster.local."} {
		r := query(t, addr, "udp", name, mdns.TypeA, 0)
		expect(t, r, mdns.RcodeSuccess, true)
	}
	r := query(t, addr, "udp", "cluster.local.", mdns.TypeSOA, 0)
	if len(r.Answer) != 1 || r.Answer[0].Header().Rrtype != mdns.TypeSOA {
		t.Fatalf("apex SOA: %v", r)
	}
}

func TestForwarding(t *testing.T) {
	var hits atomic.Int32
	up := exampleUpstream(t, &hits)
	_, addr := startServer(t, Config{Upstreams: []string{up}})
	for _, netw := range []string{"udp", "tcp"} {
		r := query(t, addr, netw, "Example.COM.", mdns.TypeA, 0)
		expect(t, r, mdns.RcodeSuccess, false)
		if got := addrs(r.Answer); fmt.Sprint(got) != "[192.0.2.7]" {
			t.Fatalf("%s: %v", netw, r)
		}
		if r.Question[0].Name != "Example.COM." {
			t.Fatalf("question changed: %v", r.Question)
		}
	}
	r := query(t, addr, "udp", "nope.example.", mdns.TypeA, 0)
	expect(t, r, mdns.RcodeNameError, false)

	// upstream truncates over UDP: we retry over TCP, then truncate for the
	// client (no EDNS: 512 bytes) and answer in full over TCP / big EDNS.
	r = query(t, addr, "udp", "big.example.", mdns.TypeTXT, 0)
	if !r.Truncated {
		t.Fatalf("expected TC: %d answers", len(r.Answer))
	}
	r = query(t, addr, "tcp", "big.example.", mdns.TypeTXT, 0)
	if r.Truncated || len(r.Answer) != 20 {
		t.Fatalf("tcp: TC=%v answers=%d", r.Truncated, len(r.Answer))
	}
	r = query(t, addr, "udp", "big.example.", mdns.TypeTXT, 8192)
	if r.Truncated || len(r.Answer) != 20 || r.IsEdns0() == nil {
		t.Fatalf("edns: TC=%v answers=%d", r.Truncated, len(r.Answer))
	}
	if hits.Load() == 0 {
		t.Fatal("upstream never hit")
	}
}

func TestTruncation(t *testing.T) {
	_, addr := startServer(t, Config{})
	r := query(t, addr, "udp", "big.default.svc.cluster.local.", mdns.TypeA, 0)
	if !r.Truncated || len(r.Answer) >= 100 {
		t.Fatalf("no EDNS: TC=%v answers=%d", r.Truncated, len(r.Answer))
	}
	r = query(t, addr, "udp", "big.default.svc.cluster.local.", mdns.TypeA, 4096)
	if r.Truncated || len(r.Answer) != 100 {
		t.Fatalf("EDNS 4096: TC=%v answers=%d", r.Truncated, len(r.Answer))
	}
	if o := r.IsEdns0(); o == nil || o.UDPSize() != 4096 {
		t.Fatalf("EDNS not mirrored: %v", r.Extra)
	}
	r = query(t, addr, "tcp", "big.default.svc.cluster.local.", mdns.TypeA, 0)
	if r.Truncated || len(r.Answer) != 100 {
		t.Fatalf("TCP: TC=%v answers=%d", r.Truncated, len(r.Answer))
	}
}

func freePort(t testing.TB) int {
	l, err := bind("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := l.pc.LocalAddr().(*net.UDPAddr).Port
	l.pc.Close()
	l.ln.Close()
	return p
}

func TestLoopSelfUpstreamDropped(t *testing.T) {
	up := exampleUpstream(t, nil)
	p := freePort(t)
	self := fmt.Sprintf("127.0.0.1:%d", p)
	s, addr := startServer(t, Config{Listen: []string{self}, Upstreams: []string{self, up}})
	if got := s.Upstreams(); len(got) != 1 || got[0] != up {
		t.Fatalf("upstreams %v, want [%s]", got, up)
	}
	r := query(t, addr, "udp", "example.com.", mdns.TypeA, 0)
	if fmt.Sprint(addrs(r.Answer)) != "[192.0.2.7]" {
		t.Fatalf("%v", r)
	}

	// a wildcard listener is reached through loopback too
	p = freePort(t)
	s2, _ := startServer(t, Config{Listen: []string{fmt.Sprintf("0.0.0.0:%d", p)},
		Upstreams: []string{fmt.Sprintf("127.0.0.1:%d", p), fmt.Sprintf("127.0.0.53:%d", p+1)}})
	if got := s2.Upstreams(); len(got) != 1 || got[0] != fmt.Sprintf("127.0.0.53:%d", p+1) {
		t.Fatalf("wildcard upstreams %v", got)
	}
}

func TestLoopThroughUpstreamDetected(t *testing.T) {
	// upstream that forwards everything back to us
	var target atomic.Value
	proxy := startUpstream(t, func(w mdns.ResponseWriter, r *mdns.Msg) {
		c := &mdns.Client{Timeout: 3 * time.Second}
		resp, _, err := c.Exchange(r, target.Load().(string))
		if err != nil {
			resp = new(mdns.Msg).SetRcode(r, mdns.RcodeServerFailure)
		}
		w.WriteMsg(resp)
	})
	p := freePort(t)
	self := fmt.Sprintf("127.0.0.1:%d", p)
	target.Store(self)
	s, addr := startServer(t, Config{Listen: []string{self}, Upstreams: []string{proxy}})
	deadline := time.Now().Add(5 * time.Second)
	for len(s.Upstreams()) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("looping upstream not dropped: %v", s.Upstreams())
		}
		time.Sleep(20 * time.Millisecond)
	}
	start := time.Now()
	r := query(t, addr, "udp", "example.com.", mdns.TypeA, 0)
	expect(t, r, mdns.RcodeServerFailure, false)
	if time.Since(start) > time.Second {
		t.Fatalf("slow SERVFAIL")
	}
}

func TestRefuseQueryFromOwnForwarder(t *testing.T) {
	s, addr := startServer(t, Config{})
	c, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// pretend this socket is one of our in-flight forwarding sockets
	s.inflight.Store(c.LocalAddr().String(), struct{}{})
	m := new(mdns.Msg)
	m.SetQuestion("example.com.", mdns.TypeA)
	co := &mdns.Conn{Conn: c}
	if err := co.WriteMsg(m); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	r, err := co.ReadMsg()
	if err != nil {
		t.Fatal(err)
	}
	if r.Rcode != mdns.RcodeRefused {
		t.Fatalf("rcode %s, want REFUSED", mdns.RcodeToString[r.Rcode])
	}
}

func TestUpstreamTimeoutServfail(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0") // never answers
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	_, addr := startServer(t, Config{Upstreams: []string{pc.LocalAddr().String()}})
	start := time.Now()
	r := query(t, addr, "udp", "example.com.", mdns.TypeA, 0)
	expect(t, r, mdns.RcodeServerFailure, false)
	if d := time.Since(start); d < 1500*time.Millisecond || d > 3500*time.Millisecond {
		t.Fatalf("SERVFAIL after %v, want ~2s", d)
	}
}

func TestResolvConfDefault(t *testing.T) {
	p := filepath.Join(t.TempDir(), "resolv.conf")
	os.WriteFile(p, []byte("nameserver 192.0.2.53\nnameserver 127.0.0.1\nsearch x\n"), 0o644)
	cs := fake.NewClientset()
	f := informers.NewSharedInformerFactory(cs, 0)
	s, err := New(Config{Listen: []string{"127.0.0.1:0"}, ResolvConf: p}, f)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.Upstreams(); fmt.Sprint(got) != "[192.0.2.53:53 127.0.0.1:53]" {
		t.Fatalf("upstreams %v", got)
	}
	if len(s.Addrs()) != 2 || s.Addrs()[0].Network() != "udp" || s.Addrs()[1].Network() != "tcp" {
		t.Fatalf("addrs %v", s.Addrs())
	}
}

func BenchmarkQuery(b *testing.B) {
	_, addr := startServer(b, Config{})
	c := &mdns.Client{Net: "udp", Timeout: 2 * time.Second}
	conn, err := c.Dial(addr)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	m := new(mdns.Msg)
	m.SetQuestion("web.default.svc.cluster.local.", mdns.TypeA)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m.Id = mdns.Id()
		t0 := time.Now()
		r, _, err := c.ExchangeWithConn(m, conn)
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
		if len(r.Answer) != 1 {
			b.Fatal("no answer")
		}
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)*50/100].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	}
}

// recorder is a minimal mdns.ResponseWriter for calling ServeDNS directly.
// Its client is 127.0.0.1 unless remote says otherwise.
type recorder struct {
	msg    *mdns.Msg
	remote net.Addr
}

func (r *recorder) LocalAddr() net.Addr { return &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 53} }
func (r *recorder) RemoteAddr() net.Addr {
	if r.remote != nil {
		return r.remote
	}
	return &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
}
func (r *recorder) WriteMsg(m *mdns.Msg) error { r.msg = m; return nil }
func (r *recorder) Write([]byte) (int, error)  { return 0, nil }
func (r *recorder) Close() error               { return nil }
func (r *recorder) TsigStatus() error          { return nil }
func (r *recorder) TsigTimersOnly(bool)        {}
func (r *recorder) Hijack()                    {}

func TestServeDNSDirectAndNotSynced(t *testing.T) {
	cs := fake.NewClientset(testObjects()...)
	f := informers.NewSharedInformerFactory(cs, 0)
	s, err := New(Config{Listen: []string{"127.0.0.1:0"}, ResolvConf: emptyResolvConf(t)}, f)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	q := new(mdns.Msg).SetQuestion("web.default.svc.cluster.local.", mdns.TypeA)
	w := &recorder{}
	s.ServeDNS(w, q)
	if w.msg == nil || w.msg.Rcode != mdns.RcodeServerFailure {
		t.Fatalf("before sync: %v", w.msg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); f.Shutdown() }()
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	s.ServeDNS(w, q)
	if w.msg.Rcode != mdns.RcodeSuccess || fmt.Sprint(addrs(w.msg.Answer)) != "[10.43.0.20]" {
		t.Fatalf("after sync: %v", w.msg)
	}
	// CHAOS class inside the zone is refused; multi-question is FORMERR
	q2 := new(mdns.Msg).SetQuestion("web.default.svc.cluster.local.", mdns.TypeTXT)
	q2.Question[0].Qclass = mdns.ClassCHAOS
	s.ServeDNS(w, q2)
	if w.msg.Rcode != mdns.RcodeRefused {
		t.Fatalf("chaos: %v", w.msg)
	}
	q3 := new(mdns.Msg).SetQuestion("a.", mdns.TypeA)
	q3.Question = append(q3.Question, q3.Question[0])
	s.ServeDNS(w, q3)
	if w.msg.Rcode != mdns.RcodeFormatError {
		t.Fatalf("two questions: %v", w.msg)
	}
}
