package bench

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubectl/pkg/util/podutils"
	"k8s.io/utils/ptr"
)

// Targets of issue 14 ("built for the edge"): a node at rest is quiet and
// gentle on an SD card.
const (
	targetIdleCPUPercent = 1.0 // of one core, the kelp process
	targetIdleMBPerHour  = 50  // written to storage by all of the node's writers
)

// idleWindow is how long BenchmarkNodeIdle measures: KELP_IDLE_WINDOW (a
// Go duration, e.g. 2m for a quick run), else the 10 minutes.
// idleSettle is how long the node rests first once the seed app is Ready
// (KELP_IDLE_SETTLE, default 60 s), so start-up work is not counted.
func idleDurations(b *testing.B) (window, settle time.Duration) {
	b.Helper()
	get := func(env string, def time.Duration) time.Duration {
		v := os.Getenv(env)
		if v == "" {
			return def
		}
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			b.Fatalf("%s=%q: want a positive Go duration such as 2m", env, v)
		}
		return d
	}
	return get("KELP_IDLE_WINDOW", 10*time.Minute), get("KELP_IDLE_SETTLE", 60*time.Second)
}

// procIO is what one process has done so far: CPU time (utime+stime,
// seconds) and bytes it caused to be written to storage (write_bytes of
// /proc/<pid>/io, charged when a page is first dirtied, so the page cache
// of every file it writes counts, fsync'ed or not).
type procIO struct {
	kind       string
	cpu        float64
	writeBytes int64
}

func readProcIO(pid int, kind string) (procIO, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return procIO{}, false
	}
	p := procIO{kind: kind, cpu: procCPU(strconv.Itoa(pid), false)}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "write_bytes:"); ok {
			p.writeBytes, _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return p, true
		}
	}
	return procIO{}, false
}

// nodeWriters reads the CPU time and bytes written of the server and of
// the node's other processes (nodeProcs), by kind.
func nodeWriters(s *server) map[int]procIO {
	kinds := nodeProcs(s)
	kinds[s.pid()] = procKelp
	out := map[int]procIO{}
	for pid, kind := range kinds {
		if p, ok := readProcIO(pid, kind); ok {
			out[pid] = p
		}
	}
	return out
}

// idleUse is the difference between two nodeWriters snapshots, by kind. A
// process present at both ends counts its difference; one that appeared
// meanwhile counts all it did; one that ended meanwhile is lost (and said
// so: at idle nothing should come or go).
type idleUse struct {
	cpu        map[string]float64
	bytes      map[string]int64
	procs      map[string]int
	came, went int
}

func idleBetween(a, b map[int]procIO) idleUse {
	u := idleUse{cpu: map[string]float64{}, bytes: map[string]int64{}, procs: map[string]int{}}
	for pid, end := range b {
		start, ok := a[pid]
		if !ok || start.kind != end.kind {
			start = procIO{}
			u.came++
		}
		u.cpu[end.kind] += end.cpu - start.cpu
		u.bytes[end.kind] += end.writeBytes - start.writeBytes
		u.procs[end.kind]++
	}
	for pid := range a {
		if _, ok := b[pid]; !ok {
			u.went++
		}
	}
	return u
}

// seedApp is seed 000's lab: the container-lab Deployment (3 replicas,
// readiness probe on /healthz every 2 s, maxSurge 1 / maxUnavailable 0,
// preStop sleep 5) on the project's demo image, and its ClusterIP
// Service.
func seedApp(ctx context.Context, b *testing.B, cs kubernetes.Interface) {
	b.Helper()
	labels := map[string]string{"app": "container-lab"}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "container-lab"}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](3),
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
			MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0))}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](30),
			Containers: []corev1.Container{{Name: "app", Image: seedAppManifestPod, ImagePullPolicy: corev1.PullIfNotPresent,
				Ports: []corev1.ContainerPort{{ContainerPort: 8000}},
				ReadinessProbe: &corev1.Probe{PeriodSeconds: 2, ProbeHandler: corev1.ProbeHandler{
					HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8000)}}},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}},
				Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sleep", "5"}}}},
			}}}}}}
	if _, err := cs.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "container-lab"}, Spec: corev1.ServiceSpec{
		Selector: labels, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8000)}}}}
	if _, err := cs.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
}

// etcdRevision is etcd's current revision: the resourceVersion of a list
// read from etcd (not the watch cache). Every write to etcd adds one.
func etcdRevision(ctx context.Context, b *testing.B, cs kubernetes.Interface) int64 {
	b.Helper()
	l, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		b.Fatal(err)
	}
	rv, err := strconv.ParseInt(l.ResourceVersion, 10, 64)
	if err != nil {
		b.Fatalf("namespace list resourceVersion %q: %v", l.ResourceVersion, err)
	}
	return rv
}

// BenchmarkNodeIdle: issue 14's idle node. `kelp server` with its agent
// runs the seed app (3 demo pods behind a Service) and is left alone for
// KELP_IDLE_SETTLE, then for KELP_IDLE_WINDOW (10 min by default) it is
// measured: the kelp process's CPU as a percentage of one core, and the
// bytes written to storage per hour (extrapolated) by kelp, by
// containerd, and by all the node's writers together (kelp, containerd,
// the shims and the log writers; the server's own log goes to a file, so
// its log lines count as kelp's writes, as they would in journald). The
// etcd writes (revisions) per hour and the server's log growth are
// reported too, as diagnostics. A 10-minute window needs
// `-timeout 30m`:
//
//	go test -run '^$' -bench NodeIdle -benchtime=1x -timeout 30m ./test/bench/
//	KELP_IDLE_WINDOW=2m go test -run '^$' -bench NodeIdle -benchtime=1x -timeout 15m ./test/bench/
func BenchmarkNodeIdle(b *testing.B) {
	window, settle := idleDurations(b)
	for range b.N {
		s := newNode(b)
		s.start()
		cs := s.client()
		ctx := ctxFor(b, 5*time.Minute+settle+window)
		waitNodeReady(ctx, b, cs)
		seedApp(ctx, b, cs)
		for {
			l, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=container-lab"})
			n := 0
			if err == nil {
				for i := range l.Items {
					if podutils.IsPodReady(&l.Items[i]) {
						n++
					}
				}
			}
			if n == 3 {
				break
			}
			if ctx.Err() != nil {
				b.Fatalf("the seed app never became Ready; log tail:\n%s", s.logTail())
			}
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(settle)

		logStart := fileSize(s.logPath)
		rev0 := etcdRevision(ctx, b, cs)
		start := nodeWriters(s)
		if _, ok := start[s.pid()]; !ok {
			b.Fatal("cannot read /proc/<pid>/io of the server")
		}
		busy0 := sampleCPU(0)
		t0 := time.Now()
		stopPerf := perfRecord(b, s.pid())
		time.Sleep(window)
		end := nodeWriters(s)
		elapsed := time.Since(t0)
		stopPerf()
		busy := cpuBetween(busy0, sampleCPU(0))
		rev1 := etcdRevision(ctx, b, cs)
		logBytes := fileSize(s.logPath) - logStart

		u := idleBetween(start, end)
		perHour := func(v float64) float64 { return v * float64(time.Hour) / float64(elapsed) }
		mb := func(v int64) float64 { return perHour(float64(v)) / 1e6 }
		var all int64
		for _, v := range u.bytes {
			all += v
		}
		cpuPct := 100 * u.cpu[procKelp] / elapsed.Seconds()
		b.ReportMetric(0, "ns/op")
		b.ReportMetric(cpuPct, "kelp-cpu-%")
		b.ReportMetric(mb(u.bytes[procKelp]), "kelp-MB/h")
		b.ReportMetric(mb(u.bytes[procContainerd]), "containerd-MB/h")
		b.ReportMetric(mb(all), "all-MB/h")
		b.ReportMetric(perHour(float64(rev1-rev0)), "etcd-writes/h")
		b.ReportMetric(busy.machine, "machine-cores")
		b.Logf("node idle over %v (after %v at rest with the seed app Ready): kelp CPU %.2f%% of a core | target <= %.0f%%: %s",
			elapsed.Round(time.Second), settle, cpuPct, targetIdleCPUPercent, verdict(cpuPct <= targetIdleCPUPercent))
		b.Logf("  written per hour: all writers %.1f MB | target <= %d MB: %s",
			mb(all), targetIdleMBPerHour, verdict(mb(all) <= targetIdleMBPerHour))
		kinds := make([]string, 0, len(u.procs))
		for k := range u.procs {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		for _, k := range kinds {
			b.Logf("  %-11s %2d process(es): %7.1f MB/h written, CPU %.2f%% of a core", k, u.procs[k], mb(u.bytes[k]), 100*u.cpu[k]/elapsed.Seconds())
		}
		b.Logf("  etcd: %d revisions (writes) in the window, %.0f/h; server log: %d bytes, %.2f MB/h; processes that came %d, went %d; machine %.2f of %d cores busy",
			rev1-rev0, perHour(float64(rev1-rev0)), logBytes, mb(logBytes), u.came, u.went, busy.machine, numCPU())
	}
}

func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}
