package proxy

import (
	"context"
	"errors"
	"io"
	"k8s.io/utils/ptr"
	"net"
	"net/netip"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kelp-project/kelp/netplane/nft"
)

func apiService(name, ip string, port, target int32) (*v1.Service, *discovery.EndpointSlice) {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: v1.ServiceSpec{
			Type:       v1.ServiceTypeClusterIP,
			ClusterIP:  ip,
			ClusterIPs: []string{ip},
			Ports:      []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: port}},
		},
	}
	sl := &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name + "-abc",
			Labels: map[string]string{discovery.LabelServiceName: name}},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(v1.ProtocolTCP), Port: ptr.To(target)}},
	}
	return svc, sl
}

func addEP(sl *discovery.EndpointSlice, ip string, ready bool) {
	sl.Endpoints = append(sl.Endpoints, discovery.Endpoint{
		Addresses:  []string{ip},
		Conditions: discovery.EndpointConditions{Ready: ptr.To(ready), Serving: ptr.To(ready), Terminating: ptr.To(false)},
		NodeName:   ptr.To("node1"),
	})
}

// sp is a synthetic TCP ClusterIP service port with ready endpoints.
func sp(name, ip string, port uint16, eps ...string) servicePort {
	s := servicePort{Namespace: "default", Name: name, PortName: "http", Proto: protoTCP,
		ClusterIPs: []netip.Addr{netip.MustParseAddr(ip)}, Port: port}
	for _, e := range eps {
		ap := netip.MustParseAddrPort(e)
		s.Endpoints = append(s.Endpoints, endpoint{IP: ap.Addr(), Port: ap.Port(), NodeName: "node1", Ready: true, Serving: true})
	}
	return s
}

func svcKey(ip string, proto uint8, port uint16) string {
	return string(ipProtoPortKey(netip.MustParseAddr(ip), proto, port))
}

// mapTarget returns the chain an element of a verdict map goes to.
func mapTarget(t *testing.T, els []nftables.SetElement, key []byte) string {
	t.Helper()
	for _, e := range els {
		if string(e.Key) == string(key) {
			if e.VerdictData == nil {
				t.Fatalf("element %x has no verdict", key)
			}
			return e.VerdictData.Chain
		}
	}
	return ""
}

func hasKey(els []nftables.SetElement, key []byte) bool {
	for _, e := range els {
		if string(e.Key) == string(key) {
			return true
		}
	}
	return false
}

func TestClusterIPFromAPI(t *testing.T) {
	n := newTestNS(t)
	svc, sl := apiService("web", "10.43.0.20", 80, 8080)
	addEP(sl, "10.42.0.5", true)
	addEP(sl, "10.42.0.6", true)
	client := fake.NewSimpleClientset(svc, sl)
	factory := informers.NewSharedInformerFactory(client, 0)

	p, err := New(Config{NodeName: "node1", ClusterCIDR: "10.42.0.0/16", NetNS: n.path}, client, factory)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	if err := p.Sync(); err != nil {
		t.Fatalf("sync: %v", err)
	}

	c := n.conn()
	chains := n.chains(c)
	for _, want := range []string{chainPrerouting, chainOutput, chainPostrouting, chainServices, chainFilterOut, chainReject} {
		if chains[want] == nil {
			t.Errorf("chain %s missing", want)
		}
	}
	if ch := chains[chainPrerouting]; ch != nil && (ch.Type != nftables.ChainTypeNAT || *ch.Hooknum != *nftables.ChainHookPrerouting || *ch.Priority != -100) {
		t.Errorf("prerouting chain: type %s hook %d prio %d", ch.Type, *ch.Hooknum, *ch.Priority)
	}
	svcChain := mapTarget(t, n.elements(c, mapServiceIPs), ipProtoPortKey(netip.MustParseAddr("10.43.0.20"), protoTCP, 80))
	if !strings.HasPrefix(svcChain, svcChainPrefix) {
		t.Fatalf("service-ips map: 10.43.0.20 . tcp . 80 -> %q, want a %s* chain", svcChain, svcChainPrefix)
	}
	dnats := n.targets(c, svcChain)
	if strings.Join(dnats, ",") != "10.42.0.5:8080,10.42.0.6:8080" {
		t.Errorf("service chain DNATs to %v", dnats)
	}
}

func TestNoEndpointsRejectSet(t *testing.T) {
	n := newTestNS(t)
	p := n.proxier()
	empty := sp("empty", "10.43.0.30", 80)
	if err := p.syncState(&state{Ports: []servicePort{empty}}); err != nil {
		t.Fatal(err)
	}
	c := n.conn()
	if !hasKey(n.elements(c, setNoEPIPs), ipProtoPortKey(netip.MustParseAddr("10.43.0.30"), protoTCP, 80)) {
		t.Fatal("service without endpoints is not in the reject set")
	}
	if len(n.elements(c, mapServiceIPs)) != 0 {
		t.Fatal("service without endpoints is in the service map")
	}
	// Endpoints appear: it leaves the reject set and enters the map.
	withEP := sp("empty", "10.43.0.30", 80, "10.42.0.5:8080")
	if err := p.syncState(&state{Ports: []servicePort{withEP}}); err != nil {
		t.Fatal(err)
	}
	if len(n.elements(c, setNoEPIPs)) != 0 || len(n.elements(c, mapServiceIPs)) != 1 {
		t.Fatal("after endpoints appeared: reject set / map not updated")
	}
}

func TestEndpointNotReadyLeavesRotation(t *testing.T) {
	n := newTestNS(t)
	p := n.proxier()
	s := sp("web", "10.43.0.20", 80, "10.42.0.5:8080", "10.42.0.6:8080", "10.42.0.7:8080")
	if err := p.syncState(&state{Ports: []servicePort{s}}); err != nil {
		t.Fatal(err)
	}
	c := n.conn()
	svcChain := hashName(svcChainPrefix, s.key())
	before := n.targets(c, svcChain)
	if len(before) != 3 {
		t.Fatalf("targets %v, want 3", before)
	}
	s.Endpoints[1].Ready = false
	if err := p.syncState(&state{Ports: []servicePort{s}}); err != nil {
		t.Fatal(err)
	}
	after := n.targets(c, svcChain)
	if strings.Join(after, ",") != "10.42.0.5:8080,10.42.0.7:8080" {
		t.Fatalf("targets after not-ready %v, want 10.42.0.5:8080,10.42.0.7:8080", after)
	}
	// All endpoints terminating but serving: fall back to them.
	for i := range s.Endpoints {
		s.Endpoints[i] = endpoint{IP: s.Endpoints[i].IP, Port: 8080, Serving: true, Terminating: true}
	}
	if err := p.syncState(&state{Ports: []servicePort{s}}); err != nil {
		t.Fatal(err)
	}
	if got := n.targets(c, svcChain); len(got) != 3 {
		t.Fatalf("serving+terminating fallback: targets %v, want 3", got)
	}
}

func TestNodePortAndLB(t *testing.T) {
	n := newTestNS(t)
	p := n.proxier("192.168.99.1")
	s := sp("np", "10.43.0.40", 80, "10.42.0.5:8080")
	s.NodePort = 30080
	s.ExternalIPs = []netip.Addr{netip.MustParseAddr("192.168.99.200")}
	loc := sp("local", "10.43.0.41", 80, "10.42.0.5:8080")
	loc.NodePort = 30081
	loc.ExternalLocal = true
	loc.Endpoints[0].NodeName = "other-node"
	if err := p.syncState(&state{Ports: []servicePort{s, loc}}); err != nil {
		t.Fatal(err)
	}
	c := n.conn()
	ext := mapTarget(t, n.elements(c, mapNodePorts), protoPortKey(protoTCP, 30080))
	if ext != hashName(extChainPrefix, s.key()) {
		t.Fatalf("nodeport map: tcp . 30080 -> %q", ext)
	}
	if got := mapTarget(t, n.elements(c, mapServiceIPs), ipProtoPortKey(netip.MustParseAddr("192.168.99.200"), protoTCP, 80)); got != ext {
		t.Fatalf("LB ingress IP -> %q, want %q", got, ext)
	}
	if !hasKey(n.elements(c, setNodeIPs), []byte{192, 168, 99, 1}) {
		t.Fatal("node IP not in node-ips set")
	}
	// externalTrafficPolicy Local with no local endpoint: pods go to the
	// service chain, everything else is dropped.
	rules, err := c.GetRules(nft.Table(), &nftables.Chain{Table: nft.Table(), Name: hashName(extChainPrefix, loc.key())})
	if err != nil {
		t.Fatal(err)
	}
	last := rules[len(rules)-1].Exprs
	if v, ok := last[len(last)-1].(*expr.Verdict); !ok || v.Kind != expr.VerdictDrop {
		t.Fatalf("eTP Local without local endpoints: last rule %v, want drop", last)
	}
}

func countObjects(n *testNS, c *nftables.Conn) (chains, sets []string, rules int) {
	for name := range n.chains(c) {
		chains = append(chains, name)
		r, err := c.GetRules(nft.Table(), &nftables.Chain{Table: nft.Table(), Name: name})
		if err != nil {
			n.t.Fatal(err)
		}
		rules += len(r)
	}
	for name := range n.sets(c) {
		if !strings.HasPrefix(name, "__") {
			sets = append(sets, name)
		}
	}
	sort.Strings(chains)
	sort.Strings(sets)
	return
}

func testState() *state {
	a := sp("a", "10.43.0.20", 80, "10.42.0.5:8080", "10.42.0.6:8080")
	a.AffinityTimeout = 100 * time.Second
	b := sp("b", "10.43.0.21", 53, "10.42.0.7:53")
	b.Proto = protoUDP
	b.NodePort = 30053
	return &state{Ports: []servicePort{a, b, sp("c", "10.43.0.22", 80)}}
}

func TestSyncIdempotentAndRestart(t *testing.T) {
	n := newTestNS(t)
	c := n.conn()
	p := n.proxier("192.168.99.1")
	if err := p.syncState(testState()); err != nil {
		t.Fatal(err)
	}
	ch1, s1, r1 := countObjects(n, c)
	if err := p.syncState(testState()); err != nil { // incremental, no change
		t.Fatal(err)
	}
	ch2, s2, r2 := countObjects(n, c)
	// A restarted proxy: full rebuild over the old objects, plus a stale
	// chain/set of an earlier run that must go.
	c.AddChain(&nftables.Chain{Table: nft.Table(), Name: svcChainPrefix + "stale"})
	if err := c.AddSet(affinitySet(nft.Table(), affSetPrefix+"stale", time.Second), nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	p2 := n.proxier("192.168.99.1")
	if err := p2.syncState(testState()); err != nil {
		t.Fatal(err)
	}
	ch3, s3, r3 := countObjects(n, c)
	if strings.Join(ch1, ",") != strings.Join(ch2, ",") || strings.Join(ch1, ",") != strings.Join(ch3, ",") {
		t.Errorf("chains differ between syncs:\n%v\n%v\n%v", ch1, ch2, ch3)
	}
	if strings.Join(s1, ",") != strings.Join(s2, ",") || strings.Join(s1, ",") != strings.Join(s3, ",") {
		t.Errorf("sets differ between syncs:\n%v\n%v\n%v", s1, s2, s3)
	}
	if r1 != r2 || r1 != r3 {
		t.Errorf("rule counts differ: %d %d %d", r1, r2, r3)
	}
	t.Logf("%d chains, %d sets, %d rules", len(ch1), len(s1), r1)
}

func TestCleanupLeavesForeignObjects(t *testing.T) {
	n := newTestNS(t)
	c := n.conn()
	tb := c.AddTable(nft.Table())
	pol := nftables.ChainPolicyAccept
	c.AddChain(&nftables.Chain{Table: tb, Name: "bridge-postrouting", Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource, Policy: &pol})
	c.AddRule(&nftables.Rule{Table: tb, Chain: &nftables.Chain{Table: tb, Name: "bridge-postrouting"},
		Exprs: []expr.Any{&expr.Masq{}}})
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	p := n.proxier("192.168.99.1")
	if err := p.syncState(testState()); err != nil {
		t.Fatal(err)
	}
	if n.chains(c)["bridge-postrouting"] == nil {
		t.Fatal("sync removed the foreign chain")
	}
	if err := Cleanup(n.path); err != nil {
		t.Fatalf("cleanup: %v", err)
	}
	chains, sets, rules := countObjects(n, c)
	if strings.Join(chains, ",") != "bridge-postrouting" || len(sets) != 0 || rules != 1 {
		t.Fatalf("after cleanup: chains %v sets %v rules %d; want only bridge-postrouting with its rule", chains, sets, rules)
	}
	if err := Cleanup(n.path); err != nil {
		t.Fatalf("second cleanup: %v", err)
	}
}

// dial connects from inside the test netns.
func (n *testNS) dial(addr string) (string, time.Duration, error) {
	var reply string
	start := time.Now()
	var d time.Duration
	err := n.run(func() error {
		conn, err := net.DialTimeout("tcp", addr, 3*time.Second)
		d = time.Since(start)
		if err != nil {
			return err
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
		b, err := io.ReadAll(conn)
		reply = string(b)
		return err
	})
	return reply, d, err
}

func (n *testNS) listen(addr, reply string) {
	n.t.Helper()
	var ln net.Listener
	if err := n.run(func() error {
		var err error
		ln, err = net.Listen("tcp", addr)
		return err
	}); err != nil {
		n.t.Fatalf("listen %s: %v", addr, err)
	}
	n.t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte(reply))
			c.Close()
		}
	}()
}

func TestTraffic(t *testing.T) {
	n := newTestNS(t)
	// A "pod" network on a dummy device: two backends, plus a client
	// address; the service CIDR is routed there too, and a node address.
	n.ip("link", "add", "pods0", "type", "veth", "peer", "name", "pods1")
	n.ip("link", "set", "pods1", "up")
	n.ip("link", "set", "pods0", "up")
	for _, a := range []string{"10.42.0.5/24", "10.42.0.6/24", "10.42.0.9/24"} {
		n.ip("addr", "add", a, "dev", "pods0")
	}
	n.ip("link", "add", "node0", "type", "veth", "peer", "name", "node1")
	n.ip("link", "set", "node1", "up")
	n.ip("link", "set", "node0", "up")
	n.ip("addr", "add", "192.168.99.1/24", "dev", "node0")
	n.ip("route", "add", "10.43.0.0/16", "dev", "pods0", "src", "10.42.0.9")
	n.listen("10.42.0.5:8080", "pod-a")
	n.listen("10.42.0.6:8080", "pod-b")

	p := n.proxier("192.168.99.1")
	web := sp("web", "10.43.0.20", 80, "10.42.0.5:8080", "10.42.0.6:8080")
	web.NodePort = 30080
	aff := sp("sticky", "10.43.0.21", 80, "10.42.0.5:8080", "10.42.0.6:8080")
	aff.AffinityTimeout = time.Hour
	empty := sp("empty", "10.43.0.30", 80)
	if err := p.syncState(&state{Ports: []servicePort{web, aff, empty}}); err != nil {
		t.Fatal(err)
	}

	seen := map[string]int{}
	for i := 0; i < 40; i++ {
		r, _, err := n.dial("10.43.0.20:80")
		if err != nil {
			t.Fatalf("dial ClusterIP: %v", err)
		}
		seen[r]++
	}
	if seen["pod-a"] == 0 || seen["pod-b"] == 0 || len(seen) != 2 {
		t.Fatalf("ClusterIP spread: %v, want both pods", seen)
	}
	t.Logf("ClusterIP spread over 40 connections: %v", seen)

	if r, _, err := n.dial("192.168.99.1:30080"); err != nil || !strings.HasPrefix(r, "pod-") {
		t.Fatalf("NodePort on node IP: %q, %v", r, err)
	}

	sticky := map[string]int{}
	for i := 0; i < 10; i++ {
		r, _, err := n.dial("10.43.0.21:80")
		if err != nil {
			t.Fatalf("dial sticky service: %v", err)
		}
		sticky[r]++
	}
	if len(sticky) != 1 {
		t.Fatalf("sessionAffinity ClientIP: replies %v, want one backend", sticky)
	}

	_, d, err := n.dial("10.43.0.30:80")
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("service without endpoints: err %v, want connection refused", err)
	}
	if d > time.Second {
		t.Fatalf("connection refused took %v", d)
	}
	t.Logf("no endpoints: refused after %v", d)

	// One backend goes away: traffic goes only to the other.
	web.Endpoints = web.Endpoints[1:]
	if err := p.syncState(&state{Ports: []servicePort{web, aff, empty}}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		if r, _, err := n.dial("10.43.0.20:80"); err != nil || r != "pod-b" {
			t.Fatalf("after endpoint removal: %q, %v", r, err)
		}
	}
}

func TestRunFollowsInformers(t *testing.T) {
	n := newTestNS(t)
	svc, sl := apiService("web", "10.43.0.20", 80, 8080)
	addEP(sl, "10.42.0.5", true)
	addEP(sl, "10.42.0.6", true)
	client := fake.NewSimpleClientset(svc, sl)
	factory := informers.NewSharedInformerFactory(client, 0)
	p, err := New(Config{NodeName: "node1", ClusterCIDR: "10.42.0.0/16", NetNS: n.path, SyncPeriod: time.Hour}, client, factory)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()

	c := n.conn()
	svcChain := hashName(svcChainPrefix, "default/web:http/tcp")
	waitFor := func(what string, want string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			var got string
			if chains := n.chains(c); chains[svcChain] != nil {
				got = strings.Join(n.targets(c, svcChain), ",")
			}
			if got == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: targets %q, want %q", what, got, want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFor("initial sync", "10.42.0.5:8080,10.42.0.6:8080")

	sl2 := sl.DeepCopy()
	sl2.Endpoints[0].Conditions.Ready = ptr.To(false)
	sl2.Endpoints[0].Conditions.Serving = ptr.To(false)
	t0 := time.Now()
	if _, err := client.DiscoveryV1().EndpointSlices("default").Update(ctx, sl2, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("endpoint not ready", "10.42.0.6:8080")
	t.Logf("endpoint change reached the rules in %v", time.Since(t0))

	if err := client.CoreV1().Services("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("service deleted", "")

	// Stopping leaves the rules in place.
	cancel()
	<-done
	if n.chains(c)[chainPrerouting] == nil {
		t.Fatal("rules removed when Run stopped")
	}
}
