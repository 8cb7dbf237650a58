package kubelet

import (
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

func TestEndpointFindsLatestAndPreviousInstances(t *testing.T) {
	pod := testPod("logs", "c")
	tk := newTestKubelet(t, pod)
	w := tk.worker(t, pod)
	pods := endpointPods{tk.Kubelet}

	if _, err := pods.Container(t.Context(), "default", "logs", "c", false); err == nil || !strings.Contains(err.Error(), "waiting to start") {
		t.Fatalf("before the first start: %v, want waiting to start", err)
	}
	tk.sync(t, w, pod)
	exitContainer(t, tk.rt, "uid-logs-c-0", 1)
	tk.sync(t, w, pod)

	cur, err := pods.Container(t.Context(), "default", "logs", "c", false)
	if err != nil || cur.ID != "uid-logs-c-1" {
		t.Fatalf("latest = %+v, %v; want attempt 1", cur, err)
	}
	if want := filepath.Join(tk.cfg.LogRoot, "default_logs_uid-logs", "c", "1.log"); cur.LogPath != want {
		t.Fatalf("log path %s, want %s", cur.LogPath, want)
	}
	prev, err := pods.Container(t.Context(), "default", "logs", "c", true)
	if err != nil || prev.ID != "uid-logs-c-0" || filepath.Base(prev.LogPath) != "0.log" {
		t.Fatalf("previous = %+v, %v; want attempt 0", prev, err)
	}
	if _, err := pods.Container(t.Context(), "default", "nope", "c", false); err == nil || !strings.Contains(err.Error(), `pod "nope" not found`) {
		t.Fatalf("unknown pod: %v", err)
	}
}

func TestEndpointSandbox(t *testing.T) {
	pod, host := testPod("net", "c"), testPod("host", "c")
	host.Spec.HostNetwork = true
	tk := newTestKubelet(t, pod, host)
	pods := endpointPods{tk.Kubelet}

	if _, err := pods.Sandbox("default", "missing"); !apierrors.IsNotFound(err) {
		t.Fatalf("missing pod: %v, want NotFound", err)
	}
	w := tk.worker(t, pod)
	if _, err := pods.Sandbox("default", "net"); err == nil || apierrors.IsNotFound(err) {
		t.Fatalf("pod without its sandbox yet: %v, want an error other than NotFound", err)
	}
	tk.sync(t, w, pod)
	if ns, err := pods.Sandbox("default", "net"); err != nil || ns != "/run/test/netns/uid-net" {
		t.Fatalf("sandbox %q, %v", ns, err)
	}
	hw := tk.worker(t, host)
	tk.sync(t, hw, host)
	if ns, err := pods.Sandbox("default", "host"); err != nil || ns != "" {
		t.Fatalf("hostNetwork sandbox %q, %v; want the host's (\"\")", ns, err)
	}
}
