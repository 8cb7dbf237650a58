package podgc

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

func finished(name string, phase corev1.PodPhase, created int64, reason string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", CreationTimestamp: metav1.Unix(created, 0)},
		Status: corev1.PodStatus{Phase: phase, Reason: reason}}
}

func names(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

// Beyond the threshold the evicted pods go first, then the oldest; running
// and pending pods never count.
func TestTerminated(t *testing.T) {
	pods := []*corev1.Pod{
		finished("new", corev1.PodSucceeded, 300, ""),
		finished("old", corev1.PodFailed, 100, ""),
		finished("evicted", corev1.PodFailed, 400, "Evicted"),
		finished("mid", corev1.PodSucceeded, 200, ""),
		finished("running", corev1.PodRunning, 1, ""),
		finished("pending", corev1.PodPending, 1, ""),
	}
	if got := names(Terminated(pods, 2)); len(got) != 2 || got[0] != "evicted" || got[1] != "old" {
		t.Fatalf("threshold 2: %v", got)
	}
	if got := Terminated(pods, 4); len(got) != 0 {
		t.Fatalf("at the threshold: %v", names(got))
	}
	if got := Terminated(pods, 0); len(got) != 0 {
		t.Fatalf("threshold 0 keeps all: %v", names(got))
	}
}

func TestOrphansAndUnscheduled(t *testing.T) {
	now := metav1.Now()
	pods := []*corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: corev1.PodSpec{NodeName: "gone"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: corev1.PodSpec{NodeName: "gone"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: corev1.PodSpec{NodeName: "here"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "d", DeletionTimestamp: &now}},
		{ObjectMeta: metav1.ObjectMeta{Name: "e"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "f", DeletionTimestamp: &now}, Spec: corev1.PodSpec{NodeName: "here"}},
	}
	if got := MissingNodes(pods, map[string]bool{"here": true}); len(got) != 1 || got[0] != "gone" {
		t.Fatalf("missing nodes %v", got)
	}
	if got := names(UnscheduledTerminating(pods)); len(got) != 1 || got[0] != "d" {
		t.Fatalf("unscheduled terminating %v", got)
	}
}

// A pod whose Node is missing is deleted only once its quarantine is over
// and a GET confirms the Node gone; a pod on a live Node stays.
func TestGCOrphanAfterQuarantine(t *testing.T) {
	objs := []runtime.Object{
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "here"}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "orphan", Namespace: "default", UID: "u1"}, Spec: corev1.PodSpec{NodeName: "gone"},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "kept", Namespace: "default", UID: "u2"}, Spec: corev1.PodSpec{NodeName: "here"},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}},
	}
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	c := New(client, factory, Config{Quarantine: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	c.gc(ctx)
	if _, err := client.CoreV1().Pods("default").Get(ctx, "orphan", metav1.GetOptions{}); err != nil {
		t.Fatalf("deleted before the quarantine: %v", err)
	}
	time.Sleep(100 * time.Millisecond)
	c.gc(ctx)
	if _, err := client.CoreV1().Pods("default").Get(ctx, "orphan", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("orphan after the quarantine: %v", err)
	}
	if _, err := client.CoreV1().Pods("default").Get(ctx, "kept", metav1.GetOptions{}); err != nil {
		t.Fatalf("pod on a live node: %v", err)
	}
}
