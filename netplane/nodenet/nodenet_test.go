package nodenet

import (
	"strings"
	"testing"
)

func TestLookup(t *testing.T) {
	for _, name := range []string{"", "bridge"} {
		b, err := Lookup(name)
		if err != nil || b.Name != "bridge" || b.New == nil || b.Cleanup == nil {
			t.Fatalf("Lookup(%q) = %+v, %v; want the bridge", name, b, err)
		}
	}
	_, err := Lookup("vxlan")
	if err == nil || !strings.Contains(err.Error(), `"vxlan"`) || !strings.Contains(err.Error(), "known: bridge") {
		t.Fatalf("Lookup(vxlan) error %v; want one naming it and the known backends", err)
	}
}

func TestNames(t *testing.T) {
	if got := strings.Join(Names(), ","); got != "bridge" {
		t.Fatalf("Names() = %s", got)
	}
}

func TestBridgeConfigPaths(t *testing.T) {
	c := bridgeConfig(Options{PodCIDR: "10.42.1.0/24", ClusterCIDR: "10.42.0.0/16", AgentDir: "/d/agent", RunDir: "/run/x"})
	if c.StateDir != "/d/agent/ipam" || c.NetNSDir != "/run/x/netns" || c.PodCIDR != "10.42.1.0/24" || c.ClusterCIDR != "10.42.0.0/16" {
		t.Fatalf("bridge config %+v", c)
	}
}
