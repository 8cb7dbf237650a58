package scheduler

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// BenchmarkSchedule1000Pods100Nodes measures end-to-end throughput (informer
// event -> filter/score -> assume -> Bind through the fake clientset ->
// informer confirmation) for 1000 pods of 10 ReplicaSets over 100 nodes.
func BenchmarkSchedule1000Pods100Nodes(b *testing.B) {
	const nodes, pods = 100, 1000
	var total time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		objs := make([]runtime.Object, 0, nodes+pods)
		for n := 0; n < nodes; n++ {
			objs = append(objs, makeNode(fmt.Sprintf("node-%03d", n), "32", "128Gi"))
		}
		for p := 0; p < pods; p++ {
			objs = append(objs, makePod(fmt.Sprintf("pod-%04d", p), "100m", "256Mi", ownedBy(fmt.Sprintf("rs-%d", p%10))))
		}
		start := time.Now()
		b.StartTimer()
		env := newTestEnv(b, objs...)
		env.waitFor(2*time.Minute, "all pods bound", func() bool { return env.binds.Load() == pods })
		b.StopTimer()
		total += time.Since(start)
		env.stop()
		env.sched.cache.mu.Lock()
		count := 0
		for _, ni := range env.sched.cache.nodes {
			count += len(ni.pods)
		}
		env.sched.cache.mu.Unlock()
		if count != pods {
			b.Fatalf("cache accounts %d pods, want %d", count, pods)
		}
	}
	b.ReportMetric(float64(pods*b.N)/total.Seconds(), "pods/s")
}

// BenchmarkScheduleAlgorithm100Nodes measures filter+score+assume alone
// (no API calls): one op is one pod placed among 100 nodes.
func BenchmarkScheduleAlgorithm100Nodes(b *testing.B) {
	s := &Scheduler{cache: newCache(), rng: rand.New(rand.NewSource(1))}
	for n := 0; n < 100; n++ {
		s.cache.addOrUpdateNode(makeNode(fmt.Sprintf("node-%03d", n), "1000", "4000Gi"))
	}
	pods := make([]*podInfo, 1000)
	for i := range pods {
		p := makePod(fmt.Sprintf("pod-%04d", i), "100m", "256Mi", ownedBy(fmt.Sprintf("rs-%d", i%10)))
		p.UID = types.UID(fmt.Sprintf("uid-%d", i))
		pods[i] = newPodInfo(p)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		pi := pods[i%len(pods)]
		if _, _, err := s.schedulePod(pi); err != nil {
			b.Fatal(err)
		}
		if i%len(pods) == len(pods)-1 {
			b.StopTimer()
			for _, p := range pods {
				s.cache.removePod(p.pod.UID)
			}
			b.StartTimer()
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pods/s")
}
