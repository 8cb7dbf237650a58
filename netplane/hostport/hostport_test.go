package hostport

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
)

func TestForPodTakesTheReservedPortsNormalized(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{
			{Name: "once", Ports: []corev1.ContainerPort{{ContainerPort: 1, HostPort: 1}}},
			{Name: "sidecar", RestartPolicy: &always, Ports: []corev1.ContainerPort{{ContainerPort: 53, HostPort: 5353, Protocol: corev1.ProtocolUDP}}},
		},
		Containers: []corev1.Container{{Name: "c", Ports: []corev1.ContainerPort{
			{ContainerPort: 80}, // no host port
			{ContainerPort: 8080, HostPort: 54323, HostIP: "127.0.0.1"}, // protocol defaults to TCP
			{ContainerPort: 8080, HostPort: 54324, HostIP: "0.0.0.0", Protocol: corev1.ProtocolTCP},
			{ContainerPort: 8080, HostPort: 54325, HostIP: "::1", Protocol: corev1.ProtocolTCP}, // not the pod network's family
			{ContainerPort: 9, HostPort: 9, HostIP: "192.0.2.7", Protocol: corev1.ProtocolSCTP},
		}}},
	}}
	want := []Mapping{
		{Protocol: corev1.ProtocolUDP, HostPort: 5353, ContainerPort: 53},
		{Protocol: corev1.ProtocolTCP, HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: 54323, ContainerPort: 8080},
		{Protocol: corev1.ProtocolTCP, HostPort: 54324, ContainerPort: 8080},
		{Protocol: corev1.ProtocolSCTP, HostIP: netip.MustParseAddr("192.0.2.7"), HostPort: 9, ContainerPort: 9},
	}
	if got := ForPod(pod); !reflect.DeepEqual(got, want) {
		t.Fatalf("ForPod:\n got %v\nwant %v", got, want)
	}
	if got := ForPod(&corev1.Pod{}); len(got) != 0 {
		t.Errorf("a pod without host ports: %v", got)
	}
}

func TestLoopbackReach(t *testing.T) {
	for _, c := range []struct {
		ip   string
		want bool
	}{{"", true}, {"127.0.0.1", true}, {"127.0.0.2", true}, {"10.0.0.4", false}} {
		m := Mapping{Protocol: corev1.ProtocolTCP, HostPort: 1, ContainerPort: 1}
		if c.ip != "" {
			m.HostIP = netip.MustParseAddr(c.ip)
		}
		if got := m.reachesLoopback(); got != c.want {
			t.Errorf("%s: reachesLoopback = %v, want %v", m, got, c.want)
		}
	}
}

func TestRulesOfAPod(t *testing.T) {
	pod := netip.MustParseAddr("10.42.0.9")
	ms := []Mapping{
		{Protocol: corev1.ProtocolTCP, HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: 54323, ContainerPort: 8080},
		{Protocol: corev1.ProtocolUDP, HostPort: 54323, ContainerPort: 8080},
		{Protocol: corev1.ProtocolSCTP, HostIP: netip.MustParseAddr("192.0.2.7"), HostPort: 9, ContainerPort: 99},
	}
	var got []string
	for _, r := range Rules(pod, ms) {
		line := r.Chain + ": " + render(t, r.Exprs)
		if r.First {
			line = "insert " + line
		}
		got = append(got, line)
	}
	want := []string{
		"insert hostport-dnat: ip daddr 127.0.0.1/32 meta l4proto 6 th dport 54323 dnat to 10.42.0.9:8080",
		"hostport-dnat: meta l4proto 17 th dport 54323 dnat to 10.42.0.9:8080",
		"insert hostport-dnat: ip daddr 192.0.2.7/32 meta l4proto 132 th dport 9 dnat to 10.42.0.9:99",
		"hostport-postrouting: ip saddr 10.42.0.9/32 ip daddr 10.42.0.9/32 masquerade",
		"hostport-postrouting: ip saddr 127.0.0.1/32 ip daddr 10.42.0.9/32 masquerade",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("rules:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(want, "\n     "))
	}
}

func TestFixedRules(t *testing.T) {
	if got, want := render(t, JumpIfLocal()), "fib daddr type local jump hostport-dnat"; got != want {
		t.Errorf("JumpIfLocal: %q, want %q", got, want)
	}
	if got, want := render(t, Guard("cni0")), "iifname cni0 ip daddr 127.0.0.0/8 drop"; got != want {
		t.Errorf("Guard: %q, want %q", got, want)
	}
}

// render prints the expressions this package builds in nft's words, so
// the tests read like the ruleset; an expression it does not know fails
// the test.
func render(t *testing.T, exprs []expr.Any) string {
	t.Helper()
	var out []string
	field := ""
	var mask []byte
	for _, e := range exprs {
		switch e := e.(type) {
		case *expr.Payload:
			switch {
			case e.Base == expr.PayloadBaseNetworkHeader && e.Offset == 12:
				field = "ip saddr"
			case e.Base == expr.PayloadBaseNetworkHeader && e.Offset == 16:
				field = "ip daddr"
			case e.Base == expr.PayloadBaseTransportHeader && e.Offset == 2 && e.Len == 2:
				field = "th dport"
			default:
				t.Fatalf("payload %+v", e)
			}
			mask = nil
		case *expr.Meta:
			switch e.Key {
			case expr.MetaKeyL4PROTO:
				field = "meta l4proto"
			case expr.MetaKeyIIFNAME:
				field = "iifname"
			default:
				t.Fatalf("meta %+v", e)
			}
		case *expr.Fib:
			if !e.FlagDADDR || !e.ResultADDRTYPE {
				t.Fatalf("fib %+v", e)
			}
			field = "fib daddr type"
		case *expr.Bitwise:
			mask = e.Mask
		case *expr.Cmp:
			if e.Op != expr.CmpOpEq {
				t.Fatalf("cmp %+v", e)
			}
			var v string
			switch field {
			case "ip saddr", "ip daddr":
				bits := 32
				if mask != nil {
					bits = 0
					for _, b := range mask {
						for ; b != 0; b <<= 1 {
							bits++
						}
					}
				}
				v = netip.PrefixFrom(netip.AddrFrom4([4]byte(e.Data)), bits).String()
			case "th dport":
				v = fmt.Sprint(binary.BigEndian.Uint16(e.Data))
			case "meta l4proto":
				v = fmt.Sprint(e.Data[0])
			case "iifname":
				v = strings.TrimRight(string(e.Data), "\x00")
			case "fib daddr type":
				if binary.NativeEndian.Uint32(e.Data) != unix.RTN_LOCAL {
					t.Fatalf("fib type %v", e.Data)
				}
				v = "local"
			default:
				t.Fatalf("cmp without a field: %+v", e)
			}
			out = append(out, field+" "+v)
		case *expr.Immediate:
			if e.Register == 1 {
				field = netip.AddrFrom4([4]byte(e.Data)).String()
			} else {
				field += fmt.Sprintf(":%d", binary.BigEndian.Uint16(e.Data))
			}
		case *expr.NAT:
			if e.Type != expr.NATTypeDestNAT || e.RegAddrMin != 1 || e.RegProtoMin != 2 {
				t.Fatalf("nat %+v", e)
			}
			out = append(out, "dnat to "+field)
		case *expr.Masq:
			out = append(out, "masquerade")
		case *expr.Verdict:
			switch e.Kind {
			case expr.VerdictJump:
				out = append(out, "jump "+e.Chain)
			case expr.VerdictDrop:
				out = append(out, "drop")
			default:
				t.Fatalf("verdict %+v", e)
			}
		default:
			t.Fatalf("expression %T", e)
		}
	}
	return strings.Join(out, " ")
}
