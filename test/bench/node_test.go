package bench

import (
	"context"
	"fmt"
	"io"
	"k8s.io/kubectl/pkg/util/podutils"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/kelp-project/kelp/test/images"
	"github.com/kelp-project/kelp/test/nodelock"
)

const (
	startupPods        = 30
	targetStartupP99   = 500 * time.Millisecond
	targetNodeReady    = 2 * time.Second
	targetNodeRSSMiB   = 150
	nodeIdleWait       = 60 * time.Second
	seedAppManifestPod = "kelp/demo:v1"
)

// newNode prepares a server that runs its node agent, with its own run
// dir, cgroup root and pod log dir, the test images in its air-gap
// directory, and `kelp killall` at cleanup (containerd and the pods
// outlive the server by design).
func newNode(b *testing.B) *server {
	b.Helper()
	if os.Geteuid() != 0 {
		b.Fatal("node benchmarks run real containers and need root")
	}
	release, err := nodelock.Acquire()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(release)
	tars := testImages(b)
	s := newServer(b)
	s.withAgent = true
	id := strconv.FormatInt(time.Now().UnixNano()%1e6, 36)
	agentArgs := []string{"--run-dir", "/run/kbench-" + id, "--cgroup-root", "/kbench-" + id,
		"--pod-log-dir", filepath.Join(s.dataDir, "pod-logs")}
	s.extraArgs = append(agentArgs, "--kubelet-port", "0")
	dir := filepath.Join(s.dataDir, "agent", "images")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	for _, t := range tars {
		if err := copyFile(t, filepath.Join(dir, filepath.Base(t))); err != nil {
			b.Fatal(err)
		}
	}
	b.Cleanup(func() {
		s.stop()
		out, err := exec.Command(s.bin, append([]string{"killall", "--data-dir", s.dataDir}, agentArgs...)...).CombinedOutput()
		if err != nil {
			b.Errorf("killall: %v\n%s", err, out)
		}
	})
	return s
}

// testImages builds the test images (once per checkout) and returns
// their archives.
func testImages(b *testing.B) []string {
	b.Helper()
	_, file, _, _ := goruntime.Caller(0)
	tars, err := images.Build(filepath.Join(filepath.Dir(file), "..", "..", "bin", "images"))
	if err != nil {
		b.Fatal(err)
	}
	return tars
}

func waitNodeReady(ctx context.Context, b *testing.B, cs kubernetes.Interface) time.Time {
	b.Helper()
	for {
		l, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err == nil && len(l.Items) == 1 {
			for _, c := range l.Items[0].Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					return time.Now()
				}
			}
		}
		if ctx.Err() != nil {
			b.Fatal("the node never became Ready")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitPodReady polls (every 5 ms, so latencies stay exact) until the pod
// is Ready, and returns it.
func waitPodReady(ctx context.Context, b *testing.B, cs kubernetes.Interface, name string) *corev1.Pod {
	b.Helper()
	for {
		p, err := cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err == nil && podutils.IsPodReady(p) {
			return p
		}
		if ctx.Err() != nil {
			b.Fatalf("pod %s never became Ready", name)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// BenchmarkNodeColdStart: `kelp server` on an empty data dir, with its
// agent, until the node is Ready (containerd started, images imported in
// the background, the pod network set up).
func BenchmarkNodeColdStart(b *testing.B) {
	for range b.N {
		s := newNode(b)
		t0 := time.Now()
		s.start()
		ctx := ctxFor(b, time.Minute)
		ready := waitNodeReady(ctx, b, s.client()).Sub(t0)
		b.ReportMetric(0, "ns/op")
		b.ReportMetric(Ms(ready), "node-ready-ms")
		b.Logf("cold start to node Ready: %.0f ms | target <= %v: %s", Ms(ready), targetNodeReady, verdict(ready <= targetNodeReady))
	}
}

// BenchmarkPodStartup: 30 pods, one after another, each from create to
// Ready (the kubelet reports it); images are local.
func BenchmarkPodStartup(b *testing.B) {
	for range b.N {
		s := newNode(b)
		s.start()
		cs := s.client()
		ctx := ctxFor(b, 5*time.Minute)
		waitNodeReady(ctx, b, cs)
		time.Sleep(2 * time.Second) // the images are imported
		var lat []time.Duration
		done := measure(b, s.pid())
		for i := range startupPods {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%02d", i)}, Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "c", Image: "busybox:1.35", ImagePullPolicy: corev1.PullIfNotPresent,
					Command: []string{"sleep", "3600"}}}}}
			t0 := time.Now()
			if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
			waitPodReady(ctx, b, cs, pod.Name)
			lat = append(lat, time.Since(t0))
		}
		done(startupPods)
		reportLatency(b, fmt.Sprintf("pod startup, create to Ready, %d pods one after another", startupPods), lat, 0, targetStartupP99)
	}
}

// seededNode starts a node (newNode) and the seed app's 3 demo pods, and
// waits until they are Ready; the context ends after timeout.
func seededNode(b *testing.B, timeout time.Duration) (*server, kubernetes.Interface, context.Context) {
	b.Helper()
	s := newNode(b)
	s.start()
	cs := s.client()
	ctx := ctxFor(b, timeout)
	waitNodeReady(ctx, b, cs)
	createSeedPods(ctx, b, cs)
	waitReadyPods(ctx, b, s, cs, 3)
	return s, cs, ctx
}

// createSeedPods creates the seed app's 3 demo pods.
func createSeedPods(ctx context.Context, b *testing.B, cs kubernetes.Interface) {
	b.Helper()
	for i := range 3 {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("container-lab-%d", i), Labels: map[string]string{"app": "container-lab"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: seedAppManifestPod, ImagePullPolicy: corev1.PullIfNotPresent}}}}
		if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNodeIdleRSS: the seed app (3 demo pods) Ready, then 60 s idle;
// the kelp process's RSS, with containerd, its shims, the log daemon and
// the parked log writers reported apart.
func BenchmarkNodeIdleRSS(b *testing.B) {
	for range b.N {
		s, _, _ := seededNode(b, 5*time.Minute)
		time.Sleep(nodeIdleWait)
		st, err := procStatus(s.pid(), "VmRSS", "VmHWM")
		if err != nil {
			b.Fatal(err)
		}
		mib := func(v int64) float64 { return float64(v) / (1 << 20) }
		others, pss := map[string]int64{}, map[string]int64{}
		counts := map[string]int{}
		for pid, kind := range nodeProcs(s) {
			if ps, err := procStatus(pid, "VmRSS"); err == nil {
				others[kind] += ps["VmRSS"]
				pss[kind] += procPss(pid)
				counts[kind]++
			}
		}
		b.ReportMetric(0, "ns/op")
		b.ReportMetric(mib(st["VmRSS"]), "kelp-rss-MiB")
		b.ReportMetric(mib(others["containerd"]), "containerd-rss-MiB")
		line := fmt.Sprintf("node idle RSS %v after the seed app is Ready: kelp VmRSS=%.1f MiB (PSS %.1f, peak %.1f) | target <= %d MB: %s",
			nodeIdleWait, mib(st["VmRSS"]), mib(procPss(s.pid())), mib(st["VmHWM"]), targetNodeRSSMiB, verdict(mib(st["VmRSS"]) <= targetNodeRSSMiB))
		for _, k := range []string{procContainerd, procShims, procLogDaemon, procParkedWriters, procLogWriters} {
			line += fmt.Sprintf("; %s: RSS %.1f MiB (PSS %.1f) in %d processes", k, mib(others[k]), mib(pss[k]), counts[k])
		}
		b.Log(line)
	}
}

// procPss is the process's proportional set size in bytes: shared pages
// (the kelp binary mapped by the server and every log writer) are split
// between the processes that map them.
func procPss(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Pss:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// BenchmarkDatapath compares new-connection HTTP requests through a
// Service's ClusterIP (nftables DNAT) with requests to a pod IP directly,
// in the same run: latency and connections per second, and their ratio.
func BenchmarkDatapath(b *testing.B) {
	for range b.N {
		s := newNode(b)
		s.start()
		cs := s.client()
		ctx := ctxFor(b, 5*time.Minute)
		waitNodeReady(ctx, b, cs)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: seedAppManifestPod, ImagePullPolicy: corev1.PullIfNotPresent}}}}
		if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8000)}}}}
		created, err := cs.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		podIP := waitPodReady(ctx, b, cs, "web").Status.PodIP
		client := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}}
		get := func(url string) error {
			resp, err := client.Get(url)
			if err != nil {
				return err
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			return resp.Body.Close()
		}
		clusterURL, podURL := "http://"+created.Spec.ClusterIP+"/", "http://"+podIP+":8000/"
		for deadline := time.Now().Add(20 * time.Second); get(clusterURL) != nil; {
			if time.Now().After(deadline) {
				b.Fatal("the Service never answered")
			}
			time.Sleep(50 * time.Millisecond)
		}
		const n = 2000
		run := func(url string) ([]time.Duration, time.Duration) {
			lat, wall, err := parallel(n, 4, func(int) error { return get(url) })
			if err != nil {
				b.Fatal(err)
			}
			return lat, wall
		}
		run(podURL) // warm up
		direct, dWall := run(podURL)
		viaSvc, sWall := run(clusterURL)
		d, v := Summarize(direct), Summarize(viaSvc)
		b.ReportMetric(0, "ns/op")
		b.ReportMetric(float64(n)/sWall.Seconds(), "svc-conn/s")
		b.ReportMetric(float64(n)/dWall.Seconds(), "pod-conn/s")
		b.Logf("datapath, %d new-connection GETs at concurrency 4: pod IP %s (%.0f conn/s); ClusterIP %s (%.0f conn/s); ClusterIP/pod: p50 %.2fx, rate %.2fx",
			n, d, float64(n)/dWall.Seconds(), v, float64(n)/sWall.Seconds(), Ms(v.P50)/Ms(d.P50), dWall.Seconds()/sWall.Seconds())
	}
}
