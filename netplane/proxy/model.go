package proxy

import (
	"net/netip"
	"time"
)

// The element families of the fixed sets and maps, in fixedSets order.
const (
	famServiceIPs = iota
	famNodePorts
	famNoEPIPs
	famNoEPNodePort
	famNodeIPs // fixed by Config, not in the model
	famClusterIPs
	famHairpin
	numFams
)

type entry struct {
	val  string // verdict map: target chain; set: ""
	refs int
}

type fragCache struct {
	sp servicePort
	rs *ruleset
}

// model is the desired state, kept incrementally: each service port's
// rules (a fragment) are rebuilt only when its input changed, and the
// fixed sets/maps hold reference counts, since fragments share elements
// (an endpoint backing two services shares its hairpin element, the ports
// of a service share its cluster IP).
type model struct {
	frags  map[string]*fragCache
	chains map[string]*chainSpec
	elems  [numFams]map[string]*entry
	aff    map[string]time.Duration
}

func newModel() *model {
	m := &model{frags: map[string]*fragCache{}, chains: map[string]*chainSpec{}, aff: map[string]time.Duration{}}
	for i := range m.elems {
		m.elems[i] = map[string]*entry{}
	}
	return m
}

// delta is what one update changes in the kernel.
type delta struct {
	newChains []string     // to create (empty) first
	fill      []*chainSpec // new or changed chains: (flush and) add rules
	flush     []string     // changed chains to flush before filling
	delChains []string     // to flush and delete
	addElems  [numFams]map[string]string
	delElems  [numFams][]string
	addAff    map[string]time.Duration
	delAff    []string
	udp       [][2]*udpService // (old, new) for UDP service ports that changed
}

func (d *delta) empty() bool {
	if len(d.newChains)+len(d.fill)+len(d.delChains)+len(d.addAff)+len(d.delAff) > 0 {
		return false
	}
	for i := range d.addElems {
		if len(d.addElems[i])+len(d.delElems[i]) > 0 {
			return false
		}
	}
	return true
}

func fragElems(rs *ruleset) [numFams]map[string]string {
	var f [numFams]map[string]string
	f[famServiceIPs] = rs.ServiceIPs
	f[famNodePorts] = rs.NodePorts
	f[famNoEPIPs] = boolMap(rs.NoEPIPs)
	f[famNoEPNodePort] = boolMap(rs.NoEPNodePort)
	f[famClusterIPs] = boolMap(rs.ClusterIPs)
	f[famHairpin] = boolMap(rs.Hairpin)
	return f
}

func boolMap(m map[string]bool) map[string]string {
	out := make(map[string]string, len(m))
	for k := range m {
		out[k] = ""
	}
	return out
}

func sameSP(a, b *servicePort) bool {
	if a.Namespace != b.Namespace || a.Name != b.Name || a.PortName != b.PortName || a.Proto != b.Proto ||
		a.Port != b.Port || a.NodePort != b.NodePort || a.ExternalLocal != b.ExternalLocal ||
		a.InternalLocal != b.InternalLocal || a.AffinityTimeout != b.AffinityTimeout ||
		len(a.ClusterIPs) != len(b.ClusterIPs) || len(a.ExternalIPs) != len(b.ExternalIPs) ||
		len(a.Endpoints) != len(b.Endpoints) {
		return false
	}
	for i := range a.ClusterIPs {
		if a.ClusterIPs[i] != b.ClusterIPs[i] {
			return false
		}
	}
	for i := range a.ExternalIPs {
		if a.ExternalIPs[i] != b.ExternalIPs[i] {
			return false
		}
	}
	for i := range a.Endpoints {
		if a.Endpoints[i] != b.Endpoints[i] {
			return false
		}
	}
	return true
}

// update moves the model to st and returns what changed.
func (m *model) update(b *builder, st *state) *delta {
	type before struct {
		had bool
		val string
	}
	var touched [numFams]map[string]before
	for i := range touched {
		touched[i] = map[string]before{}
	}
	chainBefore := map[string]*chainSpec{} // nil: did not exist
	affBefore := map[string]bool{}
	d := &delta{addAff: map[string]time.Duration{}}

	remove := func(rs *ruleset) {
		for fam, el := range fragElems(rs) {
			for k := range el {
				e := m.elems[fam][k]
				if _, ok := touched[fam][k]; !ok {
					touched[fam][k] = before{e != nil, valOf(e)}
				}
				if e == nil {
					continue
				}
				if e.refs--; e.refs <= 0 {
					delete(m.elems[fam], k)
				}
			}
		}
		for n := range rs.Chains {
			if _, ok := chainBefore[n]; !ok {
				chainBefore[n] = m.chains[n]
			}
			delete(m.chains, n)
		}
		for n := range rs.Affinity {
			if _, ok := affBefore[n]; !ok {
				_, had := m.aff[n]
				affBefore[n] = had
			}
			delete(m.aff, n)
		}
	}
	add := func(rs *ruleset) {
		for fam, el := range fragElems(rs) {
			for k, v := range el {
				e := m.elems[fam][k]
				if _, ok := touched[fam][k]; !ok {
					touched[fam][k] = before{e != nil, valOf(e)}
				}
				if e == nil {
					e = &entry{}
					m.elems[fam][k] = e
				}
				e.refs++
				e.val = v
			}
		}
		for n, c := range rs.Chains {
			if _, ok := chainBefore[n]; !ok {
				chainBefore[n] = m.chains[n]
			}
			m.chains[n] = c
		}
		for n, to := range rs.Affinity {
			if _, ok := affBefore[n]; !ok {
				_, had := m.aff[n]
				affBefore[n] = had
			}
			m.aff[n] = to
		}
	}

	seen := make(map[string]bool, len(st.Ports))
	for i := range st.Ports {
		sp := &st.Ports[i]
		key := sp.key()
		if seen[key] {
			continue // duplicate port definition: first wins
		}
		seen[key] = true
		old := m.frags[key]
		if old != nil && sameSP(&old.sp, sp) {
			continue
		}
		rs := b.fragment(sp)
		var oldUDP *udpService
		if old != nil {
			remove(old.rs)
			oldUDP = old.rs.UDP[key]
		}
		add(rs)
		cp := *sp // keep a private copy of the input
		cp.ClusterIPs = append([]netip.Addr(nil), sp.ClusterIPs...)
		cp.ExternalIPs = append([]netip.Addr(nil), sp.ExternalIPs...)
		cp.Endpoints = append([]endpoint(nil), sp.Endpoints...)
		m.frags[key] = &fragCache{sp: cp, rs: rs}
		if oldUDP != nil || rs.UDP[key] != nil {
			d.udp = append(d.udp, [2]*udpService{oldUDP, rs.UDP[key]})
		}
	}
	for key, old := range m.frags {
		if !seen[key] {
			remove(old.rs)
			delete(m.frags, key)
			if u := old.rs.UDP[key]; u != nil {
				d.udp = append(d.udp, [2]*udpService{u, nil})
			}
		}
	}

	for fam := range touched {
		for k, bf := range touched[fam] {
			e := m.elems[fam][k]
			switch {
			case e == nil && bf.had:
				d.delElems[fam] = append(d.delElems[fam], k)
			case e != nil && !bf.had:
				addElem(d, fam, k, e.val)
			case e != nil && bf.had && e.val != bf.val:
				d.delElems[fam] = append(d.delElems[fam], k)
				addElem(d, fam, k, e.val)
			}
		}
	}
	for n, bc := range chainBefore {
		c := m.chains[n]
		switch {
		case c == nil && bc != nil:
			d.delChains = append(d.delChains, n)
		case c != nil && bc == nil:
			d.newChains = append(d.newChains, n)
			d.fill = append(d.fill, c)
		case c != nil && !sameOps(c.Ops, bc.Ops):
			d.flush = append(d.flush, n)
			d.fill = append(d.fill, c)
		}
	}
	for n, had := range affBefore {
		to, has := m.aff[n]
		switch {
		case has && !had:
			d.addAff[n] = to
		case !has && had:
			d.delAff = append(d.delAff, n)
		}
	}
	return d
}

func addElem(d *delta, fam int, k, v string) {
	if d.addElems[fam] == nil {
		d.addElems[fam] = map[string]string{}
	}
	d.addElems[fam][k] = v
}

func valOf(e *entry) string {
	if e == nil {
		return ""
	}
	return e.val
}

// flat returns the whole desired state as one ruleset (for a full sync).
func (m *model) flat() *ruleset {
	rs := newRuleset()
	for n, c := range m.chains {
		rs.Chains[n] = c
	}
	for k, e := range m.elems[famServiceIPs] {
		rs.ServiceIPs[k] = e.val
	}
	for k, e := range m.elems[famNodePorts] {
		rs.NodePorts[k] = e.val
	}
	for fam, dst := range map[int]map[string]bool{famNoEPIPs: rs.NoEPIPs, famNoEPNodePort: rs.NoEPNodePort,
		famClusterIPs: rs.ClusterIPs, famHairpin: rs.Hairpin} {
		for k := range m.elems[fam] {
			dst[k] = true
		}
	}
	for n, to := range m.aff {
		rs.Affinity[n] = to
	}
	return rs
}
