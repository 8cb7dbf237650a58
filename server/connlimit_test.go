package server

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kelp-project/kelp/server/pki"
)

// guardFixture is a connGuard serving "ok" over HTTP/1.1 and HTTP/2 on
// loopback, with a client certificate from its CA at hand.
type guardFixture struct {
	g      *connGuard
	addr   string
	ca     *tls.Config // trusts the server; no client certificate
	client *tls.Config // presents alice's certificate
}

func newGuardFixture(t *testing.T, budget, perIP int, handshake time.Duration) *guardFixture {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.LoadOrCreateCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := ca.ServingCert(dir, "serving", []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	serving, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	cPEM, kPEM, err := ca.ClientCert("alice", nil)
	if err != nil {
		t.Fatal(err)
	}
	alice, err := tls.X509KeyPair(cPEM, kPEM)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := newConnGuard(ln, &tls.Config{Certificates: []tls.Certificate{serving}, ClientAuth: tls.VerifyClientCertIfGiven,
		ClientCAs: ca.Pool(), NextProtos: []string{"http/1.1"}}, budget, perIP, handshake)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }),
		ConnState: g.connState}
	go func() { _ = srv.Serve(g) }()
	t.Cleanup(func() { _ = srv.Close() })
	return &guardFixture{g: g, addr: ln.Addr().String(),
		ca:     &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"},
		client: &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", Certificates: []tls.Certificate{alice}}}
}

// get makes one HTTP/1.1 request on a new connection and leaves it open
// (idle); an error means the server refused or closed it.
func (f *guardFixture) get(t *testing.T, cfg *tls.Config) (*tls.Conn, error) {
	t.Helper()
	c, err := tls.Dial("tcp", f.addr, cfg)
	if err != nil {
		return nil, err
	}
	if err := request(c); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func request(c *tls.Conn) error {
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"); err != nil {
		return err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.ReadAll(resp.Body)
	return err
}

func (f *guardFixture) open() int {
	f.g.mu.Lock()
	defer f.g.mu.Unlock()
	return f.g.open
}

// waitOpen waits for the guard to count n connections.
func (f *guardFixture) waitOpen(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for f.open() != n {
		if time.Now().After(deadline) {
			t.Fatalf("guard counts %d open connections, want %d", f.open(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (f *guardFixture) waitEvictable(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		f.g.mu.Lock()
		got := f.g.evictable.Len()
		f.g.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("guard has %d evictable connections, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestGuardCapsAnonymousConnectionsPerAddressButNotCertificates(t *testing.T) {
	f := newGuardFixture(t, 0, 3, 5*time.Second)
	for i := range 3 {
		c, err := f.get(t, f.ca)
		if err != nil {
			t.Fatalf("anonymous connection %d under the cap: %v", i, err)
		}
		defer c.Close()
	}
	for i := range 2 {
		if c, err := f.get(t, f.ca); err == nil {
			c.Close()
			t.Fatalf("anonymous connection %d over the cap of 3 was served", 3+i)
		}
	}
	// The same address with a client certificate is not capped.
	for i := range 5 {
		c, err := f.get(t, f.client)
		if err != nil {
			t.Fatalf("certificate connection %d beside 3 anonymous ones: %v", i, err)
		}
		defer c.Close()
	}
	f.waitOpen(t, 8)
}

func TestGuardBudgetEvictsTheOldestIdleAnonymousConnection(t *testing.T) {
	f := newGuardFixture(t, 4, 0, 5*time.Second)
	var anon []*tls.Conn
	for i := range 3 {
		c, err := f.get(t, f.ca)
		if err != nil {
			t.Fatalf("anonymous connection %d: %v", i, err)
		}
		defer c.Close()
		anon = append(anon, c)
		// net/http reports it idle just after the response: wait, so
		// that the order of becoming idle is the order of opening.
		f.waitEvictable(t, i+1)
	}
	admin, err := f.get(t, f.client)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	f.waitOpen(t, 4)
	// The budget is spent: a new certificate connection closes the
	// oldest idle anonymous one, never the admin's.
	node, err := f.get(t, f.client)
	if err != nil {
		t.Fatalf("a certificate connection over a budget full of idle anonymous ones: %v", err)
	}
	defer node.Close()
	if err := request(anon[0]); err == nil {
		t.Fatal("the oldest anonymous connection still answers after eviction")
	}
	for i, c := range anon[1:] {
		if err := request(c); err != nil {
			t.Fatalf("anonymous connection %d, not the oldest, was closed: %v", i+1, err)
		}
	}
	if err := request(admin); err != nil {
		t.Fatalf("the admin's connection was closed: %v", err)
	}
	if n := f.open(); n > 4 {
		t.Fatalf("%d open connections over a budget of 4", n)
	}
}

func TestGuardRefusesWhenNothingIsEvictable(t *testing.T) {
	f := newGuardFixture(t, 2, 0, 5*time.Second)
	for range 2 {
		c, err := f.get(t, f.client)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	f.waitOpen(t, 2)
	if c, err := f.get(t, f.client); err == nil {
		c.Close()
		t.Fatal("a third connection was served over a budget of 2 certificate connections")
	}
	f.waitOpen(t, 2)
}

func TestGuardEndsStalledHandshakes(t *testing.T) {
	f := newGuardFixture(t, 0, 0, 200*time.Millisecond)
	raw, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	f.waitOpen(t, 1)
	start := time.Now()
	_ = raw.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := raw.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("a silent client's read: %v, want EOF", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the stalled handshake was closed after %s, with a 200ms timeout", d)
	}
	f.waitOpen(t, 0)
	// After the handshake the deadline is gone: an idle connection
	// outlives it.
	c, err := f.get(t, f.ca)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	time.Sleep(400 * time.Millisecond)
	if err := request(c); err != nil {
		t.Fatalf("an established connection died with the handshake deadline: %v", err)
	}
}

func TestClosedConnectionsAreForgotten(t *testing.T) {
	f := newGuardFixture(t, 0, 2, 5*time.Second)
	for range 5 {
		c, err := f.get(t, f.ca)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		f.waitOpen(t, 0)
	}
	f.g.mu.Lock()
	defer f.g.mu.Unlock()
	if len(f.g.anonByIP) != 0 || f.g.evictable.Len() != 0 {
		t.Fatalf("closed connections still counted: %v, %d evictable", f.g.anonByIP, f.g.evictable.Len())
	}
}

func TestBudgetLeavesAReserve(t *testing.T) {
	for nofile, want := range map[int]int{1024: 64, 4096: 3072, 20000: 15000, 1 << 20: 3 << 18} {
		if got := budgetFor(nofile); got != want {
			t.Errorf("budgetFor(%d) = %d, want %d", nofile, got, want)
		}
	}
}

func TestConnBudgetIsTheLowerLimit(t *testing.T) {
	for _, c := range []struct{ fd, max, want int }{
		{15000, 4096, 4096}, {3000, 4096, 3000}, {0, 4096, 4096}, {15000, 0, 15000}, {0, 0, 0},
	} {
		if got := connBudget(c.fd, c.max); got != c.want {
			t.Errorf("connBudget(fd %d, --max-connections %d) = %d, want %d", c.fd, c.max, got, c.want)
		}
	}
}

// Plain HTTP on the TLS port gets net/http's (and kube-apiserver's) 400,
// not a bare close.
func TestGuardAnswersPlainHTTPWith400(t *testing.T) {
	f := newGuardFixture(t, 0, 0, time.Second)
	raw, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := io.WriteString(raw, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = raw.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, _ := io.ReadAll(raw)
	if !strings.HasPrefix(string(b), "HTTP/1.0 400 Bad Request") || !strings.Contains(string(b), "Client sent an HTTP request to an HTTPS server.") {
		t.Errorf("plain HTTP got %q", b)
	}
	f.waitOpen(t, 0)
}
