package kubelet

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	utilsysctl "k8s.io/component-helpers/node/util/sysctl"
)

// Pod sysctls (spec.securityContext.sysctls), as upstream's kubelet: set
// in each container's OCI spec, which runc writes inside the container's
// namespaces (the pod's network namespace for net.*), and only those
// upstream calls safe, namespaced and unable to affect other pods or the
// node (pkg/kubelet/sysctl: the allowlist without
// --allowed-unsafe-sysctls, which kelp does not offer). A pod asking for
// another is rejected at admission, reason SysctlForbidden.
var safeSysctls = map[string]bool{
	"kernel.shm_rmid_forced":              true,
	"net.ipv4.ip_local_port_range":        true,
	"net.ipv4.tcp_syncookies":             true,
	"net.ipv4.ping_group_range":           true,
	"net.ipv4.ip_unprivileged_port_start": true,
	"net.ipv4.ip_local_reserved_ports":    true,
	"net.ipv4.tcp_keepalive_time":         true,
	"net.ipv4.tcp_fin_timeout":            true,
	"net.ipv4.tcp_keepalive_intvl":        true,
	"net.ipv4.tcp_keepalive_probes":       true,
	"net.ipv4.tcp_rmem":                   true,
	"net.ipv4.tcp_wmem":                   true,
}

const reasonSysctlForbidden = "SysctlForbidden"

// forbiddenSysctl says why the pod may not have one of its sysctls, or
// "" when it may have them all: not on the allowlist, or a sysctl of a
// namespace the pod shares with the node.
func forbiddenSysctl(pod *corev1.Pod) string {
	if pod.Spec.SecurityContext == nil {
		return ""
	}
	for _, s := range pod.Spec.SecurityContext.Sysctls {
		name := utilsysctl.NormalizeName(s.Name)
		// The sysctl's namespace as pod validation reads it
		// (component-helpers' table).
		ns, _, _ := utilsysctl.GetNamespace(name)
		switch {
		case !safeSysctls[name]:
			return fmt.Sprintf("forbidden sysctl: %q not allowlisted", s.Name)
		case ns == utilsysctl.NetNamespace && pod.Spec.HostNetwork:
			return fmt.Sprintf("forbidden sysctl: %q not allowed with host net enabled", s.Name)
		case ns == utilsysctl.IPCNamespace && pod.Spec.HostIPC:
			return fmt.Sprintf("forbidden sysctl: %q not allowed with host ipc enabled", s.Name)
		}
	}
	return ""
}

// podSysctls are the pod's sysctls for a container's OCI spec, by dotted
// name (admission has refused a pod with any other).
func podSysctls(pod *corev1.Pod) map[string]string {
	if pod.Spec.SecurityContext == nil || len(pod.Spec.SecurityContext.Sysctls) == 0 {
		return nil
	}
	out := map[string]string{}
	for _, s := range pod.Spec.SecurityContext.Sysctls {
		out[utilsysctl.NormalizeName(s.Name)] = s.Value
	}
	return out
}
