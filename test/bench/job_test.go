package bench

import (
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/kelp-project/kelp/test/simkubelet"
)

const (
	jobCompletions = 1000
	jobParallelism = 100
	targetJob      = 10 * time.Second
)

// BenchmarkJob1000 measures a Job of 1,000 completions at parallelism 100
// on 10 simulated kubelets, whose pods end (exit 0) as soon as they are
// bound: from the Job's creation to its Complete condition, i.e. ten waves
// of scheduling, pod status, finalizer tracking and replacement.
func BenchmarkJob1000(b *testing.B) {
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
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "batch"},
			Spec: batchv1.JobSpec{Completions: ptr.To(int32(jobCompletions)), Parallelism: ptr.To(int32(jobParallelism)),
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{simkubelet.ExitCodeAnnotation: "0"}},
					Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
						Containers: []corev1.Container{{Name: "work", Image: "busybox:1.36"}}}}}}
		w, err := cs.BatchV1().Jobs("default").Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", "batch").String()})
		if err != nil {
			b.Fatal(err)
		}
		done := measure(b, s.pid())
		t0 := time.Now()
		if _, err := cs.BatchV1().Jobs("default").Create(ctx, job, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		end, final := waitComplete(b, w)
		done(jobCompletions)
		wall := end.Sub(t0)
		if final.Status.Succeeded != jobCompletions || final.Status.Failed != 0 {
			b.Errorf("status %+v", final.Status)
		}
		b.ReportMetric(0, "ns/op")
		b.ReportMetric(Ms(wall), "complete-ms")
		b.Logf("job of %d completions at parallelism %d on 10 simulated kubelets (polling every %v): Complete %.0f ms after create | target <= %v: %s",
			jobCompletions, jobParallelism, simkubelet.Interval, Ms(wall), targetJob, verdict(wall <= targetJob))
		w.Stop()
	}
}

// waitComplete returns when the watched Job turned Complete (or Failed,
// which fails the benchmark).
func waitComplete(b *testing.B, w watch.Interface) (time.Time, *batchv1.Job) {
	b.Helper()
	timeout := time.After(2 * time.Minute)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				b.Fatal("job watch ended")
			}
			j, isJob := ev.Object.(*batchv1.Job)
			if !isJob {
				continue
			}
			for _, c := range j.Status.Conditions {
				if c.Status != corev1.ConditionTrue {
					continue
				}
				switch c.Type {
				case batchv1.JobComplete:
					return time.Now(), j
				case batchv1.JobFailed:
					b.Fatalf("job failed: %s %s", c.Reason, c.Message)
				}
			}
		case <-timeout:
			b.Fatal("job not Complete within 2 minutes")
		}
	}
}
