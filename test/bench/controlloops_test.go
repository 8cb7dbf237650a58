package bench

import (
	"context"
	"fmt"
	"k8s.io/kubectl/pkg/util/podutils"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/kelp-project/kelp/test/simkubelet"
)

const (
	schedPods          = 1000
	targetSchedPerSec  = 1000 // at 100 nodes
	deployReplicas     = 100
	storedPods         = 5000
	storedPodNodes     = 50
	createConcurrency  = 32
	quietNodesGraceArg = "--node-monitor-grace-period=1h" // Node objects without kubelets must stay Ready
)

// node is a Node object with no kubelet behind it: big enough for the
// workload and Ready, as scheduler_perf's nodes are.
func node(name string) *corev1.Node {
	capacity := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("128Gi"),
		corev1.ResourcePods: resource.MustParse("110")}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity, Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}}}
}

func benchPod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "bench"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox:1.36",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}}}}}}
}

func createNodes(ctx context.Context, b *testing.B, cs kubernetes.Interface, n int) {
	b.Helper()
	if _, _, err := parallel(n, createConcurrency, func(i int) error {
		_, err := cs.CoreV1().Nodes().Create(ctx, node(fmt.Sprintf("node-%04d", i)), metav1.CreateOptions{})
		return err
	}); err != nil {
		b.Fatal(err)
	}
}

func createPods(ctx context.Context, b *testing.B, cs kubernetes.Interface, n int) time.Duration {
	b.Helper()
	_, wall, err := parallel(n, createConcurrency, func(i int) error {
		_, err := cs.CoreV1().Pods("default").Create(ctx, benchPod(fmt.Sprintf("pod-%05d", i)), metav1.CreateOptions{})
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return wall
}

// podProgress follows the default namespace's pods through one watch and
// reports when n of them are bound and when n are Ready.
type podProgress struct {
	mu           sync.Mutex
	bound, ready map[string]bool
	n            int
	allBound     chan time.Time
	allReady     chan time.Time
}

func watchProgress(ctx context.Context, b *testing.B, cs kubernetes.Interface, n int) *podProgress {
	b.Helper()
	w, err := cs.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	p := &podProgress{bound: map[string]bool{}, ready: map[string]bool{}, n: n,
		allBound: make(chan time.Time, 1), allReady: make(chan time.Time, 1)}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			p.mu.Lock()
			nb, nr := len(p.bound), len(p.ready)
			if pod.Spec.NodeName != "" {
				p.bound[pod.Name] = true
			}
			if podutils.IsPodReady(pod) {
				p.ready[pod.Name] = true
			}
			if nb < n && len(p.bound) == n {
				p.allBound <- time.Now()
			}
			if nr < n && len(p.ready) == n {
				p.allReady <- time.Now()
			}
			p.mu.Unlock()
		}
	}()
	return p
}

func (p *podProgress) wait(b *testing.B, what string, ch <-chan time.Time, limit time.Duration) time.Time {
	b.Helper()
	select {
	case t := <-ch:
		return t
	case <-time.After(limit):
		p.mu.Lock()
		defer p.mu.Unlock()
		b.Fatalf("timed out waiting for %s: %d bound, %d Ready", what, len(p.bound), len(p.ready))
		return time.Time{}
	}
}

// BenchmarkScheduler measures the scheduler's own throughput through the
// real API. 1,000 pending pods and the nodes are stored while the server
// runs with --disable-scheduler; the server is restarted with its
// scheduler, and the clock runs from /readyz until every pod is bound
// (leader election and the informers' initial list included). Each
// placement is a filter and score pass over every node plus a
// pods/binding call. scheduler_perf's upstream floor is 680–810 pods/s at
// 5,000 nodes.
//
// BenchmarkScheduler/created measures what a user sees instead: pods
// created as fast as 32 clients can, with the scheduler running, from the
// first create until the last is bound; there the creates are the limit.
func BenchmarkScheduler(b *testing.B) {
	for _, nodes := range []int{100, 1000} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			for range b.N {
				s := startServer(b, quietNodesGraceArg, "--disable-scheduler")
				cs := s.client()
				ctx := ctxFor(b, 5*time.Minute)
				createNodes(ctx, b, cs, nodes)
				createPods(ctx, b, cs, schedPods)
				s.stop()
				s.extraArgs = []string{quietNodesGraceArg}
				ready := s.start()
				t0 := time.Now()
				cs = s.client()
				progress := watchProgress(ctx, b, cs, schedPods)
				done := measure(b, s.pid())
				end := progress.wait(b, "every pod bound", progress.allBound, 2*time.Minute)
				done(schedPods)
				wall := end.Sub(t0)
				rate := float64(schedPods) / wall.Seconds()
				b.ReportMetric(0, "ns/op")
				b.ReportMetric(rate, "pods/s")
				line := fmt.Sprintf("scheduler, %d pending pods onto %d nodes: all bound %.0f ms after /readyz (the restart took %.0f ms): %.0f pods/s",
					schedPods, nodes, Ms(wall), Ms(ready), rate)
				if nodes == 100 {
					line += fmt.Sprintf(" | target >= %d pods/s: %s", targetSchedPerSec, verdict(rate >= targetSchedPerSec))
				}
				b.Log(line)
			}
		})
	}
	b.Run("created", func(b *testing.B) {
		for range b.N {
			s := startServer(b, quietNodesGraceArg)
			cs := s.client()
			ctx := ctxFor(b, 5*time.Minute)
			createNodes(ctx, b, cs, 100)
			time.Sleep(2 * time.Second) // the scheduler's cache has every node
			progress := watchProgress(ctx, b, cs, schedPods)
			done := measure(b, s.pid())
			t0 := time.Now()
			create := createPods(ctx, b, cs, schedPods)
			end := progress.wait(b, "every pod bound", progress.allBound, 2*time.Minute)
			done(schedPods)
			wall := end.Sub(t0)
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(float64(schedPods)/wall.Seconds(), "pods/s")
			b.Logf("scheduler, %d pods created onto 100 nodes: all bound %.0f ms after the first create (creating took %.0f ms): %.0f pods/s",
				schedPods, Ms(wall), Ms(create), float64(schedPods)/wall.Seconds())
		}
	})
}

// BenchmarkDeployment100 times `apply` of a 100-replica Deployment until
// every pod is bound and until every pod is Ready, with simulated kubelets
// (simkubelet, polling every 200 ms) on 10 nodes.
func BenchmarkDeployment100(b *testing.B) {
	for range b.N {
		s := startServer(b)
		cs := s.client()
		ctx := ctxFor(b, 5*time.Minute)
		var nodes []string
		for i := range 10 {
			nodes = append(nodes, fmt.Sprintf("node-%d", i))
		}
		simkubelet.Start(b, cs, nodes...)
		time.Sleep(time.Second) // nodes registered and leases renewed
		progress := watchProgress(ctx, b, cs, deployReplicas)
		done := measure(b, s.pid())
		replicas := int32(deployReplicas)
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec: appsv1.DeploymentSpec{Replicas: &replicas,
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "bench"}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "bench"}},
					Spec: benchPod("").Spec}}}
		t0 := time.Now()
		if _, err := cs.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		bound := progress.wait(b, "100 pods bound", progress.allBound, 2*time.Minute).Sub(t0)
		ready := progress.wait(b, "100 pods Ready", progress.allReady, 2*time.Minute).Sub(t0)
		done(deployReplicas)
		b.ReportMetric(0, "ns/op")
		b.ReportMetric(Ms(bound), "bound-ms")
		b.ReportMetric(Ms(ready), "ready-ms")
		b.Logf("deployment of %d replicas on 10 nodes: all bound after %.0f ms, all Ready after %.0f ms (simulated kubelets poll every %v)",
			deployReplicas, Ms(bound), Ms(ready), simkubelet.Interval)
	}
}

// BenchmarkRSS5000Pods reports the server's memory with 5,000 pods stored,
// bound to 50 nodes, and every control loop's caches holding them.
func BenchmarkRSS5000Pods(b *testing.B) {
	for range b.N {
		s := startServer(b, quietNodesGraceArg)
		cs := s.client()
		ctx := ctxFor(b, 10*time.Minute)
		createNodes(ctx, b, cs, storedPodNodes)
		progress := watchProgress(ctx, b, cs, storedPods)
		wall := createPods(ctx, b, cs, storedPods)
		progress.wait(b, "5000 pods bound", progress.allBound, 5*time.Minute)
		time.Sleep(10 * time.Second) // let the loops settle
		st, err := procStatus(s.pid(), "VmRSS", "VmHWM")
		if err != nil {
			b.Fatal(err)
		}
		mib := func(k string) float64 { return float64(st[k]) / (1 << 20) }
		b.ReportMetric(0, "ns/op")
		b.ReportMetric(mib("VmRSS"), "rss-MiB")
		b.ReportMetric(mib("VmHWM"), "peak-MiB")
		b.Logf("%d pods on %d nodes (created in %.1f s): VmRSS=%.1f MiB, peak VmHWM=%.1f MiB",
			storedPods, storedPodNodes, wall.Seconds(), mib("VmRSS"), mib("VmHWM"))
	}
}
