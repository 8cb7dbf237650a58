package printers

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// listLimit is how many endpoints, ports or hosts a cell shows before
// collapsing the rest into "+ N more...".
const listLimit = 3

func init() {
	svcDoc := corev1.ServiceSpec{}.SwaggerDoc()
	cells([]metav1.TableColumnDefinition{
		nameColumn(),
		column("Type", "string", svcDoc["type"]),
		column("Cluster-IP", "string", svcDoc["clusterIP"]),
		column("External-IP", "string", svcDoc["externalIPs"]),
		column("Port(s)", "string", svcDoc["ports"]),
		ageColumn(),
		wide(column("Selector", "string", svcDoc["selector"])),
	}, func(svc *corev1.Service, now time.Time) []interface{} {
		return []interface{}{
			svc.Name,
			string(svc.Spec.Type),
			orNone(serviceClusterIP(svc)),
			serviceExternalIP(svc),
			orNone(servicePorts(svc.Spec.Ports)),
			age(svc.ObjectMeta, now),
			labels.FormatLabels(svc.Spec.Selector),
		}
	})

	cells([]metav1.TableColumnDefinition{
		nameColumn(),
		column("Endpoints", "string", corev1.Endpoints{}.SwaggerDoc()["subsets"]),
		ageColumn(),
	}, func(ep *corev1.Endpoints, now time.Time) []interface{} {
		return []interface{}{ep.Name, formatEndpoints(ep), age(ep.ObjectMeta, now)}
	})

	sliceDoc := discoveryv1.EndpointSlice{}.SwaggerDoc()
	cells([]metav1.TableColumnDefinition{
		nameColumn(),
		column("AddressType", "string", sliceDoc["addressType"]),
		column("Ports", "string", sliceDoc["ports"]),
		column("Endpoints", "string", sliceDoc["endpoints"]),
		ageColumn(),
	}, func(es *discoveryv1.EndpointSlice, now time.Time) []interface{} {
		ports := make([]string, 0, len(es.Ports))
		for _, p := range es.Ports {
			switch {
			case p.Port != nil:
				ports = append(ports, strconv.Itoa(int(*p.Port)))
			case p.Name != nil:
				ports = append(ports, *p.Name)
			default:
				ports = append(ports, "*")
			}
		}
		var addrs []string
		for _, e := range es.Endpoints {
			addrs = append(addrs, e.Addresses...)
		}
		return []interface{}{
			es.Name,
			string(es.AddressType),
			truncatedList(ports, listLimit),
			truncatedList(addrs, listLimit),
			age(es.ObjectMeta, now),
		}
	})

	cells([]metav1.TableColumnDefinition{
		nameColumn(),
		column("Class", "string", "The name of the IngressClass resource that should be used for additional configuration"),
		column("Hosts", "string", "Hosts that incoming requests are matched against before the ingress rule"),
		column("Address", "string", "Address is a list containing ingress points for the load-balancer"),
		column("Ports", "string", "Ports of TLS configurations that open"),
		ageColumn(),
	}, func(ing *networkingv1.Ingress, now time.Time) []interface{} {
		var addrs []string
		for _, lb := range ing.Status.LoadBalancer.Ingress {
			addrs = append(addrs, lbAddress(lb.IP, lb.Hostname))
		}
		ports := "80"
		if len(ing.Spec.TLS) != 0 {
			ports = "80, 443"
		}
		return []interface{}{
			ing.Name,
			orNone(deref(ing.Spec.IngressClassName)),
			ingressHosts(ing.Spec.Rules),
			sortedUnique(addrs),
			ports,
			age(ing.ObjectMeta, now),
		}
	})

	cells([]metav1.TableColumnDefinition{
		nameColumn(),
		column("Controller", "string", "Controller that is responsible for handling this class"),
		column("Parameters", "string", "A reference to a resource with additional parameters"),
		ageColumn(),
	}, func(ic *networkingv1.IngressClass, now time.Time) []interface{} {
		params := "<none>"
		if p := ic.Spec.Parameters; p != nil {
			params = p.Kind
			if p.APIGroup != nil {
				params += "." + *p.APIGroup
			}
			params += "/" + p.Name
		}
		return []interface{}{ic.Name, ic.Spec.Controller, params, age(ic.ObjectMeta, now)}
	})

	cells([]metav1.TableColumnDefinition{
		nameColumn(),
		column("CIDRs", "string", networkingv1.ServiceCIDRSpec{}.SwaggerDoc()["cidrs"]),
		ageColumn(),
	}, func(sc *networkingv1.ServiceCIDR, now time.Time) []interface{} {
		return []interface{}{sc.Name, strings.Join(sc.Spec.CIDRs, ","), age(sc.ObjectMeta, now)}
	})

	// Upstream declares no Age column for IPAddresses (its row has an
	// age cell beyond the columns, which kubectl does not show).
	cells([]metav1.TableColumnDefinition{
		nameColumn(),
		column("ParentRef", "string", networkingv1.IPAddressSpec{}.SwaggerDoc()["parentRef"]),
	}, func(ip *networkingv1.IPAddress, now time.Time) []interface{} {
		return []interface{}{ip.Name, ipAddressParent(ip.Spec.ParentRef)}
	})

	cells([]metav1.TableColumnDefinition{
		nameColumn(),
		column("Pod-Selector", "string", networkingv1.NetworkPolicySpec{}.SwaggerDoc()["podSelector"]),
		ageColumn(),
	}, func(np *networkingv1.NetworkPolicy, now time.Time) []interface{} {
		return []interface{}{np.Name, metav1.FormatLabelSelector(&np.Spec.PodSelector), age(np.ObjectMeta, now)}
	})
}

// serviceClusterIP prefers spec.clusterIPs (the primary family first);
// spec.clusterIP only matters for objects that skipped defaulting.
func serviceClusterIP(svc *corev1.Service) string {
	if len(svc.Spec.ClusterIPs) > 0 {
		return svc.Spec.ClusterIPs[0]
	}
	return svc.Spec.ClusterIP
}

// serviceExternalIP distinguishes a load balancer still being provisioned
// (<pending>) from a service type that never gets one (<none>).
func serviceExternalIP(svc *corev1.Service) string {
	switch svc.Spec.Type {
	case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort:
		return joinOr(svc.Spec.ExternalIPs, ",", "<none>")
	case corev1.ServiceTypeLoadBalancer:
		var lb []string
		for _, in := range svc.Status.LoadBalancer.Ingress {
			lb = append(lb, lbAddress(in.IP, in.Hostname))
		}
		ips := sortedUniqueList(lb)
		ips = append(ips, svc.Spec.ExternalIPs...)
		return joinOr(ips, ",", "<pending>")
	case corev1.ServiceTypeExternalName:
		return svc.Spec.ExternalName
	}
	return "<unknown>"
}

// lbAddress returns the IP of a load-balancer ingress point, or its hostname
// when it has no IP; either may be empty.
func lbAddress(ip, hostname string) string {
	if ip != "" {
		return ip
	}
	return hostname
}

// sortedUniqueList drops empties and duplicates and sorts, the way upstream
// collects load-balancer addresses into a string set.
func sortedUniqueList(in []string) []string {
	seen := make(map[string]bool, len(in))
	out := make([]string, 0, len(in))
	for _, s := range in {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

func sortedUnique(in []string) string {
	return strings.Join(sortedUniqueList(in), ",")
}

// servicePorts renders "port/proto" or "port:nodePort/proto" per port.
func servicePorts(ports []corev1.ServicePort) string {
	out := make([]string, len(ports))
	for i, p := range ports {
		if p.NodePort > 0 {
			out[i] = fmt.Sprintf("%d:%d/%s", p.Port, p.NodePort, p.Protocol)
		} else {
			out[i] = fmt.Sprintf("%d/%s", p.Port, p.Protocol)
		}
	}
	return strings.Join(out, ",")
}

// formatEndpoints lists ip:port for every address and port of every subset
// (bare IPs for headless subsets without ports).
func formatEndpoints(ep *corev1.Endpoints) string {
	if len(ep.Subsets) == 0 {
		return "<none>"
	}
	var entries []string
	for _, ss := range ep.Subsets {
		if len(ss.Ports) == 0 {
			for _, a := range ss.Addresses {
				entries = append(entries, a.IP)
			}
			continue
		}
		for _, p := range ss.Ports {
			for _, a := range ss.Addresses {
				entries = append(entries, net.JoinHostPort(a.IP, strconv.Itoa(int(p.Port))))
			}
		}
	}
	// Subsets with only not-ready addresses print as an empty cell, not
	// <unset> as the other truncated lists do.
	if len(entries) > listLimit {
		return truncatedList(entries, listLimit)
	}
	return strings.Join(entries, ",")
}

// ingressHosts shows the hosts of the first rules; rules without a host
// (catch-all) are skipped, yet still counted in "+ N more...".
func ingressHosts(rules []networkingv1.IngressRule) string {
	var hosts []string
	more := false
	for _, r := range rules {
		if len(hosts) == listLimit {
			more = true
			break
		}
		if r.Host != "" {
			hosts = append(hosts, r.Host)
		}
	}
	if len(hosts) == 0 {
		return "*"
	}
	if more {
		return fmt.Sprintf("%s + %d more...", strings.Join(hosts, ","), len(rules)-listLimit)
	}
	return strings.Join(hosts, ",")
}

// ipAddressParent is an IPAddress's parentRef as upstream prints it:
// "services/default/kubernetes", "<resource>.<group>/<name>" when cluster-scoped.
func ipAddressParent(ref *networkingv1.ParentReference) string {
	if ref == nil {
		return "<none>"
	}
	out := strings.ToLower(schema.GroupResource{Group: ref.Group, Resource: ref.Resource}.String())
	if ref.Namespace != "" {
		out += "/" + ref.Namespace
	}
	return out + "/" + ref.Name
}
