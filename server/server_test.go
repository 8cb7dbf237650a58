package server

import (
	"net"
	"slices"
	"testing"
)

func TestServingNames(t *testing.T) {
	cfg := Config{ClusterDomain: "cluster.local", NodeName: "node-a", AdvertiseAddress: "192.0.2.7", ServiceCIDR: "10.43.0.0/16"}
	names, ips := servingNames(cfg, "Host-A", []net.IP{net.IPv4(127, 0, 0, 1)})
	want := []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "Host-A", "node-a"}
	if !slices.Equal(names, want) {
		t.Errorf("names %q, want %q", names, want)
	}
	for _, ip := range []string{"127.0.0.1", "192.0.2.7", "10.43.0.1"} {
		if !slices.ContainsFunc(ips, net.ParseIP(ip).Equal) {
			t.Errorf("IPs %v lack %s", ips, ip)
		}
	}
	// The node name is the hostname by default: listed once.
	cfg.NodeName = "host-a"
	if names, _ := servingNames(cfg, "host-a", nil); len(names) != 6 {
		t.Errorf("names %q", names)
	}
}

func TestAddresses(t *testing.T) {
	for in, want := range map[string]string{"10.43.0.0/16": "10.43.0.1", "10.96.0.0/12": "10.96.0.1", "fd00::/108": "", "bad": ""} {
		if got := firstServiceIP(in); got != want {
			t.Errorf("firstServiceIP(%s) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "127.0.0.1", "127.0.0.1": "127.0.0.1", "192.0.2.7": "192.0.2.7"} {
		if got := loopbackFor(in); got != want {
			t.Errorf("loopbackFor(%q) = %q, want %q", in, got, want)
		}
	}
}
