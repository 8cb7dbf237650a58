package endpoints

import (
	"fmt"
	"k8s.io/kubectl/pkg/util/podutils"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// podIncluded is upstream's ShouldPodBeInEndpoints, reduced to what kelp
// needs: a pod without an IP has nothing to route to, and a pod that has
// run to completion never serves again. Terminating pods stay in; each
// writer decides what to do with them.
func podIncluded(pod *corev1.Pod) bool {
	return pod.Status.PodIP != "" && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}

// podIP returns the pod's address of the given family, or "". status.podIP
// alone is accepted for pods whose podIPs was never filled in.
func podIP(pod *corev1.Pod, family corev1.IPFamily) string {
	ips := make([]string, 0, len(pod.Status.PodIPs)+1)
	for _, ip := range pod.Status.PodIPs {
		ips = append(ips, ip.IP)
	}
	if len(ips) == 0 {
		ips = append(ips, pod.Status.PodIP)
	}
	for _, ip := range ips {
		a, err := netip.ParseAddr(ip)
		if err != nil {
			continue
		}
		// A v4-mapped v6 address counts as IPv4, as net.IP.To4 sees it.
		if (a.Is4() || a.Is4In6()) == (family == corev1.IPv4Protocol) {
			return ip
		}
	}
	return ""
}

// serviceFamilies lists the address families endpoints are published for.
func serviceFamilies(svc *corev1.Service) []corev1.IPFamily {
	if len(svc.Spec.IPFamilies) > 0 {
		return svc.Spec.IPFamilies
	}
	return []corev1.IPFamily{corev1.IPv4Protocol}
}

// hostnameFor is set only when the pod asked for a DNS name under this
// service (spec.subdomain names the service), as upstream.
func hostnameFor(svc *corev1.Service, pod *corev1.Pod) string {
	if pod.Spec.Hostname != "" && pod.Spec.Subdomain == svc.Name && pod.Namespace == svc.Namespace {
		return pod.Spec.Hostname
	}
	return ""
}

// resolvedPort is one service port as it lands on one pod. Pods of the
// same service can resolve a named targetPort to different numbers, so
// the resolved list, not the service's, decides which slice or subset a
// pod goes into.
type resolvedPort struct {
	name        string
	port        int32
	protocol    corev1.Protocol
	appProtocol *string
}

func protocolOrTCP(p corev1.Protocol) corev1.Protocol {
	if p == "" {
		return corev1.ProtocolTCP
	}
	return p
}

// podPorts resolves every service port for pod. A named port the pod does
// not declare (with the same protocol) is left out for that pod rather
// than dropping the pod, as upstream does.
func podPorts(svc *corev1.Service, pod *corev1.Pod) []resolvedPort {
	out := make([]resolvedPort, 0, len(svc.Spec.Ports))
	for _, sp := range svc.Spec.Ports {
		proto := protocolOrTCP(sp.Protocol)
		n, ok := findPort(pod, sp.TargetPort, sp.Port, proto)
		if !ok {
			continue
		}
		out = append(out, resolvedPort{name: sp.Name, port: n, protocol: proto, appProtocol: sp.AppProtocol})
	}
	return out
}

func findPort(pod *corev1.Pod, target intstr.IntOrString, servicePort int32, proto corev1.Protocol) (int32, bool) {
	if target.Type == intstr.String {
		for _, c := range pod.Spec.Containers {
			for _, p := range c.Ports {
				if p.Name == target.StrVal && protocolOrTCP(p.Protocol) == proto {
					return p.ContainerPort, true
				}
			}
		}
		return 0, false
	}
	// The API server defaults targetPort to port; an unset one here means
	// the object skipped defaulting, and port is what it would have got.
	if target.IntVal == 0 {
		return servicePort, true
	}
	return target.IntVal, true
}

// portsKey identifies a resolved port list; order matters because it is
// the order the ports are published in.
func portsKey(ports []resolvedPort) string {
	var b strings.Builder
	for _, p := range ports {
		app := "-"
		if p.appProtocol != nil {
			app = "=" + *p.appProtocol
		}
		fmt.Fprintf(&b, "%q/%d/%s%s;", p.name, p.port, p.protocol, app)
	}
	return b.String()
}

func ptrTo[T any](v T) *T { return &v }

func derefOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

func slicePorts(ports []resolvedPort) []discoveryv1.EndpointPort {
	out := make([]discoveryv1.EndpointPort, 0, len(ports))
	for _, p := range ports {
		ep := discoveryv1.EndpointPort{Name: ptrTo(p.name), Port: ptrTo(p.port), Protocol: ptrTo(p.protocol)}
		if p.appProtocol != nil {
			ep.AppProtocol = ptrTo(*p.appProtocol)
		}
		out = append(out, ep)
	}
	return out
}

func fromSlicePorts(ports []discoveryv1.EndpointPort) []resolvedPort {
	out := make([]resolvedPort, 0, len(ports))
	for _, p := range ports {
		out = append(out, resolvedPort{name: derefOr(p.Name, ""), port: derefOr(p.Port, 0),
			protocol: derefOr(p.Protocol, ""), appProtocol: p.AppProtocol})
	}
	return out
}

func legacyPorts(ports []resolvedPort) []corev1.EndpointPort {
	out := make([]corev1.EndpointPort, 0, len(ports))
	for _, p := range ports {
		ep := corev1.EndpointPort{Name: p.name, Port: p.port, Protocol: p.protocol}
		if p.appProtocol != nil {
			ep.AppProtocol = ptrTo(*p.appProtocol)
		}
		out = append(out, ep)
	}
	return out
}

func podRef(pod *corev1.Pod) *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}
}

// sliceEndpoint is pod's entry in an EndpointSlice. Serving tracks
// readiness alone so that consumers can keep using a terminating pod
// while it drains; ready additionally turns false once the pod is
// terminating, which is what old consumers of "ready" expect.
// publishNotReadyAddresses forces both, as upstream.
func sliceEndpoint(svc *corev1.Service, pod *corev1.Pod, ip string) discoveryv1.Endpoint {
	terminating := pod.DeletionTimestamp != nil
	serving := svc.Spec.PublishNotReadyAddresses || podutils.IsPodReady(pod)
	ready := svc.Spec.PublishNotReadyAddresses || (serving && !terminating)
	ep := discoveryv1.Endpoint{
		Addresses:  []string{ip},
		Conditions: discoveryv1.EndpointConditions{Ready: ptrTo(ready), Serving: ptrTo(serving), Terminating: ptrTo(terminating)},
		TargetRef:  podRef(pod),
	}
	if pod.Spec.NodeName != "" {
		ep.NodeName = ptrTo(pod.Spec.NodeName)
	}
	if h := hostnameFor(svc, pod); h != "" {
		ep.Hostname = ptrTo(h)
	}
	return ep
}

// legacyAddress is pod's entry in an Endpoints subset.
func legacyAddress(svc *corev1.Service, pod *corev1.Pod, ip string) corev1.EndpointAddress {
	a := corev1.EndpointAddress{IP: ip, Hostname: hostnameFor(svc, pod), TargetRef: podRef(pod)}
	if pod.Spec.NodeName != "" {
		a.NodeName = ptrTo(pod.Spec.NodeName)
	}
	return a
}
