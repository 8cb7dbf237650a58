// Package allocator hands out Service ClusterIPs and NodePorts. Each
// allocated value is a key in etcd, created in a transaction that fails if
// it exists, so two API servers (or two racing requests) can never hand out
// the same address. A cluster IP's key is its networking.k8s.io/v1
// IPAddress object (ipaddress.go), as upstream's MultiCIDRServiceAllocator
// keeps it; a node port's key is a bare key under portPrefix.
package allocator

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kelp-project/kelp/server/apiserver/storage"
)

const (
	// legacyIPPrefix held cluster IPs before they were IPAddress objects;
	// Repair removes what an older kelp left there.
	legacyIPPrefix = "/registry/ranges/serviceips/"
	portPrefix     = "/registry/ranges/servicenodeports/"
)

// ErrAllocated means a requested value is already taken.
type ErrAllocated struct{ Value string }

func (e ErrAllocated) Error() string { return fmt.Sprintf("provided %s is already allocated", e.Value) }

// ErrFull means the range has no free value.
type ErrFull struct{ Range string }

func (e ErrFull) Error() string { return fmt.Sprintf("range %s is full", e.Range) }

// ErrOutOfRange means a requested value is not in the range.
type ErrOutOfRange struct{ Kind, Value, Range string } // Kind: "IP" or "port"

func (e ErrOutOfRange) Error() string {
	return fmt.Sprintf("provided %s is not in the valid range. The range of valid %ss is %s", e.Value, e.Kind, e.Range)
}

// Services allocates from one service CIDR and one node port range.
type Services struct {
	client *clientv3.Client
	// ips is the IPAddress storage, where each cluster IP is claimed
	// (UseIPAddresses); nil until the API server has opened it.
	ips      *storage.Store
	cidr     netip.Prefix
	size     uint64 // usable addresses: the network address is excluded
	portBase int
	portSize int
}

// NewServices parses the ranges ("10.43.0.0/16", "30000-32767").
func NewServices(_ context.Context, client *clientv3.Client, cidr, ports string) (*Services, error) {
	p, err := netip.ParsePrefix(cidr)
	if err != nil || !p.Addr().Is4() {
		return nil, fmt.Errorf("invalid service CIDR %q: an IPv4 CIDR is required", cidr)
	}
	p = p.Masked()
	bits := 32 - p.Bits()
	if bits < 2 || bits > 20 {
		return nil, fmt.Errorf("service CIDR %s must be between /12 and /30", cidr)
	}
	lo, hi, ok := strings.Cut(ports, "-")
	base, err1 := strconv.Atoi(lo)
	top, err2 := strconv.Atoi(hi)
	if !ok || err1 != nil || err2 != nil || base <= 0 || top < base || top > 65535 {
		return nil, fmt.Errorf("invalid node port range %q", ports)
	}
	return &Services{client: client, cidr: p, size: 1<<bits - 2, portBase: base, portSize: top - base + 1}, nil
}

// CIDR is the service CIDR, canonical ("10.43.0.0/16"): the default
// ServiceCIDR's spec.
func (s *Services) CIDR() string { return s.cidr.String() }

// FirstIP is the range's first usable address, kept for default/kubernetes.
func (s *Services) FirstIP() string { return s.ipAt(0).String() }

// NthIP is the n-th usable address (0-based); 10.43.0.10 is NthIP(9).
func (s *Services) NthIP(n uint64) string { return s.ipAt(n).String() }

func (s *Services) ipAt(offset uint64) netip.Addr {
	b := s.cidr.Addr().As4()
	v := binary.BigEndian.Uint32(b[:]) + 1 + uint32(offset)
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}

// AllocateIP claims ip for owner, or a free address when ip is "".
// Dynamic allocation prefers the upper part of the range, leaving the
// lower part to addresses that users and kelp itself pick statically.
// fresh is false when owner already held the requested ip (a retried or
// repeated write): undoing a failed write must then leave it held.
func (s *Services) AllocateIP(ctx context.Context, ip, owner string) (got string, fresh bool, err error) {
	if ip != "" {
		a, err := netip.ParseAddr(ip)
		if err != nil || !s.cidr.Contains(a) || a == s.cidr.Addr() || a == s.ipAt(s.size) {
			return "", false, ErrOutOfRange{Kind: "IP", Value: ip, Range: s.cidr.String()}
		}
		held, err := s.claimIP(ctx, ip, owner)
		return ip, !held, err
	}
	static := min(max(16, s.size/16), 256)
	if static >= s.size {
		static = 0
	}
	// A dynamic pick is a free address: one the owner holds already is
	// taken like any other.
	try := func(cand string) (bool, error) {
		held, err := s.claimIP(ctx, cand, owner)
		if _, taken := err.(ErrAllocated); taken || held {
			return false, nil
		}
		return err == nil, err
	}
	for range 32 {
		cand := s.ipAt(static + rand.Uint64N(s.size-static)).String()
		if ok, err := try(cand); ok || err != nil {
			return cand, ok, err
		}
	}
	for off := uint64(0); off < s.size; off++ {
		cand := s.ipAt((static + off) % s.size).String()
		if ok, err := try(cand); ok || err != nil {
			return cand, ok, err
		}
	}
	return "", false, ErrFull{Range: s.cidr.String()}
}

// AllocatePort claims port for owner, or a free port when port is 0;
// fresh as AllocateIP's.
func (s *Services) AllocatePort(ctx context.Context, port int, owner string) (got int, fresh bool, err error) {
	if port != 0 {
		if port < s.portBase || port >= s.portBase+s.portSize {
			return 0, false, ErrOutOfRange{Kind: "port", Value: strconv.Itoa(port), Range: fmt.Sprintf("%d-%d", s.portBase, s.portBase+s.portSize-1)}
		}
		held, err := s.claim(ctx, portPrefix+strconv.Itoa(port), owner, strconv.Itoa(port))
		return port, !held, err
	}
	start := rand.IntN(s.portSize)
	for i := 0; i < s.portSize; i++ {
		cand := s.portBase + (start+i)%s.portSize
		held, err := s.claim(ctx, portPrefix+strconv.Itoa(cand), owner, strconv.Itoa(cand))
		if _, taken := err.(ErrAllocated); taken || held {
			continue
		}
		return cand, err == nil, err
	}
	return 0, false, ErrFull{Range: fmt.Sprintf("%d-%d", s.portBase, s.portBase+s.portSize-1)}
}

// claim creates the key for owner. Claiming a value the same owner already
// holds succeeds with held set, so a retried write does not fail on its
// own allocation.
func (s *Services) claim(ctx context.Context, key, owner, value string) (held bool, err error) {
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, owner)).
		Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		return false, err
	}
	if resp.Succeeded {
		return false, nil
	}
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 && string(kvs[0].Value) == owner {
		return true, nil
	}
	return false, ErrAllocated{Value: value}
}

// ReleasePort frees port if owner holds it.
func (s *Services) ReleasePort(ctx context.Context, port int, owner string) {
	s.release(ctx, portPrefix+strconv.Itoa(port), owner)
}

func (s *Services) release(ctx context.Context, key, owner string) {
	_, _ = s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.Value(key), "=", owner)).
		Then(clientv3.OpDelete(key)).Commit()
}
