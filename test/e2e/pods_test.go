package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientws "k8s.io/client-go/transport/websocket"
	"k8s.io/kubectl/pkg/util/podutils"
)

// Deleting a pod runs its preStop hook, then SIGTERM reaches the app,
// which shuts down gracefully within the grace period; the pod goes and
// its Deployment starts a replacement. Init containers run in order,
// and configMap, secret, emptyDir and downwardAPI content is visible.
func TestDeletionInitAndVolumes(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	c.apply(t, `apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {greeting: hello-from-configmap}
---
apiVersion: v1
kind: Secret
metadata: {name: creds}
stringData: {password: s3cret}
---
apiVersion: v1
kind: Pod
metadata: {name: vols, labels: {tier: demo}}
spec:
  initContainers:
  - {name: first, image: busybox:1.35, imagePullPolicy: IfNotPresent, command: ["sh", "-c", "echo first >> /work/order"], volumeMounts: [{name: work, mountPath: /work}]}
  - {name: second, image: busybox:1.35, imagePullPolicy: IfNotPresent, command: ["sh", "-c", "echo second >> /work/order"], volumeMounts: [{name: work, mountPath: /work}]}
  containers:
  - name: app
    image: busybox:1.35
    imagePullPolicy: IfNotPresent
    command: ["sleep", "3600"]
    env:
    - {name: MY_POD, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
    - {name: GREETING, valueFrom: {configMapKeyRef: {name: settings, key: greeting}}}
    volumeMounts:
    - {name: work, mountPath: /work}
    - {name: cfg, mountPath: /etc/cfg}
    - {name: sec, mountPath: /etc/sec}
    - {name: info, mountPath: /etc/info}
  volumes:
  - {name: work, emptyDir: {}}
  - {name: cfg, configMap: {name: settings}}
  - {name: sec, secret: {secretName: creds}}
  - {name: info, downwardAPI: {items: [{path: labels, fieldRef: {fieldPath: metadata.labels}}]}}
`)
	c.waitFor(60*time.Second, "vols Running", func() bool { return c.pod("vols").Status.Phase == corev1.PodRunning })
	for cmd, want := range map[string]string{
		"cat /work/order":        "first\nsecond\n",
		"cat /etc/cfg/greeting":  "hello-from-configmap",
		"cat /etc/sec/password":  "s3cret",
		"cat /etc/info/labels":   `tier="demo"`,
		"echo $MY_POD $GREETING": "vols hello-from-configmap\n",
	} {
		if out := c.mustKubectl("exec", "vols", "-c", "app", "--", "sh", "-c", cmd); out != want {
			t.Errorf("%s: got %q, want %q", cmd, out, want)
		}
	}
	// The Secret is in memory on the node, as upstream's kubelet keeps it.
	if out := c.mustKubectl("exec", "vols", "-c", "app", "--", "sh", "-c", "grep ' /etc/sec ' /proc/mounts"); !strings.HasPrefix(out, "tmpfs ") {
		t.Errorf("the secret volume inside the pod is no tmpfs mount: %q", out)
	}
	for _, name := range []string{"first", "second"} {
		cs := containerStatus(c.pod("vols"), name)
		if cs == nil || cs.State.Terminated == nil || cs.State.Terminated.Reason != "Completed" {
			t.Errorf("init container %s: %+v", name, cs)
		}
	}

	c.apply(t, seedDeployment)
	if out, err := c.kubectl("rollout", "status", "deployment/container-lab", "--timeout=90s"); err != nil {
		t.Fatalf("rollout: %v\n%s", err, out)
	}
	victim := c.livePods("app=container-lab")[0]
	logDir := filepath.Join(c.dataDir, "pod-logs", "default_"+victim.Name+"_"+string(victim.UID), "app")
	start := time.Now()
	out := c.mustKubectl("delete", "pod", victim.Name)
	took := time.Since(start)
	if !strings.Contains(out, "deleted") {
		t.Fatalf("delete: %s", out)
	}
	// preStop sleeps 5 s; then SIGTERM and the app exits at once.
	if took < 5*time.Second || took > 25*time.Second {
		t.Errorf("deletion took %v, want preStop (5 s) plus a graceful exit", took)
	}
	b, _ := os.ReadFile(filepath.Join(logDir, "0.log"))
	if !strings.Contains(string(b), "received SIGTERM, shutting down") {
		t.Errorf("the app did not log its SIGTERM:\n%s", b)
	}
	if _, err := c.cs.CoreV1().Pods("default").Get(ctx, victim.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("pod still there after kubectl delete returned: %v", err)
	}
	if out, err := c.kubectl("rollout", "status", "deployment/container-lab", "--timeout=60s"); err != nil {
		t.Fatalf("replacement: %v\n%s", err, out)
	}
	evs, _ := c.cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + victim.Name + ",reason=Killing"})
	if len(evs.Items) == 0 {
		t.Error("no Killing event for the deleted pod")
	}
}

// Errors are reported, never hangs: an image nobody has shows
// ErrImagePull then ImagePullBackOff; a missing ConfigMap volume gives a
// FailedMount event and the pod waits.
func TestErrors(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	c.apply(t, `apiVersion: v1
kind: Pod
metadata: {name: noimage}
spec:
  containers: [{name: app, image: "kelp/does-not-exist:1"}]
---
apiVersion: v1
kind: Pod
metadata: {name: novolume}
spec:
  containers: [{name: app, image: busybox:1.35, imagePullPolicy: IfNotPresent, command: ["sleep", "3600"], volumeMounts: [{name: cfg, mountPath: /cfg}]}]
  volumes: [{name: cfg, configMap: {name: missing}}]
`)
	seen := map[string]bool{}
	c.waitFor(60*time.Second, "ErrImagePull and ImagePullBackOff", func() bool {
		if cs := containerStatus(c.pod("noimage"), "app"); cs != nil && cs.State.Waiting != nil {
			seen[cs.State.Waiting.Reason] = true
		}
		return seen["ErrImagePull"] && seen["ImagePullBackOff"]
	})
	out := c.mustKubectl("get", "pod", "noimage")
	if !strings.Contains(out, "ImagePullBackOff") && !strings.Contains(out, "ErrImagePull") {
		t.Errorf("kubectl get pod noimage:\n%s", out)
	}
	c.waitFor(30*time.Second, "a FailedMount event", func() bool {
		evs, err := c.cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=novolume,reason=FailedMount"})
		return err == nil && len(evs.Items) > 0 && strings.Contains(evs.Items[0].Message, `configmap "missing" not found`)
	})
	if p := c.pod("novolume"); p.Status.Phase != corev1.PodPending {
		t.Errorf("novolume phase %s", p.Status.Phase)
	}
	// The node keeps working: the ConfigMap appears, the pod starts.
	c.mustKubectl("create", "configmap", "missing", "--from-literal=k=v")
	c.waitFor(60*time.Second, "novolume Running once its ConfigMap exists", func() bool { return c.pod("novolume").Status.Phase == corev1.PodRunning })
}

// Restarting kelp adopts the running containers: the seed app keeps
// answering while kelp is down, and afterwards the same containers (same
// IDs, no restarts) are reported.
func TestAgentRestart(t *testing.T) {
	c := startCluster(t)
	c.apply(t, seedDeployment)
	if out, err := c.kubectl("rollout", "status", "deployment/container-lab", "--timeout=90s"); err != nil {
		t.Fatalf("rollout: %v\n%s", err, out)
	}
	before := map[string]string{}
	var ips []string
	for _, p := range c.livePods("app=container-lab") {
		before[p.Name] = p.Status.ContainerStatuses[0].ContainerID
		ips = append(ips, p.Status.PodIP)
	}
	c.stop()
	for _, ip := range ips {
		if body, err := httpGet("http://" + ip + ":8000/"); err != nil || !strings.Contains(body, "Hello from") {
			t.Errorf("pod %s while kelp is down: %v %q", ip, err, body)
		}
	}
	c.start()
	c.waitNodeReady()
	// Through the restarted kubelet's first sync rounds the pods stay
	// Ready: readiness of adopted containers carries over, so they never
	// leave their Services.
	for end := time.Now().Add(4 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		for _, p := range c.livePods("app=container-lab") {
			if !podutils.IsPodReady(&p) {
				t.Fatalf("pod %s turned NotReady after the restart", p.Name)
			}
		}
	}
	for _, p := range c.livePods("app=container-lab") {
		cs := p.Status.ContainerStatuses[0]
		if before[p.Name] != cs.ContainerID || cs.RestartCount != 0 || !cs.Ready {
			t.Errorf("pod %s after the restart: %s (was %s), restarts %d, ready %v", p.Name, cs.ContainerID, before[p.Name], cs.RestartCount, cs.Ready)
		}
	}
	if n := len(c.livePods("app=container-lab")); n != 3 {
		t.Errorf("%d pods after the restart", n)
	}
}

// A container's output keeps reaching its log while kelp is stopped (the
// node's log daemon outlives kelp, as containerd does): after the restart
// `kubectl logs` shows every line, those written while kelp was down
// included, in order and without a gap.
func TestLogsWrittenWhileKelpIsStopped(t *testing.T) {
	c := startCluster(t)
	c.apply(t, `apiVersion: v1
kind: Pod
metadata: {name: counter}
spec:
  containers:
  - name: app
    image: busybox:1.35
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "i=0; while true; do echo line $i; i=$((i+1)); sleep 0.2; done"]
`)
	c.waitFor(60*time.Second, "counter Running", func() bool { return c.pod("counter").Status.Phase == corev1.PodRunning })
	time.Sleep(time.Second)
	c.stop()
	stopped := time.Now()
	time.Sleep(3 * time.Second)
	restarted := time.Now()
	c.start()
	c.waitNodeReady()
	out := c.mustKubectl("logs", "counter", "--timestamps")
	var whileDown, n int
	for i, line := range strings.Split(strings.TrimSpace(out), "\n") {
		ts, text, ok := strings.Cut(line, " ")
		if !ok {
			t.Fatalf("line %d without a timestamp: %q", i, line)
		}
		if text != fmt.Sprintf("line %d", i) {
			t.Fatalf("line %d is %q: the log has a gap or is out of order", i, text)
		}
		at, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			t.Fatalf("line %d: timestamp %q: %v", i, ts, err)
		}
		if at.After(stopped) && at.Before(restarted) {
			whileDown++
		}
		n++
	}
	// 3 s at one line per 0.2 s: 15 lines, less the shell's own time.
	if whileDown < 10 {
		t.Errorf("%d lines written while kelp was stopped reached the log (of %d), want about 15", whileDown, n)
	}
	// The same log read over a WebSocket (binary.k8s.io), as the Pods
	// conformance spec reads it: the API server streams the kubelet's
	// answer in WebSocket messages.
	if got := c.logOverWebSocket(t, "counter", "app"); !strings.HasPrefix(got, "line 0\nline 1\n") {
		t.Errorf("log over WebSocket starts %q, want line 0 and line 1", got[:min(len(got), 40)])
	}
}

// logOverWebSocket reads a container's whole log through a WebSocket
// upgrade of pods/log.
func (c *cluster) logOverWebSocket(t *testing.T, pod, container string) string {
	t.Helper()
	rt, holder, err := clientws.RoundTripperFor(c.config)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodGet, c.config.Host+"/api/v1/namespaces/default/pods/"+pod+"/log?container="+container, nil)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := clientws.Negotiate(rt, holder, req, "binary.k8s.io")
	if err != nil {
		t.Fatalf("log over WebSocket: %v", err)
	}
	defer conn.Close()
	var b strings.Builder
	for {
		_, msg, err := conn.ReadMessage()
		if err != nil {
			break
		}
		b.Write(msg)
	}
	return b.String()
}
