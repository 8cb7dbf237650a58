package kubelet

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kelp-project/kelp/runtime"
)

func TestPlanInit(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "setup"}, {Name: "side", RestartPolicy: &always}, {Name: "after"}},
		Containers:     []corev1.Container{{Name: "app"}},
	}}
	running := func(id string) []runtime.ContainerStatus {
		return []runtime.ContainerStatus{{ID: id, State: runtime.StateRunning}}
	}
	exited := func(id string, code int32) []runtime.ContainerStatus {
		return []runtime.ContainerStatus{{ID: id, State: runtime.StateExited, ExitCode: code}}
	}
	names := func(p initPlan) []string {
		var out []string
		for _, c := range p.sync {
			out = append(out, c.Name)
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		inst    map[string][]runtime.ContainerStatus
		started map[string]bool
		sync    []string
		init    bool
	}{
		{"nothing ran: the first init container", map[string][]runtime.ContainerStatus{}, nil, []string{"setup"}, false},
		{"plain init running: wait for it", map[string][]runtime.ContainerStatus{"setup": running("s1")}, nil, []string{"setup"}, false},
		{"plain init failed: sync it again", map[string][]runtime.ContainerStatus{"setup": exited("s1", 1)}, nil, []string{"setup"}, false},
		{"plain done: start the sidecar", map[string][]runtime.ContainerStatus{"setup": exited("s1", 0)}, nil, []string{"side"}, false},
		{"sidecar running, startup probe pending: wait",
			map[string][]runtime.ContainerStatus{"setup": exited("s1", 0), "side": running("c1")}, nil, []string{"side"}, false},
		{"sidecar started: the next init container, sidecar kept",
			map[string][]runtime.ContainerStatus{"setup": exited("s1", 0), "side": running("c1")}, map[string]bool{"c1": true}, []string{"side", "after"}, false},
		{"all done: initialized, sidecar still synced",
			map[string][]runtime.ContainerStatus{"setup": exited("s1", 0), "side": running("c1"), "after": exited("a1", 0)},
			map[string]bool{"c1": true}, []string{"side"}, true},
		{"sidecar exited after the pod got past it: restarted, pod stays initialized",
			map[string][]runtime.ContainerStatus{"setup": exited("s1", 0), "side": exited("c1", 0), "after": exited("a1", 0), "app": running("p1")},
			nil, []string{"side"}, true},
		{"sidecar exited before it was passed: restarted, blocks",
			map[string][]runtime.ContainerStatus{"setup": exited("s1", 0), "side": exited("c1", 2)}, nil, []string{"side"}, false},
		{"plain init gone but the app ran (kelp restart): not rerun",
			map[string][]runtime.ContainerStatus{"side": running("c1"), "app": running("p1")}, map[string]bool{"c1": true}, []string{"side"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := planInit(pod, tc.inst, func(id string) bool { return tc.started[id] })
			if got := names(p); !slices.Equal(got, tc.sync) || p.initialized != tc.init {
				t.Errorf("sync %v initialized %v, want %v %v", got, p.initialized, tc.sync, tc.init)
			}
		})
	}
}

func TestShouldRestartSidecar(t *testing.T) {
	for _, p := range []corev1.RestartPolicy{corev1.RestartPolicyNever, corev1.RestartPolicyOnFailure, corev1.RestartPolicyAlways} {
		for _, code := range []int32{0, 1} {
			if !shouldRestart(p, code, false, true) {
				t.Errorf("sidecar exiting %d under %s not restarted", code, p)
			}
		}
	}
	if shouldRestart(corev1.RestartPolicyAlways, 0, true, false) {
		t.Error("a succeeded plain init container restarted")
	}
}

func sidecarPod(name string, policy corev1.RestartPolicy, sidecars ...string) *corev1.Pod {
	pod := testPod(name, "app")
	pod.Spec.RestartPolicy = policy
	always := corev1.ContainerRestartPolicyAlways
	for _, s := range sidecars {
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, corev1.Container{Name: s, Image: "img-" + s, RestartPolicy: &always})
	}
	return pod
}

// A sidecar starts before the app container, is restarted when it exits
// under restartPolicy Never, and is stopped once the app container has
// finished, the pod Succeeded.
func TestSidecarRunsBesideTheAppAndEndsWithIt(t *testing.T) {
	pod := sidecarPod("sc", corev1.RestartPolicyNever, "side")
	tk := newTestKubelet(t, pod)
	w := tk.worker(t, pod)

	tk.sync(t, w, pod)
	assertCalls(t, tk.rt.Took("create"), "create uid-sc-side-0")
	// Running without a startup probe: started, so the app container goes
	// at the next sync, which the worker is woken for.
	select {
	case <-w.kickCh:
	default:
		t.Fatal("the worker was not woken after its sidecar started")
	}
	tk.sync(t, w, pod)
	assertCalls(t, tk.rt.Took("create"), "create uid-sc-app-0")
	st := tk.apiPod(t, pod).Status
	if podCond(st, corev1.PodInitialized) != corev1.ConditionTrue || podCond(st, corev1.PodReady) != corev1.ConditionTrue || st.Phase != corev1.PodRunning {
		t.Fatalf("with the sidecar and app running: phase %s, conditions %+v", st.Phase, st.Conditions)
	}
	if cs := containerStatus(t, st.InitContainerStatuses, "side"); cs.Started == nil || !*cs.Started || !cs.Ready || cs.State.Running == nil {
		t.Fatalf("sidecar status %+v, want running, started, ready", cs)
	}

	// The sidecar exits: restarted although the pod's policy is Never.
	exitContainer(t, tk.rt, "uid-sc-side-0", 1)
	tk.sync(t, w, pod)
	assertCalls(t, tk.rt.Took("create"), "create uid-sc-side-1")
	if st := tk.apiPod(t, pod).Status; st.Phase != corev1.PodRunning || podCond(st, corev1.PodInitialized) != corev1.ConditionTrue {
		t.Fatalf("after the sidecar's restart: phase %s, conditions %+v", st.Phase, st.Conditions)
	}

	// The app container finishes: the sidecar is stopped, the pod Succeeded.
	exitContainer(t, tk.rt, "uid-sc-app-0", 0)
	tk.sync(t, w, pod)
	stops := tk.rt.Took("stop", "create")
	if len(stops) != 1 || !strings.HasPrefix(stops[0], "stop uid-sc-side-1 ") {
		t.Fatalf("runtime calls %q, want the sidecar stopped and nothing created", stops)
	}
	if st := tk.apiPod(t, pod).Status; st.Phase != corev1.PodSucceeded {
		t.Fatalf("phase %s after the app container succeeded, want Succeeded", st.Phase)
	}
	tk.sync(t, w, pod)
	assertCalls(t, tk.rt.Took("create"))
}

// On deletion the app container gets its stop signal first, then the
// sidecars in reverse order.
func TestSidecarsStopAfterTheAppInReverseOrder(t *testing.T) {
	pod := sidecarPod("order", corev1.RestartPolicyAlways, "s1", "s2")
	tk := newTestKubelet(t, pod)
	w := tk.worker(t, pod)
	for range 3 {
		tk.sync(t, w, pod)
	}
	assertCalls(t, tk.rt.Took("create"), "create uid-order-s1-0", "create uid-order-s2-0", "create uid-order-app-0")

	terminating := tk.apiPod(t, pod)
	terminating.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	if !w.sync(terminating, false) {
		t.Fatal("termination did not finish the pod")
	}
	var order []string
	for _, c := range tk.rt.Took("stop") {
		order = append(order, strings.Fields(c)[1])
	}
	if want := []string{"uid-order-app-0", "uid-order-s2-0", "uid-order-s1-0"}; !slices.Equal(order, want) {
		t.Fatalf("stop order %v, want %v", order, want)
	}
}

// An ephemeral container is started once in the running pod, joins its
// target's PID namespace, is reported in ephemeralContainerStatuses and
// is not restarted when it exits.
func TestEphemeralContainerStartsOnce(t *testing.T) {
	pod := testPod("eph", "app")
	tk := newTestKubelet(t, pod)
	w := tk.worker(t, pod)
	tk.sync(t, w, pod)
	tk.rt.Took()
	appID := containerID(pod, "app", 0)
	c := tk.rt.Containers()[appID]
	c.Pid = 4242
	tk.rt.Put(c)

	withEph := tk.apiPod(t, pod)
	withEph.Spec.EphemeralContainers = []corev1.EphemeralContainer{{
		EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debugger", Image: "img-debug"}, TargetContainerName: "app"}}
	if _, err := tk.client.CoreV1().Pods("default").Update(t.Context(), withEph, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	tk.sync(t, w, pod)
	assertCalls(t, tk.rt.Took("create"), "create uid-eph-debugger-0")
	spec, _ := tk.rt.Spec("uid-eph-debugger-0")
	if spec.PIDNSPath != "/proc/4242/ns/pid" || spec.NetNSPath == "" {
		t.Fatalf("debugger namespaces: pid %q net %q", spec.PIDNSPath, spec.NetNSPath)
	}
	st := tk.apiPod(t, pod).Status
	if len(st.EphemeralContainerStatuses) != 1 || st.EphemeralContainerStatuses[0].State.Running == nil {
		t.Fatalf("ephemeralContainerStatuses %+v", st.EphemeralContainerStatuses)
	}
	if podCond(st, corev1.PodReady) != corev1.ConditionTrue {
		t.Fatal("an ephemeral container took the pod out of Ready")
	}
	exitContainer(t, tk.rt, "uid-eph-debugger-0", 0)
	tk.sync(t, w, pod)
	assertCalls(t, tk.rt.Took("create"))
}
