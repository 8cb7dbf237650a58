package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubectl/pkg/util/podutils"
)

// What kelp adds to a node per running container, beyond the container's
// own processes and its containerd shim: its share of the node's log
// daemon and its parked log writer (package containerlog), or a whole
// log-writing process when no daemon runs.
const targetPerContainerKiB = 1024

// Process kinds of a node.
const (
	procKelp          = "kelp"
	procContainerd    = "containerd"
	procShims         = "shims"
	procLogDaemon     = "log daemon"
	procParkedWriters = "parked log writers"
	procLogWriters    = "log writers"
)

// runDir is the node's --run-dir.
func (s *server) runDir() string {
	for i, a := range s.extraArgs {
		if a == "--run-dir" && i+1 < len(s.extraArgs) {
			return s.extraArgs[i+1]
		}
	}
	return "/run/kelp"
}

// nodeProcs finds the node's processes other than the server, by kind:
// its containerd (its command line names the data dir), the shims of that
// containerd (theirs names its socket, under the node's run dir), and the
// container-log processes of its run dir. Other benchmarks' and tests'
// nodes on the same host are left out.
func nodeProcs(s *server) map[int]string {
	runDir := s.runDir()
	out := map[int]string{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == s.pid() {
			continue
		}
		raw, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		cmdline := string(raw)
		args := strings.Split(cmdline, "\x00")
		switch {
		case strings.Contains(cmdline, s.dataDir) && strings.HasSuffix(args[0], "containerd"):
			out[pid] = procContainerd
		case strings.Contains(args[0], "containerd-shim") && strings.Contains(cmdline, runDir+"/"):
			out[pid] = procShims
		case strings.Contains(cmdline, "log-daemon") && strings.Contains(cmdline, runDir+"/"):
			out[pid] = procLogDaemon
		case strings.Contains(cmdline, "container-logger") && strings.Contains(cmdline, runDir+"/"):
			out[pid] = procLogWriters
		case args[0] == "kelp-log-parked":
			env, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
			if strings.Contains(string(env), "KELP_LOG_SOCKET="+runDir+"/") {
				out[pid] = procParkedWriters
			}
		}
	}
	return out
}

// logPSS is the PSS of the node's container-log processes, and how many
// there are.
func logPSS(s *server) (int64, int) {
	var pss int64
	n := 0
	for pid, kind := range nodeProcs(s) {
		if kind == procLogDaemon || kind == procParkedWriters || kind == procLogWriters {
			pss += procPss(pid)
			n++
		}
	}
	return pss, n
}

// waitReadyPods waits until n pods of the default namespace are Ready.
func waitReadyPods(ctx context.Context, b *testing.B, s *server, cs kubernetes.Interface, n int) {
	b.Helper()
	for {
		l, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		ready := 0
		if err == nil {
			for i := range l.Items {
				if podutils.IsPodReady(&l.Items[i]) {
					ready++
				}
			}
		}
		if ready >= n {
			return
		}
		if ctx.Err() != nil {
			b.Fatalf("%d of %d pods Ready; log tail:\n%s", ready, n, s.logTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// BenchmarkPerContainerOverhead: with the seed app running, 1, then 10,
// then 30 more one-container pods; after each step, the PSS of the
// node's container-log processes against the seed app's alone, per added
// container.
func BenchmarkPerContainerOverhead(b *testing.B) {
	for range b.N {
		s, cs, ctx := seededNode(b, 10*time.Minute)
		time.Sleep(2 * time.Second)
		base, baseProcs := logPSS(s)
		b.Logf("seed app only: container-log processes %d, PSS %.0f KiB", baseProcs, float64(base)/1024)
		b.ReportMetric(0, "ns/op")
		created := 0
		for _, n := range []int{1, 10, 30} {
			for ; created < n; created++ {
				pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("o%02d", created)}, Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "c", Image: "busybox:1.35", ImagePullPolicy: corev1.PullIfNotPresent,
						Command: []string{"sh", "-c", "while true; do echo tick; sleep 5; done"}}}}}
				if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			waitReadyPods(ctx, b, s, cs, 3+n)
			time.Sleep(2 * time.Second)
			pss, procs := logPSS(s)
			per := float64(pss-base) / float64(n) / 1024
			b.ReportMetric(per, fmt.Sprintf("KiB/container@%d", n))
			b.Logf("%2d more pods: container-log processes %d, PSS %.0f KiB, %.0f KiB per added container | target <= %d KiB: %s",
				n, procs, float64(pss)/1024, per, targetPerContainerKiB, verdict(per <= targetPerContainerKiB))
		}
	}
}
