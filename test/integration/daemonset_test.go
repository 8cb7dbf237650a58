package integration

import (
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubectl/pkg/util/podutils"

	"github.com/kelp-project/kelp/test/simkubelet"
)

func daemonSet(name string, tolerations ...corev1.Toleration) *appsv1.DaemonSet {
	one := intstr.FromInt32(1)
	return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"ds": name}},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: &one}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"ds": name}},
				Spec: corev1.PodSpec{Tolerations: tolerations, Containers: []corev1.Container{{Name: "app", Image: "busybox:1.36"}}}}}}
}

// daemonPodsByNode returns the live pods of DaemonSet name by node, and
// whether each is Running and Ready on its node.
func daemonPodsByNode(t *testing.T, cs kubernetes.Interface, name string) (map[string][]corev1.Pod, bool) {
	t.Helper()
	l, err := cs.CoreV1().Pods("default").List(ctxT(t), metav1.ListOptions{LabelSelector: "ds=" + name})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]corev1.Pod{}
	allReady := true
	for _, p := range l.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		out[p.Spec.NodeName] = append(out[p.Spec.NodeName], p)
		allReady = allReady && p.Spec.NodeName != "" && podutils.IsPodReady(&p)
	}
	return out, allReady
}

// onePerNode waits until DaemonSet name runs exactly one Ready pod on each
// of nodes and on no other.
func onePerNode(t *testing.T, cs kubernetes.Interface, name string, nodes ...string) map[string][]corev1.Pod {
	t.Helper()
	var got map[string][]corev1.Pod
	waitFor(t, fmt.Sprintf("%s: one Ready pod on each of %v", name, nodes), func() bool {
		var ready bool
		got, ready = daemonPodsByNode(t, cs, name)
		if !ready || len(got) != len(nodes) {
			return false
		}
		for _, n := range nodes {
			if len(got[n]) != 1 {
				return false
			}
		}
		return true
	})
	return got
}

func dsRolloutStatus(t *testing.T, s *testServer, name string) {
	t.Helper()
	out, err := s.kubectl("rollout", "status", "ds/"+name, "--timeout=60s")
	if err != nil || !strings.Contains(out, "successfully rolled out") {
		t.Fatalf("rollout status ds/%s: %v\n%s", name, err, out)
	}
}

// TestDaemonSet: with simulated nodes a DaemonSet runs one pod per node;
// a tainted node gets one only from a DaemonSet that tolerates the taint;
// a new node gets its pod; a failed pod is replaced; a cordoned node still
// gets one; a node leaving the selector loses it; an image change rolls
// node by node within maxUnavailable, and rollout history and undo work
// through kubectl.
func TestDaemonSet(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	k := simkubelet.Start(t, cs, "node-1", "node-2", "node-3")

	if _, err := cs.AppsV1().DaemonSets("default").Create(ctx, daemonSet("agent"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := onePerNode(t, cs, "agent", "node-1", "node-2", "node-3")
	dsRolloutStatus(t, s, "agent")
	p := pods["node-1"][0]
	if p.Labels[appsv1.ControllerRevisionHashLabelKey] == "" || p.Labels["pod-template-generation"] != "1" {
		t.Errorf("daemon pod labels %v: want controller-revision-hash and pod-template-generation=1", p.Labels)
	}
	ds, err := cs.AppsV1().DaemonSets("default").Get(ctx, "agent", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st := ds.Status; st.DesiredNumberScheduled != 3 || st.CurrentNumberScheduled != 3 || st.NumberReady != 3 ||
		st.UpdatedNumberScheduled != 3 || st.NumberAvailable != 3 || st.NumberUnavailable != 0 || st.NumberMisscheduled != 0 ||
		st.ObservedGeneration != ds.Generation {
		t.Errorf("status %+v", st)
	}

	// A tainted node: agent stays off it, a tolerating DaemonSet runs there.
	k.AddNode(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "infra-1"},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule}}}}, "4", "8Gi")
	tol := corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "infra", Effect: corev1.TaintEffectNoSchedule}
	if _, err := cs.AppsV1().DaemonSets("default").Create(ctx, daemonSet("infra", tol), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	onePerNode(t, cs, "infra", "node-1", "node-2", "node-3", "infra-1")
	waitFor(t, "agent observed the tainted node", func() bool {
		ds, err := cs.AppsV1().DaemonSets("default").Get(ctx, "agent", metav1.GetOptions{})
		return err == nil && ds.Status.DesiredNumberScheduled == 3
	})
	if got, _ := daemonPodsByNode(t, cs, "agent"); len(got["infra-1"]) != 0 {
		t.Errorf("agent, without the toleration, has a pod on the tainted node")
	}

	// A new node gets its pod.
	k.AddNode(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-4"}}, "4", "8Gi")
	nodes := []string{"node-1", "node-2", "node-3", "node-4"}
	onePerNode(t, cs, "agent", nodes...)

	// A failed daemon pod is deleted and replaced on its node.
	failed := pods["node-2"][0]
	failed.Status.Phase = corev1.PodFailed
	if _, err := cs.CoreV1().Pods("default").UpdateStatus(ctx, &failed, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the failed pod replaced", func() bool {
		got, ready := daemonPodsByNode(t, cs, "agent")
		return ready && len(got["node-2"]) == 1 && got["node-2"][0].Name != failed.Name
	})
	waitFor(t, "FailedDaemonPod event", func() bool {
		evs, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=agent"})
		if err != nil {
			return false
		}
		seen := map[string]bool{}
		for _, e := range evs.Items {
			seen[e.Reason] = true
		}
		return seen["FailedDaemonPod"] && seen["SuccessfulCreate"] && seen["SuccessfulDelete"]
	})

	// An image change rolls node by node: never more than maxUnavailable
	// (1) of the 4 nodes without a Ready pod, never two pods on a node.
	b := watchPodBounds(t, cs, "default", "ds=agent")
	s.mustKubectl("set", "image", "ds/agent", "app=busybox:1.37")
	dsRolloutStatus(t, s, "agent")
	most, least := b.get()
	t.Logf("rolling update over 4 nodes: at most %d live pods, at least %d Ready", most, least)
	if most > 4 || least < 3 {
		t.Errorf("maxUnavailable 1 over 4 nodes: saw at most %d live pods (bound 4) and at least %d Ready (bound 3)\n%s", most, least, b)
	}
	for n, ps := range onePerNode(t, cs, "agent", nodes...) {
		if img := ps[0].Spec.Containers[0].Image; img != "busybox:1.37" {
			t.Errorf("after the rollout %s runs %s", n, img)
		}
	}

	out := s.mustKubectl("rollout", "history", "ds/agent")
	if !strings.Contains(out, "\n1 ") || !strings.Contains(out, "\n2 ") {
		t.Errorf("rollout history lacks revisions 1 and 2:\n%s", out)
	}
	if out := s.mustKubectl("rollout", "history", "ds/agent", "--revision=1"); !strings.Contains(out, "busybox:1.36") {
		t.Errorf("revision 1 does not show the old image:\n%s", out)
	}
	s.mustKubectl("rollout", "undo", "ds/agent")
	dsRolloutStatus(t, s, "agent")
	waitFor(t, "undo back to busybox:1.36 on every node", func() bool {
		got, ready := daemonPodsByNode(t, cs, "agent")
		if !ready || len(got) != len(nodes) {
			return false
		}
		for _, ps := range got {
			if len(ps) != 1 || ps[0].Spec.Containers[0].Image != "busybox:1.36" {
				return false
			}
		}
		return true
	})
	revs, err := cs.AppsV1().ControllerRevisions("default").List(ctx, metav1.ListOptions{LabelSelector: "ds=agent"})
	if err != nil || len(revs.Items) != 2 {
		t.Fatalf("ControllerRevisions after undo: %v %d", err, len(revs.Items))
	}
	for _, r := range revs.Items {
		if strings.Contains(string(r.Data.Raw), "busybox:1.36") && r.Revision != 3 {
			t.Errorf("the restored revision %s is number %d, want 3", r.Name, r.Revision)
		}
	}

	// No longer eligible: a label selector the nodes lose.
	s.mustKubectl("label", "node", "node-4", "role=edge")
	s.mustKubectl("patch", "ds", "infra", "--type=merge", "-p", `{"spec":{"template":{"spec":{"nodeSelector":{"role":"edge"}}}}}`)
	onePerNode(t, cs, "infra", "node-4")

	// A cordoned node still gets daemon pods: they tolerate unschedulable.
	s.mustKubectl("cordon", "node-1")
	if _, err := cs.AppsV1().DaemonSets("default").Create(ctx, daemonSet("late"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	onePerNode(t, cs, "late", nodes...)
}

// TestDaemonSetSurge: maxSurge 1 / maxUnavailable 0 over 3 nodes starts
// the new pod beside the old one and removes the old one only once the new
// one is Ready: never fewer than 3 Ready pods, never more than 4 live.
func TestDaemonSetSurge(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	simkubelet.Start(t, cs, "node-1", "node-2", "node-3")
	ds := daemonSet("surge")
	one, zero := intstr.FromInt32(1), intstr.FromInt32(0)
	ds.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateDaemonSet{MaxSurge: &one, MaxUnavailable: &zero}
	if _, err := cs.AppsV1().DaemonSets("default").Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	onePerNode(t, cs, "surge", "node-1", "node-2", "node-3")
	dsRolloutStatus(t, s, "surge")
	b := watchPodBounds(t, cs, "default", "ds=surge")
	s.mustKubectl("set", "image", "ds/surge", "app=busybox:1.37")
	dsRolloutStatus(t, s, "surge")
	most, least := b.get()
	t.Logf("surge over 3 nodes: at most %d live pods, at least %d Ready", most, least)
	if most != 4 || least < 3 {
		t.Errorf("maxSurge 1/maxUnavailable 0 over 3 nodes: saw at most %d live pods (want 4) and at least %d Ready (bound 3)\n%s", most, least, b)
	}
	for n, ps := range onePerNode(t, cs, "surge", "node-1", "node-2", "node-3") {
		if img := ps[0].Spec.Containers[0].Image; img != "busybox:1.37" {
			t.Errorf("after the rollout %s runs %s", n, img)
		}
	}
}
