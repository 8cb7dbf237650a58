package integration

import (
	"context"
	"fmt"
	"k8s.io/kubectl/pkg/util/podutils"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/kelp-project/kelp/test/simkubelet"
)

// podBounds follows a label selector's pods through a watch and records
// the most live (not terminating) pods and the fewest Ready live pods seen
// at any moment: the quantities maxSurge and maxUnavailable bound.
type podBounds struct {
	mu       sync.Mutex
	pods     map[string]*corev1.Pod
	maxLive  int
	minReady int
	history  []string // one line per event, printed when a bound fails
	done     chan struct{}
}

func watchPodBounds(t *testing.T, cs kubernetes.Interface, ns, selector string) *podBounds {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	b := &podBounds{pods: map[string]*corev1.Pod{}, minReady: 1 << 30, done: make(chan struct{})}
	for i := range list.Items {
		b.pods[list.Items[i].Name] = &list.Items[i]
	}
	b.observe()
	go func() {
		defer close(b.done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				if ctx.Err() != nil {
					return // the test is over; the client reports the closed stream
				}
				t.Errorf("pod watch: %v %#v", ev.Type, ev.Object)
				return
			}
			b.mu.Lock()
			b.history = append(b.history, fmt.Sprintf("%s %s owner=%s ready=%v terminating=%v", ev.Type, p.Name,
				p.OwnerReferences[0].Name, podutils.IsPodReady(p), p.DeletionTimestamp != nil))
			if ev.Type == watch.Deleted {
				delete(b.pods, p.Name)
			} else {
				b.pods[p.Name] = p
			}
			b.mu.Unlock()
			b.observe()
		}
	}()
	t.Cleanup(func() { cancel(); w.Stop(); <-b.done })
	return b
}

func (b *podBounds) observe() {
	b.mu.Lock()
	defer b.mu.Unlock()
	live, ready := 0, 0
	for _, p := range b.pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		live++
		if podutils.IsPodReady(p) {
			ready++
		}
	}
	if len(b.history) > 0 {
		b.history[len(b.history)-1] += fmt.Sprintf(" → live %d ready %d", live, ready)
	}
	b.maxLive = max(b.maxLive, live)
	b.minReady = min(b.minReady, ready)
}

func (b *podBounds) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.history, "\n")
}

func (b *podBounds) get() (maxLive, minReady int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.maxLive, b.minReady
}

func rolloutStatus(t *testing.T, s *testServer, ns, name string) {
	t.Helper()
	out, err := s.kubectl("-n", ns, "rollout", "status", "deployment/"+name, "--timeout=60s")
	if err != nil || !strings.Contains(out, "successfully rolled out") {
		t.Fatalf("rollout status %s: %v\n%s", name, err, out)
	}
}

// kubectl set image rolls the seed's Deployment within its bounds:
// maxSurge 1 / maxUnavailable 0 with 3 replicas never runs more than 4 pods
// nor fewer than 3 Ready; the 25% defaults give seed 003's table for 4 and
// 5 replicas. Then history, undo, pause/resume and restart behave as
// upstream's kubectl expects.
func TestRollingUpdate(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	simkubelet.Start(t, cs, "node-1", "node-2", "node-3")

	s.mustKubectl("apply", "-f", "testdata/deployment.yaml")
	rolloutStatus(t, s, "default", "container-lab")
	b := watchPodBounds(t, cs, "default", "app=container-lab")
	s.mustKubectl("set", "image", "deployment/container-lab", "app=username/container-lab:v3")
	rolloutStatus(t, s, "default", "container-lab")
	if most, least := b.get(); most != 4 || least != 3 {
		t.Errorf("maxSurge 1/maxUnavailable 0 with 3 replicas: saw at most %d pods (want 4) and at least %d Ready (want 3)\n%s", most, least, b)
	}

	for _, tc := range []struct {
		replicas        int32
		atMost, atLeast int
	}{{4, 5, 3}, {5, 7, 4}} {
		name := fmt.Sprintf("pct%d", tc.replicas)
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: appsv1.DeploymentSpec{Replicas: &tc.replicas,
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox:1.36"}}}}}}
		if _, err := cs.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		rolloutStatus(t, s, "default", name)
		b := watchPodBounds(t, cs, "default", "app="+name)
		s.mustKubectl("set", "image", "deployment/"+name, "app=busybox:1.37")
		rolloutStatus(t, s, "default", name)
		most, least := b.get()
		t.Logf("%d replicas, 25%%: at most %d pods, at least %d Ready", tc.replicas, most, least)
		if most > tc.atMost || least < tc.atLeast {
			t.Errorf("25%% with %d replicas: saw at most %d pods (bound %d) and at least %d Ready (bound %d)\n%s", tc.replicas, most, tc.atMost, least, tc.atLeast, b)
		}
		if most == int(tc.replicas) {
			t.Errorf("25%% with %d replicas: the rollout never surged", tc.replicas)
		}
	}

	out := s.mustKubectl("rollout", "history", "deployment/container-lab")
	if !strings.Contains(out, "\n1 ") || !strings.Contains(out, "\n2 ") {
		t.Errorf("rollout history lacks revisions 1 and 2:\n%s", out)
	}
	s.mustKubectl("rollout", "undo", "deployment/container-lab")
	rolloutStatus(t, s, "default", "container-lab")
	rsList, err := cs.AppsV1().ReplicaSets("default").List(ctx, metav1.ListOptions{LabelSelector: "app=container-lab"})
	if err != nil || len(rsList.Items) != 2 {
		t.Fatalf("ReplicaSets after undo: %v %d", err, len(rsList.Items))
	}
	for _, rs := range rsList.Items {
		img := rs.Spec.Template.Spec.Containers[0].Image
		want := int32(0)
		if img == "username/container-lab:v2" {
			want = 3
			if rs.Annotations["deployment.kubernetes.io/revision"] != "3" {
				t.Errorf("the restored ReplicaSet has revision %q, want 3", rs.Annotations["deployment.kubernetes.io/revision"])
			}
		}
		if *rs.Spec.Replicas != want {
			t.Errorf("after undo ReplicaSet %s (%s) has %d replicas, want %d", rs.Name, img, *rs.Spec.Replicas, want)
		}
	}

	// Paused: a template change makes no new ReplicaSet until resumed.
	s.mustKubectl("rollout", "pause", "deployment/container-lab")
	s.mustKubectl("set", "image", "deployment/container-lab", "app=username/container-lab:v4")
	waitFor(t, "paused Deployment observed", func() bool {
		d, err := cs.AppsV1().Deployments("default").Get(ctx, "container-lab", metav1.GetOptions{})
		return err == nil && d.Status.ObservedGeneration == d.Generation
	})
	if l, _ := cs.AppsV1().ReplicaSets("default").List(ctx, metav1.ListOptions{LabelSelector: "app=container-lab"}); len(l.Items) != 2 {
		t.Errorf("a paused Deployment made a ReplicaSet: %d", len(l.Items))
	}
	s.mustKubectl("rollout", "resume", "deployment/container-lab")
	rolloutStatus(t, s, "default", "container-lab")
	s.mustKubectl("rollout", "restart", "deployment/container-lab")
	rolloutStatus(t, s, "default", "container-lab")
	pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=container-lab"})
	if err != nil {
		t.Fatal(err)
	}
	live := 0
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			live++
			if p.Spec.Containers[0].Image != "username/container-lab:v4" || p.Annotations["kubectl.kubernetes.io/restartedAt"] == "" {
				t.Errorf("pod %s after resume and restart: image %s, annotations %v", p.Name, p.Spec.Containers[0].Image, p.Annotations)
			}
		}
	}
	if live != 3 {
		t.Errorf("%d live pods after restart, want 3", live)
	}
}

// A template whose pods never become Ready ends in ProgressDeadlineExceeded
// and kubectl rollout status fails with upstream's message.
func TestProgressDeadline(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	simkubelet.Start(t, cs, "node-1")
	one, deadline := int32(1), int32(2)
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "stuck"},
		Spec: appsv1.DeploymentSpec{Replicas: &one, ProgressDeadlineSeconds: &deadline,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "stuck"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "stuck", simkubelet.NeverReadyLabel: "true"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox:1.36"}}}}}}
	if _, err := cs.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	out, err := s.kubectl("rollout", "status", "deployment/stuck", "--timeout=30s")
	if err == nil || !strings.Contains(out, `deployment "stuck" exceeded its progress deadline`) {
		t.Fatalf("rollout status of a stuck Deployment: %v\n%s", err, out)
	}
	got, err := cs.AppsV1().Deployments("default").Get(ctx, "stuck", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var progressing, available *appsv1.DeploymentCondition
	for i, c := range got.Status.Conditions {
		switch c.Type {
		case appsv1.DeploymentProgressing:
			progressing = &got.Status.Conditions[i]
		case appsv1.DeploymentAvailable:
			available = &got.Status.Conditions[i]
		}
	}
	if progressing == nil || progressing.Status != corev1.ConditionFalse || progressing.Reason != "ProgressDeadlineExceeded" {
		t.Errorf("Progressing condition %+v", progressing)
	}
	if available == nil || available.Status != corev1.ConditionFalse || available.Reason != "MinimumReplicasUnavailable" {
		t.Errorf("Available condition %+v", available)
	}
}
