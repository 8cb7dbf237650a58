package e2e

import (
	"context"
	"k8s.io/kubectl/pkg/util/podutils"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func (c *cluster) apply(t *testing.T, manifest string) {
	t.Helper()
	if out, err := c.kubectlIn(manifest, "apply", "-f", "-"); err != nil {
		t.Fatalf("apply: %v\n%s\n%s", err, out, manifest)
	}
}

func containerStatus(p *corev1.Pod, name string) *corev1.ContainerStatus {
	for i := range p.Status.ContainerStatuses {
		if p.Status.ContainerStatuses[i].Name == name {
			return &p.Status.ContainerStatuses[i]
		}
	}
	for i := range p.Status.InitContainerStatuses {
		if p.Status.InitContainerStatuses[i].Name == name {
			return &p.Status.InitContainerStatuses[i]
		}
	}
	return nil
}

// Containers restart as their policy says: a killed process comes back
// with restartCount 1 and the same pod IP; a crashing container goes into
// CrashLoopBackOff with growing delays; a memory hog over its 32Mi limit
// is OOMKilled with 137; a failing liveness probe restarts the container;
// a failing readiness probe only takes the pod out of Ready.
func TestContainerRestarts(t *testing.T) {
	c := startCluster(t, "--container-restart-max-backoff=40s")
	ctx := context.Background()
	c.apply(t, `apiVersion: v1
kind: Pod
metadata: {name: web, labels: {app: web}}
spec:
  containers:
  - name: app
    image: kelp/demo:v1
    imagePullPolicy: IfNotPresent
    readinessProbe: {httpGet: {path: /healthz, port: 8000}, periodSeconds: 1, failureThreshold: 1}
    livenessProbe: {httpGet: {path: /healthz, port: 8000}, periodSeconds: 1, failureThreshold: 30}
---
apiVersion: v1
kind: Pod
metadata: {name: hog}
spec:
  restartPolicy: Never
  containers:
  - name: app
    image: busybox:1.35
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "dd if=/dev/zero of=/dev/null bs=100M count=1"]
    resources: {limits: {memory: 32Mi}}
---
apiVersion: v1
kind: Pod
metadata: {name: unlive}
spec:
  containers:
  - name: app
    image: busybox:1.35
    imagePullPolicy: IfNotPresent
    command: ["sleep", "3600"]
    livenessProbe: {exec: {command: ["cat", "/tmp/healthy"]}, periodSeconds: 1, failureThreshold: 2}
`)
	c.waitFor(60*time.Second, "web Ready", func() bool { return podutils.IsPodReady(c.pod("web")) })
	ip := c.pod("web").Status.PodIP
	// When PID 1 of the container exits, the kernel kills everything else
	// in its PID namespace, the exec'd kill among them, so exit code 137
	// (SIGKILL) is as good an answer as 0: whichever came first.
	if out, err := c.kubectl("exec", "web", "--", "kill", "1"); err != nil && !strings.Contains(out, "exit code 137") {
		t.Fatalf("kubectl exec web -- kill 1: %v\n%s", err, out)
	}
	c.waitFor(30*time.Second, "web restarted", func() bool {
		p := c.pod("web")
		cs := containerStatus(p, "app")
		return cs != nil && cs.RestartCount == 1 && cs.State.Running != nil && podutils.IsPodReady(p)
	})
	if p := c.pod("web"); p.Status.PodIP != ip {
		t.Errorf("pod IP changed across a container restart: %s → %s", ip, p.Status.PodIP)
	}
	if cs := containerStatus(c.pod("web"), "app"); cs.LastTerminationState.Terminated == nil {
		t.Errorf("lastState after a restart: %+v", cs.LastTerminationState)
	}

	// Readiness: the demo app's switch makes /healthz fail; no restart.
	c.mustKubectl("exec", "web", "--", "wget", "-qO-", "--post-data=", "http://127.0.0.1:8000/fail-ready")
	c.waitFor(20*time.Second, "web NotReady", func() bool { return !podutils.IsPodReady(c.pod("web")) })
	if cs := containerStatus(c.pod("web"), "app"); cs.RestartCount != 1 || cs.Ready {
		t.Errorf("a failing readiness probe must not restart: %+v", cs)
	}
	c.mustKubectl("exec", "web", "--", "wget", "-qO-", "--post-data=", "http://127.0.0.1:8000/ready")
	c.waitFor(20*time.Second, "web Ready again", func() bool { return podutils.IsPodReady(c.pod("web")) })

	// OOM.
	c.waitFor(60*time.Second, "hog OOMKilled", func() bool {
		cs := containerStatus(c.pod("hog"), "app")
		return cs != nil && cs.State.Terminated != nil
	})
	hog := c.pod("hog")
	if term := containerStatus(hog, "app").State.Terminated; term.Reason != "OOMKilled" || term.ExitCode != 137 || hog.Status.Phase != corev1.PodFailed {
		t.Errorf("memory hog: %+v, phase %s", term, hog.Status.Phase)
	}

	// Liveness: /tmp/healthy never exists, so the probe restarts it.
	c.waitFor(60*time.Second, "unlive restarted by its liveness probe", func() bool {
		cs := containerStatus(c.pod("unlive"), "app")
		return cs != nil && cs.RestartCount >= 1
	})
	evs, _ := c.cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=unlive,reason=Unhealthy"})
	if len(evs.Items) == 0 || !strings.Contains(evs.Items[0].Message, "Liveness probe failed") {
		t.Errorf("no Unhealthy event for the liveness probe: %+v", evs.Items)
	}

	// CrashLoopBackOff: the restarts come slower and slower (the first
	// is immediate, then 10 s, then 20 s, as upstream).
	c.apply(t, `apiVersion: v1
kind: Pod
metadata: {name: crasher}
spec:
  containers:
  - name: app
    image: kelp/demo:v1
    imagePullPolicy: IfNotPresent
    env: [{name: EXIT_AFTER, value: 200ms}]
`)
	var restarts []time.Time
	last := int32(-1)
	sawBackOff := false
	c.waitFor(120*time.Second, "3 restarts of the crashing container", func() bool {
		cs := containerStatus(c.pod("crasher"), "app")
		if cs == nil {
			return false
		}
		if cs.State.Waiting != nil && cs.State.Waiting.Reason == "CrashLoopBackOff" {
			sawBackOff = true
		}
		if cs.RestartCount != last {
			last = cs.RestartCount
			restarts = append(restarts, time.Now())
		}
		return cs.RestartCount >= 3
	})
	if !sawBackOff {
		t.Error("the crashing container never showed CrashLoopBackOff")
	}
	out := c.mustKubectl("get", "pod", "crasher")
	if !strings.Contains(out, "CrashLoopBackOff") && !strings.Contains(out, "Error") && !strings.Contains(out, "Running") {
		t.Errorf("kubectl get pod crasher:\n%s", out)
	}
	gaps := []string{}
	for i := 1; i < len(restarts); i++ {
		gaps = append(gaps, restarts[i].Sub(restarts[i-1]).Round(time.Second).String())
	}
	n := len(restarts)
	if n < 4 || restarts[n-1].Sub(restarts[n-2]) < 15*time.Second || restarts[n-2].Sub(restarts[n-3]) < 8*time.Second {
		t.Errorf("restart delays do not grow: %v", gaps)
	}
	t.Logf("crash loop restart gaps: %v", gaps)
	if out := c.mustKubectl("logs", "--previous", "crasher"); !strings.Contains(out, "demo v1") {
		t.Errorf("logs --previous: %q", out)
	}
}

// A terminated container's message is what it wrote to its termination
// log, or under FallbackToLogsOnError, when it failed without writing one,
// the tail of its log (as upstream's kubelet; conformance checks both). A
// pod named longer than a host name may be runs with its name cut to 63
// characters as its host name.
func TestTerminationMessagesAndLongNames(t *testing.T) {
	c := startCluster(t)
	long := strings.Repeat("a", 62) + "-long-pod-name"
	c.apply(t, `apiVersion: v1
kind: Pod
metadata: {name: file}
spec:
  restartPolicy: Never
  containers:
  - name: app
    image: busybox:1.35
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "echo -n from the file > /dev/termination-log; echo noise"]
    terminationMessagePolicy: FallbackToLogsOnError
---
apiVersion: v1
kind: Pod
metadata: {name: fallback}
spec:
  restartPolicy: Never
  containers:
  - name: app
    image: busybox:1.35
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "echo first; echo last words; exit 3"]
    terminationMessagePolicy: FallbackToLogsOnError
---
apiVersion: v1
kind: Pod
metadata: {name: succeeded}
spec:
  restartPolicy: Never
  containers:
  - name: app
    image: busybox:1.35
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "echo fine"]
    terminationMessagePolicy: FallbackToLogsOnError
---
apiVersion: v1
kind: Pod
metadata: {name: `+long+`}
spec:
  restartPolicy: Never
  containers:
  - name: app
    image: busybox:1.35
    imagePullPolicy: IfNotPresent
    command: ["hostname"]
`)
	want := map[string]string{"file": "from the file", "fallback": "first\nlast words\n", "succeeded": ""}
	for _, name := range []string{"file", "fallback", "succeeded", long} {
		var term *corev1.ContainerStateTerminated
		c.waitFor(90*time.Second, name+" terminated", func() bool {
			if cs := containerStatus(c.pod(name), "app"); cs != nil {
				term = cs.State.Terminated
			}
			return term != nil
		})
		if msg, ok := want[name]; ok && term.Message != msg {
			t.Errorf("%s: termination message %q, want %q", name, term.Message, msg)
		}
	}
	if got := strings.TrimSpace(c.mustKubectl("logs", long)); got != strings.Repeat("a", 62) {
		t.Errorf("host name of %s: %q, want its first 63 characters less the trailing '-'", long, got)
	}
	if p := c.pod(long); p.Status.Phase != corev1.PodSucceeded {
		t.Errorf("%s: phase %s, want Succeeded", long, p.Status.Phase)
	}
}

// A pod active longer than its activeDeadlineSeconds is stopped and
// Failed with reason DeadlineExceeded, whether the deadline was there
// from the start or set on the running pod (conformance checks the
// latter); the pod object stays.
func TestActiveDeadlineSeconds(t *testing.T) {
	c := startCluster(t)
	c.apply(t, `apiVersion: v1
kind: Pod
metadata: {name: bounded}
spec:
  activeDeadlineSeconds: 3
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: busybox:1.35
    imagePullPolicy: IfNotPresent
    command: ["sleep", "3600"]
---
apiVersion: v1
kind: Pod
metadata: {name: updated}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: busybox:1.35
    imagePullPolicy: IfNotPresent
    command: ["sleep", "3600"]
`)
	c.waitFor(60*time.Second, "updated Running", func() bool { return c.pod("updated").Status.Phase == corev1.PodRunning })
	c.mustKubectl("patch", "pod", "updated", "-p", `{"spec":{"activeDeadlineSeconds":2}}`)
	for _, name := range []string{"bounded", "updated"} {
		c.waitFor(30*time.Second, name+" Failed", func() bool { return c.pod(name).Status.Phase == corev1.PodFailed })
		p := c.pod(name)
		if p.Status.Reason != "DeadlineExceeded" || !strings.Contains(p.Status.Message, "deadline") {
			t.Errorf("%s: reason %q message %q, want DeadlineExceeded", name, p.Status.Reason, p.Status.Message)
		}
		c.waitFor(30*time.Second, name+"'s container stopped", func() bool {
			cs := containerStatus(c.pod(name), "app")
			return cs != nil && cs.State.Terminated != nil
		})
	}
}
