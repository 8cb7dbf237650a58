package bench

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

const (
	statefulSetRealPods   = 10
	targetStatefulSetUp   = 6 * time.Second
	statefulSetWaitLimit  = 3 * time.Minute
	statefulSetBenchImage = "busybox:1.35"
)

// realStatefulSet is a StatefulSet of 0 busybox pods; withVolume gives
// each pod a claim on the default class (the node's local-path
// provisioner).
func realStatefulSet(name string, policy appsv1.PodManagementPolicyType, withVolume bool) *appsv1.StatefulSet {
	zero := int32(0)
	grace := int64(1)
	labels := map[string]string{"sts": name}
	pod := corev1.PodSpec{TerminationGracePeriodSeconds: &grace, Containers: []corev1.Container{{Name: "c", Image: statefulSetBenchImage,
		ImagePullPolicy: corev1.PullIfNotPresent, Command: []string{"sleep", "3600"}}}}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: appsv1.StatefulSetSpec{
		Replicas: &zero, ServiceName: name, PodManagementPolicy: policy,
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod}}}
	if withVolume {
		sts.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
		sts.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("16Mi")}}}}}
	}
	return sts
}

// scaleUntilReady scales the StatefulSet from 0 to n and returns the time
// until its status counts n Ready replicas of the current revision.
func scaleUntilReady(ctx context.Context, b *testing.B, s *server, cs kubernetes.Interface, name string, n int32) time.Duration {
	b.Helper()
	t0 := time.Now()
	scale := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: autoscalingv1.ScaleSpec{Replicas: n}}
	if _, err := cs.AppsV1().StatefulSets("default").UpdateScale(ctx, name, scale, metav1.UpdateOptions{}); err != nil {
		b.Fatal(err)
	}
	for {
		sts, err := cs.AppsV1().StatefulSets("default").Get(ctx, name, metav1.GetOptions{})
		if err == nil && sts.Status.ReadyReplicas == n && sts.Status.ObservedGeneration >= sts.Generation {
			return time.Since(t0)
		}
		if ctx.Err() != nil {
			b.Fatalf("StatefulSet %s never reached %d Ready (%+v); log tail:\n%s", name, n, sts.Status, s.logTail())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// BenchmarkStatefulSetRealPods: a StatefulSet of 10 real busybox pods on
// the node agent, scaled 0 → 10 until all are Ready: OrderedReady (each
// pod waits for the one before it to be Ready), Parallel, and
// OrderedReady with a local-path volume per pod (claim, provisioning,
// binding and the mount on each pod's path).
func BenchmarkStatefulSetRealPods(b *testing.B) {
	for range b.N {
		s := newNode(b)
		s.start()
		cs := s.client()
		ctx := ctxFor(b, 10*time.Minute)
		waitNodeReady(ctx, b, cs)
		time.Sleep(2 * time.Second) // the images are imported
		for _, run := range []struct {
			name   string
			policy appsv1.PodManagementPolicyType
			volume bool
		}{
			{"ordered", appsv1.OrderedReadyPodManagement, false},
			{"parallel", appsv1.ParallelPodManagement, false},
			{"ordered-volumes", appsv1.OrderedReadyPodManagement, true},
		} {
			if _, err := cs.AppsV1().StatefulSets("default").Create(ctx, realStatefulSet(run.name, run.policy, run.volume), metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
			wctx, cancel := context.WithTimeout(ctx, statefulSetWaitLimit)
			d := scaleUntilReady(wctx, b, s, cs, run.name, statefulSetRealPods)
			cancel()
			b.ReportMetric(Ms(d), run.name+"-ms")
			b.Logf("StatefulSet of %d real pods, %s, scale 0 → %d → all Ready: %.0f ms | target <= %v: %s",
				statefulSetRealPods, run.name, statefulSetRealPods, Ms(d), targetStatefulSetUp, verdict(d <= targetStatefulSetUp))
			// Make room for the next run: its pods would share the node.
			if err := cs.AppsV1().StatefulSets("default").Delete(ctx, run.name, metav1.DeleteOptions{}); err != nil {
				b.Fatal(err)
			}
			waitNoPods(ctx, b, cs, "sts="+run.name)
		}
		b.ReportMetric(0, "ns/op")
	}
}

// waitNoPods waits until no pod matches the selector.
func waitNoPods(ctx context.Context, b *testing.B, cs kubernetes.Interface, selector string) {
	b.Helper()
	for {
		l, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err == nil && len(l.Items) == 0 {
			return
		}
		if ctx.Err() != nil {
			b.Fatalf("pods %s never went away", selector)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
