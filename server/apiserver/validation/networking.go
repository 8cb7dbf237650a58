package validation

import (
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func NetworkPolicy(np *networkingv1.NetworkPolicy) field.ErrorList {
	allErrs := validateObjectMeta(&np.ObjectMeta, true, nameIsDNSSubdomain)
	spec := &np.Spec
	allErrs = append(allErrs, validateLabelSelector(&spec.PodSelector, specPath.Child("podSelector"))...)
	for i, rule := range spec.Ingress {
		allErrs = append(allErrs, validateNetworkPolicyRule(rule.Ports, rule.From, "from", specPath.Child("ingress").Index(i))...)
	}
	for i, rule := range spec.Egress {
		allErrs = append(allErrs, validateNetworkPolicyRule(rule.Ports, rule.To, "to", specPath.Child("egress").Index(i))...)
	}
	types := []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
	if len(spec.PolicyTypes) > len(types) {
		return append(allErrs, field.Invalid(specPath.Child("policyTypes"), spec.PolicyTypes, "may not specify more than two policyTypes"))
	}
	for i, t := range spec.PolicyTypes {
		if t != networkingv1.PolicyTypeIngress && t != networkingv1.PolicyTypeEgress {
			allErrs = append(allErrs, field.NotSupported(specPath.Child("policyTypes").Index(i), t, types))
		}
	}
	return allErrs
}

// validateNetworkPolicyRule checks an ingress or egress rule: its ports and
// its peers, listed under peersField ("from" or "to").
func validateNetworkPolicyRule(ports []networkingv1.NetworkPolicyPort, peers []networkingv1.NetworkPolicyPeer, peersField string, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for j := range ports {
		allErrs = append(allErrs, validateNetworkPolicyPort(&ports[j], p.Child("ports").Index(j))...)
	}
	for j := range peers {
		allErrs = append(allErrs, validateNetworkPolicyPeer(&peers[j], p.Child(peersField).Index(j))...)
	}
	return allErrs
}

func validateNetworkPolicyPort(port *networkingv1.NetworkPolicyPort, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if port.Protocol != nil && !supportedPortProtocols.Has(*port.Protocol) {
		allErrs = append(allErrs, field.NotSupported(p.Child("protocol"), *port.Protocol, []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP}))
	}
	switch {
	case port.Port == nil:
		if port.EndPort != nil {
			allErrs = append(allErrs, field.Invalid(p.Child("endPort"), *port.EndPort, "may not be specified when `port` is not specified"))
		}
	case port.Port.Type == intstr.Int:
		for _, msg := range validation.IsValidPortNum(int(port.Port.IntVal)) {
			allErrs = append(allErrs, field.Invalid(p.Child("port"), port.Port.IntVal, msg))
		}
		if port.EndPort != nil {
			if *port.EndPort < port.Port.IntVal {
				allErrs = append(allErrs, field.Invalid(p.Child("endPort"), port.Port.IntVal, "must be greater than or equal to `port`"))
			}
			for _, msg := range validation.IsValidPortNum(int(*port.EndPort)) {
				allErrs = append(allErrs, field.Invalid(p.Child("endPort"), *port.EndPort, msg))
			}
		}
	default:
		if port.EndPort != nil {
			allErrs = append(allErrs, field.Invalid(p.Child("endPort"), *port.EndPort, "may not be specified when `port` is non-numeric"))
		}
		for _, msg := range validation.IsValidPortName(port.Port.StrVal) {
			allErrs = append(allErrs, field.Invalid(p.Child("port"), port.Port.StrVal, msg))
		}
	}
	return allErrs
}

func validateNetworkPolicyPeer(peer *networkingv1.NetworkPolicyPeer, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	n := 0
	if peer.PodSelector != nil {
		n++
		allErrs = append(allErrs, validateLabelSelector(peer.PodSelector, p.Child("podSelector"))...)
	}
	if peer.NamespaceSelector != nil {
		n++
		allErrs = append(allErrs, validateLabelSelector(peer.NamespaceSelector, p.Child("namespaceSelector"))...)
	}
	if peer.IPBlock != nil {
		n++
		allErrs = append(allErrs, validateIPBlock(peer.IPBlock, p.Child("ipBlock"))...)
	}
	if n == 0 {
		allErrs = append(allErrs, field.Required(p, "must specify a peer"))
	} else if n > 1 && peer.IPBlock != nil {
		allErrs = append(allErrs, field.Forbidden(p, "may not specify both ipBlock and another peer"))
	}
	return allErrs
}

func validateIPBlock(b *networkingv1.IPBlock, p *field.Path) field.ErrorList {
	if b.CIDR == "" {
		return field.ErrorList{field.Required(p.Child("cidr"), "")}
	}
	allErrs := validateCIDR(b.CIDR, p.Child("cidr"))
	outer, err := netip.ParsePrefix(b.CIDR)
	for i, ex := range b.Except {
		ep := p.Child("except").Index(i)
		if errs := validateCIDR(ex, ep); len(errs) > 0 {
			allErrs = append(allErrs, errs...)
			continue
		}
		inner, ierr := netip.ParsePrefix(ex)
		if err != nil || ierr != nil {
			continue
		}
		// An exception must carve something out of the block, not all of it.
		if inner.Bits() <= outer.Bits() || !outer.Masked().Contains(inner.Addr()) {
			allErrs = append(allErrs, field.Invalid(ep, ex, "must be a strict subset of `cidr`"))
		}
	}
	return allErrs
}

var (
	invalidPathSequences = []string{"//", "/./", "/../", "%2f", "%2F"}
	invalidPathSuffixes  = []string{"/..", "/."}
	supportedPathTypes   = []networkingv1.PathType{networkingv1.PathTypeExact, networkingv1.PathTypeImplementationSpecific, networkingv1.PathTypePrefix}
)

func Ingress(ing *networkingv1.Ingress) field.ErrorList {
	allErrs := validateObjectMeta(&ing.ObjectMeta, true, nameIsDNSSubdomain)
	spec := &ing.Spec
	if len(spec.Rules) == 0 && spec.DefaultBackend == nil {
		allErrs = append(allErrs, field.Invalid(specPath, spec.Rules, "either `defaultBackend` or `rules` must be specified"))
	}
	if spec.DefaultBackend != nil {
		allErrs = append(allErrs, validateIngressBackend(spec.DefaultBackend, specPath.Child("defaultBackend"))...)
	}
	for i, r := range spec.Rules {
		p := specPath.Child("rules").Index(i)
		if r.Host != "" {
			if _, err := netip.ParseAddr(r.Host); err == nil {
				allErrs = append(allErrs, field.Invalid(p.Child("host"), r.Host, "must be a DNS name, not an IP address"))
			}
			allErrs = append(allErrs, validateHostOrWildcard(r.Host, p.Child("host"))...)
		}
		if r.HTTP != nil {
			hp := p.Child("http")
			if len(r.HTTP.Paths) == 0 {
				allErrs = append(allErrs, field.Required(hp.Child("paths"), ""))
			}
			for j := range r.HTTP.Paths {
				allErrs = append(allErrs, validateHTTPIngressPath(&r.HTTP.Paths[j], hp.Child("paths").Index(j))...)
			}
		}
	}
	for i, t := range spec.TLS {
		p := specPath.Child("tls").Index(i)
		for j, h := range t.Hosts {
			allErrs = append(allErrs, validateHostOrWildcard(h, p.Child("hosts").Index(j))...)
		}
		if t.SecretName != "" {
			allErrs = append(allErrs, validateName(t.SecretName, nameIsDNSSubdomain, p.Child("secretName"))...)
		}
	}
	if spec.IngressClassName != nil {
		allErrs = append(allErrs, validateName(*spec.IngressClassName, nameIsDNSSubdomain, specPath.Child("ingressClassName"))...)
	}
	return allErrs
}

func validateHostOrWildcard(host string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	check := validation.IsDNS1123Subdomain
	if strings.Contains(host, "*") {
		check = validation.IsWildcardDNS1123Subdomain
	}
	for _, msg := range check(host) {
		errs = append(errs, field.Invalid(p, host, msg))
	}
	return errs
}

func validateHTTPIngressPath(path *networkingv1.HTTPIngressPath, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if path.PathType == nil {
		return field.ErrorList{field.Required(p.Child("pathType"), "pathType must be specified")}
	}
	switch *path.PathType {
	case networkingv1.PathTypeExact, networkingv1.PathTypePrefix:
		if !strings.HasPrefix(path.Path, "/") {
			allErrs = append(allErrs, field.Invalid(p.Child("path"), path.Path, "must be an absolute path"))
		}
		for _, seq := range invalidPathSequences {
			if strings.Contains(path.Path, seq) {
				allErrs = append(allErrs, field.Invalid(p.Child("path"), path.Path, fmt.Sprintf("must not contain '%s'", seq)))
			}
		}
		for _, suf := range invalidPathSuffixes {
			if strings.HasSuffix(path.Path, suf) {
				allErrs = append(allErrs, field.Invalid(p.Child("path"), path.Path, fmt.Sprintf("cannot end with '%s'", suf)))
			}
		}
	case networkingv1.PathTypeImplementationSpecific:
		if path.Path != "" && !strings.HasPrefix(path.Path, "/") {
			allErrs = append(allErrs, field.Invalid(p.Child("path"), path.Path, "must be an absolute path"))
		}
	default:
		allErrs = append(allErrs, field.NotSupported(p.Child("pathType"), *path.PathType, supportedPathTypes))
	}
	return append(allErrs, validateIngressBackend(&path.Backend, p.Child("backend"))...)
}

func validateIngressBackend(b *networkingv1.IngressBackend, p *field.Path) field.ErrorList {
	switch {
	case b.Resource != nil && b.Service != nil:
		return field.ErrorList{field.Invalid(p, "", "cannot set both resource and service backends")}
	case b.Resource != nil:
		var errs field.ErrorList
		if b.Resource.Kind == "" {
			errs = append(errs, field.Required(p.Child("resource", "kind"), ""))
		}
		if b.Resource.Name == "" {
			errs = append(errs, field.Required(p.Child("resource", "name"), ""))
		}
		return errs
	case b.Service != nil:
		var errs field.ErrorList
		sp := p.Child("service")
		if b.Service.Name == "" {
			errs = append(errs, field.Required(sp.Child("name"), ""))
		} else {
			errs = append(errs, validateName(b.Service.Name, nameIsDNS1035Label, sp.Child("name"))...)
		}
		hasName, hasNumber := b.Service.Port.Name != "", b.Service.Port.Number != 0
		switch {
		case hasName && hasNumber:
			errs = append(errs, field.Invalid(p, "", "cannot set both port name & port number"))
		case hasName:
			for _, msg := range validation.IsValidPortName(b.Service.Port.Name) {
				errs = append(errs, field.Invalid(sp.Child("port", "name"), b.Service.Port.Name, msg))
			}
		case hasNumber:
			for _, msg := range validation.IsValidPortNum(int(b.Service.Port.Number)) {
				errs = append(errs, field.Invalid(sp.Child("port", "number"), b.Service.Port.Number, msg))
			}
		default:
			errs = append(errs, field.Required(p, "port name or number is required"))
		}
		return errs
	default:
		return field.ErrorList{field.Invalid(p, "", "resource or service backend is required")}
	}
}

const maxIngressClassControllerLen = 250

func IngressClass(ic *networkingv1.IngressClass) field.ErrorList {
	allErrs := validateObjectMeta(&ic.ObjectMeta, false, nameIsDNSSubdomain)
	cp := specPath.Child("controller")
	if ic.Spec.Controller == "" {
		allErrs = append(allErrs, field.Required(cp, ""))
	} else {
		allErrs = append(allErrs, validation.IsDomainPrefixedPath(cp, ic.Spec.Controller)...)
		if len(ic.Spec.Controller) > maxIngressClassControllerLen {
			allErrs = append(allErrs, field.TooLong(cp, "", maxIngressClassControllerLen))
		}
	}
	if p := ic.Spec.Parameters; p != nil {
		pp := specPath.Child("parameters")
		if p.Kind == "" {
			allErrs = append(allErrs, field.Required(pp.Child("kind"), ""))
		}
		if p.Name == "" {
			allErrs = append(allErrs, field.Required(pp.Child("name"), ""))
		}
		if p.Scope != nil {
			switch *p.Scope {
			case networkingv1.IngressClassParametersReferenceScopeCluster:
				if p.Namespace != nil {
					allErrs = append(allErrs, field.Forbidden(pp.Child("namespace"), "`parameters.scope` is set to 'Cluster'"))
				}
			case networkingv1.IngressClassParametersReferenceScopeNamespace:
				if p.Namespace == nil {
					allErrs = append(allErrs, field.Required(pp.Child("namespace"), "`parameters.scope` is set to 'Namespace'"))
				}
			default:
				allErrs = append(allErrs, field.NotSupported(pp.Child("scope"), *p.Scope, []string{
					networkingv1.IngressClassParametersReferenceScopeCluster, networkingv1.IngressClassParametersReferenceScopeNamespace}))
			}
		}
	}
	return allErrs
}

// nameIsIP is the IPAddress name rule: the IP in canonical form (upstream's
// ValidateIPAddressName; IPAddresses have no generateName).
func nameIsIP(name string, _ bool) []string {
	var msgs []string
	for _, err := range validation.IsValidIP(&field.Path{}, name) {
		msgs = append(msgs, err.Detail)
	}
	return msgs
}

// IPAddress is upstream's ValidateIPAddress: the name is an IP, and the
// parentRef names what holds it (group optional, since Services are in
// the core group).
func IPAddress(ip *networkingv1.IPAddress) field.ErrorList {
	allErrs := validateObjectMeta(&ip.ObjectMeta, false, nameIsIP)
	p := specPath.Child("parentRef")
	ref := ip.Spec.ParentRef
	if ref == nil {
		return append(allErrs, field.Required(p, ""))
	}
	if ref.Group != "" {
		allErrs = append(allErrs, validateDNS1123Subdomain(ref.Group, p.Child("group"))...)
	}
	if ref.Resource == "" {
		allErrs = append(allErrs, field.Required(p.Child("resource"), ""))
	} else {
		allErrs = append(allErrs, validateName(ref.Resource, nameIsPathSegment, p.Child("resource"))...)
	}
	if ref.Name == "" {
		allErrs = append(allErrs, field.Required(p.Child("name"), ""))
	} else {
		allErrs = append(allErrs, validateName(ref.Name, nameIsPathSegment, p.Child("name"))...)
	}
	if ref.Namespace != "" {
		allErrs = append(allErrs, validateName(ref.Namespace, nameIsPathSegment, p.Child("namespace"))...)
	}
	return allErrs
}

// IPAddressUpdate is upstream's strategy: the object is valid and its
// parentRef never changes.
func IPAddressUpdate(ip, old *networkingv1.IPAddress) field.ErrorList {
	errs := dedupe(append(validateMetaUpdateOf(ip, old), IPAddress(ip)...))
	return append(errs, validateImmutable(ip.Spec.ParentRef, old.Spec.ParentRef, specPath.Child("parentRef"))...)
}

// ServiceCIDR is upstream's ValidateServiceCIDR: one or two canonical
// CIDRs, two only of different families.
func ServiceCIDR(sc *networkingv1.ServiceCIDR) field.ErrorList {
	allErrs := validateObjectMeta(&sc.ObjectMeta, false, nameIsDNSSubdomain)
	return append(allErrs, validateServiceCIDRSpec(&sc.Spec)...)
}

var serviceCIDRsPath = specPath.Child("cidrs")

func validateServiceCIDRSpec(spec *networkingv1.ServiceCIDRSpec) field.ErrorList {
	switch n := len(spec.CIDRs); {
	case n == 0:
		return field.ErrorList{field.Required(serviceCIDRsPath, "at least one CIDR required")}
	case n > 2:
		return field.ErrorList{field.Invalid(serviceCIDRsPath, spec, "may only hold up to 2 values")}
	}
	var allErrs field.ErrorList
	for i, cidr := range spec.CIDRs {
		allErrs = append(allErrs, validation.IsValidCIDR(serviceCIDRsPath.Index(i), cidr)...)
	}
	if len(spec.CIDRs) == 2 {
		a, errA := netip.ParsePrefix(spec.CIDRs[0])
		b, errB := netip.ParsePrefix(spec.CIDRs[1])
		if errA == nil && errB == nil && a.Addr().Is4() == b.Addr().Is4() {
			allErrs = append(allErrs, field.Invalid(serviceCIDRsPath, spec.CIDRs, "may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and 2001:db8::/64"))
		}
	}
	return allErrs
}

// ServiceCIDRUpdate is upstream's ValidateServiceCIDRUpdate: the CIDRs are
// immutable, except that a single-stack range may gain a second CIDR of the
// other family (to turn dual-stack).
func ServiceCIDRUpdate(sc, old *networkingv1.ServiceCIDR) field.ErrorList {
	allErrs := validateMetaUpdateOf(sc, old)
	switch {
	case len(old.Spec.CIDRs) == len(sc.Spec.CIDRs):
		for i, cidr := range old.Spec.CIDRs {
			if cidr != sc.Spec.CIDRs[i] {
				allErrs = append(allErrs, field.Invalid(serviceCIDRsPath.Index(i), sc.Spec.CIDRs[i], fieldImmutableMsg))
			}
		}
	case len(old.Spec.CIDRs) == 1 && len(sc.Spec.CIDRs) == 2:
		if sc.Spec.CIDRs[0] != old.Spec.CIDRs[0] {
			allErrs = append(allErrs, field.Invalid(serviceCIDRsPath.Index(0), sc.Spec.CIDRs[0], fieldImmutableMsg))
		}
		allErrs = append(allErrs, validateServiceCIDRSpec(&sc.Spec)...)
	default:
		allErrs = append(allErrs, field.Invalid(serviceCIDRsPath, sc.Spec.CIDRs, fieldImmutableMsg))
	}
	return allErrs
}
