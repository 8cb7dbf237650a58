package hostports

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestConflictRules(t *testing.T) {
	used := Used{}
	used.Add([]Port{{IP: "10.0.0.1", Protocol: v1.ProtocolTCP, Port: 80}})
	for _, c := range []struct {
		p    Port
		want bool
	}{
		{Port{"10.0.0.1", v1.ProtocolTCP, 80}, true},
		{Port{"0.0.0.0", v1.ProtocolTCP, 80}, true},
		{Port{"10.0.0.2", v1.ProtocolTCP, 80}, false},
		{Port{"10.0.0.1", v1.ProtocolUDP, 80}, false},
		{Port{"10.0.0.1", v1.ProtocolTCP, 81}, false},
	} {
		if got := used.Conflict(c.p); got != c.want {
			t.Errorf("%+v: got %v want %v", c.p, got, c.want)
		}
	}
	used.Add([]Port{{IP: "0.0.0.0", Protocol: v1.ProtocolUDP, Port: 53}})
	if !used.Conflict(Port{"10.0.0.9", v1.ProtocolUDP, 53}) {
		t.Error("an address does not conflict with 0.0.0.0 in use")
	}
	used.Remove([]Port{{IP: "10.0.0.1", Protocol: v1.ProtocolTCP, Port: 80}})
	if used.Conflict(Port{"0.0.0.0", v1.ProtocolTCP, 80}) {
		t.Error("a removed port still conflicts")
	}
}

func TestOfNormalizesAndTakesSidecars(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	pod := &v1.Pod{Spec: v1.PodSpec{
		InitContainers: []v1.Container{
			{Name: "once", Ports: []v1.ContainerPort{{ContainerPort: 1, HostPort: 1}}},
			{Name: "sidecar", RestartPolicy: &always, Ports: []v1.ContainerPort{{ContainerPort: 2, HostPort: 2, Protocol: v1.ProtocolUDP}}},
		},
		Containers: []v1.Container{{Name: "c", Ports: []v1.ContainerPort{{ContainerPort: 80}, {ContainerPort: 3, HostPort: 3, HostIP: "10.0.0.1"}}}},
	}}
	got := Of(pod)
	want := []Port{{"0.0.0.0", v1.ProtocolUDP, 2}, {"10.0.0.1", v1.ProtocolTCP, 3}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("Of = %+v, want %+v", got, want)
	}
}
