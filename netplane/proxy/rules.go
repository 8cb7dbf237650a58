package proxy

import (
	"encoding/base32"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The proxy's objects in table ip kelp all carry this prefix; Cleanup and
// the first sync of a new Proxier delete or rebuild exactly those.
const (
	Prefix = "proxy-"

	chainPrerouting  = Prefix + "nat-prerouting"  // nat, prerouting, -100
	chainOutput      = Prefix + "nat-output"      // nat, output, -100
	chainPostrouting = Prefix + "nat-postrouting" // nat, postrouting, 100
	chainServices    = Prefix + "services"        // regular: dispatch via the maps
	chainFilterIn    = Prefix + "filter-input"    // filter, input, -10
	chainFilterFwd   = Prefix + "filter-forward"  // filter, forward, -10
	chainFilterOut   = Prefix + "filter-output"   // filter, output, -10
	chainRejectCheck = Prefix + "reject-check"    // regular: services without endpoints
	chainReject      = Prefix + "reject"          // regular: tcp reset / icmp port unreachable

	mapServiceIPs   = Prefix + "service-ips"    // ipv4_addr . inet_proto . inet_service : verdict
	mapNodePorts    = Prefix + "nodeports"      // inet_proto . inet_service : verdict
	setNoEPIPs      = Prefix + "noep-ips"       // ipv4_addr . inet_proto . inet_service
	setNoEPNodePort = Prefix + "noep-nodeports" // inet_proto . inet_service
	setNodeIPs      = Prefix + "node-ips"       // ipv4_addr
	setClusterIPs   = Prefix + "cluster-ips"    // ipv4_addr
	setHairpin      = Prefix + "hairpin"        // ipv4_addr . ipv4_addr

	svcChainPrefix = Prefix + "svc-"
	extChainPrefix = Prefix + "ext-"
	affSetPrefix   = Prefix + "aff-"

	// MasqMark is the packet mark bit that asks proxy-nat-postrouting to
	// masquerade (as kube-proxy's 0x4000).
	MasqMark = 0x4000

	protoTCP  = 6
	protoUDP  = 17
	protoSCTP = 132
)

// endpoint is one backend of a service port.
type endpoint struct {
	IP          netip.Addr
	Port        uint16
	NodeName    string
	Ready       bool
	Serving     bool
	Terminating bool
}

// servicePort is the proxy's view of one port of one Service.
type servicePort struct {
	Namespace, Name, PortName string
	Proto                     uint8
	ClusterIPs                []netip.Addr
	Port                      uint16
	NodePort                  uint16
	ExternalIPs               []netip.Addr // status.loadBalancer.ingress and spec.externalIPs
	ExternalLocal             bool         // externalTrafficPolicy: Local
	InternalLocal             bool         // internalTrafficPolicy: Local
	AffinityTimeout           time.Duration
	Endpoints                 []endpoint
}

func (sp *servicePort) key() string {
	return sp.Namespace + "/" + sp.Name + ":" + sp.PortName + "/" + protoName(sp.Proto)
}

// state is everything a sync is computed from.
type state struct {
	Ports []servicePort
}

// opKind is one rule of a generated (per-service) chain.
type opKind uint8

const (
	opMasq         opKind = iota // meta mark set mark | 0x4000
	opGotoIfCIDR                 // ip saddr <cluster CIDR> goto Target
	opGoto                       // goto Target
	opDrop                       // drop
	opAffinityDNAT               // ip saddr @Set meta l4proto P dnat to IP:Port
	opPickDNAT                   // [numgen random mod Mod == 0] [update @Set { ip saddr }] meta l4proto P dnat to IP:Port
)

type op struct {
	Kind   opKind
	IP     netip.Addr
	Port   uint16
	Proto  uint8
	Mod    uint32 // opPickDNAT: 0 = unconditional
	Target string
	Set    string
}

func (o op) String() string {
	return fmt.Sprintf("%d %s %d %d %d %s %s", o.Kind, o.IP, o.Port, o.Proto, o.Mod, o.Target, o.Set)
}

type chainSpec struct {
	Name string
	Ops  []op
}

// sameOps reports whether two chains have the same rules.
func sameOps(a, b []op) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// udpService records, for UDP service ports, where clients send to and which
// backends they reach, so that stale conntrack entries can be deleted.
type udpService struct {
	IPs      []netip.Addr
	Port     uint16
	NodePort uint16
	Backends map[netip.AddrPort]bool
}

// ruleset is the desired content of the proxy's objects (apart from the
// fixed base chains, which depend only on the Config).
type ruleset struct {
	Chains       map[string]*chainSpec
	ServiceIPs   map[string]string // key (ip . proto . port) -> chain (goto)
	NodePorts    map[string]string // key (proto . port) -> chain (goto)
	ClusterIPs   map[string]bool   // ipv4_addr: traffic to these from outside the cluster CIDR is marked
	Hairpin      map[string]bool   // ipv4_addr . ipv4_addr (ep . ep): masqueraded in postrouting
	NoEPIPs      map[string]bool
	NoEPNodePort map[string]bool
	Affinity     map[string]time.Duration // set name -> timeout
	UDP          map[string]*udpService   // servicePort key
}

func newRuleset() *ruleset {
	return &ruleset{
		Chains:       map[string]*chainSpec{},
		ServiceIPs:   map[string]string{},
		NodePorts:    map[string]string{},
		ClusterIPs:   map[string]bool{},
		Hairpin:      map[string]bool{},
		NoEPIPs:      map[string]bool{},
		NoEPNodePort: map[string]bool{},
		Affinity:     map[string]time.Duration{},
		UDP:          map[string]*udpService{},
	}
}

var b32 = base32.StdEncoding.WithPadding(base32.NoPadding)

// hashName gives a stable, valid nft identifier: prefix + 13 base32 chars
// of the 64-bit FNV-1a hash of parts.
func hashName(prefix string, parts ...string) string {
	h := fnv.New64a()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], h.Sum64())
	return prefix + strings.ToLower(b32.EncodeToString(b[:]))
}

func protoName(p uint8) string {
	switch p {
	case protoTCP:
		return "tcp"
	case protoUDP:
		return "udp"
	case protoSCTP:
		return "sctp"
	}
	return strconv.Itoa(int(p))
}

// ipProtoPortKey is the concatenated set key ipv4_addr . inet_proto .
// inet_service (each field padded to 4 bytes).
func ipProtoPortKey(ip netip.Addr, proto uint8, port uint16) []byte {
	a := ip.As4()
	return []byte{a[0], a[1], a[2], a[3], proto, 0, 0, 0, byte(port >> 8), byte(port), 0, 0}
}

// protoPortKey is the concatenated key inet_proto . inet_service.
func protoPortKey(proto uint8, port uint16) []byte {
	return []byte{proto, 0, 0, 0, byte(port >> 8), byte(port), 0, 0}
}

// pickEndpoints returns the endpoints that receive traffic, as upstream:
// the ready ones, or when none is ready, the serving+terminating ones.
func pickEndpoints(eps []endpoint) []endpoint {
	var ready, term []endpoint
	for _, e := range eps {
		switch {
		case e.Ready:
			ready = append(ready, e)
		case e.Serving && e.Terminating:
			term = append(term, e)
		}
	}
	if len(ready) > 0 {
		return ready
	}
	return term
}

func localOnly(eps []endpoint, node string) []endpoint {
	var out []endpoint
	for _, e := range eps {
		if e.NodeName == node {
			out = append(out, e)
		}
	}
	return out
}

// builder computes a ruleset from state. It is a pure function of its
// inputs.
type builder struct {
	nodeName    string
	clusterCIDR netip.Prefix // invalid = unknown: every service packet is marked
}

// fragment builds the rules of one service port on their own.
func (b *builder) fragment(sp *servicePort) *ruleset {
	rs := newRuleset()
	b.addServicePort(rs, sp)
	return rs
}

func (b *builder) addServicePort(rs *ruleset, sp *servicePort) {
	if sp.Proto != protoTCP && sp.Proto != protoUDP && sp.Proto != protoSCTP {
		return
	}
	key := sp.key()
	all := pickEndpoints(sp.Endpoints)

	if sp.Proto == protoUDP {
		u := &udpService{Port: sp.Port, NodePort: sp.NodePort, Backends: map[netip.AddrPort]bool{}}
		u.IPs = append(append(u.IPs, sp.ClusterIPs...), sp.ExternalIPs...)
		for _, e := range all {
			u.Backends[netip.AddrPortFrom(e.IP, e.Port)] = true
		}
		rs.UDP[key] = u
	}

	if len(all) == 0 {
		// No usable endpoint anywhere: reject at once.
		for _, ip := range sp.ClusterIPs {
			rs.NoEPIPs[string(ipProtoPortKey(ip, sp.Proto, sp.Port))] = true
		}
		for _, ip := range sp.ExternalIPs {
			rs.NoEPIPs[string(ipProtoPortKey(ip, sp.Proto, sp.Port))] = true
		}
		if sp.NodePort != 0 {
			rs.NoEPNodePort[string(protoPortKey(sp.Proto, sp.NodePort))] = true
		}
		return
	}

	// Endpoints are picked and DNATed by the service chain's own rules
	// (no chain per endpoint: a third of the rules, and a big sync is
	// dominated by the number of netlink messages).
	affSets := map[netip.AddrPort]string{}
	affSet := func(e endpoint) string {
		ap := netip.AddrPortFrom(e.IP, e.Port)
		if n, ok := affSets[ap]; ok {
			return n
		}
		n := hashName(affSetPrefix, key, ap.String(), sp.AffinityTimeout.String())
		rs.Affinity[n] = sp.AffinityTimeout
		affSets[ap] = n
		return n
	}
	balance := func(eps []endpoint) []op {
		if len(eps) == 0 {
			return []op{{Kind: opDrop}}
		}
		var ops []op
		if sp.AffinityTimeout > 0 {
			for _, e := range eps {
				ops = append(ops, op{Kind: opAffinityDNAT, Set: affSet(e), IP: e.IP, Port: e.Port, Proto: sp.Proto})
			}
		}
		// Endpoint i is taken with probability 1/(N-i) by the packets
		// that reach its rule: uniform over the N endpoints.
		for i, e := range eps {
			o := op{Kind: opPickDNAT, IP: e.IP, Port: e.Port, Proto: sp.Proto}
			if i < len(eps)-1 {
				o.Mod = uint32(len(eps) - i)
			}
			if sp.AffinityTimeout > 0 {
				o.Set = affSet(e)
			}
			a4 := e.IP.As4()
			rs.Hairpin[string(append(a4[:], a4[:]...))] = true
			ops = append(ops, o)
		}
		return ops
	}
	sortEPs(all)

	// Internal (ClusterIP) path.
	svcChain := hashName(svcChainPrefix, key)
	internal := all
	if sp.InternalLocal {
		internal = pickEndpoints(localOnly(sp.Endpoints, b.nodeName))
		sortEPs(internal)
	}
	rs.Chains[svcChain] = &chainSpec{Name: svcChain, Ops: balance(internal)}
	for _, ip := range sp.ClusterIPs {
		rs.ServiceIPs[string(ipProtoPortKey(ip, sp.Proto, sp.Port))] = svcChain
		a4 := ip.As4()
		rs.ClusterIPs[string(a4[:])] = true
	}

	// External path (NodePort, load-balancer ingress, external IPs).
	if sp.NodePort == 0 && len(sp.ExternalIPs) == 0 {
		return
	}
	extChain := hashName(extChainPrefix, key)
	var extOps []op
	if sp.ExternalLocal {
		// Traffic from pods is internal traffic; the rest only reaches
		// local endpoints and keeps its source address.
		if b.clusterCIDR.IsValid() {
			extOps = append(extOps, op{Kind: opGotoIfCIDR, Target: svcChain})
		}
		local := pickEndpoints(localOnly(sp.Endpoints, b.nodeName))
		sortEPs(local)
		extOps = append(extOps, balance(local)...)
	} else {
		extOps = []op{{Kind: opMasq}, {Kind: opGoto, Target: svcChain}}
	}
	rs.Chains[extChain] = &chainSpec{Name: extChain, Ops: extOps}
	for _, ip := range sp.ExternalIPs {
		rs.ServiceIPs[string(ipProtoPortKey(ip, sp.Proto, sp.Port))] = extChain
	}
	if sp.NodePort != 0 {
		rs.NodePorts[string(protoPortKey(sp.Proto, sp.NodePort))] = extChain
	}
}

func sortEPs(eps []endpoint) {
	sort.Slice(eps, func(i, j int) bool {
		if c := eps[i].IP.Compare(eps[j].IP); c != 0 {
			return c < 0
		}
		return eps[i].Port < eps[j].Port
	})
}
