package bench

import (
	"fmt"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/kubectl/pkg/util/podutils"

	"github.com/kelp-project/kelp/test/simkubelet"
)

const (
	dsNodes         = 100
	targetDSCreated = 2 * time.Second
)

// BenchmarkDaemonSet100Nodes times a DaemonSet over 100 simulated nodes
// (simkubelet, polling every 200 ms): from its create until the controller
// has created a pod for every node (the target: 2 s), until every
// pod is bound and until every one is Ready; then an image change with
// maxUnavailable 100% until every node runs a Ready pod of the new
// template.
func BenchmarkDaemonSet100Nodes(b *testing.B) {
	for range b.N {
		s := startServer(b)
		cs := s.client()
		ctx := ctxFor(b, 5*time.Minute)
		var nodes []string
		for i := range dsNodes {
			nodes = append(nodes, fmt.Sprintf("node-%03d", i))
		}
		simkubelet.Start(b, cs, nodes...)
		time.Sleep(2 * time.Second) // nodes registered, leases renewed, caches filled

		w, err := cs.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{LabelSelector: "app=ds-bench"})
		if err != nil {
			b.Fatal(err)
		}
		var mu sync.Mutex
		created, bound, ready := map[string]bool{}, map[string]bool{}, map[string]map[string]bool{}
		type mark struct {
			what string
			at   time.Time
		}
		marks := make(chan mark, 16)
		go func() {
			defer w.Stop()
			for ev := range w.ResultChan() {
				p, ok := ev.Object.(*corev1.Pod)
				if !ok || ev.Type == watch.Deleted {
					continue
				}
				mu.Lock()
				img := p.Spec.Containers[0].Image
				if ready[img] == nil {
					ready[img] = map[string]bool{}
				}
				nc, nb, nr := len(created), len(bound), len(ready[img])
				created[p.Name] = true
				if p.Spec.NodeName != "" {
					bound[p.Name] = true
				}
				if podutils.IsPodReady(p) && p.DeletionTimestamp == nil {
					ready[img][p.Spec.NodeName] = true
				}
				if nc < dsNodes && len(created) == dsNodes {
					marks <- mark{"created", time.Now()}
				}
				if nb < dsNodes && len(bound) == dsNodes {
					marks <- mark{"bound", time.Now()}
				}
				if nr < dsNodes && len(ready[img]) == dsNodes {
					marks <- mark{"ready " + img, time.Now()}
				}
				mu.Unlock()
			}
		}()
		waitMark := func(want string, t0 time.Time) time.Duration {
			b.Helper()
			deadline := time.After(2 * time.Minute)
			for {
				select {
				case m := <-marks:
					if m.what == want {
						return m.at.Sub(t0)
					}
				case <-deadline:
					mu.Lock()
					defer mu.Unlock()
					b.Fatalf("timed out waiting for %s: %d created, %d bound", want, len(created), len(bound))
				}
			}
		}

		all := intstr.FromString("100%")
		ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "ds-bench"},
			Spec: appsv1.DaemonSetSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "ds-bench"}},
				UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
					RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: &all}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "ds-bench"}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox:1.36"}}}}}}
		done := measure(b, s.pid())
		t0 := time.Now()
		if _, err := cs.AppsV1().DaemonSets("default").Create(ctx, ds, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		createdIn := waitMark("created", t0)
		boundIn := waitMark("bound", t0)
		readyIn := waitMark("ready busybox:1.36", t0)

		t1 := time.Now()
		patch := `{"spec":{"template":{"spec":{"containers":[{"name":"c","image":"busybox:1.37"}]}}}}`
		if _, err := cs.AppsV1().DaemonSets("default").Patch(ctx, "ds-bench", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			b.Fatal(err)
		}
		rolledIn := waitMark("ready busybox:1.37", t1)
		done(2 * dsNodes)

		b.ReportMetric(0, "ns/op")
		b.ReportMetric(Ms(createdIn), "created-ms")
		b.ReportMetric(Ms(boundIn), "bound-ms")
		b.ReportMetric(Ms(readyIn), "ready-ms")
		b.ReportMetric(Ms(rolledIn), "rollout-ms")
		b.Logf("daemonset over %d nodes: all pods created after %.0f ms (target <= %v: %s), bound after %.0f ms, Ready after %.0f ms; "+
			"image update (maxUnavailable 100%%) Ready everywhere after %.0f ms (simulated kubelets poll every %v)",
			dsNodes, Ms(createdIn), targetDSCreated, verdict(createdIn <= targetDSCreated), Ms(boundIn), Ms(readyIn), Ms(rolledIn), simkubelet.Interval)
	}
}
