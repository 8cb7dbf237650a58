package dns

import (
	"net"
	"strings"

	mdns "github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/tools/cache"
)

const (
	indexClusterIP = "kelp-dns-clusterip"
	indexService   = "kelp-dns-service"
	indexAddr      = "kelp-dns-addr"
)

func addIndexers(svcs, slices cache.SharedIndexInformer) error {
	if err := svcs.AddIndexers(cache.Indexers{
		indexClusterIP: func(obj interface{}) ([]string, error) {
			svc, ok := obj.(*corev1.Service)
			if !ok {
				return nil, nil
			}
			var out []string
			for _, ip := range clusterIPs(svc) {
				out = append(out, ip.String())
			}
			return out, nil
		},
	}); err != nil {
		return err
	}
	return slices.AddIndexers(cache.Indexers{
		indexService: func(obj interface{}) ([]string, error) {
			es, ok := obj.(*discoveryv1.EndpointSlice)
			if !ok {
				return nil, nil
			}
			name := es.Labels[discoveryv1.LabelServiceName]
			if name == "" {
				return nil, nil
			}
			return []string{es.Namespace + "/" + name}, nil
		},
		indexAddr: func(obj interface{}) ([]string, error) {
			es, ok := obj.(*discoveryv1.EndpointSlice)
			if !ok || es.Labels[discoveryv1.LabelServiceName] == "" {
				return nil, nil
			}
			var out []string
			for _, ep := range es.Endpoints {
				for _, a := range ep.Addresses {
					if ip := net.ParseIP(a); ip != nil {
						out = append(out, ip.String())
					}
				}
			}
			return out, nil
		},
	})
}

func clusterIPs(svc *corev1.Service) []net.IP {
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 && svc.Spec.ClusterIP != "" {
		ips = []string{svc.Spec.ClusterIP}
	}
	var out []net.IP
	for _, s := range ips {
		if ip := net.ParseIP(s); ip != nil {
			out = append(out, ip)
		}
	}
	return out
}

func isHeadless(svc *corev1.Service) bool {
	return svc.Spec.Type != corev1.ServiceTypeExternalName && svc.Spec.ClusterIP == corev1.ClusterIPNone
}

// endpoint is one published address of a headless service.
type endpoint struct {
	ip    net.IP
	name  string // hostname, or the dashed IP
	slice *discoveryv1.EndpointSlice
}

// dashed turns 10.1.2.3 into 10-1-2-3 and fd00::1 into fd00--1.
func dashed(ip net.IP) string {
	if v4 := ip.To4(); v4 != nil {
		return strings.ReplaceAll(v4.String(), ".", "-")
	}
	return strings.ReplaceAll(ip.String(), ":", "-")
}

// undashed is the inverse of dashed; nil when s is not a dashed IP.
func undashed(s string) net.IP {
	if strings.Count(s, "-") == 3 {
		if ip := net.ParseIP(strings.ReplaceAll(s, "-", ".")); ip != nil && ip.To4() != nil {
			return ip
		}
	}
	if ip := net.ParseIP(strings.ReplaceAll(s, "-", ":")); ip != nil && ip.To4() == nil {
		return ip
	}
	return nil
}

// endpointsOf returns the published endpoints of svc: ready ones, or all of
// them when publishNotReadyAddresses is set. Duplicates are merged.
func (s *Server) endpointsOf(svc *corev1.Service) []endpoint {
	objs, err := s.sliceInformer.GetIndexer().ByIndex(indexService, svc.Namespace+"/"+svc.Name)
	if err != nil {
		return nil
	}
	var out []endpoint
	seen := map[string]bool{}
	for _, o := range objs {
		es, ok := o.(*discoveryv1.EndpointSlice)
		if !ok || es.AddressType == discoveryv1.AddressTypeFQDN {
			continue
		}
		for _, ep := range es.Endpoints {
			ready := ep.Conditions.Ready == nil || *ep.Conditions.Ready
			if !ready && !svc.Spec.PublishNotReadyAddresses {
				continue
			}
			for _, a := range ep.Addresses {
				ip := net.ParseIP(a)
				if ip == nil || seen[ip.String()] {
					continue
				}
				seen[ip.String()] = true
				name := dashed(ip)
				if ep.Hostname != nil && *ep.Hostname != "" {
					name = strings.ToLower(*ep.Hostname)
				}
				out = append(out, endpoint{ip: ip, name: name, slice: es})
			}
		}
	}
	return out
}

func (s *Server) svcName(svc *corev1.Service) string {
	return svc.Name + "." + svc.Namespace + ".svc." + s.zone
}

func (s *Server) hdr(name string, t uint16) mdns.RR_Header {
	return mdns.RR_Header{Name: name, Rrtype: t, Class: mdns.ClassINET, Ttl: s.cfg.TTL}
}

func (s *Server) soa() *mdns.SOA {
	h := s.hdr(s.zone, mdns.TypeSOA)
	return &mdns.SOA{
		Hdr:     h,
		Ns:      "ns.dns." + s.zone,
		Mbox:    "hostmaster." + s.zone,
		Serial:  1,
		Refresh: 7200,
		Retry:   1800,
		Expire:  86400,
		Minttl:  s.cfg.TTL,
	}
}

// addrRRs returns A or AAAA records (per qtype; both for ANY) for ips.
func (s *Server) addrRRs(name string, qtype uint16, ips []net.IP) []mdns.RR {
	var out []mdns.RR
	for _, ip := range ips {
		if v4 := ip.To4(); v4 != nil {
			if qtype == mdns.TypeA || qtype == mdns.TypeANY {
				out = append(out, &mdns.A{Hdr: s.hdr(name, mdns.TypeA), A: v4})
			}
		} else if qtype == mdns.TypeAAAA || qtype == mdns.TypeANY {
			out = append(out, &mdns.AAAA{Hdr: s.hdr(name, mdns.TypeAAAA), AAAA: ip})
		}
	}
	return out
}

// answerZone answers a query inside the cluster domain authoritatively.
func (s *Server) answerZone(r *mdns.Msg, q mdns.Question, lname string) *mdns.Msg {
	m := new(mdns.Msg)
	m.SetReply(r)
	m.Authoritative = true

	rel := strings.TrimSuffix(strings.TrimSuffix(lname, s.zone), ".")
	var labels []string
	if rel != "" {
		labels = mdns.SplitDomainName(rel)
	}
	exists, answer, extra := s.lookup(q, labels)
	if !exists {
		m.Rcode = mdns.RcodeNameError
	}
	m.Answer, m.Extra = answer, extra
	if len(answer) == 0 {
		m.Ns = []mdns.RR{s.soa()}
	}
	// ExternalName: chase the CNAME target for address queries.
	if len(answer) == 1 && q.Qtype != mdns.TypeCNAME && q.Qtype != mdns.TypeANY {
		if cn, ok := answer[0].(*mdns.CNAME); ok {
			m.Answer = append(m.Answer, s.chase(r, cn.Target, q.Qtype)...)
		}
	}
	return m
}

// chase resolves a CNAME target (one level, in-zone or via the upstreams).
func (s *Server) chase(r *mdns.Msg, target string, qtype uint16) []mdns.RR {
	lt := strings.ToLower(target)
	q := mdns.Question{Name: target, Qtype: qtype, Qclass: mdns.ClassINET}
	if mdns.IsSubDomain(s.zone, lt) {
		rel := strings.TrimSuffix(strings.TrimSuffix(lt, s.zone), ".")
		var labels []string
		if rel != "" {
			labels = mdns.SplitDomainName(rel)
		}
		_, ans, _ := s.lookup(q, labels)
		for _, rr := range ans {
			if _, ok := rr.(*mdns.CNAME); ok {
				return nil // no chains inside the zone
			}
		}
		return ans
	}
	req := new(mdns.Msg)
	req.SetQuestion(target, qtype)
	req.RecursionDesired = true
	req.CheckingDisabled = r.CheckingDisabled
	resp := s.forwardMsg(req)
	if resp == nil || resp.Rcode != mdns.RcodeSuccess {
		return nil
	}
	return resp.Answer
}

// lookup resolves labels (relative to the zone, left to right) and reports
// whether the name exists plus the answer and additional records.
func (s *Server) lookup(q mdns.Question, labels []string) (bool, []mdns.RR, []mdns.RR) {
	n := len(labels)
	if n == 0 {
		switch q.Qtype {
		case mdns.TypeSOA:
			soa := s.soa()
			soa.Hdr.Name = q.Name
			return true, []mdns.RR{soa}, nil
		case mdns.TypeNS:
			return true, []mdns.RR{&mdns.NS{Hdr: s.hdr(q.Name, mdns.TypeNS), Ns: "ns.dns." + s.zone}}, nil
		}
		return true, nil, nil
	}
	switch labels[n-1] {
	case "svc":
		switch n {
		case 1:
			return true, nil, nil
		case 2:
			objs, _ := s.svcInformer.GetIndexer().ByIndex(cache.NamespaceIndex, labels[0])
			return len(objs) > 0, nil, nil
		case 3:
			return s.lookupService(q, labels[1], labels[0])
		case 4:
			return s.lookupEndpoint(q, labels[2], labels[1], labels[0])
		case 5:
			return s.lookupSRV(q, labels[3], labels[2], labels[0], labels[1])
		}
	case "pod":
		switch n {
		case 1, 2:
			return true, nil, nil
		case 3:
			ip := undashed(labels[0])
			if ip == nil {
				return false, nil, nil
			}
			return true, s.addrRRs(q.Name, q.Qtype, []net.IP{ip}), nil
		}
	}
	return false, nil, nil
}

func (s *Server) getService(ns, name string) *corev1.Service {
	obj, ok, err := s.svcInformer.GetIndexer().GetByKey(ns + "/" + name)
	if err != nil || !ok {
		return nil
	}
	svc, _ := obj.(*corev1.Service)
	return svc
}

func (s *Server) lookupService(q mdns.Question, ns, name string) (bool, []mdns.RR, []mdns.RR) {
	svc := s.getService(ns, name)
	if svc == nil {
		return false, nil, nil
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		if svc.Spec.ExternalName == "" {
			return true, nil, nil
		}
		return true, []mdns.RR{&mdns.CNAME{Hdr: s.hdr(q.Name, mdns.TypeCNAME), Target: mdns.Fqdn(svc.Spec.ExternalName)}}, nil
	}
	headless := isHeadless(svc)
	switch q.Qtype {
	case mdns.TypeSRV:
		var ans, extra []mdns.RR
		for _, p := range svc.Spec.Ports {
			if p.Name == "" {
				continue
			}
			a, e := s.srvRecords(q.Name, svc, p, headless)
			ans, extra = append(ans, a...), append(extra, e...)
		}
		return true, ans, dedupRRs(extra)
	}
	if headless {
		var ips []net.IP
		for _, ep := range s.endpointsOf(svc) {
			ips = append(ips, ep.ip)
		}
		return true, s.addrRRs(q.Name, q.Qtype, ips), nil
	}
	return true, s.addrRRs(q.Name, q.Qtype, clusterIPs(svc)), nil
}

// lookupEndpoint answers <host>.<svc>.<ns>.svc for headless services.
func (s *Server) lookupEndpoint(q mdns.Question, ns, name, host string) (bool, []mdns.RR, []mdns.RR) {
	svc := s.getService(ns, name)
	if svc == nil || !isHeadless(svc) {
		return false, nil, nil
	}
	var ips []net.IP
	for _, ep := range s.endpointsOf(svc) {
		if ep.name == host {
			ips = append(ips, ep.ip)
		}
	}
	if len(ips) == 0 {
		return false, nil, nil
	}
	return true, s.addrRRs(q.Name, q.Qtype, ips), nil
}

// lookupSRV answers _<port>._<proto>.<svc>.<ns>.svc.
func (s *Server) lookupSRV(q mdns.Question, ns, name, portLabel, protoLabel string) (bool, []mdns.RR, []mdns.RR) {
	if !strings.HasPrefix(portLabel, "_") || !strings.HasPrefix(protoLabel, "_") {
		return false, nil, nil
	}
	svc := s.getService(ns, name)
	if svc == nil || svc.Spec.Type == corev1.ServiceTypeExternalName {
		return false, nil, nil
	}
	portName, proto := portLabel[1:], protoLabel[1:]
	for _, p := range svc.Spec.Ports {
		if p.Name == "" || strings.ToLower(p.Name) != portName || strings.ToLower(string(protocolOf(p.Protocol))) != proto {
			continue
		}
		if q.Qtype != mdns.TypeSRV && q.Qtype != mdns.TypeANY {
			return true, nil, nil
		}
		ans, extra := s.srvRecords(q.Name, svc, p, isHeadless(svc))
		return true, ans, extra
	}
	return false, nil, nil
}

func protocolOf(p corev1.Protocol) corev1.Protocol {
	if p == "" {
		return corev1.ProtocolTCP
	}
	return p
}

func srvWeight(n int) uint16 {
	if n <= 0 {
		return 0
	}
	w := 100 / n
	if w == 0 {
		w = 1
	}
	return uint16(w)
}

// srvRecords builds the SRV records (owner name owner) for one service port.
func (s *Server) srvRecords(owner string, svc *corev1.Service, p corev1.ServicePort, headless bool) ([]mdns.RR, []mdns.RR) {
	if !headless {
		target := s.svcName(svc)
		srv := &mdns.SRV{Hdr: s.hdr(owner, mdns.TypeSRV), Priority: 0, Weight: 100, Port: uint16(p.Port), Target: target}
		return []mdns.RR{srv}, s.addrRRs(target, mdns.TypeANY, clusterIPs(svc))
	}
	eps := s.endpointsOf(svc)
	var ans, extra []mdns.RR
	type rec struct {
		ep   endpoint
		port int32
	}
	var recs []rec
	for _, ep := range eps {
		port, ok := slicePort(ep.slice, p)
		if !ok {
			continue
		}
		recs = append(recs, rec{ep, port})
	}
	w := srvWeight(len(recs))
	for _, r := range recs {
		target := r.ep.name + "." + s.svcName(svc)
		ans = append(ans, &mdns.SRV{Hdr: s.hdr(owner, mdns.TypeSRV), Priority: 0, Weight: w, Port: uint16(r.port), Target: target})
		extra = append(extra, s.addrRRs(target, mdns.TypeANY, []net.IP{r.ep.ip})...)
	}
	return ans, extra
}

// slicePort finds the endpoint port of a slice matching a service port (by
// name and protocol).
func slicePort(es *discoveryv1.EndpointSlice, p corev1.ServicePort) (int32, bool) {
	for _, sp := range es.Ports {
		name := ""
		if sp.Name != nil {
			name = *sp.Name
		}
		proto := corev1.ProtocolTCP
		if sp.Protocol != nil {
			proto = *sp.Protocol
		}
		if name == p.Name && proto == protocolOf(p.Protocol) && sp.Port != nil {
			return *sp.Port, true
		}
	}
	return 0, false
}

func dedupRRs(rrs []mdns.RR) []mdns.RR {
	seen := map[string]bool{}
	out := rrs[:0]
	for _, rr := range rrs {
		k := rr.String()
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, rr)
	}
	return out
}

// answerPTR answers reverse queries for known ClusterIPs and headless
// endpoint IPs; nil when the address is not ours (then it is forwarded).
func (s *Server) answerPTR(r *mdns.Msg, q mdns.Question, lname string) *mdns.Msg {
	ip := reverseIP(lname)
	if ip == nil {
		return nil
	}
	key := ip.String()
	var names []string
	seen := map[string]bool{}
	add := func(n string) {
		if !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	svcs, _ := s.svcInformer.GetIndexer().ByIndex(indexClusterIP, key)
	for _, o := range svcs {
		if svc, ok := o.(*corev1.Service); ok {
			add(s.svcName(svc))
		}
	}
	slices, _ := s.sliceInformer.GetIndexer().ByIndex(indexAddr, key)
	for _, o := range slices {
		es, ok := o.(*discoveryv1.EndpointSlice)
		if !ok {
			continue
		}
		svc := s.getService(es.Namespace, es.Labels[discoveryv1.LabelServiceName])
		if svc == nil || !isHeadless(svc) {
			continue
		}
		for _, ep := range s.endpointsOf(svc) {
			if ep.ip.Equal(ip) {
				add(ep.name + "." + s.svcName(svc))
			}
		}
	}
	if len(names) == 0 {
		return nil
	}
	m := new(mdns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	for _, n := range names {
		m.Answer = append(m.Answer, &mdns.PTR{Hdr: s.hdr(q.Name, mdns.TypePTR), Ptr: n})
	}
	return m
}

// reverseIP parses a lower-case in-addr.arpa. or ip6.arpa. name.
func reverseIP(name string) net.IP {
	switch {
	case strings.HasSuffix(name, ".in-addr.arpa."):
		parts := strings.Split(strings.TrimSuffix(name, ".in-addr.arpa."), ".")
		if len(parts) != 4 {
			return nil
		}
		for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
			parts[i], parts[j] = parts[j], parts[i]
		}
		ip := net.ParseIP(strings.Join(parts, "."))
		if ip == nil || ip.To4() == nil {
			return nil
		}
		return ip
	case strings.HasSuffix(name, ".ip6.arpa."):
		nibbles := strings.Split(strings.TrimSuffix(name, ".ip6.arpa."), ".")
		if len(nibbles) != 32 {
			return nil
		}
		var b strings.Builder
		for i := 31; i >= 0; i-- {
			if len(nibbles[i]) != 1 {
				return nil
			}
			b.WriteString(nibbles[i])
			if i%4 == 0 && i != 0 {
				b.WriteByte(':')
			}
		}
		return net.ParseIP(b.String())
	}
	return nil
}
