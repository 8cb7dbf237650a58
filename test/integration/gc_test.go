package integration

import (
	"context"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/kelp-project/kelp/test/simkubelet"
)

// Deleting a Deployment propagates through its ReplicaSets to the pods as
// the propagation policy says: Background deletes the owner at once and
// the garbage collector removes the rest; Foreground keeps the owner
// (with the foregroundDeletion finalizer) until its dependents are gone;
// Orphan leaves the dependents running, without their owner reference.
func TestDeletionPropagation(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	simkubelet.Start(t, cs, "node-1", "node-2")

	deploy := func(ns string) {
		s.mustKubectl("create", "namespace", ns)
		s.mustKubectl("-n", ns, "apply", "-f", "testdata/deployment.yaml")
		rolloutStatus(t, s, ns, "container-lab")
	}
	count := func(ns string) (rs, pods int) {
		r, err := cs.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return len(r.Items), len(p.Items)
	}

	deploy("bg")
	s.mustKubectl("-n", "bg", "delete", "deployment", "container-lab", "--cascade=background")
	waitFor(t, "background: ReplicaSet and pods collected", func() bool {
		rs, pods := count("bg")
		return rs == 0 && pods == 0
	})

	deploy("fg")
	// With the kubelet confirming deletions at once, Foreground finishes
	// quickly; watch the Deployment to see it held with its finalizer.
	sawHeld := watchForegroundHold(t, cs, "fg")
	out, err := s.kubectl("-n", "fg", "delete", "deployment", "container-lab", "--cascade=foreground", "--timeout=60s")
	if err != nil || !strings.Contains(out, "deleted") {
		t.Fatalf("foreground delete: %v\n%s", err, out)
	}
	if rs, pods := count("fg"); rs != 0 || pods != 0 {
		t.Errorf("foreground: kubectl returned with %d ReplicaSets and %d pods left", rs, pods)
	}
	if !<-sawHeld {
		t.Error("foreground: the Deployment was never seen held with the foregroundDeletion finalizer")
	}

	deploy("orphan")
	s.mustKubectl("-n", "orphan", "delete", "deployment", "container-lab", "--cascade=orphan")
	waitFor(t, "orphan: the ReplicaSet loses its owner reference", func() bool {
		l, err := cs.AppsV1().ReplicaSets("orphan").List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 1 && len(l.Items[0].OwnerReferences) == 0
	})
	if _, err := cs.AppsV1().Deployments("orphan").Get(ctx, "container-lab", metav1.GetOptions{}); err == nil {
		t.Error("orphan: the Deployment is still there")
	}
	if rs, pods := count("orphan"); rs != 1 || pods != 3 {
		t.Errorf("orphan: %d ReplicaSets and %d pods remain, want 1 and 3", rs, pods)
	}
	// The orphaned ReplicaSet still owns its pods and keeps them.
	p, _ := cs.CoreV1().Pods("orphan").List(ctx, metav1.ListOptions{})
	for _, pod := range p.Items {
		if ref := metav1.GetControllerOf(&pod); ref == nil || ref.Kind != "ReplicaSet" {
			t.Errorf("orphaned pod %s lost its ReplicaSet owner: %+v", pod.Name, pod.OwnerReferences)
		}
	}
}

// watchForegroundHold reports whether the Deployment in ns was seen with a
// deletionTimestamp and the foregroundDeletion finalizer before it went.
func watchForegroundHold(t *testing.T, cs kubernetes.Interface, ns string) <-chan bool {
	ctx, cancel := context.WithCancel(context.Background())
	w, err := cs.AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cancel)
	res := make(chan bool, 1)
	go func() {
		held := false
		for ev := range w.ResultChan() {
			d, ok := ev.Object.(*appsv1.Deployment)
			if !ok {
				break
			}
			if d.DeletionTimestamp != nil && slices.Contains(d.Finalizers, metav1.FinalizerDeleteDependents) {
				held = true
			}
			if ev.Type == watch.Deleted {
				break
			}
		}
		res <- held
	}()
	return res
}
