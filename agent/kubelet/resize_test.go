package kubelet

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kelp-project/kelp/runtime"
)

func cpuMem(reqCPU, reqMem, limCPU, limMem string) corev1.ResourceRequirements {
	list := func(cpu, mem string) corev1.ResourceList {
		l := corev1.ResourceList{}
		if cpu != "" {
			l[corev1.ResourceCPU] = resource.MustParse(cpu)
		}
		if mem != "" {
			l[corev1.ResourceMemory] = resource.MustParse(mem)
		}
		return l
	}
	return corev1.ResourceRequirements{Requests: list(reqCPU, reqMem), Limits: list(limCPU, limMem)}
}

// resizeTo stores the pod with new resources for container 0 and a new
// generation, as pods/resize does.
func (tk *testKubelet) resizeTo(t *testing.T, pod *corev1.Pod, r corev1.ResourceRequirements, policy ...corev1.ContainerResizePolicy) {
	t.Helper()
	p := tk.apiPod(t, pod)
	p.Spec.Containers[0].Resources = r
	if policy != nil {
		p.Spec.Containers[0].ResizePolicy = policy
	}
	p.Generation++
	if _, err := tk.client.CoreV1().Pods(p.Namespace).Update(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func resizeCond(st corev1.PodStatus, typ corev1.PodConditionType) *corev1.PodCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == typ {
			return &st.Conditions[i]
		}
	}
	return nil
}

func resizablePod(t *testing.T, tk *testKubelet) (*corev1.Pod, *podWorker) {
	t.Helper()
	pod := testPod("web", "app")
	pod.Generation = 1
	pod.Status.QOSClass = corev1.PodQOSBurstable
	pod.Spec.Containers[0].Resources = cpuMem("100m", "64Mi", "200m", "128Mi")
	tk.addPod(t, pod)
	w := tk.worker(t, pod)
	tk.sync(t, w, pod)
	return pod, w
}

// A resize the node has room for is applied to the running container in
// place, pod cgroup first, and reported as its actual resources.
func TestResizeUpdatesRunningContainerInPlace(t *testing.T) {
	tk := newTestKubelet(t)
	tk.Kubelet.node = func() *corev1.Node {
		return &corev1.Node{Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("2Gi")}}}
	}
	pod, w := resizablePod(t, tk)
	id := containerID(pod, "app", 0)
	if spec, _ := tk.rt.Spec(id); spec.Labels[labelResources] == "" {
		t.Fatalf("container made without its resources label: %v", spec.Labels)
	}
	want := cpuMem("150m", "64Mi", "300m", "256Mi")
	tk.resizeTo(t, pod, want)
	tk.sync(t, w, pod)

	if !slices.Contains(tk.rt.Calls(), "update "+id) {
		t.Fatalf("no in-place update of %s: %q", id, tk.rt.Calls())
	}
	if slices.Contains(tk.rt.Calls(), "stop "+id+" 30s") {
		t.Fatalf("container restarted for a NotRequired resize: %q", tk.rt.Calls())
	}
	spec, _ := tk.rt.Spec(id)
	if spec.Resources.CPUQuota != 30000 || spec.Resources.MemoryLimit != 256<<20 || spec.Resources.CPUShares != 153 {
		t.Fatalf("container resources after resize = %+v, want quota 30000, 256Mi, 153 shares", spec.Resources)
	}
	cg, _ := tk.rt.PodCgroup(string(pod.UID))
	if cg.Resources.MemoryLimit != 256<<20 || cg.Resources.CPUQuota != 30000 {
		t.Fatalf("pod cgroup after resize = %+v, want the new limits", cg.Resources)
	}
	st := tk.apiPod(t, pod).Status
	cs := containerStatus(t, st.ContainerStatuses, "app")
	if cs.Resources == nil || !sameCPUMemory(*cs.Resources, want) {
		t.Fatalf("status resources = %+v, want %+v", cs.Resources, want)
	}
	if q := cs.AllocatedResources[corev1.ResourceCPU]; q.Cmp(resource.MustParse("150m")) != 0 {
		t.Fatalf("allocatedResources = %v, want cpu 150m", cs.AllocatedResources)
	}
	if st.ObservedGeneration != 2 || resizeCond(st, corev1.PodResizePending) != nil || resizeCond(st, corev1.PodResizeInProgress) != nil {
		t.Fatalf("status after the resize: observedGeneration %d, conditions %+v", st.ObservedGeneration, st.Conditions)
	}
	if cs.RestartCount != 0 {
		t.Fatalf("restartCount = %d, want 0", cs.RestartCount)
	}
}

// A resource whose resizePolicy is RestartContainer restarts the
// container, which comes back with its new resources.
func TestResizeRestartsContainerForRestartContainerPolicy(t *testing.T) {
	tk := newTestKubelet(t)
	pod, w := resizablePod(t, tk)
	tk.resizeTo(t, pod, cpuMem("100m", "64Mi", "200m", "256Mi"),
		corev1.ContainerResizePolicy{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.RestartContainer})
	tk.sync(t, w, pod)

	restarted := containerID(pod, "app", 1)
	spec, ok := tk.rt.Spec(restarted)
	if !ok || spec.Resources.MemoryLimit != 256<<20 {
		t.Fatalf("restarted container %s: present %v, resources %+v; calls %q", restarted, ok, spec.Resources, tk.rt.Calls())
	}
	if slices.Contains(tk.rt.Calls(), "update "+containerID(pod, "app", 0)) {
		t.Fatalf("a RestartContainer resize was applied in place: %q", tk.rt.Calls())
	}
	tk.sync(t, w, pod)
	cs := containerStatus(t, tk.apiPod(t, pod).Status.ContainerStatuses, "app")
	if cs.RestartCount != 1 || cs.State.Running == nil {
		t.Fatalf("status after restart: restartCount %d, state %+v", cs.RestartCount, cs.State)
	}
}

// A resize beyond what the node has left beside the other pods is
// deferred: PodResizePending/Deferred with upstream's message, the
// container untouched, allocatedResources the old ones.
func TestResizeDeferredWhenNodeLacksRoom(t *testing.T) {
	tk := newTestKubelet(t)
	tk.Kubelet.node = func() *corev1.Node {
		return &corev1.Node{Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}
	}
	other := testPod("other", "big")
	other.Spec.Containers[0].Resources = cpuMem("800m", "128Mi", "", "")
	tk.addPod(t, other)
	tk.sync(t, tk.worker(t, other), other)

	pod, w := resizablePod(t, tk)
	tk.resizeTo(t, pod, cpuMem("500m", "64Mi", "600m", "128Mi"))
	tk.sync(t, w, pod)

	if slices.Contains(tk.rt.Calls(), "update "+containerID(pod, "app", 0)) {
		t.Fatalf("a deferred resize was applied: %q", tk.rt.Calls())
	}
	st := tk.apiPod(t, pod).Status
	c := resizeCond(st, corev1.PodResizePending)
	if c == nil || c.Reason != corev1.PodReasonDeferred || c.ObservedGeneration != 2 ||
		!strings.Contains(c.Message, "Node didn't have enough resource: cpu, requested: 500, used: 800, capacity: 1000") {
		t.Fatalf("PodResizePending = %+v, want Deferred for cpu", c)
	}
	cs := containerStatus(t, st.ContainerStatuses, "app")
	if q := cs.AllocatedResources[corev1.ResourceCPU]; q.Cmp(resource.MustParse("100m")) != 0 {
		t.Fatalf("allocatedResources = %v, want the old cpu 100m", cs.AllocatedResources)
	}
	if !w.retry {
		t.Fatal("a deferred resize is not retried at the next resync")
	}

	// The other pod goes: the resize is accepted at the next sync.
	tk.Kubelet.admitMu.Lock()
	delete(tk.Kubelet.admitted, other.UID)
	tk.Kubelet.admitMu.Unlock()
	if err := tk.factory.Core().V1().Pods().Informer().GetIndexer().Delete(other); err != nil {
		t.Fatal(err)
	}
	tk.Kubelet.forget(other.UID)
	tk.sync(t, w, pod)
	st = tk.apiPod(t, pod).Status
	if resizeCond(st, corev1.PodResizePending) != nil || !slices.Contains(tk.rt.Calls(), "update "+containerID(pod, "app", 0)) {
		t.Fatalf("resize not applied once room was made: conditions %+v, calls %q", st.Conditions, tk.rt.Calls())
	}
}

// A failed in-place update leaves PodResizeInProgress with reason Error.
func TestResizeUpdateFailureIsInProgressError(t *testing.T) {
	tk := newTestKubelet(t)
	pod, w := resizablePod(t, tk)
	exitContainer(t, tk.rt, containerID(pod, "app", 0), 0)
	// The worker still believes the container runs (inst is read before),
	// so the runtime refuses the update of a stopped task.
	inst, err := w.instances(w.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range inst["app"] {
		inst["app"][i].State = "running"
	}
	tk.resizeTo(t, pod, cpuMem("150m", "64Mi", "200m", "128Mi"))
	w.syncResize(w.ctx, tk.apiPod(t, pod), inst)
	c := w.resize.inProgress
	if c == nil || c.Reason != corev1.PodReasonError || !strings.Contains(c.Message, "updating container app") {
		t.Fatalf("PodResizeInProgress = %+v, want reason Error", c)
	}
}

func TestLargerResourcesIsTheLooserLimit(t *testing.T) {
	a := runtimeResources(2, 10000, 100)
	b := runtimeResources(4, 0, 50)
	got := largerResources(a, b)
	if got.CPUShares != 4 || got.CPUQuota != 0 || got.MemoryLimit != 100 {
		t.Fatalf("largerResources = %+v, want shares 4, no quota, memory 100", got)
	}
}

func runtimeResources(shares uint64, quota, memory int64) runtime.Resources {
	return runtime.Resources{CPUShares: shares, CPUQuota: quota, MemoryLimit: memory}
}
