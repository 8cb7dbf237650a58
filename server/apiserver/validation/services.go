package validation

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var (
	supportedServiceTypes = []corev1.ServiceType{
		corev1.ServiceTypeClusterIP, corev1.ServiceTypeExternalName, corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeNodePort,
	}
	supportedSessionAffinities  = []corev1.ServiceAffinity{corev1.ServiceAffinityClientIP, corev1.ServiceAffinityNone}
	supportedIPFamilies         = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	supportedIPFamilyPolicies   = []corev1.IPFamilyPolicy{corev1.IPFamilyPolicySingleStack, corev1.IPFamilyPolicyPreferDualStack, corev1.IPFamilyPolicyRequireDualStack}
	supportedTrafficPolicies    = []corev1.ServiceExternalTrafficPolicy{corev1.ServiceExternalTrafficPolicyCluster, corev1.ServiceExternalTrafficPolicyLocal}
	supportedInternalPolicies   = []corev1.ServiceInternalTrafficPolicy{corev1.ServiceInternalTrafficPolicyCluster, corev1.ServiceInternalTrafficPolicyLocal}
	supportedTrafficDistributes = []string{corev1.ServiceTrafficDistributionPreferClose, corev1.ServiceTrafficDistributionPreferSameZone, corev1.ServiceTrafficDistributionPreferSameNode}
)

// maxClientIPServiceAffinitySeconds is one day, upstream's cap on ClientIP
// session stickiness.
const maxClientIPServiceAffinitySeconds = 86400

func isHeadless(s *corev1.Service) bool {
	return s.Spec.ClusterIP == corev1.ClusterIPNone ||
		(len(s.Spec.ClusterIPs) == 1 && s.Spec.ClusterIPs[0] == corev1.ClusterIPNone)
}

func externallyAccessible(s *corev1.Service) bool {
	return s.Spec.Type == corev1.ServiceTypeLoadBalancer || s.Spec.Type == corev1.ServiceTypeNodePort ||
		(s.Spec.Type == corev1.ServiceTypeClusterIP && len(s.Spec.ExternalIPs) > 0)
}

// validateService is upstream's ValidateService for v1 objects. It expects
// the object to have been defaulted (type, sessionAffinity, protocols,
// internalTrafficPolicy are required here because defaulting sets them).
func Service(s *corev1.Service) field.ErrorList {
	allErrs := validateObjectMeta(&s.ObjectMeta, true, nameIsDNS1035Label)
	spec := &s.Spec
	headless := isHeadless(s)

	if len(spec.Ports) == 0 && !headless && spec.Type != corev1.ServiceTypeExternalName {
		allErrs = append(allErrs, field.Required(specPath.Child("ports"), ""))
	}
	switch spec.Type {
	case corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeNodePort:
		if headless {
			allErrs = append(allErrs, field.Invalid(specPath.Child("clusterIPs").Index(0), corev1.ClusterIPNone,
				fmt.Sprintf("may not be set to 'None' for %s services", spec.Type)))
		}
	case corev1.ServiceTypeExternalName:
		if spec.ClusterIP != "" {
			allErrs = append(allErrs, field.Forbidden(specPath.Child("clusterIP"), "may not be set for ExternalName services"))
		}
		if len(spec.ClusterIPs) > 0 {
			allErrs = append(allErrs, field.Forbidden(specPath.Child("clusterIPs"), "may not be set for ExternalName services"))
		}
		if len(spec.IPFamilies) > 0 {
			allErrs = append(allErrs, field.Forbidden(specPath.Child("ipFamilies"), "may not be set for ExternalName services"))
		}
		if spec.IPFamilyPolicy != nil {
			allErrs = append(allErrs, field.Forbidden(specPath.Child("ipFamilyPolicy"), "may not be set for ExternalName services"))
		}
		// A CNAME target; a trailing dot marks it fully qualified.
		if cname := strings.TrimSuffix(spec.ExternalName, "."); cname != "" {
			allErrs = append(allErrs, validateDNS1123Subdomain(cname, specPath.Child("externalName"))...)
		} else {
			allErrs = append(allErrs, field.Required(specPath.Child("externalName"), ""))
		}
	}

	portNames := sets.New[string]()
	portsPath := specPath.Child("ports")
	for i := range spec.Ports {
		allErrs = append(allErrs, validateServicePort(&spec.Ports[i], len(spec.Ports) > 1, portNames, portsPath.Index(i))...)
	}
	if spec.Selector != nil {
		allErrs = append(allErrs, validateLabelsMap(spec.Selector, specPath.Child("selector"))...)
	}

	sa := specPath.Child("sessionAffinity")
	if spec.SessionAffinity == "" {
		allErrs = append(allErrs, field.Required(sa, ""))
	} else if !slices.Contains(supportedSessionAffinities, spec.SessionAffinity) {
		allErrs = append(allErrs, field.NotSupported(sa, spec.SessionAffinity, supportedSessionAffinities))
	}
	switch spec.SessionAffinity {
	case corev1.ServiceAffinityClientIP:
		cfg := specPath.Child("sessionAffinityConfig")
		if spec.SessionAffinityConfig == nil || spec.SessionAffinityConfig.ClientIP == nil || spec.SessionAffinityConfig.ClientIP.TimeoutSeconds == nil {
			allErrs = append(allErrs, field.Required(cfg.Child("clientIP", "timeoutSeconds"), "must be specified when sessionAffinity is ClientIP"))
		} else if t := *spec.SessionAffinityConfig.ClientIP.TimeoutSeconds; t <= 0 || t > maxClientIPServiceAffinitySeconds {
			allErrs = append(allErrs, field.Invalid(cfg.Child("clientIP", "timeoutSeconds"), t,
				fmt.Sprintf("must be greater than 0 and less than %d", maxClientIPServiceAffinitySeconds)))
		}
	case corev1.ServiceAffinityNone:
		if spec.SessionAffinityConfig != nil {
			allErrs = append(allErrs, field.Forbidden(specPath.Child("sessionAffinityConfig"),
				fmt.Sprintf("must not be set when session affinity is %s", corev1.ServiceAffinityNone)))
		}
	}

	allErrs = append(allErrs, validateServiceClusterIPs(s)...)

	for i, ip := range spec.ExternalIPs {
		p := specPath.Child("externalIPs").Index(i)
		if errs := validateIP(ip, p); len(errs) != 0 {
			allErrs = append(allErrs, errs...)
		} else {
			allErrs = append(allErrs, validateNonSpecialIP(ip, p)...)
		}
	}

	tp := specPath.Child("type")
	if spec.Type == "" {
		allErrs = append(allErrs, field.Required(tp, ""))
	} else if !slices.Contains(supportedServiceTypes, spec.Type) {
		allErrs = append(allErrs, field.NotSupported(tp, spec.Type, supportedServiceTypes))
	}
	// Node ports exist only on services reachable through nodes.
	if spec.Type == corev1.ServiceTypeClusterIP || spec.Type == corev1.ServiceTypeExternalName {
		for i := range spec.Ports {
			if spec.Ports[i].NodePort != 0 {
				allErrs = append(allErrs, field.Forbidden(portsPath.Index(i).Child("nodePort"), fmt.Sprintf("may not be used when `type` is '%s'", spec.Type)))
			}
		}
	}
	nodePorts := sets.New[string]()
	ports := sets.New[string]()
	for i, p := range spec.Ports {
		if p.NodePort != 0 {
			key := fmt.Sprintf("%s/%d", p.Protocol, p.NodePort)
			if nodePorts.Has(key) {
				allErrs = append(allErrs, field.Duplicate(portsPath.Index(i).Child("nodePort"), p.NodePort))
			}
			nodePorts.Insert(key)
		}
		key := fmt.Sprintf("%s/%d", p.Protocol, p.Port)
		if ports.Has(key) {
			allErrs = append(allErrs, field.Duplicate(portsPath.Index(i), corev1.ServicePort{Protocol: p.Protocol, Port: p.Port}))
		}
		ports.Insert(key)
	}

	if len(spec.LoadBalancerSourceRanges) > 0 {
		p := specPath.Child("LoadBalancerSourceRanges") // sic: upstream's path
		if spec.Type != corev1.ServiceTypeLoadBalancer {
			allErrs = append(allErrs, field.Forbidden(p, "may only be used when `type` is 'LoadBalancer'"))
		}
		for i, r := range spec.LoadBalancerSourceRanges {
			allErrs = append(allErrs, validateCIDR(strings.TrimSpace(r), p.Index(i))...)
		}
	}
	if spec.AllocateLoadBalancerNodePorts != nil && spec.Type != corev1.ServiceTypeLoadBalancer {
		allErrs = append(allErrs, field.Forbidden(specPath.Child("allocateLoadBalancerNodePorts"), "may only be used when `type` is 'LoadBalancer'"))
	}
	if spec.Type == corev1.ServiceTypeLoadBalancer && spec.AllocateLoadBalancerNodePorts == nil {
		allErrs = append(allErrs, field.Required(specPath.Child("allocateLoadBalancerNodePorts"), ""))
	}
	if spec.LoadBalancerClass != nil {
		if spec.Type == corev1.ServiceTypeLoadBalancer {
			allErrs = append(allErrs, validateQualifiedName(*spec.LoadBalancerClass, specPath.Child("loadBalancerClass"))...)
		} else {
			allErrs = append(allErrs, field.Forbidden(specPath.Child("loadBalancerClass"), "may only be used when `type` is 'LoadBalancer'"))
		}
	}

	etp := specPath.Child("externalTrafficPolicy")
	if !externallyAccessible(s) {
		if spec.ExternalTrafficPolicy != "" {
			allErrs = append(allErrs, field.Invalid(etp, spec.ExternalTrafficPolicy, "may only be set for externally-accessible services"))
		}
	} else if spec.ExternalTrafficPolicy == "" {
		allErrs = append(allErrs, field.Required(etp, ""))
	} else if !slices.Contains(supportedTrafficPolicies, spec.ExternalTrafficPolicy) {
		allErrs = append(allErrs, field.NotSupported(etp, spec.ExternalTrafficPolicy, supportedTrafficPolicies))
	}
	hc := specPath.Child("healthCheckNodePort")
	needsHealthCheck := spec.Type == corev1.ServiceTypeLoadBalancer && spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
	if !needsHealthCheck && spec.HealthCheckNodePort != 0 {
		allErrs = append(allErrs, field.Invalid(hc, spec.HealthCheckNodePort, "may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'"))
	}
	if needsHealthCheck && spec.HealthCheckNodePort != 0 {
		// 0 means "allocate one"; the allocator fills it in.
		for _, msg := range validation.IsValidPortNum(int(spec.HealthCheckNodePort)) {
			allErrs = append(allErrs, field.Invalid(hc, spec.HealthCheckNodePort, msg))
		}
	}
	itp := specPath.Child("internalTrafficPolicy")
	if spec.InternalTrafficPolicy == nil {
		switch spec.Type {
		case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
			allErrs = append(allErrs, field.Required(itp, ""))
		}
	} else if !slices.Contains(supportedInternalPolicies, *spec.InternalTrafficPolicy) {
		allErrs = append(allErrs, field.NotSupported(itp, *spec.InternalTrafficPolicy, supportedInternalPolicies))
	}
	if td := spec.TrafficDistribution; td != nil && !slices.Contains(supportedTrafficDistributes, *td) {
		allErrs = append(allErrs, field.NotSupported(specPath.Child("trafficDistribution"), *td, supportedTrafficDistributes))
	}
	return allErrs
}

func validateServicePort(sp *corev1.ServicePort, requireName bool, names sets.Set[string], fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	// With several ports, endpoints and clients tell them apart by name.
	if requireName && sp.Name == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("name"), ""))
	} else if sp.Name != "" {
		allErrs = append(allErrs, validateDNS1123Label(sp.Name, fldPath.Child("name"))...)
		if names.Has(sp.Name) {
			allErrs = append(allErrs, field.Duplicate(fldPath.Child("name"), sp.Name))
		} else {
			names.Insert(sp.Name)
		}
	}
	for _, msg := range validation.IsValidPortNum(int(sp.Port)) {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("port"), sp.Port, msg))
	}
	allErrs = append(allErrs, validateProtocol(sp.Protocol, fldPath.Child("protocol"))...)
	allErrs = append(allErrs, validatePortNumOrName(sp.TargetPort, fldPath.Child("targetPort"))...)
	if sp.AppProtocol != nil {
		allErrs = append(allErrs, validateQualifiedName(*sp.AppProtocol, fldPath.Child("appProtocol"))...)
	}
	if sp.NodePort != 0 {
		for _, msg := range validation.IsValidPortNum(int(sp.NodePort)) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("nodePort"), sp.NodePort, msg))
		}
	}
	return allErrs
}

// validateServiceClusterIPs is ValidateServiceClusterIPsRelatedFields:
// clusterIP and clusterIPs agree, every IP is valid (or the lone "None"),
// at most one IP per family, and families match the IPs.
func validateServiceClusterIPs(s *corev1.Service) field.ErrorList {
	spec := &s.Spec
	if spec.Type == corev1.ServiceTypeExternalName {
		return nil
	}
	var allErrs field.ErrorList
	ipsPath := specPath.Child("clusterIPs")
	if spec.ClusterIP != "" {
		if len(spec.ClusterIPs) == 0 {
			allErrs = append(allErrs, field.Required(ipsPath, ""))
		} else if spec.ClusterIPs[0] != spec.ClusterIP {
			allErrs = append(allErrs, field.Invalid(ipsPath, spec.ClusterIPs, "first value must match `clusterIP`"))
		}
	} else if len(spec.ClusterIPs) != 0 {
		allErrs = append(allErrs, field.Invalid(ipsPath, spec.ClusterIPs, "must be empty when `clusterIP` is not specified"))
	}
	fams := sets.New[corev1.IPFamily]()
	for i, f := range spec.IPFamilies {
		p := specPath.Child("ipFamilies").Index(i)
		if !slices.Contains(supportedIPFamilies, f) {
			allErrs = append(allErrs, field.NotSupported(p, f, supportedIPFamilies))
		}
		if fams.Has(f) {
			allErrs = append(allErrs, field.Duplicate(p, f))
		}
		fams.Insert(f)
	}
	if spec.IPFamilyPolicy != nil && !slices.Contains(supportedIPFamilyPolicies, *spec.IPFamilyPolicy) {
		allErrs = append(allErrs, field.NotSupported(specPath.Child("ipFamilyPolicy"), *spec.IPFamilyPolicy, supportedIPFamilyPolicies))
	}
	invalid := false
	for i, ip := range spec.ClusterIPs {
		if i == 0 && ip == corev1.ClusterIPNone {
			if len(spec.ClusterIPs) > 1 {
				invalid = true
				allErrs = append(allErrs, field.Invalid(ipsPath, spec.ClusterIPs, "'None' must be the first and only value"))
			}
			continue
		}
		if errs := validateIP(ip, ipsPath.Index(i)); len(errs) > 0 {
			invalid = true
			allErrs = append(allErrs, errs...)
		}
	}
	if len(spec.ClusterIPs) > 2 {
		allErrs = append(allErrs, field.Invalid(ipsPath, spec.ClusterIPs, "may only hold up to 2 values"))
	}
	if invalid {
		return allErrs
	}
	if len(spec.ClusterIPs) == 2 && ipIs6(spec.ClusterIPs[0]) == ipIs6(spec.ClusterIPs[1]) {
		allErrs = append(allErrs, field.Invalid(ipsPath, spec.ClusterIPs, "may specify no more than one IP for each IP family"))
	}
	if !isHeadless(s) {
		for i, ip := range spec.ClusterIPs {
			if i >= len(spec.IPFamilies) {
				break
			}
			if spec.IPFamilies[i] == corev1.IPv4Protocol && ipIs6(ip) {
				allErrs = append(allErrs, field.Invalid(ipsPath.Index(i), ip, fmt.Sprintf("expected an IPv4 value as indicated by `ipFamilies[%v]`", i)))
			}
			if spec.IPFamilies[i] == corev1.IPv6Protocol && !ipIs6(ip) {
				allErrs = append(allErrs, field.Invalid(ipsPath.Index(i), ip, fmt.Sprintf("expected an IPv6 value as indicated by `ipFamilies[%v]`", i)))
			}
		}
	}
	return allErrs
}

func ipIs6(ip string) bool {
	a, err := netip.ParseAddr(ip)
	return err == nil && a.Is6() && !a.Is4In6()
}

// validateNonSpecialIP rejects addresses that can never be a service or
// endpoint destination.
func validateNonSpecialIP(ip string, fldPath *field.Path) field.ErrorList {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return nil // reported as invalid elsewhere
	}
	a = a.Unmap()
	switch {
	case a.IsUnspecified():
		return field.ErrorList{field.Invalid(fldPath, ip, fmt.Sprintf("may not be unspecified (%v)", ip))}
	case a.IsLoopback():
		return field.ErrorList{field.Invalid(fldPath, ip, "may not be in the loopback range (127.0.0.0/8, ::1/128)")}
	case a.IsLinkLocalUnicast():
		return field.ErrorList{field.Invalid(fldPath, ip, "may not be in the link-local range (169.254.0.0/16, fe80::/10)")}
	case a.IsLinkLocalMulticast():
		return field.ErrorList{field.Invalid(fldPath, ip, "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)")}
	}
	return nil
}

// validateServiceUpdate: the cluster IP is the service's identity for
// clients, so it cannot change once allocated, except when the service
// becomes or stops being ExternalName (which has no cluster IP). A second
// (dual-stack) IP may be added or released.
func ServiceUpdate(newS, oldS *corev1.Service) field.ErrorList {
	allErrs := validateObjectMetaUpdate(&newS.ObjectMeta, &oldS.ObjectMeta)
	externalName := newS.Spec.Type == corev1.ServiceTypeExternalName || oldS.Spec.Type == corev1.ServiceTypeExternalName
	if !externalName && oldS.Spec.ClusterIP != "" && newS.Spec.ClusterIP != oldS.Spec.ClusterIP {
		allErrs = append(allErrs, field.Invalid(specPath.Child("clusterIP"), newS.Spec.ClusterIP, fieldImmutableMsg))
	}
	if !externalName && !(isHeadless(oldS) && isHeadless(newS)) {
		oldIPs, newIPs := oldS.Spec.ClusterIPs, newS.Spec.ClusterIPs
		ipsPath := specPath.Child("clusterIPs")
		switch {
		case len(oldIPs) == len(newIPs):
			// The primary is covered by the clusterIP check above.
			for i := 1; i < len(oldIPs); i++ {
				if oldIPs[i] != newIPs[i] {
					allErrs = append(allErrs, field.Invalid(ipsPath.Index(i), newIPs, "may not change once set"))
				}
			}
		case len(oldIPs) > len(newIPs) && len(newIPs) == 1:
			if newS.Spec.IPFamilyPolicy == nil || *newS.Spec.IPFamilyPolicy != corev1.IPFamilyPolicySingleStack {
				allErrs = append(allErrs, field.Invalid(specPath.Child("ipFamilyPolicy"), newS.Spec.IPFamilyPolicy,
					"must be set to 'SingleStack' when releasing the secondary clusterIP"))
			}
		}
		if !isHeadless(oldS) && !isHeadless(newS) && len(oldS.Spec.IPFamilies) > 0 && len(newS.Spec.IPFamilies) > 0 &&
			oldS.Spec.IPFamilies[0] != newS.Spec.IPFamilies[0] {
			allErrs = append(allErrs, field.Invalid(specPath.Child("ipFamilies").Index(0), newS.Spec.IPFamilies, "may not change once set"))
		}
	}
	if oldS.Spec.Type == corev1.ServiceTypeLoadBalancer && newS.Spec.Type == corev1.ServiceTypeLoadBalancer &&
		!ptrEqual(oldS.Spec.LoadBalancerClass, newS.Spec.LoadBalancerClass) {
		allErrs = append(allErrs, field.Invalid(specPath.Child("loadBalancerClass"), newS.Spec.LoadBalancerClass, "may not change once set"))
	}
	oldHC := oldS.Spec.Type == corev1.ServiceTypeLoadBalancer && oldS.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
	newHC := newS.Spec.Type == corev1.ServiceTypeLoadBalancer && newS.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
	if oldHC && newHC && oldS.Spec.HealthCheckNodePort != 0 && newS.Spec.HealthCheckNodePort != oldS.Spec.HealthCheckNodePort {
		allErrs = append(allErrs, field.Forbidden(specPath.Child("healthCheckNodePort"), fieldImmutableMsg))
	}
	return append(allErrs, Service(newS)...)
}

func ptrEqual[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func ServiceStatusUpdate(newS, oldS *corev1.Service) field.ErrorList {
	allErrs := validateObjectMetaUpdate(&newS.ObjectMeta, &oldS.ObjectMeta)
	p := statusPath.Child("loadBalancer", "ingress")
	for i, ing := range newS.Status.LoadBalancer.Ingress {
		ip := p.Index(i)
		if ing.IP != "" {
			allErrs = append(allErrs, validateIP(ing.IP, ip.Child("ip"))...)
		}
		if ing.IPMode != nil {
			if ing.IP == "" {
				allErrs = append(allErrs, field.Forbidden(ip.Child("ipMode"), "may not be specified when `ip` is not set"))
			} else if *ing.IPMode != corev1.LoadBalancerIPModeVIP && *ing.IPMode != corev1.LoadBalancerIPModeProxy {
				allErrs = append(allErrs, field.NotSupported(ip.Child("ipMode"), *ing.IPMode,
					[]corev1.LoadBalancerIPMode{corev1.LoadBalancerIPModeVIP, corev1.LoadBalancerIPModeProxy}))
			}
		}
		if ing.Hostname != "" {
			allErrs = append(allErrs, validateDNS1123Subdomain(ing.Hostname, ip.Child("hostname"))...)
			if _, err := netip.ParseAddr(ing.Hostname); err == nil {
				allErrs = append(allErrs, field.Invalid(ip.Child("hostname"), ing.Hostname, "must be a DNS name, not an IP address"))
			}
		}
	}
	return allErrs
}

func Endpoints(e *corev1.Endpoints) field.ErrorList {
	allErrs := validateObjectMeta(&e.ObjectMeta, true, nameIsDNSSubdomain)
	sp := field.NewPath("subsets")
	for i := range e.Subsets {
		ss := &e.Subsets[i]
		p := sp.Index(i)
		if len(ss.Addresses) == 0 && len(ss.NotReadyAddresses) == 0 {
			allErrs = append(allErrs, field.Required(p, "must specify `addresses` or `notReadyAddresses`"))
		}
		for j := range ss.Addresses {
			allErrs = append(allErrs, validateEndpointAddress(&ss.Addresses[j], p.Child("addresses").Index(j))...)
		}
		for j := range ss.NotReadyAddresses {
			allErrs = append(allErrs, validateEndpointAddress(&ss.NotReadyAddresses[j], p.Child("notReadyAddresses").Index(j))...)
		}
		for j := range ss.Ports {
			port := &ss.Ports[j]
			pp := p.Child("ports").Index(j)
			if len(ss.Ports) > 1 && port.Name == "" {
				allErrs = append(allErrs, field.Required(pp.Child("name"), ""))
			} else if port.Name != "" {
				allErrs = append(allErrs, validateDNS1123Label(port.Name, pp.Child("name"))...)
			}
			for _, msg := range validation.IsValidPortNum(int(port.Port)) {
				allErrs = append(allErrs, field.Invalid(pp.Child("port"), port.Port, msg))
			}
			allErrs = append(allErrs, validateProtocol(port.Protocol, pp.Child("protocol"))...)
			if port.AppProtocol != nil {
				allErrs = append(allErrs, validateQualifiedName(*port.AppProtocol, pp.Child("appProtocol"))...)
			}
		}
	}
	return allErrs
}

func validateEndpointAddress(a *corev1.EndpointAddress, fldPath *field.Path) field.ErrorList {
	errs := validateIP(a.IP, fldPath.Child("ip"))
	if len(errs) == 0 {
		errs = append(errs, validateNonSpecialIP(a.IP, fldPath.Child("ip"))...)
	}
	if a.Hostname != "" {
		errs = append(errs, validateDNS1123Label(a.Hostname, fldPath.Child("hostname"))...)
	}
	if a.NodeName != nil {
		errs = append(errs, validateName(*a.NodeName, nameIsDNSSubdomain, fldPath.Child("nodeName"))...)
	}
	return errs
}

const (
	maxEndpointsPerSlice = 1000
	maxPortsPerSlice     = 100
	maxAddressesPerEP    = 100
)

func EndpointSlice(s *discoveryv1.EndpointSlice) field.ErrorList {
	allErrs := validateObjectMeta(&s.ObjectMeta, true, nameIsDNSSubdomain)
	at := field.NewPath("addressType")
	types := []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6, discoveryv1.AddressTypeFQDN}
	if s.AddressType == "" {
		allErrs = append(allErrs, field.Required(at, ""))
	} else if !slices.Contains(types, s.AddressType) {
		allErrs = append(allErrs, field.NotSupported(at, s.AddressType, types))
	}
	ep := field.NewPath("endpoints")
	if len(s.Endpoints) > maxEndpointsPerSlice {
		allErrs = append(allErrs, field.TooMany(ep, len(s.Endpoints), maxEndpointsPerSlice))
	}
	for i := range s.Endpoints {
		e := &s.Endpoints[i]
		p := ep.Index(i)
		ap := p.Child("addresses")
		if len(e.Addresses) == 0 {
			allErrs = append(allErrs, field.Required(ap, "must contain at least 1 address"))
		} else if len(e.Addresses) > maxAddressesPerEP {
			allErrs = append(allErrs, field.TooMany(ap, len(e.Addresses), maxAddressesPerEP))
		}
		for j, addr := range e.Addresses {
			allErrs = append(allErrs, validateSliceAddress(addr, s.AddressType, ap.Index(j))...)
		}
		if e.Hostname != nil {
			allErrs = append(allErrs, validateDNS1123Label(*e.Hostname, p.Child("hostname"))...)
		}
		if e.NodeName != nil {
			allErrs = append(allErrs, validateName(*e.NodeName, nameIsDNSSubdomain, p.Child("nodeName"))...)
		}
		if e.Zone != nil {
			for _, msg := range validation.IsValidLabelValue(*e.Zone) {
				allErrs = append(allErrs, field.Invalid(p.Child("zone"), *e.Zone, msg))
			}
		}
	}
	pp := field.NewPath("ports")
	if len(s.Ports) > maxPortsPerSlice {
		allErrs = append(allErrs, field.TooMany(pp, len(s.Ports), maxPortsPerSlice))
	}
	names := sets.New[string]()
	for i, port := range s.Ports {
		p := pp.Index(i)
		if port.Name != nil {
			if *port.Name != "" {
				allErrs = append(allErrs, validateDNS1123Label(*port.Name, p.Child("name"))...)
			}
			if names.Has(*port.Name) {
				allErrs = append(allErrs, field.Duplicate(p.Child("name"), *port.Name))
			}
			names.Insert(*port.Name)
		}
		if port.Protocol == nil {
			allErrs = append(allErrs, field.Required(p.Child("protocol"), ""))
		} else {
			allErrs = append(allErrs, validateProtocol(*port.Protocol, p.Child("protocol"))...)
		}
		if port.Port != nil {
			for _, msg := range validation.IsValidPortNum(int(*port.Port)) {
				allErrs = append(allErrs, field.Invalid(p.Child("port"), *port.Port, msg))
			}
		}
		if port.AppProtocol != nil {
			allErrs = append(allErrs, validateQualifiedName(*port.AppProtocol, p.Child("appProtocol"))...)
		}
	}
	return allErrs
}

func validateSliceAddress(addr string, t discoveryv1.AddressType, fldPath *field.Path) field.ErrorList {
	switch t {
	case discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6:
		if errs := validateIP(addr, fldPath); len(errs) > 0 {
			return errs
		}
		if t == discoveryv1.AddressTypeIPv4 && ipIs6(addr) {
			return field.ErrorList{field.Invalid(fldPath, addr, "must be an IPv4 address")}
		}
		if t == discoveryv1.AddressTypeIPv6 && !ipIs6(addr) {
			return field.ErrorList{field.Invalid(fldPath, addr, "must be an IPv6 address")}
		}
	case discoveryv1.AddressTypeFQDN:
		return validation.IsFullyQualifiedDomainName(fldPath, addr)
	}
	return nil
}

func EndpointSliceUpdate(newS, oldS *discoveryv1.EndpointSlice) field.ErrorList {
	allErrs := validateObjectMetaUpdate(&newS.ObjectMeta, &oldS.ObjectMeta)
	allErrs = append(allErrs, EndpointSlice(newS)...)
	allErrs = append(allErrs, validateImmutable(newS.AddressType, oldS.AddressType, field.NewPath("addressType"))...)
	return allErrs
}
