package nodenet

import (
	"strings"
	"testing"
)

func TestLookup(t *testing.T) {
	for name, want := range map[string]string{"": Default, "none": "none", "vxlan": "vxlan", "host-gw": "host-gw"} {
		b, err := Lookup(name)
		if err != nil || b.Name != want || b.New == nil || b.Cleanup == nil {
			t.Fatalf("Lookup(%q) = %+v, %v; want %s", name, b, err, want)
		}
	}
	if Default != "vxlan" {
		t.Fatalf("Default = %q; k3s's default is vxlan", Default)
	}
	// "bridge" was the name before the overlays; it never shipped.
	for _, name := range []string{"bridge", "wireguard-native"} {
		_, err := Lookup(name)
		if err == nil || !strings.Contains(err.Error(), `"`+name+`"`) || !strings.Contains(err.Error(), "known: host-gw, none, vxlan") {
			t.Fatalf("Lookup(%s) error %v; want one naming it and the known backends", name, err)
		}
	}
}

func TestNames(t *testing.T) {
	if got := strings.Join(Names(), ","); got != "host-gw,none,vxlan" {
		t.Fatalf("Names() = %s", got)
	}
}

func TestBridgeConfigPaths(t *testing.T) {
	c := bridgeConfig(Options{PodCIDR: "10.42.1.0/24", ClusterCIDR: "10.42.0.0/16", AgentDir: "/d/agent", RunDir: "/run/x"})
	if c.StateDir != "/d/agent/ipam" || c.NetNSDir != "/run/x/netns" || c.PodCIDR != "10.42.1.0/24" || c.ClusterCIDR != "10.42.0.0/16" {
		t.Fatalf("bridge config %+v", c)
	}
}
