package bridge

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"

	"github.com/sirupsen/logrus"
)

// ipamFile is the name of the allocation state inside Config.StateDir.
const ipamFile = "ipam.json"

// ipamState is the on-disk format of the pod IP allocator. It is one JSON
// document written atomically (temp file, fsync, rename), so a crash never
// leaves a half-written state behind.
type ipamState struct {
	// PodCIDR the allocations were made from.
	PodCIDR string `json:"podCIDR"`
	// Last is the most recently handed out address; the next allocation
	// starts after it (round robin, like CNI host-local).
	Last string `json:"last,omitempty"`
	// Allocations maps an IP to the pod UID that owns it.
	Allocations map[string]string `json:"allocations"`
}

// ipam allocates addresses of one /N pod CIDR. It is not safe for
// concurrent use by itself; the Bridge serialises access with its mutex.
type ipam struct {
	path   string
	prefix netip.Prefix
	gw     netip.Addr
	last   netip.Addr
	byIP   map[netip.Addr]string
	byPod  map[string]netip.Addr
}

func newIPAM(stateDir string, prefix netip.Prefix) (*ipam, error) {
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, fmt.Errorf("ipam: create state dir: %w", err)
	}
	a := &ipam{
		path:   filepath.Join(stateDir, ipamFile),
		prefix: prefix.Masked(),
		gw:     prefix.Masked().Addr().Next(),
		byIP:   map[netip.Addr]string{},
		byPod:  map[string]netip.Addr{},
	}
	st, err := readIPAMState(stateDir)
	if err != nil {
		return nil, err
	}
	if st.PodCIDR != "" && st.PodCIDR != a.prefix.String() {
		logrus.Warnf("bridge: pod CIDR changed from %s to %s; dropping allocations outside the new range", st.PodCIDR, a.prefix)
	}
	for ipStr, pod := range st.Allocations {
		ip, err := netip.ParseAddr(ipStr)
		if err != nil || !a.usable(ip) {
			logrus.Warnf("bridge: ipam: dropping allocation %s of pod %s (not in %s)", ipStr, pod, a.prefix)
			continue
		}
		if old, dup := a.byPod[pod]; dup {
			// Should never happen; keep the lower address deterministically.
			if old.Less(ip) {
				continue
			}
			delete(a.byIP, old)
		}
		a.byIP[ip] = pod
		a.byPod[pod] = ip
	}
	if l, err := netip.ParseAddr(st.Last); err == nil && a.prefix.Contains(l) {
		a.last = l
	}
	return a, nil
}

// readIPAMState reads StateDir's ipam.json; a missing file is the zero
// state (nothing was ever allocated).
func readIPAMState(stateDir string) (ipamState, error) {
	var st ipamState
	path := filepath.Join(stateDir, ipamFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("ipam: read %s: %w", path, err)
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return ipamState{}, fmt.Errorf("ipam: parse %s: %w", path, err)
	}
	return st, nil
}

// usable reports whether ip may be handed to a pod: inside the prefix and
// neither the network address, the gateway, nor the broadcast address.
func (a *ipam) usable(ip netip.Addr) bool {
	if !ip.Is4() || !a.prefix.Contains(ip) {
		return false
	}
	return ip != a.prefix.Addr() && ip != a.gw && ip != lastAddr(a.prefix)
}

func (a *ipam) get(pod string) (netip.Addr, bool) {
	ip, ok := a.byPod[pod]
	return ip, ok
}

// allocate returns the pod's address, allocating the first free one after
// the last handed out (wrapping around) if it has none.
func (a *ipam) allocate(pod string) (netip.Addr, error) {
	if ip, ok := a.byPod[pod]; ok {
		return ip, nil
	}
	first := a.gw.Next()
	bcast := lastAddr(a.prefix)
	start := first
	if a.last.IsValid() && a.last.Next().Less(bcast) && !a.last.Next().Less(first) {
		start = a.last.Next()
	}
	ip := start
	for {
		if _, used := a.byIP[ip]; !used && a.usable(ip) {
			break
		}
		ip = ip.Next()
		if !ip.Less(bcast) {
			ip = first
		}
		if ip == start {
			return netip.Addr{}, fmt.Errorf("ipam: no free address in %s", a.prefix)
		}
	}
	a.byIP[ip] = pod
	a.byPod[pod] = ip
	prevLast := a.last
	a.last = ip
	if err := a.save(); err != nil {
		delete(a.byIP, ip)
		delete(a.byPod, pod)
		a.last = prevLast
		return netip.Addr{}, err
	}
	return ip, nil
}

// release frees the pod's address, if any.
func (a *ipam) release(pod string) error {
	ip, ok := a.byPod[pod]
	if !ok {
		return nil
	}
	delete(a.byPod, pod)
	delete(a.byIP, ip)
	if err := a.save(); err != nil {
		a.byPod[pod] = ip
		a.byIP[ip] = pod
		return err
	}
	return nil
}

// pods lists the pods holding an address, sorted.
func (a *ipam) pods() []string {
	out := make([]string, 0, len(a.byPod))
	for p := range a.byPod {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

func (a *ipam) save() error {
	st := ipamState{PodCIDR: a.prefix.String(), Allocations: map[string]string{}}
	if a.last.IsValid() {
		st.Last = a.last.String()
	}
	for ip, pod := range a.byIP {
		st.Allocations[ip.String()] = pod
	}
	data, err := json.MarshalIndent(&st, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(a.path, data, 0o600)
}

func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("ipam: write state: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after a successful rename
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("ipam: write state: %w", err)
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return fmt.Errorf("ipam: write state: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("ipam: write state: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("ipam: write state: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("ipam: write state: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// lastAddr is the highest address of p (the broadcast address for IPv4).
func lastAddr(p netip.Prefix) netip.Addr {
	p = p.Masked()
	b := p.Addr().As4()
	hostBits := 32 - p.Bits()
	for i := 3; i >= 0 && hostBits > 0; i-- {
		n := hostBits
		if n > 8 {
			n = 8
		}
		b[i] |= byte(1<<n - 1)
		hostBits -= n
	}
	return netip.AddrFrom4(b)
}
