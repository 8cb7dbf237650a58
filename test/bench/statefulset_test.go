package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubectl/pkg/util/podutils"
	"k8s.io/utils/ptr"

	"github.com/kelp-project/kelp/test/simkubelet"
)

const simStatefulSetPods = 10

// simStatefulSet is a StatefulSet of 0 pods under policy.
func simStatefulSet(name string, policy appsv1.PodManagementPolicyType) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(int32(0)),
			ServiceName:         name,
			PodManagementPolicy: policy,
			Selector:            &metav1.LabelSelector{MatchLabels: map[string]string{"sts": name}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"sts": name}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox:1.36"}}}}}}
}

// scaleSimAndWait scales the set to n and returns how long until n of its
// pods are Ready, as a pod watch sees them.
func scaleSimAndWait(ctx context.Context, b *testing.B, cs kubernetes.Interface, name string, n int) time.Duration {
	b.Helper()
	w, err := cs.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{LabelSelector: "sts=" + name})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	t0 := time.Now()
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)
	if _, err := cs.AppsV1().StatefulSets("default").Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "scale"); err != nil {
		b.Fatal(err)
	}
	ready := map[string]bool{}
	deadline := time.After(2 * time.Minute)
	for len(ready) < n {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				b.Fatalf("%s: pod watch ended with %d Ready", name, len(ready))
			}
			p, isPod := ev.Object.(*corev1.Pod)
			if !isPod {
				continue
			}
			if ev.Type != watch.Deleted && p.DeletionTimestamp == nil && podutils.IsPodReady(p) {
				ready[p.Name] = true
			}
		case <-deadline:
			b.Fatalf("%s: %d of %d pods Ready after 2 minutes", name, len(ready), n)
		}
	}
	return time.Since(t0)
}

// BenchmarkStatefulSet10SimulatedPods times scaling a StatefulSet from 0
// to 10 until all 10 pods are Ready, on three simulated nodes (simkubelet,
// polling every 200 ms), under OrderedReady (each pod waits for the one
// before it to be Ready: ten controller, scheduler and kubelet round trips
// in a row) and under Parallel (all at once).
func BenchmarkStatefulSet10SimulatedPods(b *testing.B) {
	for range b.N {
		s := startServer(b)
		cs := s.client()
		ctx := ctxFor(b, 5*time.Minute)
		simkubelet.Start(b, cs, "node-1", "node-2", "node-3")
		for _, name := range []string{"ordered", "parallel"} {
			policy := appsv1.OrderedReadyPodManagement
			if name == "parallel" {
				policy = appsv1.ParallelPodManagement
			}
			if _, err := cs.AppsV1().StatefulSets("default").Create(ctx, simStatefulSet(name, policy), metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		time.Sleep(2 * time.Second) // nodes registered, leases renewed, sets observed

		done := measure(b, s.pid())
		ordered := scaleSimAndWait(ctx, b, cs, "ordered", simStatefulSetPods)
		parallel := scaleSimAndWait(ctx, b, cs, "parallel", simStatefulSetPods)
		done(2 * simStatefulSetPods)

		b.ReportMetric(0, "ns/op")
		b.ReportMetric(Ms(ordered), "ordered-ready-ms")
		b.ReportMetric(Ms(parallel), "parallel-ready-ms")
		b.Logf("statefulset 0 -> %d on simulated kubelets (poll %v): OrderedReady all Ready after %.0f ms (%.0f ms per pod), Parallel after %.0f ms",
			simStatefulSetPods, simkubelet.Interval, Ms(ordered), Ms(ordered)/simStatefulSetPods, Ms(parallel))
	}
}
