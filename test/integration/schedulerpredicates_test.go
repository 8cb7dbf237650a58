package integration

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fieldsel "k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"

	"github.com/kelp-project/kelp/test/simkubelet"
)

// The conformance spec "SchedulerPredicates validates resource limits of
// pods that are allowed to run", step by step: the nodes get a "node"
// label, a filler pod per node takes 70% of the CPU its pods leave (pinned
// there by required node affinity on the new label, requests = limits,
// the restricted security context of the spec's pause pods), and one more
// pod asking for half of the largest node's CPU stays Pending with a
// FailedScheduling event naming Insufficient cpu, while every filler is
// bound with PodScheduled True.
func TestResourceLimitsOfPodsAllowedToRun(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	simkubelet.Start(t, cs, "node-1", "node-2")
	ns := "sched-pred"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A pod already running on node-1 (its requests count against the
	// node), and one that ended (it does not).
	running := pausePod("running", ns, "300m", nil)
	running.Spec.NodeName = "node-1"
	done := pausePod("done", ns, "3", nil)
	done.Spec.NodeName = "node-1"
	done.Annotations = map[string]string{simkubelet.ExitCodeAnnotation: "0"}
	for _, p := range []*corev1.Pod{running, done} {
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the pod that ended Succeeded and the other Running", func() bool {
		d, err1 := cs.CoreV1().Pods(ns).Get(ctx, "done", metav1.GetOptions{})
		r, err2 := cs.CoreV1().Pods(ns).Get(ctx, "running", metav1.GetOptions{})
		return err1 == nil && err2 == nil && d.Status.Phase == corev1.PodSucceeded && r.Status.Phase == corev1.PodRunning
	})

	// The spec's arithmetic.
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	free := map[string]int64{}
	maxAllocatable := int64(0)
	for _, n := range nodes.Items {
		patch := `{"metadata":{"labels":{"node":"` + n.Name + `"}}}`
		if _, err := cs.CoreV1().Nodes().Patch(ctx, n.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		cpu := n.Status.Allocatable[corev1.ResourceCPU]
		free[n.Name] = cpu.MilliValue()
		maxAllocatable = max(maxAllocatable, cpu.MilliValue())
	}
	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if _, ok := free[p.Spec.NodeName]; ok && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			for _, c := range p.Spec.Containers {
				free[p.Spec.NodeName] -= c.Resources.Requests.Cpu().MilliValue()
			}
		}
	}
	var fillers []string
	for node, cpu := range free {
		name := "filler-pod-" + string(uuid.NewUUID())
		p := pausePod(name, ns, resource.NewMilliQuantity(cpu*7/10, resource.DecimalSI).String(), &corev1.Affinity{
			NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
					{Key: "node", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}}})
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		fillers = append(fillers, name)
	}
	for _, name := range fillers {
		waitWithin(t, 30*time.Second, name+" Running", func() bool {
			p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			return err == nil && p.Status.Phase == corev1.PodRunning
		})
	}

	extra := pausePod("additional-pod", ns, resource.NewMilliQuantity(maxAllocatable*5/10, resource.DecimalSI).String(), nil)
	extra.Labels = map[string]string{"name": "additional"}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, extra, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var msg string
	waitFor(t, "FailedScheduling for additional-pod", func() bool {
		l, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fieldsel.OneTermEqualSelector("reason", "FailedScheduling").String()})
		if err != nil {
			return false
		}
		for _, e := range l.Items {
			if strings.HasPrefix(e.Name, "additional-pod") && e.Type == corev1.EventTypeWarning {
				msg = e.Message
				return true
			}
		}
		return false
	})
	if !strings.Contains(msg, "2 Insufficient cpu") {
		t.Errorf("FailedScheduling message %q, want it to name 2 nodes with Insufficient cpu", msg)
	}
	// verifyResult: the fillers (and the pod that was running) scheduled
	// with PodScheduled True, the additional pod not scheduled.
	time.Sleep(2 * simkubelet.Interval)
	all, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	scheduled, notScheduled := 0, 0
	for _, p := range all.Items {
		if p.Spec.NodeName == "" {
			notScheduled++
			continue
		}
		if p.Name == "running" || p.Name == "done" {
			continue
		}
		scheduled++
		ok := false
		for _, c := range p.Status.Conditions {
			ok = ok || (c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue)
		}
		if !ok {
			t.Errorf("pod %s on %s has no PodScheduled=True: %+v", p.Name, p.Spec.NodeName, p.Status.Conditions)
		}
	}
	if scheduled != len(fillers) || notScheduled != 1 {
		t.Errorf("scheduled %d (want %d fillers), not scheduled %d (want 1)", scheduled, len(fillers), notScheduled)
	}
}

// pausePod is the spec's pause pod: one container, the restricted
// security context, grace period 1 s, cpu requests = limits.
func pausePod(name, ns, cpu string, affinity *corev1.Affinity) *corev1.Pod {
	grace := int64(1)
	yes, no := true, false
	user := int64(1000)
	q := resource.MustParse(cpu)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: &yes, RunAsUser: &user,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Affinity:                      affinity,
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{Name: name[:min(len(name), 63)], Image: "registry.k8s.io/pause:3.10.1",
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: &no,
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
				Resources: corev1.ResourceRequirements{
					Limits:   corev1.ResourceList{corev1.ResourceCPU: q},
					Requests: corev1.ResourceList{corev1.ResourceCPU: q}}}},
		},
	}
}
