package nodelifecycle

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// testConfig is upstream's defaults with a fast real-time monitor period;
// every grace period and rate runs on the fake clock.
func testConfig() Config {
	cfg := DefaultConfig()
	cfg.NodeMonitorPeriod = 5 * time.Millisecond
	return cfg
}

type env struct {
	cs     *fake.Clientset
	c      *Controller
	clk    *testingclock.FakeClock
	rec    *record.FakeRecorder
	events []string
}

// start runs the controller over objs; the first monitor pass has
// finished when it returns. Everything is stopped at test cleanup.
func start(t *testing.T, cfg Config, objs ...runtime.Object) *env {
	t.Helper()
	cs := fake.NewSimpleClientset(objs...)
	f := informers.NewSharedInformerFactory(cs, 0)
	rec := record.NewFakeRecorder(10000)
	c, err := New(cs, f, rec, cfg)
	if err != nil {
		t.Fatal(err)
	}
	clk := testingclock.NewFakeClock(t0)
	c.clock = clk
	ctx, cancel := context.WithCancel(context.Background())
	f.Start(ctx.Done())
	done := make(chan struct{})
	go func() { c.Run(ctx, 2); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
		f.Shutdown()
	})
	e := &env{cs: cs, c: c, clk: clk, rec: rec}
	e.waitPasses(t, 1)
	return e
}

func poll(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 5*time.Second, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// waitPasses waits until n more monitor passes have finished.
func (e *env) waitPasses(t *testing.T, n int64) {
	t.Helper()
	target := e.c.passes.Load() + n
	poll(t, fmt.Sprintf("%d monitor passes", n), func(context.Context) (bool, error) {
		return e.c.passes.Load() >= target, nil
	})
}

// renew renews the named nodes' leases at the fake clock's time and waits
// until the monitor has seen it.
func (e *env) renew(t *testing.T, nodes ...string) {
	t.Helper()
	ctx := context.Background()
	at := metav1.NewMicroTime(e.clk.Now())
	for _, n := range nodes {
		l, err := e.cs.CoordinationV1().Leases(leaseNamespace).Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		l.Spec.RenewTime = &at
		if _, err := e.cs.CoordinationV1().Leases(leaseNamespace).Update(ctx, l, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	poll(t, "renewed leases in cache", func(context.Context) (bool, error) {
		for _, n := range nodes {
			l, err := e.c.leases.Leases(leaseNamespace).Get(n)
			if err != nil || l.Spec.RenewTime == nil || !l.Spec.RenewTime.Equal(&at) {
				return false, nil
			}
		}
		return true, nil
	})
	e.waitPasses(t, 2)
}

// outlive moves the clock past the monitor grace period for every node
// except healthy, whose leases are renewed half way.
func (e *env) outlive(t *testing.T, healthy ...string) {
	t.Helper()
	e.clk.Step(30 * time.Second)
	if len(healthy) > 0 {
		e.renew(t, healthy...)
	}
	e.clk.Step(31 * time.Second)
}

func (e *env) node(t *testing.T, name string) *corev1.Node {
	t.Helper()
	n, err := e.cs.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (e *env) podExists(t *testing.T, name string) bool {
	t.Helper()
	_, err := e.cs.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

// sawEvent reports whether an event containing s was recorded.
func (e *env) sawEvent(s string) bool {
	for {
		select {
		case ev := <-e.rec.Events:
			e.events = append(e.events, ev)
			continue
		default:
		}
		break
	}
	for _, ev := range e.events {
		if strings.Contains(ev, s) {
			return true
		}
	}
	return false
}

func (e *env) noExecuteTainted(t *testing.T) []string {
	t.Helper()
	nodes, err := e.cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range nodes.Items {
		if hasTaint(&n, unreachableNoExecute) || hasTaint(&n, notReadyNoExecute) {
			out = append(out, n.Name)
		}
	}
	return out
}

func readyNode(name, zone string) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: metav1.NewTime(t0), LastTransitionTime: metav1.NewTime(t0),
		}}},
	}
	if zone != "" {
		n.Labels = map[string]string{corev1.LabelTopologyRegion: "region", corev1.LabelTopologyZone: zone}
	}
	return n
}

func lease(node string) *coordinationv1.Lease {
	at := metav1.NewMicroTime(t0)
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: leaseNamespace, Name: node},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &node, RenewTime: &at},
	}
}

func pod(name, node string, tolerations ...corev1.Toleration) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)},
		Spec:       corev1.PodSpec{NodeName: node, Tolerations: tolerations},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue},
		}},
	}
}

func tolerate(key string, seconds int64) corev1.Toleration {
	t := corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}
	if seconds >= 0 {
		t.TolerationSeconds = &seconds
	}
	return t
}

// defaultTolerations are what admission gives every pod.
func defaultTolerations() []corev1.Toleration {
	return []corev1.Toleration{tolerate(corev1.TaintNodeNotReady, 300), tolerate(corev1.TaintNodeUnreachable, 300)}
}

func TestDefaultConfig(t *testing.T) {
	want := Config{
		NodeMonitorPeriod: 5 * time.Second, NodeMonitorGracePeriod: 50 * time.Second, NodeStartupGracePeriod: 60 * time.Second,
		NodeEvictionRate: 0.1, SecondaryNodeEvictionRate: 0.01, LargeClusterSizeThreshold: 50, UnhealthyZoneThreshold: 0.55,
	}
	if got := DefaultConfig(); got != want {
		t.Errorf("DefaultConfig() = %+v, want %+v", got, want)
	}
	bad := DefaultConfig()
	bad.NodeMonitorPeriod = 0
	if _, err := New(fake.NewSimpleClientset(), informers.NewSharedInformerFactory(fake.NewSimpleClientset(), 0), record.NewFakeRecorder(1), bad); err == nil {
		t.Error("New accepted a zero monitor period")
	}
}

func TestZoneStateAndRates(t *testing.T) {
	c := &Controller{cfg: DefaultConfig()}
	T, F, U := corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown
	for _, tc := range []struct {
		ready []corev1.ConditionStatus
		want  zoneState
	}{
		{[]corev1.ConditionStatus{T, T, T}, stateNormal},
		{[]corev1.ConditionStatus{U}, stateFullDisruption},
		{[]corev1.ConditionStatus{U, F, U}, stateFullDisruption},
		{[]corev1.ConditionStatus{U, U, T}, stateNormal},                      // two not ready is never partial
		{[]corev1.ConditionStatus{U, U, F, T, T}, statePartialDisruption},     // 3/5 = 0.6
		{[]corev1.ConditionStatus{U, U, F, T, T, T}, stateNormal},             // 3/6 = 0.5
		{[]corev1.ConditionStatus{U, U, U, T, T, T, T, T, T, T}, stateNormal}, // 3/10
	} {
		if got := c.computeZoneState(tc.ready); got != tc.want {
			t.Errorf("computeZoneState(%v) = %s, want %s", tc.ready, got, tc.want)
		}
	}
	for _, tc := range []struct {
		s    zoneState
		size int
		want float64
	}{
		{stateNormal, 10, 0.1}, {stateFullDisruption, 10, 0.1},
		{statePartialDisruption, 50, 0}, {statePartialDisruption, 51, 0.01},
	} {
		if got := c.evictionRate(tc.s, tc.size); got != tc.want {
			t.Errorf("evictionRate(%s, %d) = %v, want %v", tc.s, tc.size, got, tc.want)
		}
	}
}

func TestDeadNodeMarkedUnknownAndTainted(t *testing.T) {
	e := start(t, testConfig(),
		readyNode("dead", ""), lease("dead"), readyNode("alive", ""), lease("alive"),
		pod("victim", "dead", defaultTolerations()...), pod("bystander", "alive"))
	ctx := context.Background()

	e.outlive(t, "alive")
	deadAt := e.clk.Now()
	poll(t, "dead node Unknown with unreachable taints", func(context.Context) (bool, error) {
		n := e.node(t, "dead")
		ready := nodeCondition(&n.Status, corev1.NodeReady)
		return ready.Status == corev1.ConditionUnknown &&
			hasTaint(n, unreachableNoExecute) &&
			hasTaint(n, corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule}), nil
	})
	n := e.node(t, "dead")
	ready := nodeCondition(&n.Status, corev1.NodeReady)
	if ready.Reason != "NodeStatusUnknown" || ready.Message != "Kubelet stopped posting node status." || !ready.LastTransitionTime.Time.Equal(deadAt) {
		t.Errorf("Ready condition = %+v", ready)
	}
	if !ready.LastHeartbeatTime.Time.Equal(t0) {
		t.Errorf("heartbeat time rewritten: %v", ready.LastHeartbeatTime)
	}
	for _, ct := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
		if c := nodeCondition(&n.Status, ct); c == nil || c.Status != corev1.ConditionUnknown {
			t.Errorf("condition %s = %+v, want Unknown", ct, c)
		}
	}
	for _, taint := range n.Spec.Taints {
		if taint.Effect == corev1.TaintEffectNoExecute && (taint.TimeAdded == nil || !taint.TimeAdded.Time.Equal(deadAt)) {
			t.Errorf("NoExecute taint timeAdded = %v, want %v", taint.TimeAdded, deadAt)
		}
	}
	poll(t, "pod on dead node not ready", func(ctx context.Context) (bool, error) {
		p, err := e.cs.CoreV1().Pods("default").Get(ctx, "victim", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return p.Status.Conditions[0].Status == corev1.ConditionFalse, nil
	})
	poll(t, "NodeNotReady event", func(context.Context) (bool, error) {
		return e.sawEvent("Node dead status is now: NodeNotReady"), nil
	})
	e.waitPasses(t, 3)
	alive := e.node(t, "alive")
	if len(alive.Spec.Taints) != 0 || nodeCondition(&alive.Status, corev1.NodeReady).Status != corev1.ConditionTrue {
		t.Errorf("healthy node touched: %+v", alive)
	}
	if p, _ := e.cs.CoreV1().Pods("default").Get(ctx, "bystander", metav1.GetOptions{}); p.Status.Conditions[0].Status != corev1.ConditionTrue {
		t.Error("pod on healthy node marked not ready")
	}
	if !e.podExists(t, "victim") {
		t.Fatal("pod tolerating unreachable for 300s deleted at once")
	}
	poll(t, "eviction of tolerating pod scheduled", func(context.Context) (bool, error) {
		e.c.evictMu.Lock()
		defer e.c.evictMu.Unlock()
		s, ok := e.c.evictions["default/victim"]
		return ok && s.at.Equal(deadAt.Add(300*time.Second)), nil
	})

	// The kubelet comes back: it renews its lease and posts Ready.
	e.renew(t, "dead", "alive")
	n = e.node(t, "dead")
	for i := range n.Status.Conditions {
		n.Status.Conditions[i].Status = corev1.ConditionTrue
		n.Status.Conditions[i].LastHeartbeatTime = metav1.NewTime(e.clk.Now())
		n.Status.Conditions[i].LastTransitionTime = metav1.NewTime(e.clk.Now())
	}
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type != corev1.NodeReady {
			n.Status.Conditions[i].Status = corev1.ConditionFalse
		}
	}
	if _, err := e.cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "taints removed from recovered node", func(context.Context) (bool, error) {
		n := e.node(t, "dead")
		return len(n.Spec.Taints) == 0, nil
	})
	poll(t, "scheduled eviction cancelled", func(context.Context) (bool, error) {
		e.c.evictMu.Lock()
		defer e.c.evictMu.Unlock()
		return len(e.c.evictions) == 0 && !e.clk.HasWaiters(), nil
	})
	if !e.podExists(t, "victim") {
		t.Error("pod evicted although its node recovered")
	}
}

func TestTaintEviction(t *testing.T) {
	cfg := testConfig()
	cfg.NodeMonitorGracePeriod = time.Hour // keep the nodes healthy while the clock moves
	tainted := readyNode("tainted", "")
	added := metav1.NewTime(t0)
	tainted.Spec.Taints = []corev1.Taint{{Key: "example.com/maintenance", Effect: corev1.TaintEffectNoExecute, TimeAdded: &added}}
	rescued := readyNode("rescued", "")
	rescued.Spec.Taints = []corev1.Taint{{Key: "example.com/maintenance", Effect: corev1.TaintEffectNoExecute, TimeAdded: &added}}
	terminating := pod("terminating", "tainted")
	now := metav1.NewTime(t0)
	terminating.DeletionTimestamp = &now
	terminating.Finalizers = []string{"example.com/hold"}
	e := start(t, cfg,
		tainted, lease("tainted"), rescued, lease("rescued"), readyNode("clean", ""), lease("clean"),
		pod("intolerant", "tainted"),
		pod("wrong-key", "tainted", tolerate("example.com/other", -1)),
		pod("forever", "tainted", tolerate("example.com/maintenance", -1)),
		pod("timed", "tainted", tolerate("example.com/maintenance", 20)),
		pod("timed-rescued", "rescued", tolerate("example.com/maintenance", 20)),
		terminating,
		pod("elsewhere", "clean"),
	)
	ctx := context.Background()

	poll(t, "untolerating pods deleted", func(context.Context) (bool, error) {
		return !e.podExists(t, "intolerant") && !e.podExists(t, "wrong-key"), nil
	})
	poll(t, "TaintManagerEviction event", func(context.Context) (bool, error) {
		return e.sawEvent("TaintManagerEviction Marking for deletion Pod default/intolerant"), nil
	})
	for _, a := range e.cs.Actions() {
		if d, ok := a.(clienttesting.DeleteActionImpl); ok && a.GetResource().Resource == "pods" {
			if d.DeleteOptions.GracePeriodSeconds != nil {
				t.Errorf("pod %s deleted with grace period %d; eviction must be graceful", d.Name, *d.DeleteOptions.GracePeriodSeconds)
			}
			if d.Name != "intolerant" && d.Name != "wrong-key" {
				t.Errorf("pod %s deleted", d.Name)
			}
		}
		if u, ok := a.(clienttesting.UpdateActionImpl); ok && a.GetSubresource() == "status" && a.GetResource().Resource == "pods" {
			p := u.Object.(*corev1.Pod)
			if p.Name == "intolerant" && setPodCondition(p.DeepCopy(), corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}) {
				t.Error("evicted pod status update lacks DisruptionTarget")
			}
		}
	}

	// The taint leaves "rescued" before its pod's time is up.
	r := e.node(t, "rescued")
	r.Spec.Taints = nil
	if _, err := e.cs.CoreV1().Nodes().Update(ctx, r, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "rescued eviction cancelled", func(context.Context) (bool, error) {
		e.c.evictMu.Lock()
		defer e.c.evictMu.Unlock()
		_, ok := e.c.evictions["default/timed-rescued"]
		return !ok, nil
	})

	e.clk.Step(19 * time.Second)
	e.waitPasses(t, 3)
	time.Sleep(50 * time.Millisecond)
	for _, name := range []string{"timed", "timed-rescued", "forever", "terminating", "elsewhere"} {
		if !e.podExists(t, name) {
			t.Errorf("pod %s deleted before its time", name)
		}
	}
	e.clk.Step(time.Second)
	poll(t, "pod tolerating 20s deleted after 20s", func(context.Context) (bool, error) {
		return !e.podExists(t, "timed"), nil
	})
	e.clk.Step(time.Hour / 2)
	e.waitPasses(t, 3)
	time.Sleep(50 * time.Millisecond)
	for _, name := range []string{"timed-rescued", "forever", "terminating", "elsewhere"} {
		if !e.podExists(t, name) {
			t.Errorf("pod %s deleted", name)
		}
	}
}

func TestAllZonesDownStopsEviction(t *testing.T) {
	// "a" lost its kubelet earlier and already carries the taint.
	a := readyNode("a", "")
	a.Status.Conditions[0].Status = corev1.ConditionUnknown
	added := metav1.NewTime(t0)
	a.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute, TimeAdded: &added}}
	e := start(t, testConfig(), a, lease("a"), readyNode("b", ""), lease("b"), readyNode("c", ""), lease("c"),
		pod("p", "a", defaultTolerations()...))

	if got := e.noExecuteTainted(t); len(got) != 1 || got[0] != "a" {
		t.Fatalf("NoExecute-tainted nodes before the outage = %v, want [a]", got)
	}
	e.outlive(t)
	poll(t, "every node Unknown with unreachable:NoSchedule", func(context.Context) (bool, error) {
		for _, name := range []string{"a", "b", "c"} {
			n := e.node(t, name)
			if nodeCondition(&n.Status, corev1.NodeReady).Status != corev1.ConditionUnknown ||
				!hasTaint(n, corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule}) {
				return false, nil
			}
		}
		return true, nil
	})
	poll(t, "NoExecute taints removed", func(context.Context) (bool, error) {
		return len(e.noExecuteTainted(t)) == 0, nil
	})
	e.clk.Step(10 * time.Minute)
	e.waitPasses(t, 5)
	if got := e.noExecuteTainted(t); len(got) != 0 {
		t.Errorf("NoExecute taints during full disruption: %v", got)
	}
	time.Sleep(50 * time.Millisecond)
	if !e.podExists(t, "p") {
		t.Error("pod evicted during full disruption")
	}

	// One node comes back: tainting resumes for the others.
	e.renew(t, "b")
	b := e.node(t, "b")
	nodeCondition(&b.Status, corev1.NodeReady).Status = corev1.ConditionTrue
	nodeCondition(&b.Status, corev1.NodeReady).LastHeartbeatTime = metav1.NewTime(e.clk.Now())
	if _, err := e.cs.CoreV1().Nodes().UpdateStatus(context.Background(), b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "tainting resumed", func(context.Context) (bool, error) {
		return len(e.noExecuteTainted(t)) > 0, nil
	})
	for _, n := range e.noExecuteTainted(t) {
		if n == "b" {
			t.Error("recovered node tainted")
		}
	}
}

func zoneCluster(size int, zone string) []runtime.Object {
	var objs []runtime.Object
	for i := range size {
		name := fmt.Sprintf("%s-%02d", zone, i)
		objs = append(objs, readyNode(name, zone), lease(name))
	}
	return objs
}

func names(zone string, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("%s-%02d", zone, i))
	}
	return out
}

func TestTaintingIsRateLimitedPerZone(t *testing.T) {
	cfg := testConfig()
	cfg.NodeEvictionRate = 1 // one node per second, so the clock moves in small steps
	e := start(t, cfg, zoneCluster(10, "z1")...)
	e.outlive(t, names("z1", 3, 10)...) // z1-00..02 die: 3 of 10, a Normal zone
	poll(t, "first dead node tainted", func(context.Context) (bool, error) {
		return len(e.noExecuteTainted(t)) == 1, nil
	})
	for want := 2; want <= 3; want++ {
		e.waitPasses(t, 5)
		if got := e.noExecuteTainted(t); len(got) != want-1 {
			t.Fatalf("tainted before the next token: %v, want %d", got, want-1)
		}
		e.clk.Step(time.Second)
		poll(t, fmt.Sprintf("%d dead nodes tainted", want), func(context.Context) (bool, error) {
			return len(e.noExecuteTainted(t)) == want, nil
		})
	}
	e.clk.Step(5 * time.Second)
	e.waitPasses(t, 5)
	got := e.noExecuteTainted(t)
	if strings.Join(got, ",") != "z1-00,z1-01,z1-02" {
		t.Errorf("tainted nodes = %v, want the three dead ones", got)
	}
}

func TestPartialDisruption(t *testing.T) {
	for _, tc := range []struct {
		name      string
		threshold int
		want      int
	}{
		{"small zone stops tainting", 50, 0},
		{"large zone uses secondary rate", 5, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.LargeClusterSizeThreshold = tc.threshold
			objs := append(zoneCluster(10, "z1"), zoneCluster(2, "z2")...)
			e := start(t, cfg, objs...)
			// 6 of 10 die in z1 (0.6 >= 0.55): partial disruption.
			e.outlive(t, append(names("z1", 6, 10), names("z2", 0, 2)...)...)
			poll(t, "dead nodes unreachable:NoSchedule", func(context.Context) (bool, error) {
				for _, name := range names("z1", 0, 6) {
					if !hasTaint(e.node(t, name), corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule}) {
						return false, nil
					}
				}
				return true, nil
			})
			e.waitPasses(t, 5)
			e.clk.Step(10 * time.Second) // 0.01/s refills nothing in 10s
			e.waitPasses(t, 5)
			if got := e.noExecuteTainted(t); len(got) != tc.want {
				t.Errorf("NoExecute-tainted nodes = %v, want %d", got, tc.want)
			}
		})
	}
}
