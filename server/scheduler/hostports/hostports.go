// Package hostports is the NodePorts rule shared by the scheduler (which
// places pods on nodes with free host ports) and the kubelet (which
// refuses, at admission, a pod bound to its node whose host ports are
// taken): which host ports a pod asks for, and when two of them
// conflict. It is a leaf: the agent imports it without the scheduler.
package hostports

import v1 "k8s.io/api/core/v1"

// Port is a host port as the NodePorts rule sees it: an empty hostIP is
// 0.0.0.0 (every address) and an empty protocol is TCP.
type Port struct {
	IP       string
	Protocol v1.Protocol
	Port     int32
}

// anyIP is the address that conflicts with every address.
const anyIP = "0.0.0.0"

// Of returns the host ports the pod asks for, normalized, as upstream's
// GetHostPorts: those of its containers and of its restartable (sidecar)
// init containers, which run as long as the pod.
func Of(pod *v1.Pod) []Port {
	var out []Port
	for _, p := range ContainerPorts(pod) {
		out = append(out, Normalize(p))
	}
	return out
}

// ContainerPorts returns the container ports of the pod that have a host
// port, as written, from the containers Of counts: the node maps exactly
// the host ports the scheduler and the kubelet's admission reserve
// (netplane/hostport).
func ContainerPorts(pod *v1.Pod) []v1.ContainerPort {
	var out []v1.ContainerPort
	add := func(c *v1.Container) {
		for _, p := range c.Ports {
			if p.HostPort > 0 {
				out = append(out, p)
			}
		}
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			add(c)
		}
	}
	for i := range pod.Spec.Containers {
		add(&pod.Spec.Containers[i])
	}
	return out
}

// Normalize gives the container port's host side its defaults.
func Normalize(p v1.ContainerPort) Port {
	ip := p.HostIP
	if ip == "" {
		ip = anyIP
	}
	proto := p.Protocol
	if proto == "" {
		proto = v1.ProtocolTCP
	}
	return Port{IP: ip, Protocol: proto, Port: p.HostPort}
}

// Used counts the host ports in use on a node, by the pods holding them.
type Used map[Port]int

// Add records the ports of one pod.
func (u Used) Add(ports []Port) {
	for _, p := range ports {
		u[p]++
	}
}

// Remove forgets the ports of one pod.
func (u Used) Remove(ports []Port) {
	for _, p := range ports {
		if u[p]--; u[p] <= 0 {
			delete(u, p)
		}
	}
}

// Conflict reports whether want conflicts with a used port, with the
// upstream rule that 0.0.0.0 conflicts with every address of the same
// protocol and port.
func (u Used) Conflict(want Port) bool {
	if len(u) == 0 {
		return false
	}
	if want.IP == anyIP {
		for used := range u {
			if used.Port == want.Port && used.Protocol == want.Protocol {
				return true
			}
		}
		return false
	}
	if u[want] > 0 {
		return true
	}
	return u[Port{IP: anyIP, Protocol: want.Protocol, Port: want.Port}] > 0
}

// Fits reports whether none of want conflicts with a used port.
func (u Used) Fits(want []Port) bool {
	for _, p := range want {
		if u.Conflict(p) {
			return false
		}
	}
	return true
}
