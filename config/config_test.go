package config

import (
	"net"
	"os"
	"strings"
	"testing"
)

func TestDefaultAddress(t *testing.T) {
	// A specific, routable bind address is what clients reach.
	if got := DefaultAddress("192.0.2.7"); got != "192.0.2.7" {
		t.Errorf("DefaultAddress(192.0.2.7) = %q", got)
	}
	// Otherwise the host's first non-loopback IPv4 address: endpoints
	// (default/kubernetes, a node's InternalIP) may not point at loopback.
	host := DefaultAddress("")
	for _, bind := range []string{"0.0.0.0", "::", "127.0.0.1", "::1", "not-an-ip"} {
		if got := DefaultAddress(bind); got != host {
			t.Errorf("DefaultAddress(%q) = %q, want the host's %q", bind, got, host)
		}
	}
	ip := net.ParseIP(host)
	if ip == nil || ip.To4() == nil {
		t.Fatalf("DefaultAddress(\"\") = %q, not IPv4", host)
	}
	if ip.IsLoopback() && hasIPv4Besides(t) {
		t.Errorf("DefaultAddress(\"\") = %q although the host has another IPv4 address", host)
	}
}

func hasIPv4Besides(t *testing.T) bool {
	t.Helper()
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return true
		}
	}
	return false
}

func TestNodeName(t *testing.T) {
	if got, err := NodeName("given"); err != nil || got != "given" {
		t.Errorf("NodeName(given) = %q, %v", got, err)
	}
	h, err := os.Hostname()
	if err != nil {
		t.Fatalf("the host has no hostname: %v", err)
	}
	if got, err := NodeName(""); err != nil || got != strings.ToLower(h) {
		t.Errorf("NodeName(\"\") = %q, %v; want %q", got, err, strings.ToLower(h))
	}
}

func TestIdentities(t *testing.T) {
	// The API server's authorizer recognizes nodes by this prefix and
	// group (server/apiserver/auth/authorization.go).
	if got := NodeUser("a"); got != "system:node:a" {
		t.Errorf("NodeUser(a) = %q", got)
	}
	if NodesGroup != "system:nodes" || MastersGroup != "system:masters" {
		t.Errorf("groups %q %q", NodesGroup, MastersGroup)
	}
}

func TestClusterDNSInServiceCIDR(t *testing.T) {
	_, svc, err := net.ParseCIDR(ServiceCIDR)
	if err != nil {
		t.Fatal(err)
	}
	if !svc.Contains(net.ParseIP(ClusterDNS)) {
		t.Errorf("cluster DNS %s outside the service CIDR %s", ClusterDNS, ServiceCIDR)
	}
	if _, pods, err := net.ParseCIDR(ClusterCIDR); err != nil || pods.Contains(svc.IP) || svc.Contains(pods.IP) {
		t.Errorf("pod CIDR %s overlaps the service CIDR %s (%v)", ClusterCIDR, ServiceCIDR, err)
	}
}
