package proxy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	mnl "github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/kelp-project/kelp/netplane/nft"
)

var (
	svcKeyType, _      = nftables.ConcatSetType(nftables.TypeIPAddr, nftables.TypeInetProto, nftables.TypeInetService)
	nodePortKeyType, _ = nftables.ConcatSetType(nftables.TypeInetProto, nftables.TypeInetService)
	hairpinKeyType, _  = nftables.ConcatSetType(nftables.TypeIPAddr, nftables.TypeIPAddr)
)

// applier owns the proxy's objects in one netns and applies rulesets as
// diffs against what it applied last. With no previous state (a new
// Proxier, or after an error) it rebuilds every object with the prefix.
type applier struct {
	nsFd        int // -1: current netns
	nodeIPs     []netip.Addr
	clusterCIDR netip.Prefix
	synced      bool // the kernel holds the model as last applied
}

func (a *applier) conn() (*nftables.Conn, error) {
	opts := []nftables.ConnOption{nftables.WithSockOptions(bigBuffers)}
	if a.nsFd >= 0 {
		opts = append(opts, nftables.WithNetNSFd(a.nsFd))
	}
	return nftables.New(opts...)
}

// batch collects one transaction. The library would send it with an ack
// requested for every message and then read the acks one recvmsg at a time
// (for 50,000 messages that dominates a sync, and the queued acks overflow
// the receive buffer), so it is pointed at a fake connection that captures
// the marshalled messages, and commit sends them itself with only the
// last message acked: the kernel processes a batch synchronously inside
// sendmsg, and reports every error whether acked or not.
type batch struct {
	*nftables.Conn
	msgs []mnl.Message
}

func (a *applier) newBatch() (*batch, error) {
	b := &batch{}
	fn := func(req []mnl.Message) ([]mnl.Message, error) {
		b.msgs = append(b.msgs, req...)
		return []mnl.Message{{Header: mnl.Header{Type: mnl.Error}, Data: make([]byte, 20)}}, nil
	}
	c, err := nftables.New(nftables.WithTestDial(fn))
	if err != nil {
		return nil, err
	}
	b.Conn = c
	return b, nil
}

// precreate creates empty regular chains in a transaction of their own,
// before the transaction that fills them and points maps at them. Empty
// chains that nothing jumps to change no traffic, and in a transaction
// that both creates thousands of chains and references them by name from
// map elements, the kernel (6.18) intermittently fails the reference with
// ENOENT.
func (a *applier) precreate(names []string) error {
	if len(names) == 0 {
		return nil
	}
	b, err := a.newBatch()
	if err != nil {
		return err
	}
	t := nft.Table()
	for _, n := range names {
		b.AddChain(&nftables.Chain{Table: t, Name: n})
	}
	if err := a.commit(b); err != nil {
		return fmt.Errorf("nftables: create chains: %w", err)
	}
	return nil
}

// commit applies the batch in one transaction.
func (a *applier) commit(b *batch) error {
	if err := b.Conn.Flush(); err != nil { // marshals into b.msgs
		return err
	}
	msgs := b.msgs
	b.msgs = nil
	if len(msgs) <= 2 { // only BATCH_BEGIN/END, or nothing
		return nil
	}
	for i := range msgs {
		msgs[i].Header.Flags &^= mnl.Acknowledge
		msgs[i].Header.Sequence = 0
	}
	last := len(msgs) - 2 // the message before BATCH_END
	msgs[last].Header.Flags |= mnl.Acknowledge

	cfg := &mnl.Config{}
	if a.nsFd >= 0 {
		cfg.NetNS = a.nsFd
	}
	nl, err := mnl.Dial(unix.NETLINK_NETFILTER, cfg)
	if err != nil {
		return fmt.Errorf("netlink dial: %w", err)
	}
	defer nl.Close()
	if err := bigBuffers(nl); err != nil {
		return err
	}
	// One buffer, one sendmsg (the library's SendMessages grows its buffer
	// message by message, which costs more than the kernel's work).
	size := 0
	for _, m := range msgs {
		size += nlmsgAlign(16 + len(m.Data))
	}
	buf := make([]byte, size)
	off := 0
	seq := uint32(time.Now().UnixNano())
	var lastSeq uint32
	for i, m := range msgs {
		l := 16 + len(m.Data)
		binary.NativeEndian.PutUint32(buf[off:], uint32(l))
		binary.NativeEndian.PutUint16(buf[off+4:], uint16(m.Header.Type))
		binary.NativeEndian.PutUint16(buf[off+6:], uint16(m.Header.Flags))
		binary.NativeEndian.PutUint32(buf[off+8:], seq+uint32(i))
		copy(buf[off+16:], m.Data)
		off += nlmsgAlign(l)
		if i == last {
			lastSeq = seq + uint32(i)
		}
	}
	rc, err := nl.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Write(func(fd uintptr) bool {
		serr = unix.Sendto(int(fd), buf, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
		return !errors.Is(serr, unix.EAGAIN)
	}); err != nil {
		return fmt.Errorf("netlink send: %w", err)
	}
	if serr != nil {
		return fmt.Errorf("netlink send: %w", serr)
	}
	var errs error
	for {
		if errs != nil {
			// Everything was queued during sendmsg; drain what is left.
			_ = nl.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		}
		replies, err := nl.Receive()
		if err != nil {
			var oe *mnl.OpError
			if errs != nil && !errors.As(err, &oe) {
				return errs // deadline: drained
			}
			errs = errors.Join(errs, err)
			if !errors.As(err, &oe) {
				return errs
			}
			continue
		}
		for _, m := range replies {
			if m.Header.Type == mnl.Error && m.Header.Sequence == lastSeq {
				return errs
			}
		}
	}
}

func nlmsgAlign(n int) int { return (n + 3) &^ 3 }

// bigBuffers lets one transaction carry a large ruleset: the library sends
// the whole batch in one sendmsg and the kernel queues one ack per message
// before we read any, so both socket buffers must hold all of it. The
// *FORCE options (CAP_NET_ADMIN) bypass net.core.[rw]mem_max, which is a
// host-wide setting we leave alone. Memory is only used while a batch is in
// flight.
func bigBuffers(c *mnl.Conn) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = errors.Join(
			unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 256<<20),
			unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 256<<20))
	}); err != nil {
		return err
	}
	if serr != nil {
		// Not privileged: fall back to what the sysctls allow.
		_ = c.SetWriteBuffer(256 << 20)
		_ = c.SetReadBuffer(256 << 20)
	}
	return nil
}

// fixed named sets/maps, created once and never deleted by a sync.
func fixedSets(t *nftables.Table) []*nftables.Set {
	return []*nftables.Set{
		{Table: t, Name: mapServiceIPs, IsMap: true, Concatenation: true, KeyType: svcKeyType, DataType: nftables.TypeVerdict},
		{Table: t, Name: mapNodePorts, IsMap: true, Concatenation: true, KeyType: nodePortKeyType, DataType: nftables.TypeVerdict},
		{Table: t, Name: setNoEPIPs, Concatenation: true, KeyType: svcKeyType},
		{Table: t, Name: setNoEPNodePort, Concatenation: true, KeyType: nodePortKeyType},
		{Table: t, Name: setNodeIPs, KeyType: nftables.TypeIPAddr},
		{Table: t, Name: setClusterIPs, KeyType: nftables.TypeIPAddr},
		{Table: t, Name: setHairpin, Concatenation: true, KeyType: hairpinKeyType},
	}
}

func affinitySet(t *nftables.Table, name string, timeout time.Duration) *nftables.Set {
	return &nftables.Set{Table: t, Name: name, KeyType: nftables.TypeIPAddr,
		HasTimeout: true, Dynamic: true, Timeout: timeout}
}

type baseChain struct {
	name  string
	typ   nftables.ChainType
	hook  *nftables.ChainHook
	prio  nftables.ChainPriority
	rules [][]expr.Any
}

func (a *applier) baseChains() []baseChain {
	jump := func(c string) []expr.Any { return []expr.Any{&expr.Verdict{Kind: expr.VerdictJump, Chain: c}} }
	var nodePortMatch []expr.Any
	if len(a.nodeIPs) > 0 {
		nodePortMatch = []expr.Any{
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
			&expr.Lookup{SourceRegister: 1, SetName: setNodeIPs},
		}
	} else {
		// Every local address but 127.0.0.0/8.
		nodePortMatch = []expr.Any{
			&expr.Fib{Register: 1, FlagDADDR: true, ResultADDRTYPE: true},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(unix.RTN_LOCAL)},
		}
		nodePortMatch = append(nodePortMatch, nft.DAddrNotIn(netip.MustParsePrefix("127.0.0.0/8"))...)
	}
	l4protoDport := func(reg1, reg2 uint32) []expr.Any {
		return []expr.Any{
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg1},
			&expr.Payload{DestRegister: reg2, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		}
	}
	daddr := &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4}

	var markExternal []expr.Any
	if a.clusterCIDR.IsValid() {
		markExternal = nft.SAddrNotIn(a.clusterCIDR)
	}
	markExternal = append(markExternal, daddr, &expr.Lookup{SourceRegister: 1, SetName: setClusterIPs})
	markExternal = append(markExternal, setMasqMark()...)
	hairpin := []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
		&expr.Payload{DestRegister: 9, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
		&expr.Lookup{SourceRegister: 1, SetName: setHairpin},
		&expr.Masq{},
	}
	svcDispatch := append([]expr.Any{daddr}, l4protoDport(9, 10)...)
	svcDispatch = append(svcDispatch, &expr.Lookup{SourceRegister: 1, SetName: mapServiceIPs, IsDestRegSet: true, DestRegister: 0})
	npDispatch := append(append([]expr.Any{}, nodePortMatch...), l4protoDport(1, 9)...)
	npDispatch = append(npDispatch, &expr.Lookup{SourceRegister: 1, SetName: mapNodePorts, IsDestRegSet: true, DestRegister: 0})

	rejIPs := append([]expr.Any{daddr}, l4protoDport(9, 10)...)
	rejIPs = append(rejIPs, &expr.Lookup{SourceRegister: 1, SetName: setNoEPIPs},
		&expr.Verdict{Kind: expr.VerdictGoto, Chain: chainReject})
	rejNP := append(append([]expr.Any{}, nodePortMatch...), l4protoDport(1, 9)...)
	rejNP = append(rejNP, &expr.Lookup{SourceRegister: 1, SetName: setNoEPNodePort},
		&expr.Verdict{Kind: expr.VerdictGoto, Chain: chainReject})

	markZero := []expr.Any{
		&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: ne32(MasqMark), Xor: ne32(0)},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ne32(0)},
		&expr.Verdict{Kind: expr.VerdictReturn},
	}
	markClear := []expr.Any{
		&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: ne32(0xffffffff), Xor: ne32(MasqMark)},
		&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: 1},
	}
	filterPrio := nftables.ChainPriority(-10)
	// Only a connection's first packet can be for a Service without
	// endpoints; as upstream's nftables proxy, established traffic (every
	// pod-to-pod packet, too) skips the set lookups.
	newThenRejectCheck := func() []expr.Any {
		return []expr.Any{
			&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: ne32(expr.CtStateBitNEW), Xor: ne32(0)},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: ne32(0)},
			&expr.Verdict{Kind: expr.VerdictJump, Chain: chainRejectCheck},
		}
	}
	return []baseChain{
		{name: chainServices, rules: [][]expr.Any{markExternal, svcDispatch, npDispatch}},
		{name: chainPrerouting, typ: nftables.ChainTypeNAT, hook: nftables.ChainHookPrerouting, prio: -100, rules: [][]expr.Any{jump(chainServices)}},
		{name: chainOutput, typ: nftables.ChainTypeNAT, hook: nftables.ChainHookOutput, prio: -100, rules: [][]expr.Any{jump(chainServices)}},
		{name: chainPostrouting, typ: nftables.ChainTypeNAT, hook: nftables.ChainHookPostrouting, prio: 100,
			rules: [][]expr.Any{hairpin, markZero, markClear, {&expr.Masq{}}}},
		{name: chainReject, rules: [][]expr.Any{
			{&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{protoTCP}},
				&expr.Reject{Type: unix.NFT_REJECT_TCP_RST}},
			{&expr.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: 3}}, // port unreachable
		}},
		{name: chainRejectCheck, rules: [][]expr.Any{rejIPs, rejNP}},
		{name: chainFilterIn, typ: nftables.ChainTypeFilter, hook: nftables.ChainHookInput, prio: filterPrio, rules: [][]expr.Any{newThenRejectCheck()}},
		{name: chainFilterFwd, typ: nftables.ChainTypeFilter, hook: nftables.ChainHookForward, prio: filterPrio, rules: [][]expr.Any{newThenRejectCheck()}},
		{name: chainFilterOut, typ: nftables.ChainTypeFilter, hook: nftables.ChainHookOutput, prio: filterPrio, rules: [][]expr.Any{newThenRejectCheck()}},
	}
}

func ne32(v uint32) []byte { return binaryutil.NativeEndian.PutUint32(v) }

func setMasqMark() []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: ne32(^uint32(MasqMark)), Xor: ne32(MasqMark)},
		&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: 1},
	}
}

// addChainRules emits the rules of a generated chain.
func (a *applier) addChainRules(c *nftables.Conn, t *nftables.Table, cs *chainSpec) error {
	ch := &nftables.Chain{Table: t, Name: cs.Name}
	saddr := &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4}
	for _, o := range cs.Ops {
		var ex []expr.Any
		switch o.Kind {
		case opMasq:
			ex = setMasqMark()
		case opGotoIfCIDR:
			ex = append(nft.SAddrIn(a.clusterCIDR), &expr.Verdict{Kind: expr.VerdictGoto, Chain: o.Target})
		case opGoto:
			ex = []expr.Any{&expr.Verdict{Kind: expr.VerdictGoto, Chain: o.Target}}
		case opDrop:
			ex = []expr.Any{&expr.Verdict{Kind: expr.VerdictDrop}}
		case opAffinityDNAT:
			ex = append([]expr.Any{saddr, &expr.Lookup{SourceRegister: 1, SetName: o.Set}}, dnat(o)...)
		case opPickDNAT:
			if o.Mod > 0 {
				ex = append(ex,
					&expr.Numgen{Register: 1, Modulus: o.Mod, Type: unix.NFT_NG_RANDOM},
					&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ne32(0)})
			}
			if o.Set != "" {
				ex = append(ex, saddr, &expr.Dynset{SrcRegKey: 1, SetName: o.Set, Operation: unix.NFT_DYNSET_OP_UPDATE})
			}
			ex = append(ex, dnat(o)...)
		default:
			return fmt.Errorf("unknown op %d", o.Kind)
		}
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: ex})
	}
	return nil
}

// dnat is `meta l4proto P dnat to IP:Port` (the l4proto match must come
// first for a DNAT with a port).
func dnat(o op) []expr.Any {
	ip := o.IP.As4()
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{o.Proto}},
		&expr.Immediate{Register: 1, Data: ip[:]},
		&expr.Immediate{Register: 2, Data: binaryutil.BigEndian.PutUint16(o.Port)},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1, RegProtoMin: 2, Specified: true},
	}
}

// listOwn returns the names of the proxy's chains and sets in table kelp.
func listOwn(c *nftables.Conn, t *nftables.Table) (chains, sets []string, err error) {
	all, err := c.ListChainsOfTableFamily(nftables.TableFamilyIPv4)
	if err != nil {
		return nil, nil, fmt.Errorf("list chains: %w", err)
	}
	for _, ch := range all {
		if ch.Table != nil && ch.Table.Name == t.Name && strings.HasPrefix(ch.Name, Prefix) {
			chains = append(chains, ch.Name)
		}
	}
	ss, err := c.GetSets(t)
	if err != nil {
		return nil, nil, fmt.Errorf("list sets: %w", err)
	}
	for _, s := range ss {
		if !s.Anonymous && strings.HasPrefix(s.Name, Prefix) {
			sets = append(sets, s.Name)
		}
	}
	return chains, sets, nil
}

func elemsOf(m map[string]string) []nftables.SetElement {
	out := make([]nftables.SetElement, 0, len(m))
	for k, v := range m {
		out = append(out, nftables.SetElement{Key: []byte(k), VerdictData: &expr.Verdict{Kind: expr.VerdictGoto, Chain: v}})
	}
	return out
}

func keysOf(m map[string]bool) []nftables.SetElement {
	out := make([]nftables.SetElement, 0, len(m))
	for k := range m {
		out = append(out, nftables.SetElement{Key: []byte(k)})
	}
	return out
}

// apply makes the proxy's objects match the model: the delta in one
// transaction, or when the kernel state is unknown (first sync, periodic
// resync, after an error) the whole model.
func (a *applier) apply(m *model, d *delta) error {
	var err error
	if a.synced {
		err = a.applyDelta(d)
	} else {
		err = a.applyFull(m.flat())
	}
	a.synced = err == nil
	return err
}

func (a *applier) applyFull(want *ruleset) error {
	c, err := a.conn()
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	t := nft.Table()
	// Make sure the table exists (never flushed, never deleted).
	c.AddTable(t)
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables: create table ip %s: %w", nft.TableName, err)
	}
	oldChains, oldSets, err := listOwn(c, t)
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for _, n := range oldSets {
		have[n] = true
	}
	haveChain := map[string]bool{}
	for _, n := range oldChains {
		haveChain[n] = true
	}
	var newChains []string
	for n := range want.Chains {
		if !haveChain[n] {
			newChains = append(newChains, n)
		}
	}
	if err := a.precreate(newChains); err != nil {
		return err
	}
	b, err := a.newBatch()
	if err != nil {
		return err
	}
	c = b.Conn

	// 1. Empty every existing own chain (drops all references they hold).
	for _, n := range oldChains {
		c.FlushChain(&nftables.Chain{Table: t, Name: n})
	}
	// 2. Fixed sets: create or empty.
	fixed := map[string]bool{}
	for _, s := range fixedSets(t) {
		fixed[s.Name] = true
		if have[s.Name] {
			c.FlushSet(s)
		} else if err := c.AddSet(s, nil); err != nil {
			return err
		}
	}
	// 3. Affinity sets: keep existing ones (their entries survive a restart).
	for n, to := range want.Affinity {
		if !have[n] {
			if err := c.AddSet(affinitySet(t, n, to), nil); err != nil {
				return err
			}
		}
	}
	// 4. All chains.
	bases := a.baseChains()
	for _, bc := range bases {
		ch := &nftables.Chain{Table: t, Name: bc.name}
		if bc.hook != nil {
			pol := nftables.ChainPolicyAccept
			prio := bc.prio
			ch.Type, ch.Hooknum, ch.Priority, ch.Policy = bc.typ, bc.hook, &prio, &pol
		}
		c.AddChain(ch)
	}
	for n := range want.Chains {
		c.AddChain(&nftables.Chain{Table: t, Name: n})
	}
	// 5. Elements (maps reference chains).
	if err := a.addElements(c, t, want); err != nil {
		return err
	}
	// 6. Rules.
	for _, cs := range want.Chains {
		if err := a.addChainRules(c, t, cs); err != nil {
			return err
		}
	}
	for _, bc := range bases {
		for _, r := range bc.rules {
			c.AddRule(&nftables.Rule{Table: t, Chain: &nftables.Chain{Table: t, Name: bc.name}, Exprs: r})
		}
	}
	// 7. Delete what is no longer wanted: sets first, then chains.
	wantChain := map[string]bool{}
	for _, bc := range bases {
		wantChain[bc.name] = true
	}
	for n := range want.Chains {
		wantChain[n] = true
	}
	for _, n := range oldSets {
		if _, ok := want.Affinity[n]; !ok && !fixed[n] {
			c.DelSet(&nftables.Set{Table: t, Name: n})
		}
	}
	for _, n := range oldChains {
		if !wantChain[n] {
			c.DelChain(&nftables.Chain{Table: t, Name: n})
		}
	}
	if err := a.commit(b); err != nil {
		return fmt.Errorf("nftables: full sync: %w", err)
	}
	return nil
}

// addElements adds all of want's map/set elements.
func (a *applier) addElements(c *nftables.Conn, t *nftables.Table, want *ruleset) error {
	fs := fixedSets(t)
	add := func(fam int, e []nftables.SetElement) error {
		return chunked(e, func(part []nftables.SetElement) error { return c.SetAddElements(fs[fam], part) })
	}
	var ips []nftables.SetElement
	for _, ip := range a.nodeIPs {
		a4 := ip.As4()
		ips = append(ips, nftables.SetElement{Key: a4[:]})
	}
	return errors.Join(
		add(famServiceIPs, elemsOf(want.ServiceIPs)),
		add(famNodePorts, elemsOf(want.NodePorts)),
		add(famNoEPIPs, keysOf(want.NoEPIPs)),
		add(famNoEPNodePort, keysOf(want.NoEPNodePort)),
		add(famNodeIPs, ips),
		add(famClusterIPs, keysOf(want.ClusterIPs)),
		add(famHairpin, keysOf(want.Hairpin)))
}

// chunked calls fn on slices of at most 256 elements: the element list
// of one message is a netlink attribute, whose length is 16 bits, so a big
// list must be split over several messages (of the same transaction).
func chunked(e []nftables.SetElement, fn func([]nftables.SetElement) error) error {
	for len(e) > 0 {
		n := min(len(e), 256)
		if err := fn(e[:n]); err != nil {
			return err
		}
		e = e[n:]
	}
	return nil
}

func (a *applier) applyDelta(d *delta) error {
	if d.empty() {
		return nil
	}
	if err := a.precreate(d.newChains); err != nil {
		return err
	}
	b, err := a.newBatch()
	if err != nil {
		return err
	}
	c := b.Conn
	t := nft.Table()
	fs := fixedSets(t)
	for name, to := range d.addAff {
		if err := c.AddSet(affinitySet(t, name, to), nil); err != nil {
			return err
		}
	}
	// Elements that go away or change.
	for fam := range d.delElems {
		el := make([]nftables.SetElement, len(d.delElems[fam]))
		for i, k := range d.delElems[fam] {
			el[i] = nftables.SetElement{Key: []byte(k)}
		}
		if err := chunked(el, func(part []nftables.SetElement) error { return c.SetDeleteElements(fs[fam], part) }); err != nil {
			return err
		}
	}
	for _, name := range d.flush {
		c.FlushChain(&nftables.Chain{Table: t, Name: name})
	}
	for _, name := range d.delChains {
		c.FlushChain(&nftables.Chain{Table: t, Name: name})
	}
	for _, cs := range d.fill {
		if err := a.addChainRules(c, t, cs); err != nil {
			return err
		}
	}
	for fam := range d.addElems {
		var el []nftables.SetElement
		for k, v := range d.addElems[fam] {
			e := nftables.SetElement{Key: []byte(k)}
			if v != "" {
				e.VerdictData = &expr.Verdict{Kind: expr.VerdictGoto, Chain: v}
			}
			el = append(el, e)
		}
		if err := chunked(el, func(part []nftables.SetElement) error { return c.SetAddElements(fs[fam], part) }); err != nil {
			return err
		}
	}
	for _, name := range d.delAff {
		c.DelSet(&nftables.Set{Table: t, Name: name})
	}
	for _, name := range d.delChains {
		c.DelChain(&nftables.Chain{Table: t, Name: name})
	}
	if err := a.commit(b); err != nil {
		return fmt.Errorf("nftables: incremental sync: %w", err)
	}
	return nil
}

// cleanup removes every proxy object from table kelp.
func (a *applier) cleanup() error {
	c, err := a.conn()
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	t := nft.Table()
	if _, err := c.ListTableOfFamily(nft.TableName, nft.Family); err != nil {
		return nil // no table: nothing to do
	}
	chains, sets, err := listOwn(c, t)
	if err != nil {
		return err
	}
	if len(chains) == 0 && len(sets) == 0 {
		return nil
	}
	b, err := a.newBatch()
	if err != nil {
		return err
	}
	c = b.Conn
	for _, n := range chains {
		c.FlushChain(&nftables.Chain{Table: t, Name: n})
	}
	for _, n := range sets {
		c.DelSet(&nftables.Set{Table: t, Name: n})
	}
	for _, n := range chains {
		c.DelChain(&nftables.Chain{Table: t, Name: n})
	}
	if err := a.commit(b); err != nil {
		return fmt.Errorf("nftables: cleanup: %w", err)
	}
	return nil
}
