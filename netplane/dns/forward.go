package dns

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync/atomic"
	"time"

	mdns "github.com/miekg/dns"
)

// forwardMsg sends r to the upstreams (UDP, TCP when truncated) and returns
// the answer, or SERVFAIL when none answers within forwardTimeout.
func (s *Server) forwardMsg(r *mdns.Msg) *mdns.Msg {
	ups := s.Upstreams()
	fail := new(mdns.Msg).SetRcode(r, mdns.RcodeServerFailure)
	if len(ups) == 0 {
		return fail
	}
	req := r.Copy()
	req.Id = mdns.Id()
	do := false
	if opt := req.IsEdns0(); opt != nil {
		do = opt.Do()
	}
	extra := req.Extra[:0]
	for _, rr := range req.Extra {
		if rr.Header().Rrtype != mdns.TypeOPT {
			extra = append(extra, rr)
		}
	}
	req.Extra = extra
	req.SetEdns0(ourUDPSize, do)

	ctx, cancel := context.WithTimeout(context.Background(), forwardTimeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	var last *mdns.Msg
	for i, up := range ups {
		per := time.Until(deadline) / time.Duration(len(ups)-i)
		if per <= 0 {
			break
		}
		resp, err := s.exchange(ctx, "udp", up, req, per)
		if err == nil && resp.Truncated {
			resp, err = s.exchange(ctx, "tcp", up, req, time.Until(deadline))
		}
		if err != nil {
			s.log.WithError(err).Debugf("forward %s to %s", r.Question[0].Name, up)
			continue
		}
		if resp.Rcode == mdns.RcodeServerFailure || resp.Rcode == mdns.RcodeRefused {
			last = resp
			continue
		}
		return resp
	}
	if last != nil {
		return last
	}
	return fail
}

// exchange performs one query against up, tracking our local socket address
// so that a query arriving from it is recognised as a loop.
func (s *Server) exchange(ctx context.Context, network, up string, req *mdns.Msg, timeout time.Duration) (*mdns.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, up)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	local := conn.LocalAddr().String()
	s.inflight.Store(local, struct{}{})
	defer s.inflight.Delete(local)
	c := &mdns.Client{Net: network, Timeout: timeout, UDPSize: mdns.MaxMsgSize}
	co := &mdns.Conn{Conn: conn, UDPSize: mdns.MaxMsgSize}
	resp, _, err := c.ExchangeWithConnContext(ctx, req, co)
	if err != nil {
		return nil, err
	}
	if len(resp.Question) != 1 || len(req.Question) != 1 ||
		!equalFoldQ(resp.Question[0], req.Question[0]) {
		return nil, fmt.Errorf("upstream %s: answer for a different question", up)
	}
	return resp, nil
}

func equalFoldQ(a, b mdns.Question) bool {
	return a.Qtype == b.Qtype && a.Qclass == b.Qclass && mdns.CanonicalName(a.Name) == mdns.CanonicalName(b.Name)
}

// probeLoops sends one probe query per upstream. An upstream that forwards
// the probe back to us is a loop and is dropped.
func (s *Server) probeLoops(ctx context.Context) {
	ups := s.Upstreams()
	for i, up := range ups {
		if ctx.Err() != nil {
			return
		}
		req := new(mdns.Msg)
		req.SetQuestion(fmt.Sprintf("%d.%s.kelp-loop-probe.", i, s.probeToken), mdns.TypeHINFO)
		req.RecursionDesired = true
		_, _ = s.exchange(ctx, "udp", up, req, forwardTimeout)
		if v, ok := s.probeHits.Load(i); ok && v.(*atomic.Int32).Load() > 0 {
			s.log.Errorf("upstream %s forwards queries back to us (loop); dropping it", up)
			s.upMu.Lock()
			s.upstreams = slices.DeleteFunc(s.upstreams, func(u string) bool { return u == up })
			s.upMu.Unlock()
		}
	}
}
