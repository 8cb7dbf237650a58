package resident

import (
	"context"
	"runtime/metrics"
	"time"

	"github.com/sirupsen/logrus"
)

const (
	// quietCheck is how often giveBackWhenQuiet looks.
	quietCheck = 30 * time.Second
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
)

// giveBackWhenQuiet gives back, once a burst of work is over, what it
// left resident: the heap pages it freed and the pages of the executable
// its code paths faulted in. Go keeps freed heap pages for reuse, about
// as many as the live heap, and its scavenger returns the rest slowly;
// the executable's pages stay mapped until the kernel needs the memory.
// So a burst (100 CRDs registered, a Helm chart applied) left the RSS
// near its height for as long as the process then stayed idle: after 100
// CRDs an idle server held 40 MB of upstream's CRD, CEL and OpenAPI code
// it had run once, and 13 MB of free heap. It is Trim, the start's own,
// run when a check finds the process quiet and enough to give back: a
// metrics read and a /proc read each check, a full GC each give-back.
//
// baseFile is the executable's resident bytes once the process settled.
func giveBackWhenQuiet(ctx context.Context, baseFile int64) {
	samples := []metrics.Sample{
		{Name: "/memory/classes/heap/free:bytes"}, // free, not yet returned
		{Name: "/gc/heap/allocs:bytes"},
	}
	t := time.NewTicker(quietCheck)
	defer t.Stop()
	var lastAllocs uint64
	// baseFile is the executable's resident pages when the process last
	// settled: at start, and a check after each give-back, once what it
	// still runs has been faulted back.
	settling := false
	var lastFileGiveBack time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		metrics.Read(samples)
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
		before, after, err := Trim()
		if err != nil {
			logrus.WithError(err).Debug("resident: giving back after a burst")
			continue
		}
		logrus.Debugf("resident: quiet after a burst (%.1f MiB of free heap, %.1f MiB of the executable faulted in): RSS %.1f MiB → %.1f MiB",
			float64(free)/(1<<20), float64(file-baseFile)/(1<<20), float64(before)/(1<<20), float64(after)/(1<<20))
		settling = true
	}
}

// worthGivingBack tells whether a process that allocated alloc bytes
// since the last check is quiet and holds enough to give back: free heap
// bytes, or pages of the executable faulted in since the last give-back.
func worthGivingBack(alloc, free, fileGrowth uint64) bool {
	return alloc <= quietAllocs && ((free >= minGiveBack && free > reuseChecks*alloc) || fileGrowth >= minGiveBack)
}
