package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Workload sizes. Each benchmark does this fixed workload once per b.N
// iteration; run with -benchtime=1x.
const (
	cmCount       = 1000 // ConfigMaps created, then read back, per iteration
	cmConcurrency = 16   // concurrent clients for creates and gets
	listCount     = 100  // sequential lists of the cmCount-item namespace, per kind of list
	watchUpdates  = 1000 // updates whose delivery to an informer is timed
	startRuns     = 10   // server starts per iteration of BenchmarkStartup/*
	idleWait      = 30 * time.Second
)

// Targets for a 2-core machine. They are reported, never asserted.
const (
	targetCreateP99  = 25 * time.Millisecond
	targetWatchP99   = 10 * time.Millisecond
	targetColdStart  = time.Second
	targetIdleRSSMiB = 80
)

// payload makes each ConfigMap a realistic few hundred bytes.
var payload = strings.Repeat("0123456789abcdef", 16)

func configMap(i int) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%04d", i), Labels: map[string]string{"app": "bench"}},
		Data:       map[string]string{"index": strconv.Itoa(i), "payload": payload},
	}
}

func createNamespace(ctx context.Context, tb testing.TB, cs kubernetes.Interface, name string) {
	tb.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		tb.Fatalf("creating namespace %s: %v", name, err)
	}
}

// parallel runs op(0..n-1) on conc goroutines and returns each call's
// latency and the wall time of the whole batch.
func parallel(n, conc int, op func(i int) error) ([]time.Duration, time.Duration, error) {
	lat := make([]time.Duration, n)
	var next atomic.Int64
	var errOnce sync.Once
	var firstErr error
	var wg sync.WaitGroup
	t0 := time.Now()
	for range conc {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				start := time.Now()
				err := op(i)
				lat[i] = time.Since(start)
				if err != nil {
					errOnce.Do(func() { firstErr = fmt.Errorf("operation %d: %w", i, err) })
				}
			}
		})
	}
	wg.Wait()
	return lat, time.Since(t0), firstErr
}

// reportLatency reports p50/p99/max in ms (and throughput when wall > 0),
// suppresses the meaningless ns/op of a fixed workload, and logs one human
// line.
func reportLatency(b *testing.B, what string, lat []time.Duration, wall time.Duration, target time.Duration) {
	b.Helper()
	s := Summarize(lat)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(Ms(s.P50), "p50-ms")
	b.ReportMetric(Ms(s.P99), "p99-ms")
	b.ReportMetric(Ms(s.Max), "max-ms")
	line := fmt.Sprintf("%s: %s", what, s)
	if wall > 0 {
		ops := float64(s.N) / wall.Seconds()
		b.ReportMetric(ops, "ops/s")
		line += fmt.Sprintf(" throughput=%.0f/s", ops)
	}
	if target > 0 {
		line += fmt.Sprintf(" | target p99 <= %v: %s", target, verdict(s.P99 <= target))
	}
	b.Log(line)
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

// warmUp opens the connection and primes the server's paths so the first
// measured requests don't pay for TLS and discovery.
func warmUp(ctx context.Context, b *testing.B, cs kubernetes.Interface) {
	b.Helper()
	createNamespace(ctx, b, cs, "bench-warmup")
	cms := cs.CoreV1().ConfigMaps("bench-warmup")
	_, _, err := parallel(2*cmConcurrency, cmConcurrency, func(i int) error {
		if _, err := cms.Create(ctx, configMap(i), metav1.CreateOptions{}); err != nil {
			return err
		}
		if _, err := cms.Get(ctx, configMap(i).Name, metav1.GetOptions{}); err != nil {
			return err
		}
		_, err := cms.List(ctx, metav1.ListOptions{})
		return err
	})
	if err != nil {
		b.Fatalf("warm-up: %v", err)
	}
}

// BenchmarkConfigMaps measures create, get and list latency through the
// API: cmCount creates and then cmCount gets at concurrency cmConcurrency,
// then listCount sequential full lists of a cmCount-item namespace, both
// from etcd (resourceVersion="") and from the watch cache
// (resourceVersion="0").
func BenchmarkConfigMaps(b *testing.B) {
	s := startServer(b)
	cs := s.client()
	ctx := ctxFor(b, 30*time.Minute)
	warmUp(ctx, b, cs)

	// readNS holds cmCount ConfigMaps for the get and list benchmarks: the
	// last namespace the create benchmark filled, or one seeded on demand.
	readNS := ""
	seeded := func(b *testing.B) string {
		if readNS == "" {
			readNS = "bench-read"
			createNamespace(ctx, b, cs, readNS)
			cms := cs.CoreV1().ConfigMaps(readNS)
			if _, _, err := parallel(cmCount, cmConcurrency, func(i int) error {
				_, err := cms.Create(ctx, configMap(i), metav1.CreateOptions{})
				return err
			}); err != nil {
				b.Fatalf("seeding %s: %v", readNS, err)
			}
		}
		return readNS
	}

	runs := 0
	b.Run("create", func(b *testing.B) {
		var all []time.Duration
		var wall time.Duration
		done := measure(b, s.pid())
		for range b.N {
			b.StopTimer()
			ns := fmt.Sprintf("bench-create-%d", runs)
			runs++
			createNamespace(ctx, b, cs, ns)
			cms := cs.CoreV1().ConfigMaps(ns)
			b.StartTimer()
			lat, w, err := parallel(cmCount, cmConcurrency, func(i int) error {
				_, err := cms.Create(ctx, configMap(i), metav1.CreateOptions{})
				return err
			})
			if err != nil {
				b.Fatalf("create: %v", err)
			}
			all, wall = append(all, lat...), wall+w
			readNS = ns
		}
		b.StopTimer()
		reportLatency(b, fmt.Sprintf("create (%d ConfigMaps, concurrency %d)", cmCount, cmConcurrency), all, wall, targetCreateP99)
		done(len(all))
	})

	b.Run("get", func(b *testing.B) {
		b.StopTimer()
		cms := cs.CoreV1().ConfigMaps(seeded(b))
		b.StartTimer()
		var all []time.Duration
		var wall time.Duration
		done := measure(b, s.pid())
		for range b.N {
			lat, w, err := parallel(cmCount, cmConcurrency, func(i int) error {
				cm, err := cms.Get(ctx, configMap(i).Name, metav1.GetOptions{})
				if err == nil && cm.Data["index"] != strconv.Itoa(i) {
					err = fmt.Errorf("%s has index %q", cm.Name, cm.Data["index"])
				}
				return err
			})
			if err != nil {
				b.Fatalf("get: %v", err)
			}
			all, wall = append(all, lat...), wall+w
		}
		b.StopTimer()
		reportLatency(b, fmt.Sprintf("get (%d ConfigMaps, concurrency %d)", cmCount, cmConcurrency), all, wall, 0)
		done(len(all))
	})

	for _, l := range []struct{ name, rv, desc string }{
		{"list-etcd", "", `resourceVersion="" (etcd)`},
		{"list-watchcache", "0", `resourceVersion="0" (watch cache)`},
	} {
		b.Run(l.name, func(b *testing.B) {
			b.StopTimer()
			cms := cs.CoreV1().ConfigMaps(seeded(b))
			b.StartTimer()
			var all []time.Duration
			var wall time.Duration
			done := measure(b, s.pid())
			for range b.N {
				lat, w, err := parallel(listCount, 1, func(int) error {
					list, err := cms.List(ctx, metav1.ListOptions{ResourceVersion: l.rv})
					// Every namespace also holds kube-root-ca.crt.
					if err == nil && len(list.Items) != cmCount+1 {
						err = fmt.Errorf("list returned %d items, want %d", len(list.Items), cmCount+1)
					}
					return err
				})
				if err != nil {
					b.Fatalf("%s: %v", l.name, err)
				}
				all, wall = append(all, lat...), wall+w
			}
			b.StopTimer()
			reportLatency(b, fmt.Sprintf("list %s (%d lists of %d items, sequential)", l.desc, listCount, cmCount), all, wall, 0)
			done(len(all))
		})
	}
}

// BenchmarkWatchDelivery measures the time from just before an update is
// sent to the moment a ConfigMap informer's handler sees that update
// (matched by name and the value written), with the client's clock on both
// sides. Updates are sequential and paced: the next one is sent once the
// previous one has been delivered, so no event waits behind another.
func BenchmarkWatchDelivery(b *testing.B) {
	s := startServer(b)
	cs := s.client()
	ctx := ctxFor(b, 30*time.Minute)
	const ns, name = "bench-watch", "watched"
	createNamespace(ctx, b, cs, ns)
	cms := cs.CoreV1().ConfigMaps(ns)
	cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name},
		Data: map[string]string{"seq": "-1", "payload": payload}}, metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}

	type seen struct {
		seq int
		at  time.Time
	}
	events := make(chan seen, 4096)
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().ConfigMaps().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, o any) {
			at := time.Now()
			c, ok := o.(*corev1.ConfigMap)
			if !ok || c.Name != name {
				return
			}
			if seq, err := strconv.Atoi(c.Data["seq"]); err == nil {
				events <- seen{seq, at}
			}
		},
	}); err != nil {
		b.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	factory.Start(stop)
	if !cache.WaitForCacheSync(stop, inf.HasSynced) {
		b.Fatal("informer never synced")
	}

	// A few unmeasured updates warm the write and watch paths.
	const warm = 20
	var deliver, write []time.Duration
	early := 0 // events that arrived before the Update call returned
	seq := 0
	done := func(int) {}
	for i := 0; i < warm+b.N*watchUpdates; i++ {
		if i == warm {
			b.ResetTimer()
			done = measure(b, s.pid())
		}
		cm.Data["seq"] = strconv.Itoa(seq)
		sent := time.Now()
		updated, err := cms.Update(ctx, cm, metav1.UpdateOptions{})
		acked := time.Now()
		if err != nil {
			b.Fatalf("update %d: %v", seq, err)
		}
		cm = updated
		timeout := time.After(10 * time.Second)
	wait:
		for {
			select {
			case ev := <-events:
				if ev.seq < seq {
					continue // a late duplicate; cannot happen with resync off
				}
				if ev.seq > seq {
					b.Fatalf("saw seq %d while waiting for %d", ev.seq, seq)
				}
				if i >= warm {
					deliver = append(deliver, ev.at.Sub(sent))
					write = append(write, acked.Sub(sent))
					if ev.at.Before(acked) {
						early++
					}
				}
				break wait
			case <-timeout:
				b.Fatalf("update seq=%d was not delivered to the informer within 10s", seq)
			}
		}
		seq++
	}
	b.StopTimer()
	reportLatency(b, fmt.Sprintf("watch delivery, send to informer handler (%d sequential updates)", len(deliver)), deliver, 0, targetWatchP99)
	ws := Summarize(write)
	b.ReportMetric(Ms(ws.P50), "update-p50-ms")
	b.ReportMetric(Ms(ws.P99), "update-p99-ms")
	b.Logf("  for reference, the Update call itself: %s; %d of %d events reached the handler before Update returned", ws, early, len(deliver))
	done(len(deliver))
}

// BenchmarkStartup measures `kelp server` from exec to the first /readyz
// that answers "ok": "cold" with a fresh data dir each start, "warm"
// restarting on the data dir of an earlier run. It also reports how long
// SIGTERM takes to stop the server.
func BenchmarkStartup(b *testing.B) {
	kelpBinary(b) // build or copy before any timing
	b.Run("cold", func(b *testing.B) {
		var starts, stops []time.Duration
		done := measure(b, 0)
		for range b.N {
			for range startRuns {
				s := newServer(b)
				starts = append(starts, s.start())
				stops = append(stops, s.stop())
				_ = os.RemoveAll(s.dataDir)
			}
		}
		reportStarts(b, "cold start, fresh data dir", starts, stops, targetColdStart)
		done(len(starts))
	})
	b.Run("warm", func(b *testing.B) {
		b.StopTimer()
		s := newServer(b)
		s.start() // bootstraps the data dir; not measured
		s.stop()
		b.StartTimer()
		var starts, stops []time.Duration
		done := measure(b, 0)
		for range b.N {
			for range startRuns {
				starts = append(starts, s.start())
				stops = append(stops, s.stop())
			}
		}
		reportStarts(b, "warm restart, existing data dir", starts, stops, 0)
		done(len(starts))
	})
}

func reportStarts(b *testing.B, what string, starts, stops []time.Duration, target time.Duration) {
	b.Helper()
	s, st := Summarize(starts), Summarize(stops)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(Ms(s.P50), "p50-ms")
	b.ReportMetric(Ms(s.Max), "max-ms")
	b.ReportMetric(Ms(st.P50), "stop-p50-ms")
	line := fmt.Sprintf("%s to /readyz ok: %s", what, s)
	if target > 0 {
		line += fmt.Sprintf(" | target <= %v per start: %s (p50), %s (max)", target, verdict(s.P50 <= target), verdict(s.Max <= target))
	}
	b.Log(line)
	b.Logf("  SIGTERM to exit: %s", st)
}

// BenchmarkIdleRSS starts a server, leaves it idle for 30 s after /readyz,
// and reports the VmRSS of the process. It does this once, whatever b.N.
func BenchmarkIdleRSS(b *testing.B) {
	s := startServer(b)
	pid := s.pid()
	done := measure(b, pid)
	time.Sleep(idleWait)
	st, err := procStatus(pid, "VmRSS", "RssAnon", "RssFile", "VmHWM")
	if err != nil {
		b.Fatal(err)
	}
	children, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	mib := func(k string) float64 { return float64(st[k]) / (1 << 20) }
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(mib("VmRSS"), "rss-MiB")
	b.ReportMetric(mib("RssAnon"), "anon-MiB")
	b.ReportMetric(mib("RssFile"), "file-MiB")
	b.ReportMetric(mib("VmHWM"), "peak-MiB")
	b.Logf("idle RSS %v after ready: VmRSS=%.1f MiB (anon %.1f, file %.1f), peak VmHWM=%.1f MiB | target <= %d MB: %s",
		idleWait, mib("VmRSS"), mib("RssAnon"), mib("RssFile"), mib("VmHWM"), targetIdleRSSMiB,
		verdict(mib("VmRSS") <= targetIdleRSSMiB))
	if c := strings.TrimSpace(string(children)); c != "" {
		b.Logf("  note: the server has child processes (%s), not counted", c)
	}
	done(0)
}
