package integration

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kelp-project/kelp/config"

	"golang.org/x/net/http2"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// usage is a process's resident memory and open descriptors.
type usage struct {
	rssKB, anonKB int
	fds           int
}

func (u usage) String() string {
	return fmt.Sprintf("RSS %.1f MiB (anonymous %.1f MiB), %d fds", float64(u.rssKB)/1024, float64(u.anonKB)/1024, u.fds)
}

func (s *testServer) usage(t *testing.T) usage {
	t.Helper()
	pid := s.cmd.Process.Pid
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	var u usage
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			u.rssKB, _ = strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
		}
		if rest, ok := strings.CutPrefix(line, "RssAnon:"); ok {
			u.anonKB, _ = strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
		}
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	u.fds = len(fds)
	if u.rssKB == 0 {
		t.Fatalf("no VmRSS in /proc/%d/status", pid)
	}
	return u
}

// within reports whether u is back to base, as the issue has it: no more
// than 10% over it. (Go's runtime never gives back what a peak of
// connections cost it beyond their heap and stacks: the descriptors of
// their goroutines, the spans' metadata, fragmentation; some 3.5 KiB per
// connection: --max-connections keeps that within the 10%.)
func (u usage) within(base usage) bool {
	return float64(u.rssKB) <= 1.1*float64(base.rssKB) && float64(u.fds) <= 1.1*float64(base.fds)
}

// floodConn is one idle connection of the flood, as its client sees it.
type floodConn struct {
	c  net.Conn
	cc *http2.ClientConn // an HTTP/2 connection's client, which owns its reads
	// ended is set, for HTTP/1.1, by a goroutine blocked reading the
	// idle connection, when the server closes it.
	ended *atomic.Bool
}

// closed reports whether the server has closed the connection.
func (f floodConn) closed() bool {
	if f.cc != nil {
		return f.cc.State().Closed || !f.cc.CanTakeNewRequest()
	}
	return f.ended.Load()
}

func (f floodConn) Close() { _ = f.c.Close() }

// idleConn opens one connection without credentials from a source
// address, GETs /version on it (HTTP/2 or HTTP/1.1) and leaves it idle.
func idleConn(addr string, from net.IP, h2 bool) (floodConn, error) {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: from}, Timeout: 30 * time.Second}
	raw, err := d.Dial("tcp", addr)
	if err != nil {
		return floodConn{}, err
	}
	proto := "http/1.1"
	if h2 {
		proto = "h2"
	}
	c := tls.Client(raw, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{proto}})
	f := floodConn{c: c}
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if err := c.Handshake(); err != nil {
		raw.Close()
		return floodConn{}, err
	}
	req, _ := http.NewRequest(http.MethodGet, "https://"+addr+"/version", nil)
	var resp *http.Response
	if h2 {
		if f.cc, err = (&http2.Transport{}).NewClientConn(c); err == nil {
			resp, err = f.cc.RoundTrip(req)
		}
	} else if err = req.Write(c); err == nil {
		resp, err = http.ReadResponse(bufio.NewReader(c), req)
	}
	if err != nil {
		c.Close()
		return floodConn{}, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	_ = c.SetDeadline(time.Time{})
	if resp.StatusCode != http.StatusOK {
		c.Close()
		return floodConn{}, fmt.Errorf("/version: %s", resp.Status)
	}
	if f.cc == nil {
		f.ended = &atomic.Bool{}
		go func() {
			_, _ = c.Read(make([]byte, 1))
			f.ended.Store(true)
		}()
	}
	return f, nil
}

// flood opens n idle connections in all, spread over the source
// addresses, 64 at a time. Every 500 it closes, on its side, those the
// server has closed, so that this process's own fd limit is not what
// stops it. It returns the connections still open and the errors of
// those that failed.
func flood(addr string, sources []net.IP, n int) ([]floodConn, []error) {
	var mu sync.Mutex
	var conns []floodConn
	var errs []error
	for done := 0; done < n; done += 500 {
		work := make(chan int)
		var wg sync.WaitGroup
		for range 64 {
			wg.Go(func() {
				for i := range work {
					c, err := idleConn(addr, sources[i%len(sources)], i%2 == 1)
					mu.Lock()
					if err != nil {
						errs = append(errs, err)
					} else {
						conns = append(conns, c)
					}
					mu.Unlock()
				}
			})
		}
		for i := done; i < min(done+500, n); i++ {
			work <- i
		}
		close(work)
		wg.Wait()
		conns = slices.DeleteFunc(conns, func(c floodConn) bool {
			if c.closed() {
				c.Close()
				return true
			}
			return false
		})
	}
	return conns, errs
}

// nofile is a process's open-files limit, from /proc/<pid>/limits.
func nofile(t *testing.T, pid int) int {
	t.Helper()
	limits, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(limits), "\n") {
		if rest, ok := strings.CutPrefix(line, "Max open files"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				n, err := strconv.Atoi(f[0])
				if err == nil {
					return n
				}
			}
		}
	}
	t.Fatalf("no open-files limit in /proc/%d/limits", pid)
	return 0
}

// TestIdleConnectionFloodIsClosedAndForgotten is issue 12's probe: 20,000
// unauthenticated connections, one /version request each, then idle. The
// server holds no more of them than its budget (--max-connections,
// 2,048, or three quarters of RLIMIT_NOFILE if that is fewer; beyond it a
// new connection closes the oldest idle one), kubectl answers
// throughout, those left are closed after the idle timeout, and the
// server's RSS and fd count return to within 10% of their baseline. One
// address beyond --max-connections-per-ip has its extra connections
// closed cleanly.
func TestIdleConnectionFloodIsClosedAndForgotten(t *testing.T) {
	const total, sources, idle = 20000, 20, 40 * time.Second
	s := startServer(t, "--idle-connection-timeout", idle.String())
	addr := strings.TrimPrefix(s.config.Host, "https://")
	limit := nofile(t, s.cmd.Process.Pid)
	budget := min(config.MaxConnections, limit-max(1024, limit/4))
	// The baseline is taken once the server has given back its startup
	// pages (package resident, 20 s after start) and settled.
	time.Sleep(25 * time.Second)
	s.mustKubectl("get", "namespaces")
	base := s.usage(t)
	t.Logf("baseline: %s; RLIMIT_NOFILE %d, connection budget %d", base, limit, budget)

	var from []net.IP
	for i := range sources {
		from = append(from, net.IPv4(127, 0, 0, byte(2+i)))
	}
	// kubectl (a client certificate, from 127.0.0.1) answers while the
	// flood goes on; the server's fd count never passes its limit.
	stop := make(chan struct{})
	var kubectlRuns, kubectlFails atomic.Int32
	var peak atomic.Value
	peak.Store(base)
	var watching sync.WaitGroup
	watching.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Second):
			}
			kubectlRuns.Add(1)
			if out, err := s.kubectl("get", "--raw", "/api/v1/namespaces/default"); err != nil {
				kubectlFails.Add(1)
				t.Errorf("kubectl during the flood: %v\n%s", err, out)
			}
		}
	})
	watching.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			if u, p := s.usage(t), peak.Load().(usage); u.fds > p.fds {
				peak.Store(u)
			}
		}
	})
	start := time.Now()
	conns, errs := flood(addr, from, total)
	flooded := s.usage(t)

	// One address beyond the cap (1024 by default): the extra connections
	// are closed, cleanly, after their handshake.
	capped, cappedErrs := flood(addr, []net.IP{net.IPv4(127, 0, 0, 100)}, 1100)
	close(stop)
	watching.Wait()
	top := peak.Load().(usage)
	t.Logf("opened %d idle connections in %s (%d errors); %d still open; kubectl ran %d times meanwhile, %d failures",
		total, time.Since(start).Round(time.Millisecond), len(errs), len(conns), kubectlRuns.Load(), kubectlFails.Load())
	live := flooded.fds - base.fds
	t.Logf("with the flood: %s, %d connections more than the baseline (%.1f KiB RSS each); peak %d fds",
		flooded, live, float64(flooded.rssKB-base.rssKB)/float64(max(live, 1)), top.fds)
	if len(errs) > 0 {
		t.Errorf("%d of %d connections under the per-address cap failed, the first: %v", len(errs), total, errs[0])
	}
	if top.fds >= limit || top.fds > base.fds+budget+64 {
		t.Errorf("the server reached %d fds: over its budget of %d connections (limit %d)", top.fds, budget, limit)
	}
	if want := min(total, budget); len(conns) < want*9/10 {
		t.Errorf("only %d connections stayed open; the budget (%d) holds %d", len(conns), budget, want)
	}
	t.Logf("from one address: %d served, %d refused", len(capped), len(cappedErrs))
	if len(capped) != 1024 || len(cappedErrs) != 76 {
		t.Errorf("from one address, %d served and %d refused; want 1024 and 76", len(capped), len(cappedErrs))
	}
	// Closed cleanly: the client reads the end of the connection (EOF;
	// HTTP/2's client calls it a connection lost or never established),
	// not a reset, a broken pipe or a timeout.
	for _, err := range cappedErrs {
		if errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, os.ErrDeadlineExceeded) ||
			strings.Contains(err.Error(), "reset") || strings.Contains(err.Error(), "broken pipe") || strings.Contains(err.Error(), "timeout") {
			t.Errorf("a refused connection ended with %v, not a clean close", err)
			break
		}
	}
	for _, c := range capped {
		c.Close()
	}
	s.mustKubectl("get", "namespaces")

	// After the idle timeout the server closes every one of them: each
	// client sees it, and the server's usage returns to its baseline. The
	// baseline was taken just after the start gave its memory back, and
	// the server gives the flood's back once it has gone (resident/quiet.go);
	// from then on both grow alike with the GC's headroom, so the
	// comparison is of those two moments: the lowest RSS seen.
	after := s.usage(t) // the lowest RSS seen, with the latest fd count
	for deadline := time.Now().Add(idle + 45*time.Second); !after.within(base) && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
		u := s.usage(t)
		after.fds, after.rssKB, after.anonKB = u.fds, min(after.rssKB, u.rssKB), min(after.anonKB, u.anonKB)
	}
	t.Logf("after the idle timeout (%s since the flood began): %s; back to baseline means RSS under %.1f MiB (10%% over it)",
		time.Since(start).Round(time.Second), after, 1.1*float64(base.rssKB)/1024)
	if !after.within(base) {
		t.Errorf("after the idle timeout: %s, not back to the baseline %s", after, base)
	}
	for _, line := range strings.Split(s.logs.String(), "\n") {
		if strings.Contains(line, "API server:") || strings.Contains(line, "resident: goroutines fell") {
			t.Log(line)
		}
	}
	var stillOpen int
	for _, c := range conns {
		if !c.closed() {
			stillOpen++
		}
		c.Close()
	}
	if stillOpen > 0 {
		t.Errorf("%d of %d idle connections were still open after the idle timeout", stillOpen, len(conns))
	}
	s.mustKubectl("get", "namespaces")
}

// TestSlowListStormGetsTooManyRequestsButWatchesGoOn: 1,000 concurrent LISTs of
// 2,000 ConfigMaps by an ordinary user, over a lowered
// --max-requests-inflight, get some 429s (Retry-After 1, a Status body)
// and no OOM; a watch opened during the storm is never refused.
func TestSlowListStormGetsTooManyRequestsButWatchesGoOn(t *testing.T) {
	const objects, lists, limit = 2000, 1000, 50
	s := startServer(t, "--max-requests-inflight", strconv.Itoa(limit))
	ctx := context.Background()
	admin := s.client()
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "storm"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	payload := strings.Repeat("x", 1024)
	work := make(chan int)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range work {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%04d", i)}, Data: map[string]string{"payload": payload}}
				if _, err := admin.CoreV1().ConfigMaps("storm").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
					t.Errorf("creating %s: %v", cm.Name, err)
				}
			}
		})
	}
	for i := range objects {
		work <- i
	}
	close(work)
	wg.Wait()
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "storm-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "storm-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "storm-reader"},
		Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: "carol"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	carol := s.userConfig("carol")
	tlsCfg, err := rest.TLSConfigFor(carol)
	if err != nil {
		t.Fatal(err)
	}
	// HTTP/1.1, one connection per request: the storm is 1,000 requests
	// at once, not 100 streams on a connection.
	hc := &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{TLSClientConfig: tlsCfg, MaxIdleConnsPerHost: lists}}
	listURL := s.config.Host + "/api/v1/namespaces/storm/configmaps"
	// The RBAC binding holds once its watch event is in; wait for it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := hc.Get(listURL + "?limit=1")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("carol cannot list configmaps: %v %v", err, resp)
		}
		time.Sleep(50 * time.Millisecond)
	}
	base := s.usage(t)

	var peak atomic.Int64
	stopSampling := make(chan struct{})
	var sampling sync.WaitGroup
	sampling.Go(func() {
		for {
			if u := s.usage(t); int64(u.rssKB) > peak.Load() {
				peak.Store(int64(u.rssKB))
			}
			select {
			case <-stopSampling:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	})

	var ok200, tooMany, other atomic.Int32
	var badRefusal atomic.Value
	firstRefusal := make(chan struct{})
	var refusalOnce sync.Once
	release := make(chan struct{})
	var storm sync.WaitGroup
	for range lists {
		storm.Go(func() {
			<-release
			resp, err := hc.Get(listURL)
			if err != nil {
				other.Add(1)
				badRefusal.CompareAndSwap(nil, err.Error())
				return
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			switch resp.StatusCode {
			case http.StatusOK:
				ok200.Add(1)
			case http.StatusTooManyRequests:
				tooMany.Add(1)
				refusalOnce.Do(func() { close(firstRefusal) })
				var st metav1.Status
				if resp.Header.Get("Retry-After") != "1" {
					badRefusal.CompareAndSwap(nil, fmt.Sprintf("429 with Retry-After %q", resp.Header.Get("Retry-After")))
				} else if err := json.Unmarshal(body, &st); err != nil || st.Kind != "Status" || st.Reason != metav1.StatusReasonTooManyRequests || st.Code != 429 {
					badRefusal.CompareAndSwap(nil, fmt.Sprintf("429 body %q (%v)", body, err))
				}
			default:
				other.Add(1)
				badRefusal.CompareAndSwap(nil, fmt.Sprintf("%s: %s", resp.Status, body))
			}
		})
	}
	close(release)

	// A watch opened while the LISTs are being refused is served, and
	// delivers an event.
	select {
	case <-firstRefusal:
	case <-time.After(time.Minute):
		t.Fatal("no 429 within a minute of the storm")
	}
	wreq, _ := http.NewRequest(http.MethodGet, listURL+"?watch=1&resourceVersion=0&fieldSelector=metadata.name%3Dduring-storm", nil)
	wctx, cancelWatch := context.WithTimeout(ctx, 30*time.Second)
	defer cancelWatch()
	wresp, err := hc.Do(wreq.WithContext(wctx))
	if err != nil {
		t.Fatalf("watch during the storm: %v", err)
	}
	defer wresp.Body.Close()
	if wresp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(wresp.Body)
		t.Fatalf("watch during the storm: %s: %s", wresp.Status, body)
	}
	if _, err := admin.CoreV1().ConfigMaps("storm").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "during-storm"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var ev struct {
		Type   string
		Object corev1.ConfigMap
	}
	if err := json.NewDecoder(wresp.Body).Decode(&ev); err != nil || ev.Type != "ADDED" || ev.Object.Name != "during-storm" {
		t.Fatalf("the watch opened during the storm gave %+v, %v", ev, err)
	}

	storm.Wait()
	close(stopSampling)
	sampling.Wait()
	t.Logf("%d LISTs at once over --max-requests-inflight %d: %d answered, %d 429, %d other; server %s before, peak RSS %.1f MiB",
		lists, limit, ok200.Load(), tooMany.Load(), other.Load(), base, float64(peak.Load())/1024)
	if v := badRefusal.Load(); v != nil {
		t.Errorf("a LIST ended otherwise than 200 or upstream's 429: %v", v)
	}
	if tooMany.Load() == 0 || ok200.Load() == 0 {
		t.Errorf("want some LISTs answered and some refused: %d answered, %d refused", ok200.Load(), tooMany.Load())
	}
	// No OOM: the storm costs what the admitted LISTs cost, whatever the
	// number refused.
	if grew := peak.Load() - int64(base.rssKB); grew > 1<<20 {
		t.Errorf("the server's RSS grew by %d MiB during the storm", grew/1024)
	}
	if err := s.cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the server is gone after the storm: %v", err)
	}
	// system:masters is exempt: the admin lists even now, and after.
	if _, err := admin.CoreV1().ConfigMaps("storm").List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("the admin's list after the storm: %v", err)
	}
}
