package resident

import (
	"context"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
)

const (
	// burstCheck is how often giveBackWhenQuiet looks at the goroutine
	// count, quietCheck how often at the heap and the executable's pages.
	burstCheck = 5 * time.Second
	quietCheck = 30 * time.Second
	// burstDrop is how many goroutines a burst must have shed to count
	// as one: a connection flood's idle connections are one or two each,
	// with some 60 KiB of heap and stack, so fewer cost too little to be
	// worth two full GCs. burstTailMin is the least tail worth another.
	burstDrop    = 256
	burstTailMin = 32
	// quietAllocs is the most a process allocates between two checks
	// and still counts as quiet: an idle server allocates a few MiB a
	// check (probes, heartbeats, lease renewals).
	quietAllocs = 16 << 20
	// minGiveBack is the least, of free heap or of the executable's
	// pages faulted in since the last give-back, worth giving back.
	minGiveBack = 8 << 20
	// reuseChecks: free heap that the last check's allocations would not
	// fill in this many more checks is not about to be reused. An idle
	// process frees about its live heap each GC cycle and reuses it over
	// the next one; that is not worth a give-back.
	reuseChecks = 4
	// fileGiveBackEvery spaces the give-backs of executable pages: code
	// the process runs every few minutes faults back after each, and
	// would otherwise be given back again and again.
	fileGiveBackEvery = 10 * time.Minute
	// releaseEvery spaces the collections Released asks for: each is a
	// full GC, and a burst's structures are let go within moments of
	// each other (one a CRD kind written in it, a minute after).
	releaseEvery = 30 * time.Second
)

// released is set by Released and cleared by the check that collects.
var released atomic.Bool

// Released tells the process that a component let go of a large
// structure (a CRD kind's write path, some 250 KB, a minute unused). Go
// frees it only at its next garbage collection, which an idle process
// runs every two minutes, and its scavenger returns the pages slowly
// after that: after 100 CRDs each written once, the write paths they let
// go held 20 MiB resident for minutes. The next burstCheck collects, and
// gives back the free heap, at most once every releaseEvery.
func Released() { released.Store(true) }

// collectReleased runs the collection Released asked for, which gives
// back the free heap with it (FreeOSMemory is a full GC and a return of
// every free page; the executable's pages are Trim's and the quiet
// check's, not this).
func collectReleased() {
	before := rss()
	debug.FreeOSMemory()
	logrus.Debugf("resident: gave back what was released: RSS %.1f MiB → %.1f MiB", float64(before)/(1<<20), float64(rss())/(1<<20))
}

// giveBackWhenQuiet gives back, once a burst of work is over, what it
// left resident: the heap pages it freed and the pages of the executable
// its code paths faulted in. Go keeps freed heap pages for reuse, about
// as many as the live heap, and its scavenger returns the rest slowly;
// the executable's pages stay mapped until the kernel needs the memory.
// So a burst (100 CRDs registered, a Helm chart applied, a flood of idle
// connections) left the RSS near its height for as long as the process
// then stayed idle: after 100 CRDs an idle server held 40 MB of
// upstream's CRD, CEL and OpenAPI code it had run once, and 13 MB of free
// heap; after 4,096 idle connections closed, 200 MiB of heap. It is Trim,
// the start's own, run when a check finds the process quiet and enough
// to give back, or the goroutines of a burst gone (burst): a metrics read
// every burstCheck, a /proc read every quietCheck, two full GCs each
// give-back.
//
// baseFile is the executable's resident bytes once the process settled.
func giveBackWhenQuiet(ctx context.Context, baseFile int64) {
	samples := []metrics.Sample{
		{Name: "/memory/classes/heap/free:bytes"}, // free, not yet returned
		{Name: "/gc/heap/allocs:bytes"},
		{Name: "/sched/goroutines:goroutines"},
	}
	t := time.NewTicker(burstCheck)
	defer t.Stop()
	var lastAllocs uint64
	// baseFile is the executable's resident pages when the process last
	// settled: at start, and a check after each give-back, once what it
	// still runs has been faulted back.
	settling := false
	var lastFileGiveBack, lastRelease time.Time
	var b burst
	for tick := 1; ; tick++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if released.Load() && time.Since(lastRelease) >= releaseEvery {
			released.Store(false)
			lastRelease = time.Now()
			collectReleased()
		}
		metrics.Read(samples)
		if high, now, ended := b.ended(int(samples[2].Value.Uint64())); ended {
			before, after, err := giveBack()
			if err != nil {
				logrus.WithError(err).Debug("resident: giving back after a burst")
				continue
			}
			logrus.Infof("resident: goroutines fell from %d to %d: gave back memory, RSS %.1f MiB → %.1f MiB",
				high, now, float64(before)/(1<<20), float64(after)/(1<<20))
			settling = true
			continue
		}
		if tick%int(quietCheck/burstCheck) != 0 {
			continue
		}
		free, allocs := samples[0].Value.Uint64(), samples[1].Value.Uint64()
		alloc := allocs - lastAllocs
		lastAllocs = allocs
		file := statusBytes("RssFile")
		if settling {
			baseFile, settling = file, false
		}
		logrus.Tracef("resident: %.1f MiB allocated, %.1f MiB of free heap, %.1f MiB of the executable faulted in",
			float64(alloc)/(1<<20), float64(free)/(1<<20), float64(file-baseFile)/(1<<20))
		grown := uint64(max(file-baseFile, 0))
		if !lastFileGiveBack.IsZero() && time.Since(lastFileGiveBack) < fileGiveBackEvery {
			grown = 0
		}
		if !worthGivingBack(alloc, free, grown) {
			continue
		}
		if grown >= minGiveBack {
			lastFileGiveBack = time.Now()
		}
		before, after, err := giveBack()
		if err != nil {
			logrus.WithError(err).Debug("resident: giving back after a burst")
			continue
		}
		logrus.Debugf("resident: quiet after a burst (%.1f MiB of free heap, %.1f MiB of the executable faulted in): RSS %.1f MiB → %.1f MiB",
			float64(free)/(1<<20), float64(file-baseFile)/(1<<20), float64(before)/(1<<20), float64(after)/(1<<20))
		settling = true
	}
}

// giveBack is Trim after a GC of its own: what a burst put in sync.Pools
// (net/http's bufio buffers, some 8 KiB per closed HTTP/1.1 connection),
// a first GC only moves to their victim caches, and Trim's frees.
func giveBack() (before, after int64, err error) {
	runtime.GC()
	return Trim()
}

// burst follows the process's goroutine count, each check, to tell when
// a burst of concurrent work (a flood of idle connections, a storm of
// requests) has gone: its goroutines are what net/http and the handlers
// run each connection and request on, and what they held is garbage once
// they end. A burst counts from the fewest goroutines seen (rest), so a
// process that keeps more goroutines than it started with is no burst.
type burst struct {
	rest, high int // the fewest goroutines seen, the most since the last give-back
	// tail is how many goroutines above rest were left when a burst was
	// given back: a flood's connections close over an idle timeout, as
	// they came, so the check that first sees most of them gone may leave
	// hundreds, given back again once they halve.
	tail int
}

// ended records a check's goroutine count n and tells whether a burst
// has gone: most of it (burstDrop or more goroutines over rest, at most
// half of them left), or half of the tail that the last give-back left.
// It reports the high-water mark and n for the log.
func (b *burst) ended(n int) (high, now int, ended bool) {
	if b.high == 0 {
		b.rest, b.high = n, n
	}
	b.rest, b.high = min(b.rest, n), max(b.high, n)
	peak, left := b.high-b.rest, n-b.rest
	gone := peak >= burstDrop && left <= peak/2
	tailGone := b.tail >= burstTailMin && left <= b.tail/2
	if !gone && !tailGone {
		return b.high, n, false
	}
	high = b.high
	b.high, b.tail = n, left
	return high, n, true
}

// worthGivingBack tells whether a process that allocated alloc bytes
// since the last check is quiet and holds enough to give back: free heap
// bytes, or pages of the executable faulted in since the last give-back.
func worthGivingBack(alloc, free, fileGrowth uint64) bool {
	return alloc <= quietAllocs && ((free >= minGiveBack && free > reuseChecks*alloc) || fileGrowth >= minGiveBack)
}
