package kubelet

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

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
