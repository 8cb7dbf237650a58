package kubelet

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const nodePortsMessage = "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"

// hostPortPod is a pod created at second s asking for one host port.
func hostPortPod(name string, s int, port int32, proto corev1.Protocol) *corev1.Pod {
	pod := testPod(name, "app")
	pod.CreationTimestamp = metav1.NewTime(time.Unix(1_700_000_000+int64(s), 0))
	pod.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8080, HostPort: port, Protocol: proto}}
	return pod
}

// assertRejected checks the pod is Failed as upstream's kubelet rejects
// it, with its Warning Event, and that nothing of it was started.
func assertRejected(t *testing.T, tk *testKubelet, pod *corev1.Pod, events []string, predicate, message string) {
	t.Helper()
	st := tk.apiPod(t, pod).Status
	if st.Phase != corev1.PodFailed || st.Reason != predicate || st.Message != "Pod was rejected: "+message {
		t.Fatalf("status phase=%s reason=%q message=%q, want Failed %s %q", st.Phase, st.Reason, st.Message, predicate, "Pod was rejected: "+message)
	}
	if want := "Warning " + predicate + " " + message; !slices.Contains(events, want) {
		t.Fatalf("events %q, want %q", events, want)
	}
	if list, _ := tk.rt.ListContainers(t.Context(), map[string]string{labelPodUID: string(pod.UID)}); len(list) != 0 {
		t.Fatalf("the rejected pod has containers %+v", list)
	}
	if slices.Contains(tk.net.Setups(), string(pod.UID)) {
		t.Fatalf("the rejected pod got a sandbox: %v", tk.net.Setups())
	}
}

// A node label added just before a pod asking for it was scheduled may be
// missing from the node the kubelet read last; as upstream's, it reads the
// node from the API before rejecting on affinity (the conformance spec
// "validates resource limits of pods that are allowed to run" labels the
// node and creates such a pod at once).
func TestNodeAffinityReadsTheNodeAgainBeforeRejecting(t *testing.T) {
	pod := testPod("p", "app")
	pod.Spec.NodeSelector = map[string]string{"node": "node-1"}
	tk := newTestKubelet(t, pod)
	stale := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
	tk.Kubelet.node = func() *corev1.Node { return stale }
	labelled := stale.DeepCopy()
	labelled.Labels = map[string]string{"node": "node-1"}
	if _, err := tk.client.CoreV1().Nodes().Create(t.Context(), labelled, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tk.sync(t, tk.worker(t, pod), pod)
	if st := tk.apiPod(t, pod).Status; st.Phase != corev1.PodRunning {
		t.Fatalf("pod is %s (%s %s), want Running", st.Phase, st.Reason, st.Message)
	}
}

// The conformance spec "Should recreate evicted statefulset": a pod bound
// to the node asking for a host port a running pod holds is rejected, and
// the running pod is untouched.
func TestPodWithTakenHostPortIsRejected(t *testing.T) {
	first := hostPortPod("first", 1, 21017, "")
	second := hostPortPod("second", 2, 21017, corev1.ProtocolTCP)
	tk := newTestKubelet(t, first, second)
	w1, w2 := tk.worker(t, first), tk.worker(t, second)
	tk.sync(t, w1, first)
	tk.rt.Took()

	if done := tk.sync(t, w2, second); done {
		t.Fatal("the rejected pod's worker ended before the pod is deleted")
	}
	assertRejected(t, tk, second, drainEvents(tk), "NodePorts", nodePortsMessage)
	// Its next syncs see it Failed: still nothing starts.
	tk.sync(t, w2, second)
	tk.sync(t, w2, second)
	assertCalls(t, tk.rt.Took("pull", "create", "start"))

	// The first pod keeps running.
	tk.sync(t, w1, first)
	assertCalls(t, tk.rt.Took("create", "start", "stop", "remove"))
	if st := tk.apiPod(t, first).Status; st.Phase != corev1.PodRunning {
		t.Fatalf("the first pod is %s, want Running", st.Phase)
	}
}

// A pod is never rejected because of one created after it, whichever
// worker asks first.
func TestAdmissionFollowsCreationOrder(t *testing.T) {
	first := hostPortPod("first", 1, 21017, "")
	second := hostPortPod("second", 2, 21017, "")
	tk := newTestKubelet(t, second, first)
	w1, w2 := tk.worker(t, first), tk.worker(t, second)
	tk.sync(t, w2, second)
	assertRejected(t, tk, second, drainEvents(tk), "NodePorts", nodePortsMessage)
	tk.sync(t, w1, first)
	if st := tk.apiPod(t, first).Status; st.Phase != corev1.PodRunning {
		t.Fatalf("the older pod is %s, want Running", st.Phase)
	}
}

func TestOtherHostPortOrProtocolIsAdmitted(t *testing.T) {
	for _, tc := range []struct {
		name  string
		port  int32
		proto corev1.Protocol
		ip    string
	}{
		{"other-port", 21018, corev1.ProtocolTCP, ""},
		{"udp", 21017, corev1.ProtocolUDP, ""},
		{"sctp", 21017, corev1.ProtocolSCTP, ""},
		{"no-hostport", 0, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first := hostPortPod("first", 1, 21017, "")
			second := hostPortPod("second", 2, tc.port, tc.proto)
			tk := newTestKubelet(t, first, second)
			w1, w2 := tk.worker(t, first), tk.worker(t, second)
			tk.sync(t, w1, first)
			tk.sync(t, w2, second)
			for _, p := range []*corev1.Pod{first, second} {
				if st := tk.apiPod(t, p).Status; st.Phase != corev1.PodRunning {
					t.Fatalf("%s is %s (%s), want Running", p.Name, st.Phase, st.Message)
				}
			}
		})
	}
}

// A kelp restart rejects nothing that already runs: the running pod is
// admitted even when an older pending pod asks for the same port first
// (that one is rejected).
func TestPodRunningAtStartIsNotRejected(t *testing.T) {
	pending := hostPortPod("pending", 1, 21017, "")
	running := hostPortPod("running", 2, 21017, "")
	running.Status.Phase = corev1.PodRunning
	tk := newTestKubelet(t, pending, running)
	id := adopt(tk.rt, running, "app", 0)
	wp, wr := tk.worker(t, pending), tk.worker(t, running)

	tk.sync(t, wp, pending)
	assertRejected(t, tk, pending, drainEvents(tk), "NodePorts", nodePortsMessage)
	tk.sync(t, wr, running)
	assertCalls(t, tk.rt.Took("create", "start", "stop", "remove"))
	st := tk.apiPod(t, running).Status
	if cs := containerStatus(t, st.ContainerStatuses, "app"); st.Phase != corev1.PodRunning || cs.ContainerID != "containerd://"+id {
		t.Fatalf("the running pod is %s with %+v, want Running on its adopted container", st.Phase, cs)
	}
}

// A pending pod whose directory exists was admitted before a restart (the
// directory is written only after admission): it is not checked again.
func TestPodStartedBeforeRestartIsNotRejected(t *testing.T) {
	first := hostPortPod("first", 1, 21017, "")
	second := hostPortPod("second", 2, 21017, "")
	tk := newTestKubelet(t, first, second)
	tk.sync(t, tk.worker(t, first), first)
	if err := tk.writePodFiles(second); err != nil {
		t.Fatal(err)
	}
	if a := tk.admit(t.Context(), second); !a.ok {
		t.Fatalf("a pod started before the restart is rejected: %s", a.message)
	}
}

func TestNodePredicates(t *testing.T) {
	for _, tc := range []struct {
		name      string
		node      func(*corev1.Node)
		pod       func(*corev1.Pod)
		predicate string
		message   string
	}{
		{"selector", nil, func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"disk": "ssd"} },
			"NodeAffinity", "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"},
		{"selector-match", func(n *corev1.Node) { n.Labels = map[string]string{"disk": "ssd"} },
			func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"disk": "ssd"} }, "", ""},
		{"noexecute", func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: "k", Value: "v", Effect: corev1.TaintEffectNoExecute}}
		}, nil, "TaintToleration", "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate"},
		{"noexecute-tolerated", func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: "k", Value: "v", Effect: corev1.TaintEffectNoExecute}}
		}, func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}}
		}, "", ""},
		{"noschedule", func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}
		}, nil, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod("p", "app")
			if tc.pod != nil {
				tc.pod(pod)
			}
			tk := newTestKubelet(t, pod)
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
			if tc.node != nil {
				tc.node(node)
			}
			tk.Kubelet.node = func() *corev1.Node { return node } // as the status loop last read it
			tk.sync(t, tk.worker(t, pod), pod)
			if tc.predicate != "" {
				assertRejected(t, tk, pod, drainEvents(tk), tc.predicate, tc.message)
				return
			}
			if st := tk.apiPod(t, pod).Status; st.Phase != corev1.PodRunning {
				t.Fatalf("pod is %s (%s), want Running", st.Phase, st.Message)
			}
			for _, e := range drainEvents(tk) {
				if strings.HasPrefix(e, "Warning") {
					t.Errorf("unexpected %q", e)
				}
			}
		})
	}
}
