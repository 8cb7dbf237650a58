package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// clockTick is USER_HZ, the unit of the CPU times in /proc; it is 100 on
// every Linux architecture Go supports.
const clockTick = 100

// cpuSample is a snapshot of CPU time used: by the whole machine, by this
// test process (including children it has reaped, i.e. servers that
// already stopped), and by one running server.
type cpuSample struct {
	at                 time.Time
	busy, self, server float64 // seconds
}

func sampleCPU(serverPID int) cpuSample {
	s := cpuSample{at: time.Now()}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		// cpu  user nice system idle iowait irq softirq steal ...
		line, _, _ := strings.Cut(string(b), "\n")
		f := strings.Fields(line)
		for _, i := range []int{1, 2, 3, 6, 7, 8} {
			if i < len(f) {
				v, _ := strconv.ParseFloat(f[i], 64)
				s.busy += v / clockTick
			}
		}
	}
	s.self = procCPU("self", true)
	if serverPID > 0 {
		s.server = procCPU(strconv.Itoa(serverPID), false)
	}
	return s
}

// procCPU returns utime+stime of /proc/<pid>/stat in seconds, plus the
// reaped children's cutime+cstime when withChildren is set.
func procCPU(pid string, withChildren bool) float64 {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	// Fields after the parenthesised command name start at field 3 (state);
	// utime, stime, cutime, cstime are fields 14-17.
	rest := string(b[strings.LastIndexByte(string(b), ')')+1:])
	f := strings.Fields(rest)
	if len(f) < 15 {
		return 0
	}
	last := 12
	if withChildren {
		last = 14
	}
	var total float64
	for i := 11; i <= last; i++ {
		v, _ := strconv.ParseFloat(f[i], 64)
		total += v / clockTick
	}
	return total
}

// cpuUse is what happened between two samples.
type cpuUse struct {
	live                bool // a server was running: server is its CPU time
	wall                time.Duration
	server, client      time.Duration // CPU time
	otherCores, machine float64       // average cores busy
}

func cpuBetween(a, b cpuSample) cpuUse {
	wall := b.at.Sub(a.at)
	sec := func(v float64) time.Duration { return time.Duration(v * float64(time.Second)) }
	u := cpuUse{live: a.server > 0, wall: wall, server: sec(b.server - a.server), client: sec(b.self - a.self)}
	if wall > 0 {
		busy := b.busy - a.busy
		u.machine = busy / wall.Seconds()
		u.otherCores = max(0, busy-(b.server-a.server)-(b.self-a.self)) / wall.Seconds()
	}
	return u
}

// report logs the CPU split and reports the time other processes took as
// "other-cores": a busy machine (another build or test run) inflates the
// latencies, so every result carries this to judge its noise by.
func (u cpuUse) report(b *testing.B, ops int) {
	b.Helper()
	b.ReportMetric(u.otherCores, "other-cores")
	per := func(d time.Duration) string {
		if ops == 0 {
			return d.Round(time.Millisecond).String()
		}
		return fmt.Sprintf("%.2fms/op", Ms(d)/float64(ops))
	}
	who := fmt.Sprintf("server %s, benchmark client %s", per(u.server), per(u.client))
	if !u.live {
		who = fmt.Sprintf("benchmark and the servers it started %s", per(u.client))
	}
	b.Logf("  CPU over %v: %s; machine %.2f of %d cores busy, other processes %.2f cores",
		u.wall.Round(time.Millisecond), who, u.machine, numCPU(), u.otherCores)
}

func numCPU() int {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "cpu") && len(l) > 3 && l[3] >= '0' && l[3] <= '9' {
			n++
		}
	}
	return n
}

// perfRecord runs `perf record` on the server while the returned stop
// function has not been called, when KELP_BENCH_PERF names a directory;
// otherwise it does nothing. The server cannot be given profiling flags,
// so this is how to see where its CPU goes:
//
//	KELP_BENCH_PERF=/tmp/perf scripts/bench.sh -bench ConfigMaps/create
//	perf report -i /tmp/perf/BenchmarkConfigMaps_create.data
func perfRecord(b *testing.B, pid int) (stop func()) {
	dir := os.Getenv("KELP_BENCH_PERF")
	if dir == "" {
		return func() {}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	out := filepath.Join(dir, strings.NewReplacer("/", "_", " ", "_").Replace(b.Name())+".data")
	cmd := exec.Command("perf", "record", "-F", "999", "-g", "-p", strconv.Itoa(pid), "-o", out)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatalf("KELP_BENCH_PERF is set but perf does not start: %v", err)
	}
	time.Sleep(300 * time.Millisecond) // let perf attach
	return func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		_ = cmd.Wait()
		b.Logf("  perf profile of the server: %s", out)
	}
}

// measure starts CPU accounting, and perf when KELP_BENCH_PERF asks for it,
// of the server with the given pid (0: none running; servers that were
// started and stopped meanwhile count as the client's reaped children).
// The returned function ends both and logs the split for ops operations.
func measure(b *testing.B, pid int) (done func(ops int)) {
	stopPerf := func() {}
	if pid > 0 {
		stopPerf = perfRecord(b, pid)
	}
	start := sampleCPU(pid)
	return func(ops int) {
		u := cpuBetween(start, sampleCPU(pid))
		stopPerf()
		u.report(b, ops)
	}
}
