package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The shipped kelp is the launcher (launcher/): `--version` never runs the
// full kelp; anything else extracts it once per build, then execs it.
const (
	targetVersionMs     = 30
	targetVersionRSSMiB = 20
)

// runKelp runs the benchmark's kelp with args and returns its wall time,
// peak RSS in MiB and output. The RSS comes from GNU time, which forks
// itself: a child that Go starts shares the benchmark's pages until its
// exec (vfork), and its ru_maxrss would count them.
func runKelp(b *testing.B, env []string, args ...string) (time.Duration, float64, string) {
	b.Helper()
	const gnuTime = "/usr/bin/time"
	if _, err := os.Stat(gnuTime); err != nil {
		b.Fatalf("measuring a child's peak RSS needs GNU time (apt-get install time; scripts/bench.sh does): %v", err)
	}
	rssFile := filepath.Join(b.TempDir(), "rss")
	cmd := exec.Command(gnuTime, append([]string{"-f", "%M", "-o", rssFile, kelpBinary(b)}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	t0 := time.Now()
	out, err := cmd.CombinedOutput()
	wall := time.Since(t0)
	if err != nil {
		b.Fatalf("kelp %v: %v\n%s", args, err, out)
	}
	raw, _ := os.ReadFile(rssFile)
	kib, err := strconv.ParseFloat(strings.TrimSpace(string(raw)), 64)
	if err != nil {
		b.Fatalf("GNU time wrote %q: %v", raw, err)
	}
	return wall, kib / 1024, string(out)
}

// BenchmarkVersion: `kelp --version`, the cost of the binary's own start.
func BenchmarkVersion(b *testing.B) {
	var total time.Duration
	var peak float64
	for range b.N {
		wall, rss, out := runKelp(b, nil, "--version")
		if !strings.HasPrefix(out, "kelp version ") {
			b.Fatalf("--version printed %q", out)
		}
		total += wall
		peak = max(peak, rss)
	}
	ms := Ms(total) / float64(b.N)
	b.ReportMetric(ms, "ms/run")
	b.ReportMetric(peak, "peak-rss-MiB")
	b.Logf("kelp --version: %.1f ms, peak RSS %.1f MiB | targets <= %d ms: %s, <= %d MiB: %s",
		ms, peak, targetVersionMs, verdict(ms <= targetVersionMs), targetVersionRSSMiB, verdict(peak <= targetVersionRSSMiB))
}

// BenchmarkCoreStart: a command of the full kelp (`kubectl version
// --client`), first with an empty extract dir (the core is extracted),
// then once it is there.
func BenchmarkCoreStart(b *testing.B) {
	for range b.N {
		env := []string{"KELP_EXTRACT_DIR=" + b.TempDir()}
		cold, coldRSS, _ := runKelp(b, env, "kubectl", "version", "--client")
		warm, warmRSS, _ := runKelp(b, env, "kubectl", "version", "--client")
		b.ReportMetric(0, "ns/op")
		b.ReportMetric(Ms(cold), "extract-and-run-ms")
		b.ReportMetric(Ms(warm), "run-ms")
		b.Logf("kelp kubectl version --client: first run (extracts the core) %.0f ms, peak RSS %.1f MiB; later runs %.0f ms, peak RSS %.1f MiB",
			Ms(cold), coldRSS, Ms(warm), warmRSS)
	}
}
