package bridge

import (
	"net/netip"
	"testing"
)

// Pure IPAM tests: no root needed.

func TestIPAMRoundRobinAndPersist(t *testing.T) {
	dir := t.TempDir()
	p := netip.MustParsePrefix("10.42.7.0/29") // .2 .. .6 usable
	a, err := newIPAM(dir, p)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.42.7.2", "10.42.7.3", "10.42.7.4"}
	for i, pod := range []string{"a", "b", "c"} {
		ip, err := a.allocate(pod)
		if err != nil {
			t.Fatal(err)
		}
		if ip.String() != want[i] {
			t.Fatalf("pod %s got %s, want %s", pod, ip, want[i])
		}
	}
	if ip, _ := a.allocate("a"); ip.String() != "10.42.7.2" {
		t.Fatalf("re-allocate a: got %s", ip)
	}
	if err := a.release("a"); err != nil {
		t.Fatal(err)
	}
	// Round robin: the freed .2 is not reused immediately.
	if ip, _ := a.allocate("d"); ip.String() != "10.42.7.5" {
		t.Fatalf("d got %s, want 10.42.7.5", ip)
	}
	if ip, _ := a.allocate("e"); ip.String() != "10.42.7.6" {
		t.Fatalf("e got %s, want 10.42.7.6", ip)
	}
	// Wraps around to the freed .2.
	if ip, _ := a.allocate("f"); ip.String() != "10.42.7.2" {
		t.Fatalf("f got %s, want 10.42.7.2", ip)
	}
	if _, err := a.allocate("g"); err == nil {
		t.Fatal("expected exhaustion error")
	}

	b, err := newIPAM(dir, p)
	if err != nil {
		t.Fatal(err)
	}
	for pod, ip := range map[string]string{"b": "10.42.7.3", "c": "10.42.7.4", "d": "10.42.7.5", "e": "10.42.7.6", "f": "10.42.7.2"} {
		if got, ok := b.get(pod); !ok || got.String() != ip {
			t.Fatalf("after reload pod %s: got %v %v, want %s", pod, got, ok, ip)
		}
	}
	if _, ok := b.get("a"); ok {
		t.Fatal("released pod a still allocated after reload")
	}

	// A changed pod CIDR drops allocations outside it.
	c, err := newIPAM(dir, netip.MustParsePrefix("10.42.8.0/24"))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.pods()) != 0 {
		t.Fatalf("allocations survived a CIDR change: %v", c.pods())
	}
	if ip, _ := c.allocate("x"); ip.String() != "10.42.8.2" {
		t.Fatalf("x got %s", ip)
	}
}

func TestLastAddr(t *testing.T) {
	for p, want := range map[string]string{"10.42.3.0/24": "10.42.3.255", "10.42.0.0/16": "10.42.255.255", "10.0.0.8/29": "10.0.0.15"} {
		if got := lastAddr(netip.MustParsePrefix(p)).String(); got != want {
			t.Errorf("lastAddr(%s) = %s, want %s", p, got, want)
		}
	}
}

func TestVethName(t *testing.T) {
	n := VethName("3f1c2a6e-0000-4000-8000-000000000001")
	if len(n) != 12 || !isPodVethName(n) {
		t.Fatalf("bad veth name %q", n)
	}
}
