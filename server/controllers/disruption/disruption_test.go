package disruption

import (
	"context"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
)

func pod(name string, ready bool, owner types.UID) *corev1.Pod {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}}}
	if owner != "" {
		yes := true
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: string(owner), UID: owner, Controller: &yes}}
	}
	return p
}

// scales answers every known owner UID with its scale.
func scales(m map[types.UID]int32) ScaleFunc {
	return func(_ string, ref *metav1.OwnerReference) (types.UID, int32, bool) {
		n, ok := m[ref.UID]
		return ref.UID, n, ok
	}
}

func budget(minAvailable, maxUnavailable *intstr.IntOrString) *policy.PodDisruptionBudget {
	return &policy.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Generation: 4},
		Spec: policy.PodDisruptionBudgetSpec{MinAvailable: minAvailable, MaxUnavailable: maxUnavailable}}
}

func ptr(v intstr.IntOrString) *intstr.IntOrString { return &v }

// The status upstream's controller would write, for each way a budget is
// expressed.
func TestCompute(t *testing.T) {
	now := time.Unix(10000, 0)
	three := []*corev1.Pod{pod("a", true, "rs"), pod("b", true, "rs"), pod("c", true, "rs")}
	for _, tc := range []struct {
		name                               string
		pdb                                *policy.PodDisruptionBudget
		pods                               []*corev1.Pod
		scale                              map[types.UID]int32
		healthy, desired, expected, allows int32
	}{
		{"minAvailable 2 of 3", budget(ptr(intstr.FromInt32(2)), nil), three, nil, 3, 2, 3, 1},
		{"minAvailable 3 of 3", budget(ptr(intstr.FromInt32(3)), nil), three, nil, 3, 3, 3, 0},
		{"minAvailable 4 of 3: never negative", budget(ptr(intstr.FromInt32(4)), nil), three, nil, 3, 4, 3, 0},
		{"minAvailable 50% of scale 4 rounds up", budget(ptr(intstr.FromString("50%")), nil), three, map[types.UID]int32{"rs": 4}, 3, 2, 4, 1},
		{"maxUnavailable 1 of scale 3", budget(nil, ptr(intstr.FromInt32(1))), three, map[types.UID]int32{"rs": 3}, 3, 2, 3, 1},
		{"maxUnavailable 34% of 3 rounds up", budget(nil, ptr(intstr.FromString("34%"))), three, map[types.UID]int32{"rs": 3}, 3, 1, 3, 2},
		{"unready pods are not healthy", budget(ptr(intstr.FromInt32(2)), nil),
			[]*corev1.Pod{pod("a", true, "rs"), pod("b", false, "rs"), pod("c", true, "rs")}, nil, 2, 2, 3, 0},
		{"no pods: nothing allowed", budget(nil, ptr(intstr.FromInt32(1))), nil, nil, 0, 0, 0, 0},
		{"two controllers sum", budget(nil, ptr(intstr.FromInt32(1))),
			[]*corev1.Pod{pod("a", true, "x"), pod("b", true, "y"), pod("c", true, "y")}, map[types.UID]int32{"x": 1, "y": 2}, 3, 2, 3, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, recheck, _, err := Compute(tc.pdb, tc.pods, scales(tc.scale), now)
			if err != nil {
				t.Fatal(err)
			}
			if st.CurrentHealthy != tc.healthy || st.DesiredHealthy != tc.desired || st.ExpectedPods != tc.expected ||
				st.DisruptionsAllowed != tc.allows || st.ObservedGeneration != 4 || !recheck.IsZero() {
				t.Fatalf("status %+v recheck %v", st, recheck)
			}
			c := apimeta.FindStatusCondition(st.Conditions, policy.DisruptionAllowedCondition)
			wantStatus, wantReason := metav1.ConditionFalse, policy.InsufficientPodsReason
			if tc.allows > 0 {
				wantStatus, wantReason = metav1.ConditionTrue, policy.SufficientPodsReason
			}
			if c == nil || c.Status != wantStatus || c.Reason != wantReason {
				t.Fatalf("condition %+v", c)
			}
		})
	}
}

// disruptedPods: an approved eviction keeps its pod out of the healthy
// count until DeletionTimeout; a pod already terminating leaves the map;
// an expired entry counts the pod again.
func TestComputeDisruptedPods(t *testing.T) {
	now := time.Unix(10000, 0)
	pdb := budget(ptr(intstr.FromInt32(2)), nil)
	gone := metav1.NewTime(now)
	terminating := pod("c", true, "rs")
	terminating.DeletionTimestamp = &gone
	pdb.Status.DisruptedPods = map[string]metav1.Time{
		"a": metav1.NewTime(now.Add(-30 * time.Second)), // fresh
		"b": metav1.NewTime(now.Add(-3 * time.Minute)),  // its delete never came
		"c": metav1.NewTime(now.Add(-10 * time.Second)), // on its way out
		"z": metav1.NewTime(now),                        // no longer exists
	}
	pods := []*corev1.Pod{pod("a", true, "rs"), pod("b", true, "rs"), terminating, pod("d", true, "rs")}
	st, recheck, _, err := Compute(pdb, pods, scales(nil), now)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.DisruptedPods) != 1 || st.DisruptedPods["a"].Time.IsZero() {
		t.Fatalf("disruptedPods %v", st.DisruptedPods)
	}
	if st.CurrentHealthy != 2 || st.DisruptionsAllowed != 0 || st.ExpectedPods != 4 {
		t.Fatalf("status %+v", st)
	}
	if want := now.Add(-30 * time.Second).Add(DeletionTimeout); !recheck.Equal(want) {
		t.Fatalf("recheck at %v, want %v", recheck, want)
	}
}

// A percentage needs every pod's controller: an unknown one is an error
// (the controller then fails safe), a pod without one is reported.
func TestComputeControllers(t *testing.T) {
	now := time.Unix(10000, 0)
	pdb := budget(ptr(intstr.FromString("50%")), nil)
	if _, _, _, err := Compute(pdb, []*corev1.Pod{pod("a", true, "ghost")}, scales(nil), now); err == nil {
		t.Fatal("a pod of an unknown controller was counted")
	}
	_, _, unmanaged, err := Compute(pdb, []*corev1.Pod{pod("a", true, "rs"), pod("bare", true, "")}, scales(map[types.UID]int32{"rs": 2}), now)
	if err != nil || len(unmanaged) != 1 || unmanaged[0] != "bare" {
		t.Fatalf("unmanaged %v, %v", unmanaged, err)
	}
}

// sync resolves a Deployment's pods through their ReplicaSet to the
// Deployment's scale and writes the status through pdb/status.
func TestSyncWritesStatus(t *testing.T) {
	yes := true
	replicas := int32(3)
	d := &apps.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "d"}, Spec: apps.DeploymentSpec{Replicas: &replicas}}
	one := int32(1)
	rs := &apps.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "default", UID: "rs",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "d", Controller: &yes}}},
		Spec: apps.ReplicaSetSpec{Replicas: &one}}
	pdb := budget(nil, ptr(intstr.FromInt32(1)))
	pdb.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	objs := []runtime.Object{d, rs, pdb}
	for _, name := range []string{"a", "b", "c"} {
		p := pod(name, true, "rs")
		p.OwnerReferences[0].Name = "web-1"
		p.Labels = map[string]string{"app": "web"}
		objs = append(objs, p)
	}
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	c := New(client, factory, record.NewFakeRecorder(10))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	if err := c.sync(ctx, "default/web"); err != nil {
		t.Fatal(err)
	}
	got, err := client.PolicyV1().PodDisruptionBudgets("default").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The Deployment's 3, not the ReplicaSet's 1, is the expected count.
	if st := got.Status; st.ExpectedPods != 3 || st.DesiredHealthy != 2 || st.CurrentHealthy != 3 || st.DisruptionsAllowed != 1 || st.ObservedGeneration != 4 {
		t.Fatalf("status %+v", st)
	}
}

// A DisruptionTarget mark on a pod that never started terminating is
// withdrawn after StaleDisruptionTimeout, not before; the kubelet's is kept.
func TestStaleDisruptionTarget(t *testing.T) {
	now := time.Unix(10000, 0)
	marked := func(name, reason string, age time.Duration) *corev1.Pod {
		p := pod(name, true, "")
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
			Reason: reason, LastTransitionTime: metav1.NewTime(now.Add(-age))})
		return p
	}
	old, fresh, kubelet := marked("old", "EvictionByEvictionAPI", 3*time.Minute), marked("fresh", "EvictionByEvictionAPI", time.Minute),
		marked("kubelet", corev1.PodReasonTerminationByKubelet, time.Hour)
	client := fake.NewClientset(old, fresh, kubelet)
	factory := informers.NewSharedInformerFactory(client, 0)
	c := New(client, factory, record.NewFakeRecorder(10))
	c.now = func() time.Time { return now }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	if stale, after := c.staleDisruption(fresh); !stale || after != time.Minute {
		t.Fatalf("fresh mark: stale %v after %v", stale, after)
	}
	if stale, _ := c.staleDisruption(kubelet); stale {
		t.Fatal("the kubelet's mark counted stale")
	}
	err := c.syncStalePod(ctx, "default/fresh")
	if d, ok := err.(recheck); !ok || time.Duration(d) != time.Minute {
		t.Fatalf("fresh mark: want a recheck in 1m, got %v", err)
	}
	if err := c.syncStalePod(ctx, "default/old"); err != nil {
		t.Fatal(err)
	}
	got, _ := client.CoreV1().Pods("default").Get(ctx, "old", metav1.GetOptions{})
	for _, cond := range got.Status.Conditions {
		if cond.Type == corev1.DisruptionTarget && cond.Status != corev1.ConditionFalse {
			t.Fatalf("stale mark kept: %+v", cond)
		}
	}
}
