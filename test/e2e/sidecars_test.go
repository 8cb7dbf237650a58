package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubectl/pkg/util/podutils"
)

// Sidecars (init containers with restartPolicy Always): one with a
// startupProbe starts before the app container, which waits for the
// probe; it is restarted when it exits, also in a restartPolicy Never
// pod; a Never pod whose app container finished is Succeeded while its
// sidecar ran, and the sidecar is stopped; on deletion the app container
// stops before the sidecar.
func TestSidecarContainers(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	out := t.TempDir()
	c.apply(t, `apiVersion: v1
kind: Pod
metadata: {name: sidecar-start}
spec:
  initContainers:
  - name: side
    image: busybox:1.35
    imagePullPolicy: IfNotPresent
    restartPolicy: Always
    command: ["sh", "-c", "sleep 3; touch /tmp/up; sleep 3600"]
    startupProbe: {exec: {command: ["cat", "/tmp/up"]}, periodSeconds: 1, failureThreshold: 30}
    readinessProbe: {exec: {command: ["cat", "/tmp/up"]}, periodSeconds: 1}
  containers:
  - name: app
    image: busybox:1.35
    imagePullPolicy: IfNotPresent
    command: ["sleep", "3600"]
---
apiVersion: v1
kind: Pod
metadata: {name: sidecar-crash}
spec:
  restartPolicy: Never
  initContainers:
  - name: side
    image: busybox:1.35
    imagePullPolicy: IfNotPresent
    restartPolicy: Always
    command: ["sh", "-c", "sleep 2; exit 3"]
  containers:
  - name: app
    image: busybox:1.35
    imagePullPolicy: IfNotPresent
    command: ["sleep", "3600"]
---
apiVersion: v1
kind: Pod
metadata: {name: sidecar-job}
spec:
  restartPolicy: Never
  initContainers:
  - name: side
    image: busybox:1.35
    imagePullPolicy: IfNotPresent
    restartPolicy: Always
    command: ["sleep", "3600"]
  containers:
  - name: app
    image: busybox:1.35
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "sleep 2"]
---
apiVersion: v1
kind: Pod
metadata: {name: sidecar-order}
spec:
  terminationGracePeriodSeconds: 20
  volumes: [{name: out, hostPath: {path: `+out+`}}]
  initContainers:
  - name: side
    image: busybox:1.35
    imagePullPolicy: IfNotPresent
    restartPolicy: Always
    volumeMounts: [{name: out, mountPath: /out}]
    command: ["sh", "-c", "trap 'if [ -e /out/app-stopped ]; then echo after > /out/side; else echo before > /out/side; fi; exit 0' TERM; while true; do sleep 1; done"]
  containers:
  - name: app
    image: busybox:1.35
    imagePullPolicy: IfNotPresent
    volumeMounts: [{name: out, mountPath: /out}]
    command: ["sh", "-c", "trap 'sleep 2; touch /out/app-stopped; exit 0' TERM; while true; do sleep 1; done"]
`)
	// The app container waits for the sidecar's startup probe (~3 s).
	c.waitFor(90*time.Second, "sidecar-start Ready", func() bool { return podutils.IsPodReady(c.pod("sidecar-start")) })
	p := c.pod("sidecar-start")
	side, app := containerStatus(p, "side"), containerStatus(p, "app")
	if side == nil || side.State.Running == nil || side.Started == nil || !*side.Started || !side.Ready || app == nil || app.State.Running == nil {
		t.Fatalf("sidecar-start: %+v", p.Status)
	}
	if !app.State.Running.StartedAt.After(side.State.Running.StartedAt.Add(2 * time.Second)) {
		t.Errorf("app started at %v, sidecar at %v: the app did not wait for the startup probe", app.State.Running.StartedAt, side.State.Running.StartedAt)
	}
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodInitialized && cond.Status != corev1.ConditionTrue {
			t.Errorf("Initialized %s", cond.Status)
		}
	}

	// A sidecar that exits is restarted, even under restartPolicy Never,
	// and the app keeps running.
	c.waitFor(60*time.Second, "sidecar-crash's sidecar restarted", func() bool {
		s := containerStatus(c.pod("sidecar-crash"), "side")
		return s != nil && s.RestartCount >= 1
	})
	p = c.pod("sidecar-crash")
	if p.Status.Phase != corev1.PodRunning || containerStatus(p, "app").RestartCount != 0 {
		t.Errorf("sidecar-crash: phase %s, app %+v", p.Status.Phase, containerStatus(p, "app"))
	}
	if lt := containerStatus(p, "side").LastTerminationState.Terminated; lt == nil || lt.ExitCode != 3 {
		t.Errorf("sidecar-crash's sidecar last state %+v, want exit 3", containerStatus(p, "side").LastTerminationState)
	}

	// The Job-like pod completes while its sidecar ran; the sidecar stops.
	c.waitFor(60*time.Second, "sidecar-job Succeeded", func() bool { return c.pod("sidecar-job").Status.Phase == corev1.PodSucceeded })
	c.waitFor(60*time.Second, "sidecar-job's sidecar stopped", func() bool {
		s := containerStatus(c.pod("sidecar-job"), "side")
		return s != nil && s.State.Terminated != nil
	})
	time.Sleep(3 * time.Second)
	if s := containerStatus(c.pod("sidecar-job"), "side"); s.State.Terminated == nil || c.pod("sidecar-job").Status.Phase != corev1.PodSucceeded {
		t.Errorf("sidecar-job after completion: %+v", c.pod("sidecar-job").Status)
	}

	// Termination order: the app container is stopped before the sidecar.
	c.waitFor(60*time.Second, "sidecar-order running", func() bool { return podutils.IsPodReady(c.pod("sidecar-order")) })
	if err := c.cs.CoreV1().Pods("default").Delete(ctx, "sidecar-order", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitFor(60*time.Second, "sidecar-order gone", func() bool {
		_, err := c.cs.CoreV1().Pods("default").Get(ctx, "sidecar-order", metav1.GetOptions{})
		return err != nil
	})
	got, err := os.ReadFile(filepath.Join(out, "side"))
	if err != nil || strings.TrimSpace(string(got)) != "after" {
		t.Errorf("the sidecar saw the app %q (%v), want after", got, err)
	}
}

// An ephemeral container added through pods/ephemeralcontainers (client-go's
// UpdateEphemeralContainers) starts in the running pod, shares its target
// container's PID namespace and the pod's network, reports
// ephemeralContainerStatuses, and takes kubectl exec.
func TestEphemeralContainers(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	c.apply(t, `apiVersion: v1
kind: Pod
metadata: {name: debuggee}
spec:
  containers:
  - name: app
    image: busybox:1.35
    imagePullPolicy: IfNotPresent
    command: ["sleep", "3601"]
`)
	c.waitFor(60*time.Second, "debuggee Ready", func() bool { return podutils.IsPodReady(c.pod("debuggee")) })
	p := c.pod("debuggee")
	p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, corev1.EphemeralContainer{
		EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debugger", Image: "busybox:1.35", ImagePullPolicy: corev1.PullIfNotPresent,
			Command: []string{"sleep", "3602"}, TerminationMessagePolicy: corev1.TerminationMessageReadFile},
		TargetContainerName: "app"})
	if _, err := c.cs.CoreV1().Pods("default").UpdateEphemeralContainers(ctx, "debuggee", p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitFor(60*time.Second, "debugger running", func() bool {
		st := c.pod("debuggee").Status.EphemeralContainerStatuses
		return len(st) == 1 && st[0].Name == "debugger" && st[0].State.Running != nil
	})
	ps := c.mustKubectl("exec", "debuggee", "-c", "debugger", "--", "ps")
	if !strings.Contains(ps, "sleep 3601") || !strings.Contains(ps, "sleep 3602") {
		t.Errorf("ps in the debugger (target app's PID namespace):\n%s", ps)
	}
	ip := strings.TrimSpace(c.mustKubectl("exec", "debuggee", "-c", "debugger", "--", "hostname", "-i"))
	if ip != c.pod("debuggee").Status.PodIP {
		t.Errorf("debugger's address %q, pod IP %q: not in the pod's network", ip, c.pod("debuggee").Status.PodIP)
	}
	if !podutils.IsPodReady(c.pod("debuggee")) {
		t.Error("the pod lost Ready with an ephemeral container")
	}
}
