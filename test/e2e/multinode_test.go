package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	mdns "github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/kelp-project/kelp/test/lab"
)

// The node-death flags of the lab in TestMultiNode, seed 000's timeline
// scaled down (upstream: 5 s, 40-50 s, 300 s; the benchmark measures those).
const (
	labMonitorPeriod = time.Second
	labGrace         = 20 * time.Second
	labToleration    = 10 * time.Second
)

// startLab brings up scripts/lab.sh's cluster of n nodes, and takes it
// down at the end, checking that the host is as it was. The returned
// cluster is the lab's admin view, for the kubectl helpers.
func startLab(t *testing.T, n int, serverArgs ...string) (*lab.Lab, *cluster) {
	t.Helper()
	clusterMu.Lock()
	before := lab.HostState()
	dir := t.TempDir()
	l, err := lab.Up(n, lab.Options{Bin: kelpBin, Images: filepath.Dir(imageTars[0]), Dir: filepath.Join(dir, "lab"), ServerArgs: serverArgs})
	if err != nil {
		clusterMu.Unlock()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, node := range l.Nodes() {
				t.Logf("%s log (tail):\n%s", node, l.LogTail(node, 40))
			}
		}
		if err := l.Down(); err != nil {
			t.Error(err)
		}
		if after := lab.HostState(); after != before {
			t.Errorf("lab.sh down left the host changed:\nbefore:\n%s\nafter:\n%s", before, after)
		}
		clusterMu.Unlock()
	})
	return l, &cluster{t: t, dataDir: dir, kubeconfig: l.Kubeconfig, config: l.Config, cs: l.Client}
}

// askDNS sends one A query to server:53 over network, on a socket from
// dial (a lab node's namespace, or the host's).
func askDNS(dial func(ctx context.Context, network, addr string) (net.Conn, error), network, server, name string) (*mdns.Msg, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	conn, err := dial(ctx, network, net.JoinHostPort(server, "53"))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	r, _, err := (&mdns.Client{Net: network, Timeout: 2 * time.Second}).ExchangeWithConnContext(ctx, new(mdns.Msg).SetQuestion(name, mdns.TypeA), &mdns.Conn{Conn: conn})
	return r, err
}

// labGet sends a request from inside a lab node.
func labGet(l *lab.Lab, node, url string) (string, error) {
	return getWith(l.HTTPClient(node, 3*time.Second), url)
}

// Three nodes joined by token (a server and two agents, each in its own
// network namespace with its own containerd), the seed app spread over
// them and reachable every way the seeds name; node credentials limited;
// refused joins; then a node dies and comes back, on seed 000's timeline.
func TestMultiNode(t *testing.T) {
	serverArgs := []string{"--node-monitor-period", labMonitorPeriod.String(), "--node-monitor-grace-period", labGrace.String(),
		"--default-not-ready-toleration-seconds", fmt.Sprint(int(labToleration.Seconds())),
		"--default-unreachable-toleration-seconds", fmt.Sprint(int(labToleration.Seconds()))}
	l, c := startLab(t, 3, serverArgs...)
	ctx := context.Background()
	names := l.Nodes()
	if strings.Join(names, " ") != "node-1 node-2 node-3" {
		t.Fatalf("lab nodes %v", names)
	}

	nodes, err := c.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) != 3 {
		t.Fatalf("nodes: %v (%d)", err, len(nodes.Items))
	}
	cidrs := map[string]bool{}
	for _, n := range nodes.Items {
		var ip string
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				ip = a.Address
			}
		}
		if ip != l.IP(n.Name) || n.Spec.PodCIDR == "" || cidrs[n.Spec.PodCIDR] || !nodeReady(&n) {
			t.Errorf("node %s: InternalIP %q (lab %s), podCIDR %q, Ready %v", n.Name, ip, l.IP(n.Name), n.Spec.PodCIDR, nodeReady(&n))
		}
		cidrs[n.Spec.PodCIDR] = true
	}
	wide := c.mustKubectl("get", "nodes", "-o", "wide")
	for _, n := range names {
		if !strings.Contains(wide, n) || !strings.Contains(wide, l.IP(n)) {
			t.Errorf("kubectl get nodes -o wide lacks %s (%s):\n%s", n, l.IP(n), wide)
		}
	}

	c.apply(t, seedDeployment+"---\n"+seedService+"---\n"+nodePortService)
	c.mustKubectl("rollout", "status", "deployment/container-lab", "--timeout=90s")
	pods := c.livePods("app=container-lab")
	on := map[string]corev1.Pod{}
	for _, p := range pods {
		on[p.Spec.NodeName] = p
	}
	if len(pods) != 3 || len(on) != 3 {
		t.Fatalf("the seed Deployment did not spread 1/1/1:\n%s", c.mustKubectl("get", "pods", "-o", "wide"))
	}

	t.Run("pod IPs from every node", func(t *testing.T) {
		for _, node := range names {
			for _, p := range pods {
				if body, err := labGet(l, node, "http://"+p.Status.PodIP+":8000/"); err != nil || !strings.Contains(body, "Hello from "+p.Name) {
					t.Errorf("%s → %s (%s on %s): %v %q", node, p.Status.PodIP, p.Name, p.Spec.NodeName, err, body)
				}
			}
		}
	})
	t.Run("pod to pod across nodes, source IP kept", func(t *testing.T) {
		for _, from := range pods {
			for _, to := range pods {
				if from.Spec.NodeName == to.Spec.NodeName {
					continue
				}
				out, err := c.kubectl("exec", from.Name, "--", "wget", "-qO-", "http://"+to.Status.PodIP+":8000/")
				if err != nil || !strings.Contains(out, "Hello from "+to.Name) {
					t.Errorf("%s (%s) → %s (%s): %v %q", from.Name, from.Spec.NodeName, to.Name, to.Spec.NodeName, err, out)
				}
				// No masquerade between pods: the server logs the client's pod IP.
				if logs := c.mustKubectl("logs", to.Name); !strings.Contains(logs, from.Status.PodIP+":") {
					t.Errorf("%s saw no request from %s's IP %s:\n%s", to.Name, from.Name, from.Status.PodIP, logs)
				}
			}
		}
	})
	svc, err := c.cs.CoreV1().Services("default").Get(ctx, "container-lab", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("ClusterIP from every node", func(t *testing.T) {
		for _, node := range names {
			seen := spread(t, 30, func() (string, error) { return labGet(l, node, "http://"+svc.Spec.ClusterIP+"/") })
			if len(seen) != 3 {
				t.Errorf("ClusterIP from %s reached %v, want all 3 pods", node, seen)
			}
		}
	})
	t.Run("Service name from a pod on an agent node", func(t *testing.T) {
		out := c.mustKubectl("exec", on["node-2"].Name, "--", "sh", "-c", "for i in $(seq 30); do wget -qO- http://container-lab/; echo; done")
		seen := map[string]bool{}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if f := strings.Fields(line); len(f) > 2 {
				seen[f[2]] = true
			}
		}
		if len(seen) != 3 {
			t.Errorf("container-lab by name from node-2 reached %v, want all 3 pods:\n%s", seen, out)
		}
	})
	t.Run("cluster DNS only for the cluster", func(t *testing.T) {
		name := "container-lab.default.svc.cluster.local."
		// The host, on the lab's LAN (192.168.77.1), is neither a pod nor
		// a node: it gets REFUSED or silence, never an answer or a
		// forwarded one.
		for _, node := range names {
			for _, network := range []string{"udp", "tcp"} {
				for _, q := range []string{name, "example.com."} {
					r, err := askDNS((&net.Dialer{}).DialContext, network, l.IP(node), q)
					if err == nil && r.Rcode != mdns.RcodeRefused {
						t.Errorf("%s over %s from the LAN to %s's DNS: %s %v, want REFUSED or no answer", q, network, node, mdns.RcodeToString[r.Rcode], r.Answer)
					}
				}
			}
		}
		// The node itself is served.
		r, err := askDNS(lab.DialIn(l.Netns("node-2")), "udp", l.IP("node-2"), name)
		if err != nil || r.Rcode != mdns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].(*mdns.A).A.String() != svc.Spec.ClusterIP {
			t.Errorf("node-2 asking its own DNS for %s: %v %v", name, err, r)
		}
	})
	t.Run("NodePort on every node's address", func(t *testing.T) {
		np, err := c.cs.CoreV1().Services("default").Get(ctx, "container-lab-np", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, node := range names {
			url := fmt.Sprintf("http://%s:%d/", l.IP(node), np.Spec.Ports[0].NodePort)
			seen := spread(t, 30, func() (string, error) { return httpGet(url) })
			elsewhere := 0
			for name := range seen {
				if on[node].Name != name {
					elsewhere++
				}
			}
			if elsewhere != 2 {
				t.Errorf("NodePort %s reached %v, want the pods of the 2 other nodes too", url, seen)
			}
		}
	})
	t.Run("logs, exec and port-forward on an agent node", func(t *testing.T) {
		p := on["node-3"]
		if logs := c.mustKubectl("logs", p.Name); !strings.Contains(logs, "listening on :8000") {
			t.Errorf("kubectl logs %s:\n%s", p.Name, logs)
		}
		if out := c.mustKubectl("exec", p.Name, "--", "hostname"); strings.TrimSpace(out) != p.Name {
			t.Errorf("exec hostname: %q", out)
		}
		local := c.portForward("pod/"+p.Name, 8000)
		if body, err := httpGet("http://" + local + "/"); err != nil || !strings.Contains(body, "Hello from "+p.Name) {
			t.Errorf("through port-forward %s: %v %q", local, err, body)
		}
	})
	t.Run("node credentials are limited", func(t *testing.T) {
		cfg, err := l.NodeConfig("node-2")
		if err != nil {
			t.Fatal(err)
		}
		node2 := kubernetes.NewForConfigOrDie(cfg)
		if _, err := node2.CoreV1().Pods("default").Get(ctx, on["node-2"].Name, metav1.GetOptions{}); err != nil {
			t.Fatalf("node-2 reading its own pod: %v", err)
		}
		if _, err := c.cs.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "unrelated"},
			StringData: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		for what, err := range map[string]error{
			"delete Node node-3": node2.CoreV1().Nodes().Delete(ctx, "node-3", metav1.DeleteOptions{}),
			"read an unrelated Secret": func() error {
				_, err := node2.CoreV1().Secrets("default").Get(ctx, "unrelated", metav1.GetOptions{})
				return err
			}(),
			"patch the status of node-3's pod": func() error {
				_, err := node2.CoreV1().Pods("default").Patch(ctx, on["node-3"].Name, types.MergePatchType,
					[]byte(`{"status":{"message":"forged"}}`), metav1.PatchOptions{}, "status")
				return err
			}(),
		} {
			if !apierrors.IsForbidden(err) {
				t.Errorf("node-2 may %s: %v, want 403", what, err)
			}
		}
	})
	t.Run("joins refused", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join(l.DataDir("node-1"), "server", "node-token"))
		if err != nil {
			t.Fatal(err)
		}
		token := strings.TrimSpace(string(b))
		hash, secretPart, _ := strings.Cut(strings.TrimPrefix(token, "K10"), "::")
		secret := secretPart[strings.Index(secretPart, ":")+1:]
		out, err := exec.Command(kelpBin, "token", "create", "--ttl", "1s", "--kubeconfig", l.Kubeconfig).CombinedOutput()
		if err != nil {
			t.Fatalf("kelp token create: %v\n%s", err, out)
		}
		// The bare token first, then the full one with the CA hash.
		expired, _, _ := strings.Cut(string(out), "\n")
		time.Sleep(2 * time.Second) // bootstrap token expiry has a resolution of a second
		for _, tc := range []struct{ name, node, token, want string }{
			{"wrong secret", "node-9", "K10" + hash + "::node:wrong", "the token is not valid for this server"},
			{"wrong CA hash", "node-9", "K10" + strings.Repeat("0", 64) + "::node:" + secret, "the server's CA does not match the token's hash"},
			{"taken node name", "node-2", token, "node name node-2 is already taken by another machine"},
			{"expired bootstrap token", "node-9", expired, "bootstrap token " + expired[:6] + " expired at"},
		} {
			// A second machine: node-3's network, a disk of its own.
			dir := t.TempDir()
			out, err := l.Exec("node-3", "timeout", "60", kelpBin, "agent", "--server", "https://"+l.IP("node-1")+":6443", "--token", tc.token,
				"--node-name", tc.node, "--data-dir", dir, "--run-dir", filepath.Join(dir, "run"), "--cgroup-root", "/kelp-lab/refused")
			if err == nil || !strings.Contains(out, tc.want) || strings.Contains(out, "containerd") {
				t.Errorf("%s: kelp agent %v, want a failure before containerd saying %q:\n%s", tc.name, err, tc.want, out)
			}
		}
	})

	t.Run("node death", func(t *testing.T) {
		dctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		tl, err := l.NodeDeath(dctx, "node-3", "node-2", "default", "container-lab", "app=container-lab", time.Second)
		t.Logf("node-3 dies: %s", tl)
		if err != nil {
			t.Fatal(err)
		}
		// NotReady no earlier than the grace period after the last
		// heartbeat, and within a monitor period (plus polling) after it.
		if sinceRenew := tl.NotReady - tl.LastRenew; sinceRenew < labGrace || sinceRenew > labGrace+labMonitorPeriod+2*time.Second {
			t.Errorf("NotReady %v after the last lease renewal, want %v..%v", sinceRenew, labGrace, labGrace+labMonitorPeriod+2*time.Second)
		}
		// Each poll reads the node, then the pods and slices: a step that
		// follows the node's within one poll may be seen first.
		const pollSlack = 500 * time.Millisecond
		if tl.PodsNotReady+pollSlack < tl.NotReady || tl.EndpointsGone+pollSlack < tl.NotReady {
			t.Errorf("the pods left the endpoints before the node was NotReady")
		}
		if tl.Evicted < tl.NotReady+labToleration-time.Second || tl.Replaced < tl.Evicted {
			t.Errorf("evicted %v after NotReady, want the %v toleration first", tl.Evicted-tl.NotReady, labToleration)
		}
		// ClusterIP traffic fails only between the death and the
		// endpoint removal (plus the proxy's resync and one timeout).
		if tl.Failures == 0 || tl.FailLast > tl.EndpointsGone+2*time.Second {
			t.Errorf("ClusterIP failures %d, the last starting %v after the death; endpoints removed at %v", tl.Failures, tl.FailLast, tl.EndpointsGone)
		}
		t.Logf("ClusterIP failure window from node-2: %v (endpoints removed %v after the death)", tl.FailLast.Round(time.Millisecond), tl.EndpointsGone.Round(time.Millisecond))
		// The evicted pod stays Terminating while its node is dead.
		old := c.pod(on["node-3"].Name)
		if old.DeletionTimestamp == nil {
			t.Errorf("the evicted pod %s is not being deleted", old.Name)
		}

		if err := l.Revive("node-3"); err != nil {
			t.Fatal(err)
		}
		c.waitFor(60*time.Second, "the evicted pod cleaned up by the revived node", func() bool {
			_, err := c.cs.CoreV1().Pods("default").Get(ctx, old.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		})
		c.mustKubectl("rollout", "status", "deployment/container-lab", "--timeout=30s")
		if live := c.livePods("app=container-lab"); len(live) != 3 {
			t.Errorf("%d seed pods after the revival", len(live))
		}
	})

	t.Run("an overlay that cannot be set up stops the agent", func(t *testing.T) {
		if err := l.Kill("node-3"); err != nil {
			t.Fatal(err)
		}
		out, err := l.RunEnv([]string{"KELP_LAB_AGENT_ARGS=--flannel-iface nope0"}, "revive", "node-3")
		if err == nil || !strings.Contains(out, "--flannel-iface nope0") {
			t.Errorf("revive with a missing interface: %v, want kelp to exit naming --flannel-iface nope0:\n%s", err, out)
		}
		if err := l.Revive("node-3"); err != nil {
			t.Fatal(err)
		}
		// The server's own agent failing stops `kelp server` too.
		if err := l.Kill("node-1"); err != nil {
			t.Fatal(err)
		}
		bad := "KELP_LAB_SERVER_ARGS=" + strings.Join(append(slices.Clone(serverArgs), "--flannel-iface", "nope0"), " ")
		out, err = l.RunEnv([]string{bad}, "revive", "node-1")
		if err == nil || !strings.Contains(out, "the local agent stopped") || !strings.Contains(out, "--flannel-iface nope0") {
			t.Errorf("kelp server whose agent cannot set up the overlay: %v, want it to exit saying why:\n%s", err, out)
		}
		if err := l.Revive("node-1"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("the data plane outlives the server", func(t *testing.T) {
		var agentPod *corev1.Pod
		for _, p := range c.livePods("app=container-lab") {
			if p.Spec.NodeName == "node-2" {
				agentPod = &p
			}
		}
		if agentPod == nil {
			t.Fatalf("no seed pod on node-2:\n%s", c.mustKubectl("get", "pods", "-o", "wide"))
		}
		killed := time.Now()
		if err := l.Kill("node-1"); err != nil {
			t.Fatal(err)
		}
		// The agents keep trying to reach the server, saying so each
		// time, and their pods keep answering across the overlay.
		c.waitFor(30*time.Second, "node-2 to log a retry", func() bool {
			retries := 0
			for _, line := range strings.Split(l.LogTail("node-2", 200), "\n") {
				if strings.Contains(line, "cannot reach the API server") && strings.Contains(line, l.IP("node-1")+":6443") && logTime(line).After(killed) {
					retries++
				}
			}
			return retries >= 2
		})
		for range 5 {
			if body, err := labGet(l, "node-3", "http://"+agentPod.Status.PodIP+":8000/"); err != nil || !strings.Contains(body, "Hello from "+agentPod.Name) {
				t.Errorf("node-3 → %s on node-2 with the server down: %v %q", agentPod.Name, err, body)
			}
		}
		if err := l.Revive("node-1"); err != nil {
			t.Fatal(err)
		}
		c.waitFor(60*time.Second, "every node Ready again", func() bool {
			l, err := c.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			ready := 0
			for i := range l.Items {
				if nodeReady(&l.Items[i]) {
					ready++
				}
			}
			return err == nil && ready == 3
		})
		c.mustKubectl("rollout", "status", "deployment/container-lab", "--timeout=60s")
	})
}

// logTime is when a logrus line of a node's log was written (zero if it
// has no time stamp).
func logTime(line string) time.Time {
	_, rest, _ := strings.Cut(line, `time="`)
	stamp, _, _ := strings.Cut(rest, `"`)
	t, _ := time.Parse(time.RFC3339Nano, stamp)
	return t
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

const nodePortService = `apiVersion: v1
kind: Service
metadata: {name: container-lab-np}
spec:
  type: NodePort
  selector: {app: container-lab}
  ports: [{port: 80, targetPort: 8000}]
`

// host-gw: no VXLAN device, a plain route to each other node's podCIDR via
// its address; pods on different nodes reach each other.
func TestMultiNodeHostGW(t *testing.T) {
	l, c := startLab(t, 2, "--flannel-backend", "host-gw")
	for _, node := range l.Nodes() {
		out, err := l.Exec(node, "ip", "-o", "link", "show", "kelp.1")
		if err == nil {
			t.Errorf("%s has a VXLAN device under host-gw: %s", node, out)
		}
	}
	cs := c.cs
	n2, err := cs.CoreV1().Nodes().Get(context.Background(), "node-2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := l.Exec("node-1", "ip", "route", "show", n2.Spec.PodCIDR); err != nil || !strings.Contains(out, "via "+l.IP("node-2")) {
		t.Errorf("node-1's route to node-2's pods %s: %v %q, want via %s", n2.Spec.PodCIDR, err, out, l.IP("node-2"))
	}
	c.apply(t, strings.Replace(seedDeployment, "replicas: 3", "replicas: 2", 1))
	c.mustKubectl("rollout", "status", "deployment/container-lab", "--timeout=90s")
	pods := c.livePods("app=container-lab")
	if len(pods) != 2 || pods[0].Spec.NodeName == pods[1].Spec.NodeName {
		t.Fatalf("the seed pods did not spread over both nodes:\n%s", c.mustKubectl("get", "pods", "-o", "wide"))
	}
	for _, node := range l.Nodes() {
		for _, p := range pods {
			if body, err := labGet(l, node, "http://"+p.Status.PodIP+":8000/"); err != nil || !strings.Contains(body, "Hello from "+p.Name) {
				t.Errorf("%s → %s on %s: %v %q", node, p.Name, p.Spec.NodeName, err, body)
			}
		}
	}
	if out, err := c.kubectl("exec", pods[0].Name, "--", "wget", "-qO-", "http://"+pods[1].Status.PodIP+":8000/"); err != nil || !strings.Contains(out, "Hello from "+pods[1].Name) {
		t.Errorf("pod to pod across nodes: %v %q", err, out)
	}
}
