// Package allocator hands out Service ClusterIPs and NodePorts. Each
// allocated value is a key in etcd, created in a transaction that fails if
// it exists, so two API servers (or two racing requests) can never hand out
// the same address.
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
)

const (
	ipPrefix   = "/registry/ranges/serviceips/"
	portPrefix = "/registry/ranges/servicenodeports/"
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
	client   *clientv3.Client
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
func (s *Services) AllocateIP(ctx context.Context, ip, owner string) (string, error) {
	if ip != "" {
		a, err := netip.ParseAddr(ip)
		if err != nil || !s.cidr.Contains(a) || a == s.cidr.Addr() || a == s.ipAt(s.size) {
			return "", ErrOutOfRange{Kind: "IP", Value: ip, Range: s.cidr.String()}
		}
		return ip, s.claim(ctx, ipPrefix+ip, owner, ip)
	}
	static := min(max(16, s.size/16), 256)
	if static >= s.size {
		static = 0
	}
	for range 32 {
		cand := s.ipAt(static + rand.Uint64N(s.size-static)).String()
		if err := s.claim(ctx, ipPrefix+cand, owner, cand); err == nil {
			return cand, nil
		} else if _, taken := err.(ErrAllocated); !taken {
			return "", err
		}
	}
	for off := uint64(0); off < s.size; off++ {
		cand := s.ipAt((static + off) % s.size).String()
		if err := s.claim(ctx, ipPrefix+cand, owner, cand); err == nil {
			return cand, nil
		}
	}
	return "", ErrFull{Range: s.cidr.String()}
}

// AllocatePort claims port for owner, or a free port when port is 0.
func (s *Services) AllocatePort(ctx context.Context, port int, owner string) (int, error) {
	if port != 0 {
		if port < s.portBase || port >= s.portBase+s.portSize {
			return 0, ErrOutOfRange{Kind: "port", Value: strconv.Itoa(port), Range: fmt.Sprintf("%d-%d", s.portBase, s.portBase+s.portSize-1)}
		}
		return port, s.claim(ctx, portPrefix+strconv.Itoa(port), owner, strconv.Itoa(port))
	}
	start := rand.IntN(s.portSize)
	for i := 0; i < s.portSize; i++ {
		cand := s.portBase + (start+i)%s.portSize
		err := s.claim(ctx, portPrefix+strconv.Itoa(cand), owner, strconv.Itoa(cand))
		if err == nil {
			return cand, nil
		}
		if _, taken := err.(ErrAllocated); !taken {
			return 0, err
		}
	}
	return 0, ErrFull{Range: fmt.Sprintf("%d-%d", s.portBase, s.portBase+s.portSize-1)}
}

// claim creates the key for owner. Claiming a value the same owner already
// holds succeeds, so a retried write does not fail on its own allocation.
func (s *Services) claim(ctx context.Context, key, owner, value string) error {
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, owner)).
		Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		return err
	}
	if resp.Succeeded {
		return nil
	}
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 && string(kvs[0].Value) == owner {
		return nil
	}
	return ErrAllocated{Value: value}
}

// ReleaseIP frees ip if owner holds it.
func (s *Services) ReleaseIP(ctx context.Context, ip, owner string) {
	s.release(ctx, ipPrefix+ip, owner)
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

// Repair makes the allocation keys match the Services that exist: values
// whose owner is gone or no longer uses them are freed, and values in use
// but unrecorded are claimed. inUse maps owner to its IPs and ports.
func (s *Services) Repair(ctx context.Context, inUse map[string][]string) error {
	want := map[string]string{}
	for owner, vals := range inUse {
		for _, v := range vals {
			if _, err := strconv.Atoi(v); err == nil {
				want[portPrefix+v] = owner
			} else {
				want[ipPrefix+v] = owner
			}
		}
	}
	for _, prefix := range []string{ipPrefix, portPrefix} {
		resp, err := s.client.Get(ctx, prefix, clientv3.WithPrefix())
		if err != nil {
			return err
		}
		for _, kv := range resp.Kvs {
			if owner, ok := want[string(kv.Key)]; !ok || owner != string(kv.Value) {
				s.release(ctx, string(kv.Key), string(kv.Value))
			}
		}
	}
	for key, owner := range want {
		if err := s.claim(ctx, key, owner, key); err != nil {
			return fmt.Errorf("repair %s: %w", key, err)
		}
	}
	return nil
}
