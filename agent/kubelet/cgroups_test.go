package kubelet

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/kelp-project/kelp/runtime"
	"github.com/kelp-project/kelp/runtime/cgroups"
)

// res builds requirements: pairs of resource name and quantity, requests
// first ("cpu", "250m", "memory", "64Mi"), then limits after "|".
func res(kv ...string) corev1.ResourceRequirements {
	r := corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}
	list := r.Requests
	for i := 0; i < len(kv); i++ {
		if kv[i] == "|" {
			list = r.Limits
			continue
		}
		list[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		i++
	}
	return r
}

func podWith(containers ...corev1.ResourceRequirements) *corev1.Pod {
	pod := testPod("p")
	for i, r := range containers {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: string(rune('a' + i)), Image: "img", Resources: r})
	}
	return pod
}

// podResources follows upstream's ResourceConfigForPod.
func TestPodResources(t *testing.T) {
	const mi = 1 << 20
	sidecar := podWith(res("cpu", "500m", "|", "cpu", "1", "memory", "64Mi"))
	sidecar.Spec.InitContainers = []corev1.Container{
		{Name: "side", Image: "img", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways), Resources: res("cpu", "250m", "|", "cpu", "500m", "memory", "32Mi")},
	}
	initPeak := podWith(res("cpu", "500m", "|", "cpu", "1", "memory", "64Mi"))
	initPeak.Spec.InitContainers = []corev1.Container{{Name: "setup", Image: "img", Resources: res("cpu", "2", "|", "cpu", "2", "memory", "256Mi")}}
	for _, c := range []struct {
		name string
		pod  *corev1.Pod
		pids int64
		qos  cgroups.QOS
		want runtime.Resources
	}{
		// Pods as the API server stores them: requests defaulted from
		// limits.
		{"guaranteed: every limit, summed", podWith(res("cpu", "500m", "memory", "64Mi", "|", "cpu", "500m", "memory", "64Mi"),
			res("cpu", "250m", "memory", "32Mi", "|", "cpu", "250m", "memory", "32Mi")), 0,
			cgroups.Guaranteed, runtime.Resources{CPUShares: 768, CPUQuota: 75000, CPUPeriod: 100000, MemoryLimit: 96 * mi}},
		{"burstable with every limit", podWith(res("cpu", "100m", "memory", "16Mi", "|", "cpu", "1", "memory", "64Mi")), 0,
			cgroups.Burstable, runtime.Resources{CPUShares: 102, CPUQuota: 100000, CPUPeriod: 100000, MemoryLimit: 64 * mi}},
		{"burstable: one container without limits leaves the pod unlimited",
			podWith(res("cpu", "100m", "|", "cpu", "1", "memory", "64Mi"), res("cpu", "200m")), 0,
			cgroups.Burstable, runtime.Resources{CPUShares: 307}},
		{"burstable: memory limited everywhere, CPU not", podWith(res("cpu", "100m", "|", "memory", "64Mi"), res("|", "memory", "32Mi")), 0,
			cgroups.Burstable, runtime.Resources{CPUShares: 102, MemoryLimit: 96 * mi}},
		{"best effort: minimum shares", podWith(corev1.ResourceRequirements{}, corev1.ResourceRequirements{}), 0,
			cgroups.BestEffort, runtime.Resources{CPUShares: 2}},
		{"best effort with --pod-max-pids", podWith(corev1.ResourceRequirements{}), 1024,
			cgroups.BestEffort, runtime.Resources{CPUShares: 2, PidsLimit: 1024}},
		{"an init container's peak counts", initPeak, 0,
			cgroups.Burstable, runtime.Resources{CPUShares: 2048, CPUQuota: 200000, CPUPeriod: 100000, MemoryLimit: 256 * mi}},
		{"a sidecar adds to the containers", sidecar, 100,
			cgroups.Burstable, runtime.Resources{CPUShares: 768, CPUQuota: 150000, CPUPeriod: 100000, MemoryLimit: 96 * mi, PidsLimit: 100}},
		{"a tiny limit gets the minimum quota", podWith(res("cpu", "1m", "memory", "8Mi", "|", "cpu", "1m", "memory", "8Mi")), 0,
			cgroups.Guaranteed, runtime.Resources{CPUShares: 2, CPUQuota: 1000, CPUPeriod: 100000, MemoryLimit: 8 * mi}},
	} {
		if q := podQOS(c.pod); q != c.qos {
			t.Errorf("%s: QoS %q, want %q", c.name, q, c.qos)
		}
		if got := podResources(c.pod, c.pids); got != c.want {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, got, c.want)
		}
	}
}

// The class the API server recorded wins over the spec.
func TestPodQOSFromStatus(t *testing.T) {
	pod := podWith(corev1.ResourceRequirements{})
	pod.Status.QOSClass = corev1.PodQOSBurstable
	if q := podQOS(pod); q != cgroups.Burstable {
		t.Errorf("QoS %q, want burstable from the status", q)
	}
}

func TestContainerResources(t *testing.T) {
	for _, c := range []struct {
		name string
		r    corev1.ResourceRequirements
		want runtime.Resources
	}{
		{"nothing: minimum shares", corev1.ResourceRequirements{}, runtime.Resources{CPUShares: 2}},
		{"requests and limits", res("cpu", "250m", "memory", "32Mi", "|", "cpu", "500m", "memory", "64Mi"),
			runtime.Resources{CPUShares: 256, CPUQuota: 50000, CPUPeriod: 100000, MemoryLimit: 64 << 20}},
		{"a limit alone is the request", res("|", "cpu", "2"), runtime.Resources{CPUShares: 2048, CPUQuota: 200000, CPUPeriod: 100000}},
		{"huge request capped", res("cpu", "1000"), runtime.Resources{CPUShares: 262144}},
	} {
		ctr := &corev1.Container{Resources: c.r}
		if got := containerResources(ctr); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

// Each pod's containers go in its cgroup, nested by QoS as upstream's
// kubelet nests them, made with the pod's limits before its first
// container; the cgroup goes with the pod.
func TestPodCgroupNestingAndLifecycle(t *testing.T) {
	guaranteed := testPod("gold", "app")
	guaranteed.Spec.Containers[0].Resources = res("cpu", "1", "memory", "64Mi", "|", "cpu", "1", "memory", "64Mi")
	burstable := testPod("silver", "app")
	burstable.Spec.Containers[0].Resources = res("cpu", "100m")
	besteffort := testPod("bronze", "app")
	tk := newTestKubelet(t, guaranteed, burstable, besteffort)
	tk.cfg.PodPidsLimit = 4096
	for pod, want := range map[*corev1.Pod]struct {
		qos    cgroups.QOS
		parent string
		res    runtime.Resources
	}{
		guaranteed: {cgroups.Guaranteed, "/kubepods/poduid-gold", runtime.Resources{CPUShares: 1024, CPUQuota: 100000, CPUPeriod: 100000, MemoryLimit: 64 << 20, PidsLimit: 4096}},
		burstable:  {cgroups.Burstable, "/kubepods/burstable/poduid-silver", runtime.Resources{CPUShares: 102, PidsLimit: 4096}},
		besteffort: {cgroups.BestEffort, "/kubepods/besteffort/poduid-bronze", runtime.Resources{CPUShares: 2, PidsLimit: 4096}},
	} {
		w := tk.worker(t, pod)
		tk.sync(t, w, pod)
		cg, ok := tk.rt.PodCgroup(string(pod.UID))
		if !ok || cg.QOS != want.qos || cg.Parent != want.parent || cg.Resources != want.res {
			t.Errorf("%s: pod cgroup %+v (made %v), want %+v", pod.Name, cg, ok, want)
		}
		spec, ok := tk.rt.Spec(containerID(pod, "app", 0))
		if !ok {
			t.Fatalf("%s: app not created: %v", pod.Name, tk.rt.Calls())
		}
		if spec.CgroupParent != want.parent {
			t.Errorf("%s: container parent %q, want %q", pod.Name, spec.CgroupParent, want.parent)
		}
	}
	w := tk.worker(t, burstable)
	if !w.sync(burstable, true) {
		t.Fatal("sync of a deleted pod does not finish the worker")
	}
	if cg, ok := tk.rt.PodCgroup(string(burstable.UID)); ok {
		t.Errorf("the deleted pod's cgroup is left: %+v", cg)
	}
	// Pods deleted while kelp was down lose their cgroups at its start.
	_ = tk.factory.Core().V1().Pods().Informer().GetIndexer().Delete(besteffort)
	tk.removeOrphans(t.Context())
	if _, ok := tk.rt.PodCgroup(string(besteffort.UID)); ok {
		t.Error("an orphan pod's cgroup is left")
	}
	if _, ok := tk.rt.PodCgroup(string(guaranteed.UID)); !ok {
		t.Error("a running pod's cgroup was removed")
	}
}
