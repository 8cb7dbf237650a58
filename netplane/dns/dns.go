// Package dns is kelp's in-process cluster DNS: the CoreDNS "kubernetes"
// plugin equivalent plus a forwarder for everything else.
//
// It answers authoritatively for the cluster domain (Services, headless
// endpoints, SRV for named ports, pod names in "insecure" mode) and for PTR
// queries of known ClusterIPs and headless endpoint IPs. Every other query is
// forwarded to the host's upstream resolvers, with loop protection.
package dns

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kelp-project/kelp/config"
	mdns "github.com/miekg/dns"
	"github.com/sirupsen/logrus"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// Config configures the cluster DNS server.
type Config struct {
	// Domain is the cluster domain, default "cluster.local".
	Domain string
	// Listen are the addresses ("ip:port") served on both UDP and TCP.
	// Port 0 picks a free port (the same one for UDP and TCP).
	// Default: 127.0.0.1:53.
	Listen []string
	// Upstreams are the resolvers ("ip:port" or "ip") for names outside the
	// cluster. Default: the nameservers of ResolvConf. Upstreams that are one
	// of our own listen addresses are dropped.
	Upstreams []string
	// ResolvConf is read when Upstreams is empty; default /etc/resolv.conf.
	ResolvConf string
	// TTL of authoritative records, default 5.
	TTL uint32
	// Clients are the networks served besides loopback and this host's
	// own addresses: the cluster CIDR (see clients.go). Anyone else is
	// REFUSED.
	Clients []netip.Prefix
}

const (
	defaultDomain     = config.ClusterDomain
	defaultResolvConf = "/etc/resolv.conf"
	defaultTTL        = 5
	forwardTimeout    = 2 * time.Second
	// edns size we use towards upstreams and advertise at most to clients.
	ourUDPSize = 1232
	maxUDPSize = 4096
)

type listener struct {
	pc  net.PacketConn
	ln  net.Listener
	udp *mdns.Server
	tcp *mdns.Server
}

// Server is the cluster DNS server. It implements mdns.Handler.
type Server struct {
	cfg  Config
	zone string // lower-case fqdn of the cluster domain, e.g. "cluster.local."
	log  *logrus.Entry

	svcInformer   cache.SharedIndexInformer
	sliceInformer cache.SharedIndexInformer

	listeners []*listener
	clients   *clientFilter

	// upstreams currently in use; looping ones are removed by the probe.
	upMu      sync.RWMutex
	upstreams []string

	// local addresses of our in-flight forwarding sockets, for detecting
	// queries that come straight back from ourselves.
	inflight sync.Map // string -> struct{}

	// loop probe: a random label; queries for "<i>.<token>.kelp-loop-probe."
	// reaching us mean upstream i forwards back to us.
	probeToken string
	probeHits  sync.Map // int -> *atomic.Int32

	closeOnce sync.Once
}

// New creates the server, registers its informers (Services and
// EndpointSlices) with factory and binds the listen sockets, so Addrs works
// immediately. The caller starts the factory.
func New(cfg Config, factory informers.SharedInformerFactory) (*Server, error) {
	if cfg.Domain == "" {
		cfg.Domain = defaultDomain
	}
	if cfg.ResolvConf == "" {
		cfg.ResolvConf = defaultResolvConf
	}
	if cfg.TTL == 0 {
		cfg.TTL = defaultTTL
	}
	if len(cfg.Listen) == 0 {
		cfg.Listen = []string{"127.0.0.1:53"}
	}
	if factory == nil {
		return nil, errors.New("dns: nil informer factory")
	}
	s := &Server{
		cfg:  cfg,
		zone: strings.ToLower(mdns.Fqdn(strings.Trim(cfg.Domain, "."))),
		log:  logrus.WithField("component", "dns"),

		clients: newClientFilter(cfg.Clients),
	}
	var tok [8]byte
	if _, err := rand.Read(tok[:]); err != nil {
		return nil, err
	}
	s.probeToken = hex.EncodeToString(tok[:])

	s.svcInformer = factory.Core().V1().Services().Informer()
	s.sliceInformer = factory.Discovery().V1().EndpointSlices().Informer()
	if err := addIndexers(s.svcInformer, s.sliceInformer); err != nil {
		return nil, err
	}

	for _, addr := range cfg.Listen {
		l, err := bind(addr)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("dns: listen %s: %w", addr, err)
		}
		l.udp = &mdns.Server{PacketConn: l.pc, Handler: s, UDPSize: maxUDPSize}
		l.tcp = &mdns.Server{Listener: l.ln, Handler: s}
		s.listeners = append(s.listeners, l)
	}

	ups := cfg.Upstreams
	if len(ups) == 0 {
		cc, err := mdns.ClientConfigFromFile(cfg.ResolvConf)
		if err != nil {
			s.log.WithError(err).Warn("no upstream resolvers: cannot read resolv.conf")
		} else {
			for _, ns := range cc.Servers {
				ups = append(ups, net.JoinHostPort(ns, cc.Port))
			}
		}
	}
	s.upstreams = s.filterUpstreams(ups)
	return s, nil
}

// bind listens on TCP and UDP on the same address; with port 0 it retries
// until both get the same port.
func bind(addr string) (*listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	var lastErr error
	for i := 0; i < 20; i++ {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, err
		}
		p := ln.Addr().(*net.TCPAddr).Port
		pc, err := net.ListenPacket("udp", net.JoinHostPort(host, strconv.Itoa(p)))
		if err == nil {
			return &listener{pc: pc, ln: ln}, nil
		}
		ln.Close()
		lastErr = err
		if port != "0" {
			break
		}
	}
	return nil, lastErr
}

// filterUpstreams normalises upstream addresses and drops those that are us.
func (s *Server) filterUpstreams(in []string) []string {
	var out []string
	for _, u := range in {
		u = strings.TrimSpace(u)
		if u == "" {
			continue
		}
		host, port, err := net.SplitHostPort(u)
		if err != nil {
			host, port = strings.Trim(u, "[]"), "53"
		}
		ip := net.ParseIP(host)
		if ip == nil {
			s.log.Warnf("ignoring upstream %q: not an IP address", u)
			continue
		}
		pn, err := strconv.Atoi(port)
		if err != nil {
			s.log.Warnf("ignoring upstream %q: bad port", u)
			continue
		}
		if s.isSelf(ip, pn) {
			s.log.Infof("ignoring upstream %s: it is our own listen address", u)
			continue
		}
		out = append(out, net.JoinHostPort(ip.String(), port))
	}
	return out
}

// isSelf reports whether ip:port reaches one of our own listeners.
func (s *Server) isSelf(ip net.IP, port int) bool {
	for _, l := range s.listeners {
		la := l.pc.LocalAddr().(*net.UDPAddr)
		if la.Port != port {
			continue
		}
		if la.IP.Equal(ip) || ip.IsUnspecified() {
			return true
		}
		if la.IP.IsUnspecified() && (ip.IsLoopback() || s.clients.isLocal(netipOf(ip))) {
			return true
		}
	}
	return false
}

// Addrs returns the bound addresses: per listen address its UDP then its TCP
// address (same ip:port).
func (s *Server) Addrs() []net.Addr {
	var out []net.Addr
	for _, l := range s.listeners {
		out = append(out, l.pc.LocalAddr(), l.ln.Addr())
	}
	return out
}

// Upstreams returns the upstream resolvers in use.
func (s *Server) Upstreams() []string {
	s.upMu.RLock()
	defer s.upMu.RUnlock()
	return append([]string(nil), s.upstreams...)
}

// Run serves DNS on all listen addresses until ctx ends. It closes the
// sockets when it returns. Queries for the cluster domain get SERVFAIL until
// the informer caches have synced.
func (s *Server) Run(ctx context.Context) error {
	errc := make(chan error, 2*len(s.listeners))
	var wg sync.WaitGroup
	for _, l := range s.listeners {
		for _, srv := range []*mdns.Server{l.udp, l.tcp} {
			wg.Add(1)
			go func(srv *mdns.Server) {
				defer wg.Done()
				if err := srv.ActivateAndServe(); err != nil {
					errc <- err
				}
			}(srv)
		}
	}
	go s.probeLoops(ctx)

	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	s.Close()
	wg.Wait()
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("dns: serve: %w", err)
	}
	return nil
}

// Close closes the sockets; Run returns afterwards. Use it to release the
// sockets of a server that was never run.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		for _, l := range s.listeners {
			l.pc.Close()
			l.ln.Close()
		}
	})
	return nil
}

func (s *Server) synced() bool {
	return s.svcInformer.HasSynced() && s.sliceInformer.HasSynced()
}

// ServeDNS answers one query.
func (s *Server) ServeDNS(w mdns.ResponseWriter, r *mdns.Msg) {
	m := s.handle(w, r)
	s.reply(w, r, m)
}

func (s *Server) handle(w mdns.ResponseWriter, r *mdns.Msg) *mdns.Msg {
	m := new(mdns.Msg)
	if r.Opcode != mdns.OpcodeQuery {
		return m.SetRcode(r, mdns.RcodeNotImplemented)
	}
	if len(r.Question) != 1 {
		return m.SetRcodeFormatError(r)
	}
	if opt := r.IsEdns0(); opt != nil && opt.Version() != 0 {
		m.SetRcode(r, mdns.RcodeBadVers)
		return m
	}
	q := r.Question[0]
	lname := strings.ToLower(q.Name)

	// Loop probes come back through an upstream, which is no client of
	// ours: they are counted before anything else.
	if s.isProbe(lname) {
		return m.SetRcode(r, mdns.RcodeRefused)
	}
	if w != nil && w.RemoteAddr() != nil && !s.clients.allows(w.RemoteAddr()) {
		s.log.Debugf("refusing query for %s from %s: not a client of the cluster", q.Name, w.RemoteAddr())
		return m.SetRcode(r, mdns.RcodeRefused)
	}
	if w != nil && w.RemoteAddr() != nil {
		if _, ok := s.inflight.Load(w.RemoteAddr().String()); ok {
			s.log.Warnf("refusing query for %s from our own forwarder (loop)", q.Name)
			return m.SetRcode(r, mdns.RcodeRefused)
		}
	}

	inet := q.Qclass == mdns.ClassINET || q.Qclass == mdns.ClassANY
	if mdns.IsSubDomain(s.zone, lname) {
		if !inet {
			return m.SetRcode(r, mdns.RcodeRefused)
		}
		if !s.synced() {
			return m.SetRcode(r, mdns.RcodeServerFailure)
		}
		return s.answerZone(r, q, lname)
	}
	if inet {
		if q.Qtype == mdns.TypePTR {
			if resp := s.answerPTR(r, q, lname); resp != nil {
				return resp
			}
		}
	}
	return s.forwardMsg(r)
}

// reply writes m, fitting it into the client's UDP buffer (TC set when
// records had to be dropped) and mirroring EDNS0.
func (s *Server) reply(w mdns.ResponseWriter, r, m *mdns.Msg) {
	m.Id = r.Id
	m.Response = true
	m.Opcode = r.Opcode
	m.RecursionDesired = r.RecursionDesired
	m.RecursionAvailable = true
	m.CheckingDisabled = r.CheckingDisabled
	if len(r.Question) > 0 {
		m.Question = r.Question[:1]
	}
	// drop any OPT (e.g. from an upstream) and set our own.
	extra := m.Extra[:0]
	for _, rr := range m.Extra {
		if rr.Header().Rrtype != mdns.TypeOPT {
			extra = append(extra, rr)
		}
	}
	m.Extra = extra
	size := mdns.MinMsgSize
	if opt := r.IsEdns0(); opt != nil {
		if int(opt.UDPSize()) > size {
			size = int(opt.UDPSize())
		}
		adv := size
		if adv > maxUDPSize {
			adv = maxUDPSize
		}
		m.SetEdns0(uint16(adv), opt.Do())
	}
	m.Compress = true
	udp := true
	if w != nil && w.RemoteAddr() != nil {
		_, udp = w.RemoteAddr().(*net.UDPAddr)
	}
	if udp {
		m.Truncate(size)
	} else {
		m.Truncate(mdns.MaxMsgSize)
	}
	if w == nil {
		return
	}
	if err := w.WriteMsg(m); err != nil {
		s.log.WithError(err).Debug("write reply")
	}
}

// isProbe reports whether lname is one of our loop probes, and counts it.
func (s *Server) isProbe(lname string) bool {
	suffix := "." + s.probeToken + ".kelp-loop-probe."
	if !strings.HasSuffix(lname, suffix) {
		return false
	}
	i, err := strconv.Atoi(strings.TrimSuffix(lname, suffix))
	if err == nil {
		v, _ := s.probeHits.LoadOrStore(i, new(atomic.Int32))
		v.(*atomic.Int32).Add(1)
	}
	return true
}
