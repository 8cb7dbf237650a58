package e2e

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mdns "github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const seedService = `apiVersion: v1
kind: Service
metadata: {name: container-lab}
spec:
  selector: {app: container-lab}
  ports: [{name: http, port: 80, targetPort: 8000}]
`

// spread sends n requests with get and counts the pods that answered
// ("Hello from <pod> ...").
func spread(t *testing.T, n int, get func() (string, error)) map[string]int {
	t.Helper()
	seen := map[string]int{}
	for range n {
		body, err := get()
		if err != nil {
			t.Fatalf("request: %v", err)
		}
		f := strings.Fields(body)
		if len(f) < 3 {
			t.Fatalf("reply %q", body)
		}
		seen[f[2]]++
	}
	return seen
}

// clusterResolve asks the cluster DNS (at its ClusterIP) for name's A record.
func clusterResolve(t *testing.T, name string) []string {
	t.Helper()
	m := new(mdns.Msg)
	m.SetQuestion(mdns.Fqdn(name), mdns.TypeA)
	r, _, err := new(mdns.Client).Exchange(m, "10.43.0.10:53")
	if err != nil {
		t.Fatalf("DNS %s: %v", name, err)
	}
	var ips []string
	for _, a := range r.Answer {
		if rr, ok := a.(*mdns.A); ok {
			ips = append(ips, rr.A.String())
		}
	}
	return ips
}

// Services on the wire: the seed Service spreads over its 3 pods from the
// host and from a pod, by ClusterIP and by name; readiness and scaling
// change the rotation; hairpin, NodePort and LoadBalancer work; a Service
// without endpoints refuses at once; DNS answers headless, SRV and
// external names.
func TestServices(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	c.apply(t, seedDeployment+"---\n"+seedService+`---
apiVersion: v1
kind: Service
metadata: {name: lab-np}
spec:
  type: NodePort
  selector: {app: container-lab}
  ports: [{name: http, port: 80, targetPort: 8000}]
---
apiVersion: v1
kind: Service
metadata: {name: lab-lb}
spec:
  type: LoadBalancer
  selector: {app: container-lab}
  ports: [{name: http, port: 8080, targetPort: 8000}]
---
apiVersion: v1
kind: Service
metadata: {name: lab-headless}
spec:
  clusterIP: None
  selector: {app: container-lab}
  ports: [{name: http, port: 8000}]
---
apiVersion: v1
kind: Service
metadata: {name: nobody}
spec:
  selector: {app: nobody}
  ports: [{port: 80}]
---
apiVersion: v1
kind: Pod
metadata: {name: client}
spec:
  containers: [{name: c, image: busybox:1.35, imagePullPolicy: IfNotPresent, command: ["sleep", "3600"]}]
`)
	if out, err := c.kubectl("rollout", "status", "deployment/container-lab", "--timeout=90s"); err != nil {
		t.Fatalf("rollout: %v\n%s", err, out)
	}
	c.waitFor(60*time.Second, "client Running", func() bool { return c.pod("client").Status.Phase == corev1.PodRunning })
	svc, err := c.cs.CoreV1().Services("default").Get(ctx, "container-lab", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	clusterIP := svc.Spec.ClusterIP
	c.waitFor(20*time.Second, "the Service answering on its ClusterIP", func() bool {
		_, err := httpGet("http://" + clusterIP + "/")
		return err == nil
	})
	if got := spread(t, 60, func() (string, error) { return httpGet("http://" + clusterIP + "/") }); len(got) != 3 {
		t.Errorf("60 requests from the host to the ClusterIP reached %v", got)
	}
	if ips := clusterResolve(t, "container-lab.default.svc.cluster.local"); len(ips) != 1 || ips[0] != clusterIP {
		t.Errorf("cluster DNS for the Service: %v, want %s", ips, clusterIP)
	}
	if got := spread(t, 60, func() (string, error) {
		return httpGet("http://" + clusterResolve(t, "container-lab.default.svc.cluster.local")[0] + "/")
	}); len(got) != 3 {
		t.Errorf("60 requests from the host by name reached %v", got)
	}
	// From a pod, by name through the cluster DNS (search path and all).
	out := c.mustKubectl("exec", "client", "--", "sh", "-c",
		"for i in $(seq 60); do wget -qO- http://container-lab/; done; for i in $(seq 60); do wget -qO- http://container-lab.default.svc.cluster.local/; done")
	seen := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(line); len(f) > 2 {
			seen[f[2]]++
		}
	}
	if len(seen) != 3 {
		t.Errorf("120 requests from a pod by name reached %v", seen)
	}

	// NodePort on the node's IP, LoadBalancer on its ingress IP.
	node := c.node()
	nodeIP := node.Status.Addresses[0].Address
	np, _ := c.cs.CoreV1().Services("default").Get(ctx, "lab-np", metav1.GetOptions{})
	if body, err := httpGet(fmt.Sprintf("http://%s:%d/", nodeIP, np.Spec.Ports[0].NodePort)); err != nil || !strings.Contains(body, "Hello from") {
		t.Errorf("NodePort %d on %s: %v %q", np.Spec.Ports[0].NodePort, nodeIP, err, body)
	}
	var lbIP string
	c.waitFor(20*time.Second, "LoadBalancer ingress", func() bool {
		lb, _ := c.cs.CoreV1().Services("default").Get(ctx, "lab-lb", metav1.GetOptions{})
		if len(lb.Status.LoadBalancer.Ingress) == 0 {
			return false
		}
		lbIP = lb.Status.LoadBalancer.Ingress[0].IP
		return true
	})
	if body, err := httpGet("http://" + lbIP + ":8080/"); err != nil || !strings.Contains(body, "Hello from") {
		t.Errorf("LoadBalancer on %s:8080: %v %q", lbIP, err, body)
	}
	if out := c.mustKubectl("get", "svc", "lab-lb"); !strings.Contains(out, lbIP) {
		t.Errorf("kubectl get svc lab-lb shows no EXTERNAL-IP:\n%s", out)
	}

	// No endpoints: refused at once, never a hang.
	nobody, _ := c.cs.CoreV1().Services("default").Get(ctx, "nobody", metav1.GetOptions{})
	start := time.Now()
	conn, err := net.DialTimeout("tcp", nobody.Spec.ClusterIP+":80", 3*time.Second)
	if err == nil {
		conn.Close()
		t.Error("a Service without endpoints accepted a connection")
	} else if took := time.Since(start); !strings.Contains(err.Error(), "refused") || took > time.Second {
		t.Errorf("a Service without endpoints: %v after %v, want connection refused within 1s", err, took)
	}

	// Hairpin: a pod reaches itself through a Service that selects only it.
	pods := c.livePods("app=container-lab")
	self := pods[0]
	c.mustKubectl("label", "pod", self.Name, "hairpin=yes")
	c.apply(t, `apiVersion: v1
kind: Service
metadata: {name: hairpin}
spec:
  selector: {hairpin: "yes"}
  ports: [{port: 80, targetPort: 8000}]
`)
	c.waitFor(20*time.Second, "the hairpin Service", func() bool {
		out, err := c.kubectl("exec", self.Name, "--", "wget", "-qO-", "http://hairpin/")
		return err == nil && strings.Contains(out, "Hello from "+self.Name)
	})

	// DNS: headless → the pod IPs; SRV → the named port; forwarding.
	ips := clusterResolve(t, "lab-headless.default.svc.cluster.local")
	if len(ips) != 3 {
		t.Errorf("headless Service resolves to %v, want the 3 pod IPs", ips)
	}
	m := new(mdns.Msg)
	m.SetQuestion("_http._tcp.container-lab.default.svc.cluster.local.", mdns.TypeSRV)
	r, _, err := new(mdns.Client).Exchange(m, "10.43.0.10:53")
	if err != nil || len(r.Answer) != 1 || r.Answer[0].(*mdns.SRV).Port != 80 {
		t.Errorf("SRV for the named port: %v %v", err, r)
	}
	// A name outside the cluster goes to the host's resolvers: the pod
	// must get what the host gets.
	hostAddrs, err := net.LookupHost("proxy.golang.org")
	if err != nil {
		t.Fatalf("the host itself cannot resolve proxy.golang.org, so forwarding cannot be checked: %v", err)
	}
	if out, err := c.kubectl("exec", "client", "--", "nslookup", "proxy.golang.org"); err != nil || !strings.Contains(out, hostAddrs[0]) {
		t.Errorf("forwarding an external name: %v\n%s (host: %v)", err, out, hostAddrs)
	}
	// Service links and the kubernetes Service from inside a pod.
	if out := c.mustKubectl("exec", "client", "--", "env"); !strings.Contains(out, "CONTAINER_LAB_SERVICE_HOST="+clusterIP) ||
		!strings.Contains(out, "KUBERNETES_SERVICE_HOST=10.43.0.1") {
		t.Errorf("service environment variables missing:\n%s", out)
	}
	// The API server speaks TLS on 10.43.0.1:443: a plain HTTP request
	// reaching it gets its "HTTP request to an HTTPS server" 400.
	if out, _ := c.kubectl("exec", "client", "--", "wget", "-qO-", "http://kubernetes.default.svc:443/"); !strings.Contains(out, "400") {
		t.Errorf("the kubernetes Service from a pod: %q", out)
	}

	// Readiness: one pod's probe fails and it leaves the rotation; scaling
	// to 5 adds the new pods.
	c.mustKubectl("exec", pods[1].Name, "--", "wget", "-qO-", "--post-data=", "http://127.0.0.1:8000/fail-ready")
	c.waitFor(20*time.Second, "the unready pod out of the rotation", func() bool {
		got := spread(t, 30, func() (string, error) { return httpGet("http://" + clusterIP + "/") })
		return got[pods[1].Name] == 0 && len(got) == 2
	})
	c.mustKubectl("exec", pods[1].Name, "--", "wget", "-qO-", "--post-data=", "http://127.0.0.1:8000/ready")
	c.mustKubectl("scale", "deployment/container-lab", "--replicas=5")
	c.waitFor(60*time.Second, "5 pods in the rotation", func() bool {
		return len(spread(t, 60, func() (string, error) { return httpGet("http://" + clusterIP + "/") })) == 5
	})
}

// The data plane outlives the control plane: with kelp stopped, requests
// to the ClusterIP from the host and from a pod keep succeeding for 30 s;
// restarted, kelp reconciles the rules without duplicating them. Then a
// rolling update with the seed's settings loses no request.
func TestDataPlaneOutlivesKelp(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	c.apply(t, seedDeployment+"---\n"+seedService)
	if out, err := c.kubectl("rollout", "status", "deployment/container-lab", "--timeout=90s"); err != nil {
		t.Fatalf("rollout: %v\n%s", err, out)
	}
	svc, _ := c.cs.CoreV1().Services("default").Get(ctx, "container-lab", metav1.GetOptions{})
	clusterIP := svc.Spec.ClusterIP
	c.waitFor(20*time.Second, "the Service answering", func() bool { _, err := httpGet("http://" + clusterIP + "/"); return err == nil })
	// A pod that requests the ClusterIP in a loop, logging each result.
	c.apply(t, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: prober}
spec:
  containers:
  - name: c
    image: busybox:1.35
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "while true; do if wget -qO /dev/null http://%s/; then echo ok; else echo FAIL; fi; sleep 0.2; done"]
`, clusterIP))
	c.waitFor(60*time.Second, "prober Running", func() bool { return c.pod("prober").Status.Phase == corev1.PodRunning })
	rulesBefore := nftObjects(t)

	stoppedAt := time.Now()
	c.stop()
	var hostOK, hostFail int
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := httpGet("http://" + clusterIP + "/"); err != nil {
			hostFail++
		} else {
			hostOK++
		}
		time.Sleep(100 * time.Millisecond)
	}
	restartedAt := time.Now()
	c.start()
	c.waitNodeReady()
	if hostFail != 0 || hostOK < 100 {
		t.Errorf("from the host while kelp was down: %d ok, %d failed", hostOK, hostFail)
	}
	var logs string
	c.waitFor(30*time.Second, "the prober's logs after the restart", func() bool {
		out, err := c.kubectl("logs", "prober")
		logs = out
		return err == nil
	})
	okN, failN := strings.Count(logs, "ok"), strings.Count(logs, "FAIL")
	if failN != 0 || okN < 100 {
		stamped, _ := c.kubectl("logs", "--timestamps", "prober")
		var fails []string
		for _, l := range strings.Split(stamped, "\n") {
			if strings.Contains(l, "FAIL") {
				fails = append(fails, l)
			}
		}
		t.Errorf("from a pod across the stop: %d ok, %d failed (kelp stopped %s, restarted %s): %v", okN, failN,
			stoppedAt.UTC().Format(time.RFC3339Nano), restartedAt.UTC().Format(time.RFC3339Nano), fails)
	}
	t.Logf("while kelp was stopped: host %d requests ok; pod %d requests ok over the whole test", hostOK, okN)
	time.Sleep(2 * time.Second)
	if after := nftObjects(t); after != rulesBefore {
		t.Errorf("nftables objects before the restart %d, after %d", rulesBefore, after)
	}

	// Zero-downtime rollout through the ClusterIP.
	var sent, failed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				sent.Add(1)
				if _, err := httpGet("http://" + clusterIP + "/"); err != nil {
					failed.Add(1)
				}
			}
		}()
	}
	c.mustKubectl("set", "image", "deployment/container-lab", "app=kelp/demo:v2")
	out, err := c.kubectl("rollout", "status", "deployment/container-lab", "--timeout=120s")
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("rollout: %v\n%s", err, out)
	}
	t.Logf("rolling update: %d requests sent through the ClusterIP, %d failed", sent.Load(), failed.Load())
	if failed.Load() != 0 || sent.Load() < 100 {
		t.Errorf("rolling update: %d of %d requests failed", failed.Load(), sent.Load())
	}
	if body, _ := httpGet("http://" + clusterIP + "/"); !strings.Contains(body, "version v2") {
		t.Errorf("after the rollout: %q", body)
	}
}

// nftObjects counts the rules and elements in table kelp (nft's listing).
func nftObjects(t *testing.T) int {
	t.Helper()
	out, err := exec.Command("nft", "list", "table", "ip", "kelp").CombinedOutput()
	if err != nil {
		t.Fatalf("nft list table ip kelp: %v\n%s", err, out)
	}
	return strings.Count(string(out), "\n")
}
