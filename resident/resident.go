// Package resident gives back the memory that only a kelp process's
// start needed.
//
// One binary holds kubectl, etcd, the API server and the node agent, and
// every process runs all of their package initializers, whichever command
// it serves. Those initializers, and the kernel's fault-around (which maps
// 16 neighbouring pages of a file on every fault), leave a large part of
// the binary's text and read-only data mapped in a process that will
// never run that code again: a `kelp agent` had 68 MB of its 171 MB binary
// resident, against 22 MB of heap.
//
// Trim drops those pages from the process's page tables. They are clean
// pages of the executable: they stay in the page cache, shared with the
// other kelp processes, and a later access faults them back from memory.
// Fault-around is turned off for those mappings first (MADV_RANDOM), so
// that what comes back is the pages the process actually uses. Nothing
// writable is touched.
package resident

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// Trim drops this process's read-only mappings of its own executable and
// returns the heap's free pages to the system. It reports the RSS before
// and after, in bytes.
func Trim() (before, after int64, err error) {
	before = rss()
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return before, before, err
	}
	if err := dropFilePages(strings.TrimSuffix(exe, " (deleted)")); err != nil {
		return before, rss(), err
	}
	debug.FreeOSMemory()
	return before, rss(), nil
}

// dropFilePages drops the pages of this process's read-only mappings of
// the file at path from its page tables, and turns fault-around off for
// them.
func dropFilePages(path string) error {
	for _, m := range mappings(path) {
		// A read-only mapping the process wrote before making it read-only
		// (the GOT, which the dynamic loader relocates, then protects) holds
		// anonymous copies of its pages: dropping them would bring back the
		// file's unrelocated bytes. Only pure file pages are dropped.
		if m.writable || m.anonymous > 0 {
			continue
		}
		for _, advice := range []uintptr{unix.MADV_RANDOM, unix.MADV_DONTNEED} {
			if _, _, errno := unix.Syscall(unix.SYS_MADVISE, m.start, m.end-m.start, advice); errno != 0 {
				return fmt.Errorf("madvise %x-%x: %w", m.start, m.end, errno)
			}
		}
	}
	return nil
}

// TrimAfter runs Trim once, after d (when the process has started up),
// unless ctx ends first, and logs what it gave back; then it gives back
// what each burst of work leaves (giveBackWhenQuiet) until ctx ends.
func TrimAfter(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(d):
	}
	before, after, err := Trim()
	if err != nil {
		logrus.WithError(err).Warn("resident: trimming startup pages")
		return
	}
	logrus.Infof("resident: gave back the startup pages: RSS %.1f MiB → %.1f MiB", float64(before)/(1<<20), float64(after)/(1<<20))
	giveBackWhenQuiet(ctx, statusBytes("RssFile"))
}

func rss() int64 { return statusBytes("VmRSS") }

// statusBytes is a kB field of /proc/self/status (VmRSS, RssFile, ...) in
// bytes, 0 if unknown.
func statusBytes(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// mapping is one of the process's mappings of a file.
type mapping struct {
	start, end uintptr
	writable   bool
	resident   int64 // bytes of its pages mapped (Rss)
	anonymous  int64 // bytes of its pages that are private copies
}

// mappings lists the process's mappings of the file at path, from
// /proc/self/smaps.
func mappings(path string) []mapping {
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return nil
	}
	var out []mapping
	var cur *mapping
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		// A mapping's header: start-end perms offset dev inode [path]; the
		// lines after it are "Key: value kB".
		if lo, hi, ok := strings.Cut(f[0], "-"); ok && !strings.HasSuffix(f[0], ":") && len(f) >= 5 {
			cur = nil
			start, err1 := strconv.ParseUint(lo, 16, 64)
			end, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 != nil || err2 != nil || len(f) < 6 || strings.TrimSuffix(strings.Join(f[5:], " "), " (deleted)") != path {
				continue
			}
			out = append(out, mapping{start: uintptr(start), end: uintptr(end), writable: f[1][1] == 'w'})
			cur = &out[len(out)-1]
			continue
		}
		if cur != nil && len(f) >= 2 {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			switch f[0] {
			case "Rss:":
				cur.resident = kb << 10
			case "Anonymous:":
				cur.anonymous = kb << 10
			}
		}
	}
	return out
}
