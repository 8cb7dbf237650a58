package e2e

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// `kelp server` from an empty data dir gives a Ready node that renews its
// Lease; the seed's Deployment runs 3 real containers, Running and 1/1
// Ready, each with an IP the host reaches; pods reach each other; kubectl
// logs and exec work through the API server and the kubelet.
func TestSeedApp(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	node := c.node()
	out := c.mustKubectl("get", "nodes", "-o", "wide")
	for _, want := range []string{"STATUS", "ROLES", "INTERNAL-IP", "OS-IMAGE", "KERNEL-VERSION", "CONTAINER-RUNTIME",
		"Ready", "control-plane", "containerd://"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl get nodes -o wide lacks %q:\n%s", want, out)
		}
	}
	if node.Spec.PodCIDR == "" || node.Status.Capacity.Cpu().IsZero() || node.Status.Capacity.Pods().Value() != 110 {
		t.Errorf("node spec/status: podCIDR %q capacity %v", node.Spec.PodCIDR, node.Status.Capacity)
	}
	lease, err := c.cs.CoordinationV1().Leases("kube-node-lease").Get(ctx, node.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first := lease.Spec.RenewTime.Time
	c.waitFor(15*time.Second, "the node Lease renewed", func() bool {
		l, err := c.cs.CoordinationV1().Leases("kube-node-lease").Get(ctx, node.Name, metav1.GetOptions{})
		return err == nil && l.Spec.RenewTime.After(first)
	})

	if out, err := c.kubectlIn(seedDeployment, "apply", "-f", "-"); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	if out, err := c.kubectl("rollout", "status", "deployment/container-lab", "--timeout=90s"); err != nil {
		t.Fatalf("rollout status: %v\n%s", err, out)
	}
	pods := c.livePods("app=container-lab")
	if len(pods) != 3 {
		t.Fatalf("%d pods", len(pods))
	}
	out = c.mustKubectl("get", "pods", "-o", "wide")
	if strings.Count(out, "1/1") != 3 || strings.Count(out, "Running") != 3 {
		t.Errorf("kubectl get pods:\n%s", out)
	}
	for _, p := range pods {
		if p.Status.PodIP == "" {
			t.Fatalf("pod %s has no IP", p.Name)
		}
		body, err := httpGet("http://" + p.Status.PodIP + ":8000/")
		if err != nil || !strings.Contains(body, "Hello from "+p.Name) {
			t.Errorf("GET %s from the host: %v %q", p.Status.PodIP, err, body)
		}
	}
	// Pod to pod, from inside the first pod's network namespace.
	out = c.mustKubectl("exec", pods[0].Name, "--", "wget", "-qO-", "http://"+pods[1].Status.PodIP+":8000/")
	if !strings.Contains(out, "Hello from "+pods[1].Name) {
		t.Errorf("pod to pod: %q", out)
	}
	if out := c.mustKubectl("exec", pods[0].Name, "--", "hostname"); strings.TrimSpace(out) != pods[0].Name {
		t.Errorf("exec hostname: %q", out)
	}
	out, err = c.kubectl("exec", pods[0].Name, "--", "sh", "-c", "exit 3")
	if err == nil || !strings.Contains(out, "exit code 3") {
		t.Errorf("exec exit 3: %v %q", err, out)
	}
	if out, _ := c.kubectlIn("hello stdin\n", "exec", "-i", pods[0].Name, "--", "cat"); out != "hello stdin\n" {
		t.Errorf("exec -i cat: %q", out)
	}
	logs := c.mustKubectl("logs", pods[0].Name)
	if !strings.Contains(logs, "listening on :8000") || !strings.Contains(logs, "GET /healthz") {
		t.Errorf("kubectl logs:\n%s", logs)
	}
	if out := c.mustKubectl("logs", "--tail=1", pods[0].Name); strings.Count(strings.TrimSpace(out), "\n") != 0 {
		t.Errorf("logs --tail=1 gave several lines:\n%s", out)
	}
	if out := c.mustKubectl("logs", "--timestamps", "--tail=1", pods[0].Name); !strings.HasPrefix(out, time.Now().UTC().Format("2006-01-02T")) {
		t.Errorf("logs --timestamps: %q", out)
	}
	// port-forward: a local port reaches the pod's port 8000.
	local := c.portForward("pod/"+pods[2].Name, 8000)
	if body, err := httpGet("http://" + local + "/"); err != nil || !strings.Contains(body, "Hello from "+pods[2].Name) {
		t.Errorf("through port-forward %s: %v %q", local, err, body)
	}

	// attach (without -i) streams the container's output from now on.
	att := exec.Command(kelpBin, "kubectl", "--kubeconfig", c.kubeconfig, "attach", "pod/"+pods[0].Name)
	var attOut bytes.Buffer
	att.Stdout, att.Stderr = &attOut, &attOut
	if err := att.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Second)
	_ = att.Process.Kill()
	_ = att.Wait()
	if !strings.Contains(attOut.String(), "GET /healthz") {
		t.Errorf("kubectl attach showed %q", attOut.String())
	}

	// logs -f keeps streaming: the readiness probe logs every 2 s.
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	stream, err := c.cs.CoreV1().Pods("default").GetLogs(pods[0].Name, &corev1.PodLogOptions{Follow: true, TailLines: ptr.To(int64(0))}).Stream(cctx)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	n, _ := stream.Read(buf)
	stream.Close()
	if !strings.Contains(string(buf[:n]), "GET /healthz") {
		t.Errorf("logs -f delivered %q", buf[:n])
	}
}
