// Package hostport maps pods' host ports on the node: traffic to
// <hostIP or any local address>:<hostPort>/<protocol> goes to
// <podIP>:<containerPort>, as CNI's portmap plugin (chained after the
// bridge plugin, with `snat`) does for k3s. The kubelet asks for it when
// it sets up a pod's sandbox and the node network (netplane/nodenet)
// removes it with the sandbox, so a pod's mappings live exactly as long
// as its network does.
//
// Rule layout (table ip kelp, netplane/nft):
//
//	chain hostport-prerouting  { type nat hook prerouting priority dstnat+1; fib daddr type local jump hostport-dnat }
//	chain hostport-output      { type nat hook output priority dstnat+1; fib daddr type local jump hostport-dnat }
//	chain hostport-dnat {
//	    ip daddr <hostIP> meta l4proto P th dport <hostPort> dnat to <podIP>:<containerPort>   # a hostIP, first
//	    meta l4proto P th dport <hostPort> dnat to <podIP>:<containerPort>                     # every local address
//	}
//	chain hostport-postrouting { type nat hook postrouting priority srcnat;
//	    ip saddr <podIP> ip daddr <podIP> masquerade        # the pod reaching itself through its host port
//	    ip saddr 127.0.0.1 ip daddr <podIP> masquerade }    # the node through 127.0.0.1
//	chain hostport-localnet-guard { type filter hook prerouting priority mangle;
//	    iifname <bridge> ip daddr 127.0.0.0/8 drop }
//
// Every rule of hostport-dnat and hostport-postrouting carries the comment
// "pod <uid>" (nftables rule userdata, as `nft` writes comments): that is
// how Unmap and Recover find a pod's rules, as portmap finds a container's
// by its ID, and why the package keeps no state of its own.
//
// The prerouting and output chains come right after the service proxy's
// (dstnat), as portmap's chain follows kube-proxy's in iptables: a host
// port that is also a Service's node port goes to the Service. Only a
// connection's first packet passes nat chains, so the two never both
// apply.
//
// 127.0.0.1: the output chain also DNATs connections to a loopback
// address. A packet whose source is 127.0.0.1 may leave through the
// bridge only with net.ipv4.conf.<bridge>.route_localnet=1 (portmap sets
// it on the interface towards the pod for the same reason), and is then
// masqueraded to the bridge address so the pod can answer. route_localnet
// would also let anything on the bridge reach the node's loopback
// services by sending to 127.0.0.0/8 (kube-proxy's CVE-2020-8558), so the
// guard chain drops such packets before NAT (priority mangle, -150), when
// a legitimate reply still has the bridge address as its destination.
//
// A hostIP of another family than the pod network's (IPv4) is not mapped,
// as portmap skips it; the pod network is IPv4 only.
package hostport

import (
	"fmt"
	"net/netip"
	"os"
	"sort"
	"strings"
	"sync"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"github.com/sirupsen/logrus"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"github.com/kelp-project/kelp/netplane/bridge"
	"github.com/kelp-project/kelp/netplane/conntrack"
	"github.com/kelp-project/kelp/netplane/nft"
	"github.com/kelp-project/kelp/server/scheduler/hostports"
)

// The package's chains in table ip kelp; Cleanup removes every chain with
// Prefix.
const (
	Prefix          = "hostport-"
	ChainPrerouting = Prefix + "prerouting"
	ChainOutput     = Prefix + "output"
	ChainDNAT       = Prefix + "dnat"
	ChainMasq       = Prefix + "postrouting"
	ChainGuard      = Prefix + "localnet-guard"
)

// Priorities of the base chains (see the package comment).
const (
	priorityDNAT  = nftables.ChainPriority(-100 + 1) // right after the proxy's dstnat chains
	priorityMasq  = nftables.ChainPriority(100)      // srcnat
	priorityGuard = nftables.ChainPriority(-150)     // mangle: before NAT undoes a reply's masquerade
)

var (
	loopback     = netip.MustParsePrefix("127.0.0.0/8")
	localhostOne = netip.MustParseAddr("127.0.0.1")
)

// Mapping is one host port of a pod.
type Mapping struct {
	Protocol corev1.Protocol // TCP, UDP or SCTP
	// HostIP is the address the port is on; the zero Addr is every local
	// address (hostIP unset or 0.0.0.0).
	HostIP        netip.Addr
	HostPort      uint16
	ContainerPort uint16
}

func (m Mapping) String() string {
	ip := "*"
	if m.HostIP.IsValid() {
		ip = m.HostIP.String()
	}
	return fmt.Sprintf("%s %s:%d -> :%d", m.Protocol, ip, m.HostPort, m.ContainerPort)
}

// reachesLoopback reports whether the mapping answers on 127.0.0.1.
func (m Mapping) reachesLoopback() bool { return !m.HostIP.IsValid() || loopback.Contains(m.HostIP) }

// ForPod returns the mappings of a pod: the host ports the scheduler and
// the kubelet's admission reserve for it (server/scheduler/hostports),
// those of a hostIP of another family left out.
func ForPod(pod *corev1.Pod) []Mapping {
	var out []Mapping
	for _, p := range hostports.ContainerPorts(pod) {
		m := Mapping{Protocol: p.Protocol, HostPort: uint16(p.HostPort), ContainerPort: uint16(p.ContainerPort)}
		if m.Protocol == "" {
			m.Protocol = corev1.ProtocolTCP
		}
		if p.HostIP != "" {
			ip, err := netip.ParseAddr(p.HostIP)
			if err != nil || !ip.Is4() {
				continue // validated by the API; not of the pod network's family
			}
			if !ip.IsUnspecified() {
				m.HostIP = ip
			}
		}
		out = append(out, m)
	}
	return out
}

// Config says where the mappings go.
type Config struct {
	// NetNS is the node's network namespace ("" = the caller's).
	NetNS string
	// Bridge is the interface the pods are behind (netplane/bridge's cni0):
	// route_localnet goes on it, and the guard matches it.
	Bridge string
}

// Mapper installs and removes mappings. Its methods are safe for
// concurrent use (one mutex: a pod's old rules are listed, then deleted
// in the transaction that adds the new ones).
type Mapper struct {
	cfg Config
	mu  sync.Mutex
}

// New returns a Mapper; it changes nothing until the first Map.
func New(cfg Config) *Mapper {
	if cfg.Bridge == "" {
		cfg.Bridge = bridge.DefaultBridgeName
	}
	return &Mapper{cfg: cfg}
}

// comment is the tag of a pod's rules.
func comment(podUID string) string { return "pod " + podUID }

// owner returns the pod UID a rule is tagged with, or "".
func owner(r *nftables.Rule) string {
	c, ok := userdata.GetString(r.UserData, userdata.TypeComment)
	if !ok {
		return ""
	}
	uid, ok := strings.CutPrefix(c, "pod ")
	if !ok {
		return ""
	}
	return uid
}

// Map installs the pod's mappings to podIP, replacing any it had, in one
// transaction. No mappings is a no-op (a pod's ports cannot change, so
// such a pod has no rules to replace). UDP flows to the host ports that
// conntrack holds from before are dropped, as portmap does, or they would
// keep going where they went.
func (m *Mapper) Map(podUID string, podIP netip.Addr, ms []Mapping) error {
	if len(ms) == 0 {
		return nil
	}
	if !podIP.Is4() {
		return fmt.Errorf("hostport: pod IP %s is not IPv4", podIP)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	c, done, err := m.conn()
	if err != nil {
		return err
	}
	defer done()
	old, err := rulesOf(c, func(uid string) bool { return uid == podUID })
	if err != nil {
		return err
	}
	t := c.AddTable(nft.Table())
	chains := ensureChains(c, t, m.cfg.Bridge)
	for _, r := range old {
		if err := c.DelRule(r); err != nil {
			return fmt.Errorf("hostport: %w", err)
		}
	}
	udata := userdata.AppendString(nil, userdata.TypeComment, comment(podUID))
	for _, r := range Rules(podIP, ms) {
		rule := &nftables.Rule{Table: t, Chain: chains[r.Chain], Exprs: r.Exprs, UserData: udata}
		if r.First {
			c.InsertRule(rule)
		} else {
			c.AddRule(rule)
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("hostport: map %v of pod %s: %w", ms, podUID, err)
	}
	for _, mp := range ms {
		if mp.reachesLoopback() {
			if err := m.routeLocalnet(); err != nil {
				return err
			}
			break
		}
	}
	m.clearUDP(ms)
	return nil
}

// Unmap removes the pod's mappings; a pod without any is a no-op.
func (m *Mapper) Unmap(podUID string) error {
	return m.remove(func(uid string) bool { return uid == podUID })
}

// Recover removes the mappings of every pod not in keep (at kubelet
// start: pods that went while the agent was down).
func (m *Mapper) Recover(keep map[string]bool) error {
	return m.remove(func(uid string) bool { return !keep[uid] })
}

func (m *Mapper) remove(match func(uid string) bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, done, err := m.conn()
	if err != nil {
		return err
	}
	defer done()
	rules, err := rulesOf(c, match)
	if err != nil || len(rules) == 0 {
		return err
	}
	for _, r := range rules {
		if err := c.DelRule(r); err != nil {
			return fmt.Errorf("hostport: %w", err)
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("hostport: remove mappings: %w", err)
	}
	return nil
}

// Cleanup deletes the package's chains (with every mapping) in the
// network namespace at netnsPath ("" = the caller's); it needs no running
// Mapper (kelp killall). The table stays (nft.DropIfEmpty).
func Cleanup(netnsPath string) error {
	c, done, err := connIn(netnsPath)
	if err != nil {
		return err
	}
	defer done()
	chains, err := c.ListChainsOfTableFamily(nft.Family)
	if err != nil {
		return fmt.Errorf("hostport: list chains: %w", err)
	}
	// Base chains first: they jump to hostport-dnat, which cannot go while
	// referenced (the kernel orders a transaction's deletions as given).
	sort.SliceStable(chains, func(i, j int) bool { return chains[i].Hooknum != nil && chains[j].Hooknum == nil })
	n := 0
	for _, ch := range chains {
		if ch.Table != nil && ch.Table.Name == nft.TableName && strings.HasPrefix(ch.Name, Prefix) {
			c.DelChain(ch)
			n++
		}
	}
	if n == 0 {
		return nil
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("hostport: delete chains: %w", err)
	}
	return nil
}

// ensureChains adds the package's chains (a no-op for those that exist)
// and rewrites the base chains' fixed rules, returning the chains by name.
func ensureChains(c *nftables.Conn, t *nftables.Table, bridgeName string) map[string]*nftables.Chain {
	accept := nftables.ChainPolicyAccept
	base := func(name string, typ nftables.ChainType, hook *nftables.ChainHook, prio nftables.ChainPriority) *nftables.Chain {
		p := prio
		return c.AddChain(&nftables.Chain{Name: name, Table: t, Type: typ, Hooknum: hook, Priority: &p, Policy: &accept})
	}
	chains := map[string]*nftables.Chain{
		ChainDNAT: c.AddChain(&nftables.Chain{Name: ChainDNAT, Table: t}),
		ChainMasq: base(ChainMasq, nftables.ChainTypeNAT, nftables.ChainHookPostrouting, priorityMasq),
	}
	fixed := []struct {
		chain *nftables.Chain
		rule  []expr.Any
	}{
		{base(ChainPrerouting, nftables.ChainTypeNAT, nftables.ChainHookPrerouting, priorityDNAT), JumpIfLocal()},
		{base(ChainOutput, nftables.ChainTypeNAT, nftables.ChainHookOutput, priorityDNAT), JumpIfLocal()},
		{base(ChainGuard, nftables.ChainTypeFilter, nftables.ChainHookPrerouting, priorityGuard), Guard(bridgeName)},
	}
	for _, f := range fixed {
		c.FlushChain(f.chain)
		c.AddRule(&nftables.Rule{Table: t, Chain: f.chain, Exprs: f.rule})
		chains[f.chain.Name] = f.chain
	}
	return chains
}

// rulesOf lists the mapping rules whose pod matches; missing chains hold
// none.
func rulesOf(c *nftables.Conn, match func(uid string) bool) ([]*nftables.Rule, error) {
	t := nft.Table()
	var out []*nftables.Rule
	for _, name := range []string{ChainDNAT, ChainMasq} {
		if _, err := c.ListChain(t, name); err != nil {
			continue // not there (the library does not tell ENOENT apart)
		}
		rules, err := c.GetRules(t, &nftables.Chain{Name: name, Table: t})
		if err != nil {
			return nil, fmt.Errorf("hostport: list chain %s: %w", name, err)
		}
		for _, r := range rules {
			if uid := owner(r); uid != "" && match(uid) {
				out = append(out, r)
			}
		}
	}
	return out, nil
}

// Rule is one rule of a pod's mappings, before it is tagged.
type Rule struct {
	Chain string
	// First: inserted at the head of the chain (a mapping on one address
	// is looked at before those on every address).
	First bool
	Exprs []expr.Any
}

// Rules builds the rules of a pod's mappings: a DNAT rule per mapping,
// then the two masquerade rules of the pod (hairpin and 127.0.0.1).
func Rules(podIP netip.Addr, ms []Mapping) []Rule {
	var out []Rule
	for _, m := range ms {
		var ex []expr.Any
		if m.HostIP.IsValid() {
			ex = append(ex, nft.DAddrIn(netip.PrefixFrom(m.HostIP, 32))...)
		}
		ex = append(ex, DNAT(m.Protocol, m.HostPort, podIP, m.ContainerPort)...)
		out = append(out, Rule{Chain: ChainDNAT, First: m.HostIP.IsValid(), Exprs: ex})
	}
	pod := netip.PrefixFrom(podIP, 32)
	for _, src := range []netip.Addr{podIP, localhostOne} {
		ex := append(nft.SAddrIn(netip.PrefixFrom(src, 32)), nft.DAddrIn(pod)...)
		out = append(out, Rule{Chain: ChainMasq, Exprs: append(ex, &expr.Masq{})})
	}
	return out
}

// protoNumbers are the IP protocol numbers of the API's protocols.
var protoNumbers = map[corev1.Protocol]byte{
	corev1.ProtocolTCP:  unix.IPPROTO_TCP,
	corev1.ProtocolUDP:  unix.IPPROTO_UDP,
	corev1.ProtocolSCTP: unix.IPPROTO_SCTP,
}

// DNAT is `meta l4proto P th dport <hostPort> dnat to <podIP>:<port>`
// (the l4proto match must come before a DNAT with a port; TCP, UDP and
// SCTP all have the destination port at offset 2).
func DNAT(proto corev1.Protocol, hostPort uint16, podIP netip.Addr, port uint16) []expr.Any {
	ip := podIP.As4()
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{protoNumbers[proto]}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(hostPort)},
		&expr.Immediate{Register: 1, Data: ip[:]},
		&expr.Immediate{Register: 2, Data: binaryutil.BigEndian.PutUint16(port)},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1, RegProtoMin: 2, Specified: true},
	}
}

// JumpIfLocal is `fib daddr type local jump hostport-dnat`: any address
// of the node, 127.0.0.1 included.
func JumpIfLocal() []expr.Any {
	return []expr.Any{
		&expr.Fib{Register: 1, FlagDADDR: true, ResultADDRTYPE: true},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(unix.RTN_LOCAL)},
		&expr.Verdict{Kind: expr.VerdictJump, Chain: ChainDNAT},
	}
}

// Guard is `iifname <bridge> ip daddr 127.0.0.0/8 drop`.
func Guard(bridgeName string) []expr.Any {
	name := make([]byte, unix.IFNAMSIZ)
	copy(name, bridgeName)
	ex := []expr.Any{
		&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: name},
	}
	ex = append(ex, nft.DAddrIn(loopback)...)
	return append(ex, &expr.Verdict{Kind: expr.VerdictDrop})
}

func (m *Mapper) conn() (*nftables.Conn, func(), error) { return connIn(m.cfg.NetNS) }

// connIn opens an nftables connection in the namespace at path ("" = the
// caller's); done releases the namespace handle after the last use.
func connIn(path string) (*nftables.Conn, func(), error) {
	if path == "" {
		c, err := nftables.New()
		if err != nil {
			return nil, nil, fmt.Errorf("hostport: nftables: %w", err)
		}
		return c, func() {}, nil
	}
	h, err := netns.GetFromPath(path)
	if err != nil {
		return nil, nil, fmt.Errorf("hostport: open netns %s: %w", path, err)
	}
	c, err := nftables.New(nftables.WithNetNSFd(int(h)))
	if err != nil {
		h.Close()
		return nil, nil, fmt.Errorf("hostport: nftables: %w", err)
	}
	return c, func() { h.Close() }, nil
}

// routeLocalnet sets net.ipv4.conf.<bridge>.route_localnet=1 (see the
// package comment).
func (m *Mapper) routeLocalnet() error {
	write := func() error {
		p := "/proc/sys/net/ipv4/conf/" + m.cfg.Bridge + "/route_localnet"
		if b, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(b)) == "1" {
			return nil
		}
		return os.WriteFile(p, []byte("1\n"), 0o644)
	}
	var err error
	if m.cfg.NetNS == "" {
		err = write()
	} else {
		err = bridge.InNetNSPath(m.cfg.NetNS, write)
	}
	if err != nil {
		return fmt.Errorf("hostport: set route_localnet on %s: %w", m.cfg.Bridge, err)
	}
	return nil
}

// clearUDP deletes the conntrack entries of UDP flows to the mapped host
// ports. Failures are only logged: the mapping is in place either way.
func (m *Mapper) clearUDP(ms []Mapping) {
	var filters []netlink.CustomConntrackFilter
	for _, mp := range ms {
		if mp.Protocol == corev1.ProtocolUDP {
			filters = append(filters, conntrack.UDPTo(mp.HostIP, mp.HostPort))
		}
	}
	if len(filters) == 0 {
		return
	}
	ns := netns.None()
	if m.cfg.NetNS != "" {
		var err error
		if ns, err = netns.GetFromPath(m.cfg.NetNS); err != nil {
			logrus.WithError(err).Warn("hostport: conntrack: open the network namespace")
			return
		}
		defer ns.Close()
	}
	if err := conntrack.Delete(ns, filters); err != nil {
		logrus.WithError(err).Warn("hostport: conntrack: delete stale UDP entries")
	}
}
