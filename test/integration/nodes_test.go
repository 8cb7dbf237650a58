package integration

import (
	"fmt"
	"k8s.io/kubectl/pkg/util/podutils"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kelp-project/kelp/test/simkubelet"
)

// A node that stops renewing its Lease goes Ready=Unknown after the grace
// period and gets the unreachable NoExecute taint; its pods turn not Ready
// and are evicted once their toleration runs out, staying Terminating
// because no kubelet confirms; replacements land on the other nodes. When
// the node comes back the taint goes, and its kubelet finishes the
// deletions. Timings are shrunk by flag.
func TestNodeFailure(t *testing.T) {
	s := startServer(t, "--node-monitor-period=500ms", "--node-monitor-grace-period=3s",
		"--default-unreachable-toleration-seconds=4", "--default-not-ready-toleration-seconds=4")
	cs := s.client()
	ctx := ctxT(t)
	k := simkubelet.Start(t, cs, "node-1", "node-2", "node-3")
	s.mustKubectl("apply", "-f", "testdata/deployment.yaml")
	rolloutStatus(t, s, "default", "container-lab")
	podsOn := func(node string) (live, terminating []corev1.Pod) {
		l, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range l.Items {
			if p.DeletionTimestamp == nil {
				live = append(live, p)
			} else {
				terminating = append(terminating, p)
			}
		}
		return live, terminating
	}
	doomed, _ := podsOn("node-3")
	if len(doomed) != 1 {
		t.Fatalf("%d pods on node-3 before the failure, want 1", len(doomed))
	}
	if tol := doomed[0].Spec.Tolerations; len(tol) != 2 || *tol[0].TolerationSeconds != 4 {
		t.Fatalf("default tolerations %+v", tol)
	}

	cutAt := time.Now()
	k.CutOff("node-3", true)
	waitFor(t, "node-3 Ready=Unknown with the unreachable taint", func() bool {
		n, err := cs.CoreV1().Nodes().Get(ctx, "node-3", metav1.GetOptions{})
		if err != nil {
			return false
		}
		return nodeReady(n) == corev1.ConditionUnknown && hasTaint(n, corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute)
	})
	// The grace period runs from the last renewal, which may have been
	// written just before or just after the cut: read it now that no more
	// come.
	lease, err := cs.CoordinationV1().Leases("kube-node-lease").Get(ctx, "node-3", metav1.GetOptions{})
	if err != nil || lease.Spec.RenewTime == nil {
		t.Fatalf("node-3's Lease: %v", err)
	}
	if d := time.Since(lease.Spec.RenewTime.Time); d < 3*time.Second {
		t.Errorf("node-3 marked Unknown %v after its last renewal, before its 3s grace period", d)
	}
	waitFor(t, "node-3's pod marked not Ready", func() bool {
		p, err := cs.CoreV1().Pods("default").Get(ctx, doomed[0].Name, metav1.GetOptions{})
		return err == nil && !podutils.IsPodReady(p)
	})
	waitFor(t, "the pod evicted after its 4s toleration, and Terminating", func() bool {
		p, err := cs.CoreV1().Pods("default").Get(ctx, doomed[0].Name, metav1.GetOptions{})
		return err == nil && p.DeletionTimestamp != nil
	})
	// timeAdded has whole seconds, so the toleration may end up to 1s early.
	if d := time.Since(cutAt); d < 6*time.Second {
		t.Errorf("evicted %v after the cut, before grace period + toleration (3s+4s)", d)
	}
	waitFor(t, "3 available replicas on the other nodes", func() bool {
		d, err := cs.AppsV1().Deployments("default").Get(ctx, "container-lab", metav1.GetOptions{})
		if err != nil || d.Status.AvailableReplicas != 3 {
			return false
		}
		live, _ := podsOn("node-3")
		a, _ := podsOn("node-1")
		b, _ := podsOn("node-2")
		return len(live) == 0 && len(a)+len(b) == 3
	})
	evs, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "reason=TaintManagerEviction"})
	if err != nil || len(evs.Items) == 0 {
		t.Errorf("no TaintManagerEviction event: %v", err)
	}
	// Nobody confirmed the deletion: the old pod waits for its kubelet.
	time.Sleep(time.Second)
	if _, term := podsOn("node-3"); len(term) != 1 || term[0].UID != doomed[0].UID {
		t.Errorf("the evicted pod should stay Terminating while its node is away: %d", len(term))
	}

	k.CutOff("node-3", false)
	waitFor(t, "node-3 Ready again, untainted, and its pod gone", func() bool {
		n, err := cs.CoreV1().Nodes().Get(ctx, "node-3", metav1.GetOptions{})
		if err != nil || nodeReady(n) != corev1.ConditionTrue || len(n.Spec.Taints) != 0 {
			return false
		}
		live, term := podsOn("node-3")
		return len(live) == 0 && len(term) == 0
	})
}

func nodeReady(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return ""
}

func hasTaint(n *corev1.Node, key string, effect corev1.TaintEffect) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key && t.Effect == effect {
			return true
		}
	}
	return false
}

// The scheduler's filters as a user meets them: a pod too big for every
// node stays Pending with upstream's FailedScheduling summary until a big
// node joins; taints keep pods away unless tolerated; nodeSelector picks
// the labelled node.
func TestScheduling(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	k := simkubelet.Start(t, cs, "node-1", "node-2", "node-3")
	create := func(p *corev1.Pod) {
		t.Helper()
		if p.Spec.Containers == nil {
			p.Spec.Containers = []corev1.Container{{Name: "c", Image: "busybox:1.36"}}
		}
		if _, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	nodeOf := func(name string) string {
		p, err := cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p.Spec.NodeName
	}
	failedScheduling := func(pod string) string {
		l, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{
			FieldSelector: "reason=FailedScheduling,involvedObject.name=" + pod})
		if err != nil || len(l.Items) == 0 {
			return ""
		}
		return l.Items[len(l.Items)-1].Message
	}

	big := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "big"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "c", Image: "busybox:1.36", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: mustQuantity("8")}}}}}}
	create(big)
	want := "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.." // upstream's double stop
	waitFor(t, "FailedScheduling for the big pod", func() bool { return failedScheduling("big") != "" })
	if got := failedScheduling("big"); got != want {
		t.Errorf("FailedScheduling message\n got %q\nwant %q", got, want)
	}
	out := s.mustKubectl("describe", "pod", "big")
	if !strings.Contains(out, "FailedScheduling") || !strings.Contains(out, "3 Insufficient cpu") {
		t.Errorf("kubectl describe does not show the FailedScheduling event:\n%s", out)
	}
	if n := nodeOf("big"); n != "" {
		t.Fatalf("the big pod was bound to %s", n)
	}
	k.AddNode(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "big-node"}}, "16", "64Gi")
	waitFor(t, "the big pod bound to big-node", func() bool { return nodeOf("big") == "big-node" })

	k.AddNode(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-node", Labels: map[string]string{"accel": "gpu"}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}}}, "4", "8Gi")
	create(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "wants-gpu"}, Spec: corev1.PodSpec{NodeSelector: map[string]string{"accel": "gpu"}}})
	waitFor(t, "FailedScheduling for the untolerating pod", func() bool {
		return strings.HasPrefix(failedScheduling("wants-gpu"),
			"0/5 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}, 4 node(s) didn't match Pod's node affinity/selector.")
	})
	create(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "tolerates-gpu"}, Spec: corev1.PodSpec{NodeSelector: map[string]string{"accel": "gpu"},
		Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}}})
	waitFor(t, "the tolerating pod bound to gpu-node", func() bool { return nodeOf("tolerates-gpu") == "gpu-node" })
	for i := range 6 {
		create(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("plain-%d", i)}})
	}
	waitFor(t, "plain pods bound", func() bool {
		for i := range 6 {
			if nodeOf(fmt.Sprintf("plain-%d", i)) == "" {
				return false
			}
		}
		return true
	})
	for i := range 6 {
		if n := nodeOf(fmt.Sprintf("plain-%d", i)); n == "gpu-node" {
			t.Errorf("plain-%d landed on the tainted gpu-node", i)
		}
	}
	if p, _ := cs.CoreV1().Pods("default").Get(ctx, "wants-gpu", metav1.GetOptions{}); p.Spec.NodeName != "" {
		t.Errorf("wants-gpu bound to %s despite the untolerated taint", p.Spec.NodeName)
	}
}

func mustQuantity(s string) resource.Quantity { return resource.MustParse(s) }
