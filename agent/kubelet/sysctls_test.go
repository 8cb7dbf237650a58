package kubelet

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func sysctlPod(hostNetwork bool, sysctls ...corev1.Sysctl) *corev1.Pod {
	p := testPod("s", "app")
	p.Spec.HostNetwork = hostNetwork
	p.Spec.SecurityContext = &corev1.PodSecurityContext{Sysctls: sysctls}
	return p
}

// Safe sysctls pass admission and reach the container's spec by their
// dotted names; any other is SysctlForbidden, as are net.* sysctls of a
// pod on the host's network.
func TestSysctls(t *testing.T) {
	ok := sysctlPod(false, corev1.Sysctl{Name: "kernel.shm_rmid_forced", Value: "1"},
		corev1.Sysctl{Name: "net/ipv4/ip_local_port_range", Value: "1024 65535"})
	if a := decide(ok, nil, nil); !a.ok {
		t.Fatalf("safe sysctls rejected: %+v", a)
	}
	got := podSysctls(ok)
	if got["kernel.shm_rmid_forced"] != "1" || got["net.ipv4.ip_local_port_range"] != "1024 65535" || len(got) != 2 {
		t.Errorf("sysctls for the spec: %v", got)
	}
	for _, tc := range []struct {
		pod  *corev1.Pod
		want string
	}{
		{sysctlPod(false, corev1.Sysctl{Name: "kernel.msgmax", Value: "10000"}), `"kernel.msgmax" not allowlisted`},
		{sysctlPod(true, corev1.Sysctl{Name: "net.ipv4.tcp_syncookies", Value: "1"}), "not allowed with host net enabled"},
	} {
		a := decide(tc.pod, nil, nil)
		if a.ok || a.reason != reasonSysctlForbidden || !strings.Contains(a.message, tc.want) {
			t.Errorf("%v: %+v, want SysctlForbidden %q", tc.pod.Spec.SecurityContext.Sysctls, a, tc.want)
		}
	}
}
