package integration

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/kelp-project/kelp/test/simkubelet"
)

// PriorityClasses are served with the two system classes created at
// start; a pod gets its class's priority at admission (the global
// default's when it names none), an unknown class or a second default is
// upstream's 403, and the system classes cannot be deleted.
func TestPriorityClass(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	pcs := cs.SchedulingV1().PriorityClasses()

	for name, value := range map[string]int32{"system-node-critical": 2000001000, "system-cluster-critical": 2000000000} {
		pc, err := pcs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("built-in class %s: %v", name, err)
		}
		if pc.Value != value || pc.GlobalDefault || pc.PreemptionPolicy == nil || *pc.PreemptionPolicy != corev1.PreemptLowerPriority || pc.Description == "" {
			t.Errorf("%s: value %d default %v policy %v description %q", name, pc.Value, pc.GlobalDefault, pc.PreemptionPolicy, pc.Description)
		}
		err = pcs.Delete(ctx, name, metav1.DeleteOptions{})
		if want := `priorityclasses.scheduling.k8s.io "` + name + `" is forbidden: this is a system priority class and cannot be deleted`; !apierrors.IsForbidden(err) || err.Error() != want {
			t.Errorf("deleting %s:\n got %v\nwant %s", name, err, want)
		}
	}
	// Discovery and kubectl's columns.
	rl, err := cs.Discovery().ServerResourcesForGroupVersion("scheduling.k8s.io/v1")
	if err != nil || len(rl.APIResources) != 1 || rl.APIResources[0].Name != "priorityclasses" || rl.APIResources[0].Namespaced ||
		strings.Join(rl.APIResources[0].ShortNames, ",") != "pc" {
		t.Errorf("discovery of scheduling.k8s.io/v1: %+v %v", rl, err)
	}
	out := s.mustKubectl("get", "pc")
	if header := strings.Fields(strings.SplitN(out, "\n", 2)[0]); strings.Join(header, " ") != "NAME VALUE GLOBAL-DEFAULT AGE PREEMPTIONPOLICY" ||
		!strings.Contains(out, "system-node-critical") || !strings.Contains(out, "2000001000") {
		t.Errorf("kubectl get pc:\n%s", out)
	}

	// Validation: a user class's value is bounded, system- names are
	// reserved, value and preemptionPolicy are immutable.
	_, err = pcs.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "huge"}, Value: 1000000001}, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "maximum allowed value of a user defined priority is 1000000000") {
		t.Errorf("too high a value: %v", err)
	}
	_, err = pcs.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "system-mine"}, Value: 10}, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "priority class names with 'system-' prefix are reserved for system use only") {
		t.Errorf("a system- name: %v", err)
	}
	high, err := pcs.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if high.PreemptionPolicy == nil || *high.PreemptionPolicy != corev1.PreemptLowerPriority {
		t.Errorf("preemptionPolicy not defaulted: %v", high.PreemptionPolicy)
	}
	_, err = pcs.Patch(ctx, "high", types.MergePatchType, []byte(`{"value":2000}`), metav1.PatchOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "value: Forbidden: may not be changed in an update.") {
		t.Errorf("changing the value: %v", err)
	}
	_, err = pcs.Patch(ctx, "high", types.MergePatchType, []byte(`{"preemptionPolicy":"Never"}`), metav1.PatchOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "field is immutable") {
		t.Errorf("changing the preemptionPolicy: %v", err)
	}
	if _, err := pcs.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "polite"}, Value: 50,
		PreemptionPolicy: ptr.To(corev1.PreemptNever)}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	pods := cs.CoreV1().Pods("default")
	pod := func(name, class string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{PriorityClassName: class,
			Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	}
	check := func(p *corev1.Pod, class string, value int32, policy corev1.PreemptionPolicy) {
		t.Helper()
		if p.Spec.PriorityClassName != class || p.Spec.Priority == nil || *p.Spec.Priority != value ||
			p.Spec.PreemptionPolicy == nil || *p.Spec.PreemptionPolicy != policy {
			t.Errorf("pod %s: class %q priority %v policy %v, want %q %d %s", p.Name, p.Spec.PriorityClassName, p.Spec.Priority, p.Spec.PreemptionPolicy, class, value, policy)
		}
	}
	for _, tc := range []struct {
		name, class string
		value       int32
		policy      corev1.PreemptionPolicy
	}{
		{"plain", "", 0, corev1.PreemptLowerPriority},
		{"important", "high", 1000, corev1.PreemptLowerPriority},
		{"waiter", "polite", 50, corev1.PreemptNever},
		{"critical", "system-cluster-critical", 2000000000, corev1.PreemptLowerPriority},
	} {
		p, err := pods.Create(ctx, pod(tc.name, tc.class), metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("pod %s: %v", tc.name, err)
		}
		check(p, tc.class, tc.value, tc.policy)
	}
	// An update that leaves the priority out keeps it (retried: the
	// scheduler writes the pod's status meanwhile).
	var got *corev1.Pod
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := pods.Get(ctx, "important", metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Spec.Priority, cur.Spec.PreemptionPolicy = nil, nil
		cur.Labels = map[string]string{"touched": "yes"}
		got, err = pods.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("update without the priority: %v", err)
	}
	check(got, "high", 1000, corev1.PreemptLowerPriority)

	_, err = pods.Create(ctx, pod("lost", "nope"), metav1.CreateOptions{})
	if want := `pods "lost" is forbidden: no PriorityClass with name nope was found`; !apierrors.IsForbidden(err) || err.Error() != want {
		t.Errorf("an unknown class:\n got %v\nwant %s", err, want)
	}
	bold := pod("bold", "high")
	bold.Spec.Priority = ptr.To(int32(7))
	_, err = pods.Create(ctx, bold, metav1.CreateOptions{})
	if want := `pods "bold" is forbidden: the integer value of priority (7) must not be provided in pod spec; priority admission controller computed 1000 from the given PriorityClass name`; !apierrors.IsForbidden(err) || err.Error() != want {
		t.Errorf("a priority of its own:\n got %v\nwant %s", err, want)
	}

	// One global default: pods naming no class get it; a second is refused,
	// also by an update; the default itself may be updated.
	if _, err := pcs.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "everyone"}, Value: 10, GlobalDefault: true}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = pcs.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "everyone-else"}, Value: 20, GlobalDefault: true}, metav1.CreateOptions{})
	if want := `priorityclasses.scheduling.k8s.io "everyone-else" is forbidden: PriorityClass everyone is already marked as default. Only one default can exist`; !apierrors.IsForbidden(err) || err.Error() != want {
		t.Errorf("a second default:\n got %v\nwant %s", err, want)
	}
	_, err = pcs.Patch(ctx, "high", types.MergePatchType, []byte(`{"globalDefault":true}`), metav1.PatchOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "PriorityClass everyone is already marked as default") {
		t.Errorf("making a second default by update: %v", err)
	}
	if _, err := pcs.Patch(ctx, "everyone", types.MergePatchType, []byte(`{"description":"the default"}`), metav1.PatchOptions{}); err != nil {
		t.Errorf("updating the default: %v", err)
	}
	p, err := pods.Create(ctx, pod("defaulted", ""), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	check(p, "everyone", 10, corev1.PreemptLowerPriority)

	// A user class may be deleted.
	if err := pcs.Delete(ctx, "high", metav1.DeleteOptions{}); err != nil {
		t.Errorf("deleting a user class: %v", err)
	}
}

// A pod of high priority that fits nowhere preempts the least important
// pod on a node (a simulated kubelet's), is nominated to it and runs there
// once the victim is gone; pods of higher priority stay.
func TestPriorityClassPreemption(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	simkubelet.Start(t, cs, "sim-a")
	waitFor(t, "the node", func() bool {
		n, err := cs.CoreV1().Nodes().Get(ctx, "sim-a", metav1.GetOptions{})
		return err == nil && len(n.Status.Allocatable) > 0
	})
	for name, value := range map[string]int32{"low": 1, "mid": 100, "high": 1000} {
		if _, err := cs.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pods := cs.CoreV1().Pods("default")
	pod := func(name, class string) *corev1.Pod {
		cpu := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{PriorityClassName: class,
			Containers: []corev1.Container{{Name: "c", Image: "busybox", Resources: corev1.ResourceRequirements{Requests: cpu}}}}}
	}
	running := func(name string) func() bool {
		return func() bool {
			p, err := pods.Get(ctx, name, metav1.GetOptions{})
			return err == nil && p.Spec.NodeName == "sim-a" && p.Status.Phase == corev1.PodRunning
		}
	}
	for _, p := range []*corev1.Pod{pod("victim", "low"), pod("survivor", "mid")} {
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, p.Name+" running", running(p.Name))
	}
	if _, err := pods.Create(ctx, pod("urgent", "high"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "urgent running on sim-a", running("urgent"))
	if _, err := pods.Get(ctx, "victim", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("victim not deleted: %v", err)
	}
	if p, err := pods.Get(ctx, "survivor", metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil {
		t.Errorf("survivor preempted: %v", err)
	}
	u, err := pods.Get(ctx, "urgent", metav1.GetOptions{})
	if err != nil || u.Status.NominatedNodeName != "sim-a" {
		t.Errorf("urgent's nominatedNodeName: %v %v", u, err)
	}
	waitFor(t, "the Preempted event", func() bool {
		return hasPodEvent(ctx, cs, "victim", "Preempted", "Preempted by pod "+string(u.UID)+" on node sim-a")
	})
}
