package server

import (
	"container/list"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// connGuard is the API server's listener. It keeps what a connection flood
// can take bounded, which kube-apiserver leaves to the host:
//
//   - every connection's TLS handshake runs here, under its own deadline
//     (--tls-handshake-timeout), before net/http sees the connection, so
//     half-open handshakes end and the guard knows, once the handshake is
//     done, whether the client presented a verified certificate;
//   - open connections never exceed a budget: --max-connections, or less
//     if RLIMIT_NOFILE, less a reserve left for etcd, containerd, the
//     kubelet and the in-process clients, allows fewer (memory bounds a
//     flood on a small box, fds on a big one). A connection beyond it
//     closes the oldest
//     evictable one (still handshaking, or idle without a client
//     certificate), else it is refused;
//   - connections without a client certificate are capped per source
//     address (--max-connections-per-ip); one over the cap is closed
//     right after its handshake, with a TLS close_notify.
//
// What a flood leaves once it has gone, package resident gives back
// (quiet.go: its connections' goroutines gone).
//
// A connection with a verified client certificate (the admin, nodes, the
// in-process components) is never evicted nor capped, and, since a new
// connection can always evict the oldest anonymous one, anonymous
// connections cannot keep it out. The cap counts only finished anonymous
// connections: at accept time nobody knows yet which kind a connection
// is, and the in-process clients share 127.0.0.1 with any local flood.
type connGuard struct {
	inner            net.Listener
	tls              *tls.Config
	budget           int // open connections at most; 0: no limit
	perIP            int // anonymous connections per source address; 0: no limit
	handshakeTimeout time.Duration

	ready     chan net.Conn // handshaken connections, for Accept
	done      chan struct{}
	ctx       context.Context // ends handshakes when the guard closes
	cancel    context.CancelFunc
	closeOnce sync.Once

	mu   sync.Mutex
	open int
	// evictable holds, oldest first, the connections a new one may close
	// when the budget is spent: those still handshaking and the idle
	// ones without a client certificate.
	evictable list.List
	anonByIP  map[netip.Addr]int
	log       limitLog
}

// guardedConn is one accepted connection, as the guard tracks it.
type guardedConn struct {
	net.Conn
	g    *connGuard
	ip   netip.Addr
	elem *list.Element // in g.evictable, or nil; under g.mu
	// Under g.mu: the handshake is done (verified tells which kind it
	// is), it was closed.
	established, verified, gone bool
	closeOnce                   sync.Once
}

func (c *guardedConn) Close() error {
	c.closeOnce.Do(func() { c.g.forget(c) })
	return c.Conn.Close()
}

// fdBudget is how many connections the API server may hold open with the
// process's file-descriptor limit: all but a reserve of a quarter (at
// least 1024) for everything else the process opens, etcd's files and
// the in-process clients' own ends of their loopback connections among
// them. Go raises the soft limit to the hard one at start, so this reads
// the limit the process really has.
func fdBudget() int {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == unix.RLIM_INFINITY {
		return 0
	}
	return budgetFor(int(min(rl.Cur, 1<<30)))
}

// connBudget is the lower of the fd budget and --max-connections (either
// 0 for no limit).
func connBudget(fd, max int) int {
	if max > 0 && (fd == 0 || max < fd) {
		return max
	}
	return fd
}

func budgetFor(nofile int) int {
	reserve := max(1024, nofile/4)
	return max(nofile-reserve, 64)
}

func newConnGuard(inner net.Listener, cfg *tls.Config, budget, perIP int, handshakeTimeout time.Duration) *connGuard {
	g := &connGuard{inner: inner, tls: cfg, budget: budget, perIP: perIP, handshakeTimeout: handshakeTimeout,
		ready: make(chan net.Conn), done: make(chan struct{}), anonByIP: map[netip.Addr]int{}}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	go g.acceptLoop()
	return g
}

func (g *connGuard) Accept() (net.Conn, error) {
	select {
	case c := <-g.ready:
		return c, nil
	case <-g.done:
		return nil, net.ErrClosed
	}
}

func (g *connGuard) Close() error {
	var err error
	g.closeOnce.Do(func() {
		close(g.done)
		g.cancel()
		err = g.inner.Close()
	})
	return err
}

func (g *connGuard) Addr() net.Addr { return g.inner.Addr() }

func (g *connGuard) acceptLoop() {
	var backoff time.Duration
	for {
		c, err := g.inner.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// EMFILE and the like: net/http's back-off, 5 ms doubling
			// up to 1 s, so a full fd table is not a busy loop.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			g.log.printf("API server accept: %v; retrying in %s", err, backoff)
			select {
			case <-time.After(backoff):
			case <-g.done:
				return
			}
			continue
		}
		backoff = 0
		if gc := g.admit(c); gc != nil {
			go g.handshake(gc)
		}
	}
}

// admit registers a new connection, closing the oldest evictable one if
// the budget is spent; nil means it was refused (and closed).
func (g *connGuard) admit(c net.Conn) *guardedConn {
	var ip netip.Addr
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		ip = a.AddrPort().Addr().Unmap()
	}
	g.mu.Lock()
	var victim *guardedConn
	if g.budget > 0 && g.open >= g.budget {
		if front := g.evictable.Front(); front != nil {
			victim = front.Value.(*guardedConn)
			g.removeLocked(victim)
		} else {
			g.mu.Unlock()
			g.log.printf("API server: %d connections open, the budget (--max-connections or RLIMIT_NOFILE), none of them evictable: refusing %s", g.budget, ip)
			_ = c.Close()
			return nil
		}
	}
	gc := &guardedConn{Conn: c, g: g, ip: ip}
	g.open++
	gc.elem = g.evictable.PushBack(gc)
	g.mu.Unlock()
	if victim != nil {
		// The raw close: a TLS close_notify could block on a peer that
		// does not read, and this is the accept loop. Its reader in
		// net/http then sees the error and lets it go.
		_ = victim.Conn.Close()
		g.log.printf("API server: %d connections open, the budget (--max-connections or RLIMIT_NOFILE): closed the oldest idle or handshaking one without a client certificate (from %s)", g.budget, victim.ip)
	}
	return gc
}

// removeLocked forgets a connection: it no longer counts anywhere.
func (g *connGuard) removeLocked(c *guardedConn) {
	if c.gone {
		return
	}
	c.gone = true
	g.open--
	if c.elem != nil {
		g.evictable.Remove(c.elem)
		c.elem = nil
	}
	if c.established && !c.verified {
		if g.anonByIP[c.ip]--; g.anonByIP[c.ip] <= 0 {
			delete(g.anonByIP, c.ip)
		}
	}
}

func (g *connGuard) forget(c *guardedConn) {
	g.mu.Lock()
	g.removeLocked(c)
	g.mu.Unlock()
}

func (g *connGuard) handshake(gc *guardedConn) {
	tc := tls.Server(gc, g.tls)
	if g.handshakeTimeout > 0 {
		_ = gc.SetDeadline(time.Now().Add(g.handshakeTimeout))
	}
	err := tc.HandshakeContext(g.ctx)
	_ = gc.SetDeadline(time.Time{})
	if err != nil {
		// As net/http's own TLS server (and so kube-apiserver) answers a
		// plain HTTP request on the TLS port: a 400 that says why.
		var re tls.RecordHeaderError
		if errors.As(err, &re) && re.Conn != nil && looksLikeHTTP(re.RecordHeader) {
			_ = gc.SetWriteDeadline(time.Now().Add(time.Second))
			_, _ = io.WriteString(gc.Conn, "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")
		}
		_ = gc.Close()
		logrus.Debugf("API server: TLS handshake from %s: %v", gc.RemoteAddr(), err)
		return
	}
	if err := g.established(gc, len(tc.ConnectionState().VerifiedChains) > 0); err != nil {
		if errors.Is(err, errOverCap) {
			g.log.printf("API server: %d connections without a client certificate from %s: closing a new one (--max-connections-per-ip)", g.perIP, gc.ip)
			refuse(tc, gc)
			return
		}
		_ = tc.Close()
		return
	}
	select {
	case g.ready <- tc:
	case <-g.done:
		_ = tc.Close()
	}
}

// looksLikeHTTP reports whether a TLS record header is the start of a
// plaintext HTTP request (net/http's test).
func looksLikeHTTP(hdr [5]byte) bool {
	switch string(hdr[:]) {
	case "GET /", "HEAD ", "POST ", "PUT /", "OPTIO":
		return true
	}
	return false
}

var (
	errOverCap = errors.New("over the per-address cap of connections without a client certificate")
	errEvicted = errors.New("evicted during its handshake")
)

// refuseLinger is how long a refused connection is drained before it is
// closed.
const refuseLinger = time.Second

// refuse closes a connection over its address's cap so that its client
// sees a clean end (close_notify, then EOF) rather than a reset: by the
// time the server knows the connection is anonymous, the client has
// finished its side of the handshake and may be sending its request, and
// closing a socket with unread data sends RST. So it says close_notify,
// half-closes, and reads what arrives for a moment before closing. The
// connection still counts against the budget meanwhile.
func refuse(tc *tls.Conn, gc *guardedConn) {
	_ = gc.SetDeadline(time.Now().Add(refuseLinger))
	_ = tc.CloseWrite()
	if cw, ok := gc.Conn.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_, _ = io.Copy(io.Discard, gc.Conn)
	_ = gc.Close()
}

// established records a finished handshake; an error means the
// connection must be closed.
func (g *connGuard) established(c *guardedConn, verified bool) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c.gone {
		return errEvicted
	}
	if c.elem != nil {
		g.evictable.Remove(c.elem)
		c.elem = nil
	}
	if !verified && g.perIP > 0 && g.anonByIP[c.ip] >= g.perIP {
		return errOverCap
	}
	c.established, c.verified = true, verified
	if !verified {
		g.anonByIP[c.ip]++
	}
	return nil
}

// connState is the http.Server's ConnState hook: an anonymous connection
// is evictable while it is idle (HTTP/1.1 between requests, HTTP/2 with
// no open stream), never while it serves a request or once hijacked.
func (g *connGuard) connState(c net.Conn, st http.ConnState) {
	tc, ok := c.(*tls.Conn)
	if !ok {
		return
	}
	gc, ok := tc.NetConn().(*guardedConn)
	if !ok {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if gc.gone || gc.verified || !gc.established {
		return
	}
	idle := st == http.StateIdle
	switch {
	case idle && gc.elem == nil:
		gc.elem = g.evictable.PushBack(gc)
	case !idle && gc.elem != nil:
		g.evictable.Remove(gc.elem)
		gc.elem = nil
	}
}

// limitLog logs at most once per interval, counting what it held back: a
// flood must not turn into a flood of log lines.
type limitLog struct {
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

const limitLogInterval = 10 * time.Second

func (l *limitLog) printf(format string, args ...any) {
	l.mu.Lock()
	now := time.Now()
	if now.Sub(l.last) < limitLogInterval {
		l.suppressed++
		l.mu.Unlock()
		return
	}
	held := l.suppressed
	l.last, l.suppressed = now, 0
	l.mu.Unlock()
	if held > 0 {
		logrus.Warnf(format+" (and %d more such events in the last %s)", append(args, held, limitLogInterval)...)
		return
	}
	logrus.Warnf(format, args...)
}
