package defaults

import (
	"net/netip"
	"slices"

	"k8s.io/utils/ptr"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// service is SetDefaults_Service, plus two registry steps every client
// observes on a created Service (see serviceClusterIPs and serviceIPFamilies).
func Service(s *corev1.Service) {
	spec := &s.Spec
	if spec.SessionAffinity == "" {
		spec.SessionAffinity = corev1.ServiceAffinityNone
	}
	if spec.SessionAffinity == corev1.ServiceAffinityNone {
		// A config for an affinity that is off is meaningless; upstream drops it.
		spec.SessionAffinityConfig = nil
	}
	if spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		if spec.SessionAffinityConfig == nil || spec.SessionAffinityConfig.ClientIP == nil ||
			spec.SessionAffinityConfig.ClientIP.TimeoutSeconds == nil {
			spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{
				ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To(corev1.DefaultClientIPServiceAffinitySeconds)},
			}
		}
	}
	if spec.Type == "" {
		spec.Type = corev1.ServiceTypeClusterIP
	}
	for i := range spec.Ports {
		p := &spec.Ports[i]
		if p.Protocol == "" {
			p.Protocol = corev1.ProtocolTCP
		}
		if p.TargetPort == intstr.FromInt32(0) || p.TargetPort == intstr.FromString("") {
			p.TargetPort = intstr.FromInt32(p.Port)
		}
	}
	if externallyAccessible(s) && spec.ExternalTrafficPolicy == "" {
		spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	}
	if spec.InternalTrafficPolicy == nil {
		switch spec.Type {
		case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
			spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyCluster)
		}
	}
	if spec.Type == corev1.ServiceTypeLoadBalancer {
		if spec.AllocateLoadBalancerNodePorts == nil {
			spec.AllocateLoadBalancerNodePorts = ptr.To(true)
		}
		for i := range s.Status.LoadBalancer.Ingress {
			ing := &s.Status.LoadBalancer.Ingress[i]
			if ing.IP != "" && ing.IPMode == nil {
				ing.IPMode = ptr.To(corev1.LoadBalancerIPModeVIP)
			}
		}
	}
	serviceClusterIPs(s)
	serviceIPFamilies(s)
}

// externallyAccessible matches upstream's service.ExternallyAccessible: the
// externalTrafficPolicy field only means something for these services.
func externallyAccessible(s *corev1.Service) bool {
	return s.Spec.Type == corev1.ServiceTypeLoadBalancer ||
		s.Spec.Type == corev1.ServiceTypeNodePort ||
		(s.Spec.Type == corev1.ServiceTypeClusterIP && len(s.Spec.ExternalIPs) > 0)
}

// serviceClusterIPs keeps the v1 pair clusterIP / clusterIPs in step, as
// the upstream service strategy (NormalizeClusterIPs) does on create: a
// client may set either one and the API reports both. ExternalName services
// carry neither.
func serviceClusterIPs(s *corev1.Service) {
	spec := &s.Spec
	if spec.Type == corev1.ServiceTypeExternalName {
		return
	}
	if spec.ClusterIP != "" && len(spec.ClusterIPs) == 0 {
		spec.ClusterIPs = []string{spec.ClusterIP}
	}
	if spec.ClusterIP == "" && len(spec.ClusterIPs) > 0 {
		spec.ClusterIP = spec.ClusterIPs[0]
	}
}

// serviceIPFamilies fills ipFamilyPolicy and ipFamilies the way the upstream
// service registry's IP-family initialisation does on a single-stack IPv4
// cluster (kelp's only kind): SingleStack and [IPv4] for services that get a
// cluster IP, RequireDualStack for selectorless headless services (which
// upstream gives every configured family), nothing for ExternalName.
// Families already chosen by the client, or implied by the IPs it gave, are
// kept.
func serviceIPFamilies(s *corev1.Service) {
	spec := &s.Spec
	if spec.Type == corev1.ServiceTypeExternalName {
		return
	}
	headless := spec.ClusterIP == corev1.ClusterIPNone
	if spec.IPFamilyPolicy == nil {
		if headless && len(spec.Selector) == 0 {
			spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyRequireDualStack)
		} else {
			spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicySingleStack)
		}
	}
	if len(spec.IPFamilies) == 0 {
		if !headless {
			for _, ip := range spec.ClusterIPs {
				if a, err := netip.ParseAddr(ip); err == nil {
					if a.Is4() || a.Is4In6() {
						spec.IPFamilies = append(spec.IPFamilies, corev1.IPv4Protocol)
					} else {
						spec.IPFamilies = append(spec.IPFamilies, corev1.IPv6Protocol)
					}
				}
			}
		}
		if len(spec.IPFamilies) == 0 {
			spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
		}
	}
}

// endpoints is SetDefaults_Endpoints.
func Endpoints(e *corev1.Endpoints) {
	for i := range e.Subsets {
		for j := range e.Subsets[i].Ports {
			if e.Subsets[i].Ports[j].Protocol == "" {
				e.Subsets[i].Ports[j].Protocol = corev1.ProtocolTCP
			}
		}
	}
}

// endpointSlice is discovery/v1 SetDefaults_EndpointPort: unnamed ports get
// the empty name and TCP.
func EndpointSlice(s *discoveryv1.EndpointSlice) {
	for i := range s.Ports {
		p := &s.Ports[i]
		if p.Name == nil {
			p.Name = ptr.To("")
		}
		if p.Protocol == nil {
			p.Protocol = ptr.To(corev1.ProtocolTCP)
		}
	}
}

// CarryAllocatedServiceValues mirrors upstream's PatchAllocatedValues: a
// value the client left empty is taken from the stored Service when both
// versions still need it (no cluster IP for ExternalName or headless, node
// ports only for NodePort/LoadBalancer, a health-check port only for
// LoadBalancer with externalTrafficPolicy Local).
func CarryAllocatedServiceValues(s, old *corev1.Service) {
	needsClusterIP := func(x *corev1.Service) bool {
		return x.Spec.Type != corev1.ServiceTypeExternalName && x.Spec.ClusterIP != corev1.ClusterIPNone
	}
	if needsClusterIP(old) && needsClusterIP(s) {
		if s.Spec.ClusterIP == "" && len(s.Spec.ClusterIPs) == 0 {
			s.Spec.ClusterIP = old.Spec.ClusterIP
			s.Spec.ClusterIPs = append([]string(nil), old.Spec.ClusterIPs...)
		}
		if len(s.Spec.IPFamilies) == 0 {
			s.Spec.IPFamilies = append([]corev1.IPFamily(nil), old.Spec.IPFamilies...)
		}
		if s.Spec.IPFamilyPolicy == nil && old.Spec.IPFamilyPolicy != nil {
			s.Spec.IPFamilyPolicy = ptr.To(*old.Spec.IPFamilyPolicy)
		}
	}
	if needsNodePorts(old) && needsNodePorts(s) {
		// Ports are matched by name; a node port the new spec already uses
		// elsewhere is not reassigned.
		used := map[int32]bool{}
		for _, p := range s.Spec.Ports {
			if p.NodePort != 0 {
				used[p.NodePort] = true
			}
		}
		byName := map[string]int32{}
		for _, p := range old.Spec.Ports {
			byName[p.Name] = p.NodePort
		}
		for i := range s.Spec.Ports {
			p := &s.Spec.Ports[i]
			if p.NodePort == 0 {
				if v := byName[p.Name]; v != 0 && !used[v] {
					p.NodePort = v
					used[v] = true
				}
			}
		}
	}
	if needsHealthCheckNodePort(old) && needsHealthCheckNodePort(s) && s.Spec.HealthCheckNodePort == 0 {
		s.Spec.HealthCheckNodePort = old.Spec.HealthCheckNodePort
	}
}

// DropTypeDependentServiceFields mirrors upstream's update rule for a
// Service whose type changes: a field the new type has no use for is
// wiped, but only if the client left it as stored (it may have been
// filled in by the server, so a client that changes only the type, as
// kubectl edit and the conformance suite do, is not refused for values it
// never chose). A value the client changed is kept, for validation to
// judge.
func DropTypeDependentServiceFields(s, old *corev1.Service) {
	needsClusterIP := func(x *corev1.Service) bool { return x.Spec.Type != corev1.ServiceTypeExternalName }
	if needsClusterIP(old) && !needsClusterIP(s) {
		if s.Spec.ClusterIP == old.Spec.ClusterIP && slices.Equal(s.Spec.ClusterIPs, old.Spec.ClusterIPs) {
			s.Spec.ClusterIP, s.Spec.ClusterIPs = "", nil
		}
		if slices.Equal(s.Spec.IPFamilies, old.Spec.IPFamilies) {
			s.Spec.IPFamilies = nil
		}
		if ptr.Equal(s.Spec.IPFamilyPolicy, old.Spec.IPFamilyPolicy) {
			s.Spec.IPFamilyPolicy = nil
		}
	}
	if needsNodePorts(old) && !needsNodePorts(s) && sameNodePorts(s, old) {
		for i := range s.Spec.Ports {
			s.Spec.Ports[i].NodePort = 0
		}
	}
	if needsHealthCheckNodePort(old) && !needsHealthCheckNodePort(s) && s.Spec.HealthCheckNodePort == old.Spec.HealthCheckNodePort {
		s.Spec.HealthCheckNodePort = 0
	}
	isLB := func(x *corev1.Service) bool { return x.Spec.Type == corev1.ServiceTypeLoadBalancer }
	if isLB(old) && !isLB(s) {
		if ptr.Equal(s.Spec.AllocateLoadBalancerNodePorts, old.Spec.AllocateLoadBalancerNodePorts) {
			s.Spec.AllocateLoadBalancerNodePorts = nil
		}
		if ptr.Equal(s.Spec.LoadBalancerClass, old.Spec.LoadBalancerClass) {
			s.Spec.LoadBalancerClass = nil
		}
	}
	externallyAccessible := func(x *corev1.Service) bool {
		return needsNodePorts(x) || (x.Spec.Type == corev1.ServiceTypeClusterIP && len(x.Spec.ExternalIPs) > 0)
	}
	if externallyAccessible(old) && !externallyAccessible(s) && s.Spec.ExternalTrafficPolicy == old.Spec.ExternalTrafficPolicy {
		s.Spec.ExternalTrafficPolicy = ""
	}
	if needsClusterIP(old) && !needsClusterIP(s) && ptr.Equal(s.Spec.InternalTrafficPolicy, old.Spec.InternalTrafficPolicy) {
		s.Spec.InternalTrafficPolicy = nil
	}
}

// needsNodePorts: NodePort and LoadBalancer Services have node ports.
func needsNodePorts(s *corev1.Service) bool {
	return s.Spec.Type == corev1.ServiceTypeNodePort || s.Spec.Type == corev1.ServiceTypeLoadBalancer
}

// needsHealthCheckNodePort: a LoadBalancer that keeps traffic on the
// node it arrives at has a health-check node port.
func needsHealthCheckNodePort(s *corev1.Service) bool {
	return s.Spec.Type == corev1.ServiceTypeLoadBalancer && s.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
}

// sameNodePorts: every port the new spec shares with the old (by index,
// as the client edits a list it read) has the node port stored.
func sameNodePorts(s, old *corev1.Service) bool {
	for i := range min(len(s.Spec.Ports), len(old.Spec.Ports)) {
		if s.Spec.Ports[i].NodePort != old.Spec.Ports[i].NodePort {
			return false
		}
	}
	return true
}
