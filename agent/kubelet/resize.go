package kubelet

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/resource"

	"github.com/kelp-project/kelp/agent/kubelet/prober"
	"github.com/kelp-project/kelp/runtime"
)

// In-place pod resize (InPlacePodVerticalScaling), as upstream's kubelet
// does it, in three states per container:
//
//   - desired: the pod's spec, which pods/resize changes;
//   - allocated: what this kubelet accepted for the container, in memory
//     (allocation); a container is always started with it;
//   - actual: what the container's cgroup was given, recorded on the
//     container in containerd (labelResources), so it survives a kelp
//     restart (and allocation starts again from it).
//
// A sync first decides the allocation: a desired change that fits the
// node beside the other pods' allocations is accepted, else it stays
// pending (PodResizePending, reason Deferred, retried every resync).
// Then it actuates: a running container whose actual differs from its
// allocation is updated in place through the runtime (the pod cgroup
// grown first and shrunk last), or restarted when a changed resource's
// resizePolicy says RestartContainer; a failed update leaves
// PodResizeInProgress with reason Error. The status reports actual as
// containerStatuses[].resources and allocated requests as
// allocatedResources.

// labelResources holds the JSON of the resources (requests and limits) a
// container's cgroup was given: at creation, and at each in-place update.
const labelResources = "io.kelp.container.resources"

// allocation is one pod's allocated resources by container name, shared
// with the other workers' resize decisions (which count it).
type allocation struct {
	mu         sync.Mutex
	containers map[string]corev1.ResourceRequirements // nil until the first sync
}

func (a *allocation) get(name string) (corev1.ResourceRequirements, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r, ok := a.containers[name]
	return r, ok
}

func (a *allocation) set(m map[string]corev1.ResourceRequirements) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.containers = m
}

func (a *allocation) known() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.containers != nil
}

// resizeState is what the status reports of the pod's resize.
type resizeState struct {
	// pending is the PodResizePending condition, nil when none.
	pending *corev1.PodCondition
	// inProgress is the PodResizeInProgress condition, nil when none.
	inProgress *corev1.PodCondition
}

// encodeResources is a container's resources as labelResources keeps them.
func encodeResources(r corev1.ResourceRequirements) string {
	b, _ := json.Marshal(corev1.ResourceRequirements{Requests: r.Requests, Limits: r.Limits})
	return string(b)
}

// actualResources are the resources a container instance runs with: its
// label, or, for a container made before kelp recorded them, spec (what
// it was created with, as nothing could have resized it).
func actualResources(inst runtime.ContainerStatus, spec *corev1.Container) corev1.ResourceRequirements {
	if v, ok := inst.Labels[labelResources]; ok {
		var r corev1.ResourceRequirements
		if json.Unmarshal([]byte(v), &r) == nil {
			return r
		}
	}
	return corev1.ResourceRequirements{Requests: spec.Resources.Requests, Limits: spec.Resources.Limits}
}

// sameCPUMemory says whether two requirements agree on cpu and memory,
// the resources a resize changes.
func sameCPUMemory(a, b corev1.ResourceRequirements) bool {
	return sameResource(a, b, corev1.ResourceCPU) && sameResource(a, b, corev1.ResourceMemory)
}

func sameResource(a, b corev1.ResourceRequirements, name corev1.ResourceName) bool {
	return sameQuantity(a.Requests, b.Requests, name) && sameQuantity(a.Limits, b.Limits, name)
}

func sameQuantity(a, b corev1.ResourceList, name corev1.ResourceName) bool {
	qa, oka := a[name]
	qb, okb := b[name]
	return oka == okb && qa.Cmp(qb) == 0
}

// allContainers are the pod's init and regular containers.
func allContainers(pod *corev1.Pod) []*corev1.Container {
	var out []*corev1.Container
	for i := range pod.Spec.InitContainers {
		out = append(out, &pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		out = append(out, &pod.Spec.Containers[i])
	}
	return out
}

// allocatedPod is pod with each container's resources as allocated: what
// its containers and its cgroup are made with.
func (w *podWorker) allocatedPod(pod *corev1.Pod) *corev1.Pod {
	if !w.alloc.known() {
		return pod
	}
	out := pod.DeepCopy()
	for _, c := range allContainers(out) {
		if r, ok := w.alloc.get(c.Name); ok {
			c.Resources.Requests, c.Resources.Limits = r.Requests, r.Limits
		}
	}
	return out
}

// syncResize decides the pod's allocation and actuates it on the running
// containers. It returns the pod as allocated.
func (w *podWorker) syncResize(ctx context.Context, pod *corev1.Pod, inst map[string][]runtime.ContainerStatus) *corev1.Pod {
	if !w.alloc.known() {
		// The first sync (or the first after a kelp restart): what runs
		// is what was allocated; containers not running yet get the spec.
		m := map[string]corev1.ResourceRequirements{}
		for _, c := range allContainers(pod) {
			m[c.Name] = corev1.ResourceRequirements{Requests: c.Resources.Requests, Limits: c.Resources.Limits}
			if last := latest(inst[c.Name]); last != nil && last.State == runtime.StateRunning {
				m[c.Name] = actualResources(*last, c)
			}
		}
		w.alloc.set(m)
	}
	w.allocate(pod)
	allocated := w.allocatedPod(pod)
	if err := w.actuate(ctx, allocated, inst); err != nil {
		logrus.WithError(err).Warnf("kubelet: resizing %s/%s", pod.Namespace, pod.Name)
		w.resize.inProgress = resizeCondition(corev1.PodResizeInProgress, corev1.PodReasonError, err.Error(), pod.Generation, w.resize.inProgress)
	} else if w.resize.inProgress != nil && w.actuated(allocated) {
		w.resize.inProgress = nil
	}
	return allocated
}

// allocate accepts the desired resources when they differ from the
// allocation and fit, or records why not (PodResizePending).
func (w *podWorker) allocate(pod *corev1.Pod) {
	desired := map[string]corev1.ResourceRequirements{}
	changed := false
	for _, c := range allContainers(pod) {
		r := corev1.ResourceRequirements{Requests: c.Resources.Requests, Limits: c.Resources.Limits}
		desired[c.Name] = r
		if a, ok := w.alloc.get(c.Name); !ok || !sameCPUMemory(a, r) {
			changed = true
		}
	}
	if !changed {
		w.resize.pending = nil
		return
	}
	if msg := w.k.resizeFits(pod); msg != "" {
		w.resize.pending = resizeCondition(corev1.PodResizePending, corev1.PodReasonDeferred, msg, pod.Generation, w.resize.pending)
		return
	}
	w.alloc.set(desired)
	w.resize.pending = nil
	w.resize.inProgress = resizeCondition(corev1.PodResizeInProgress, "", "", pod.Generation, nil)
	w.k.event(pod, corev1.EventTypeNormal, "ResizeStarted", "Pod resize started: %s", resizeSummary(pod))
}

// resizeSummary lists the containers' new requests and limits for the
// ResizeStarted event.
func resizeSummary(pod *corev1.Pod) string {
	type res struct {
		Name      string                      `json:"name"`
		Resources corev1.ResourceRequirements `json:"resources"`
	}
	var out []res
	for _, c := range allContainers(pod) {
		out = append(out, res{c.Name, corev1.ResourceRequirements{Requests: c.Resources.Requests, Limits: c.Resources.Limits}})
	}
	b, _ := json.Marshal(map[string]any{"containers": out, "generation": pod.Generation})
	return string(b)
}

// resizeCondition is a resize condition of the pod's generation; prev's
// transition time is kept while the reason stays.
func resizeCondition(typ corev1.PodConditionType, reason, message string, generation int64, prev *corev1.PodCondition) *corev1.PodCondition {
	c := &corev1.PodCondition{Type: typ, Status: corev1.ConditionTrue, Reason: reason, Message: message,
		ObservedGeneration: generation, LastTransitionTime: metav1.NewTime(time.Now().Truncate(time.Second))}
	if prev != nil && prev.Reason == reason {
		c.LastTransitionTime = prev.LastTransitionTime
	}
	return c
}

// resizeFits is upstream's resource admission of a resize: the pod's
// desired requests beside the allocated requests of the other active
// pods must fit the node's allocatable. It returns upstream's message
// when they do not ("" when they do, or while the node is not known).
func (k *Kubelet) resizeFits(pod *corev1.Pod) string {
	if k.node == nil {
		return ""
	}
	node := k.node()
	if node == nil {
		return ""
	}
	k.admitMu.Lock()
	others := k.activeAdmitted()
	k.admitMu.Unlock()
	used := corev1.ResourceList{}
	for _, p := range others {
		if p.UID == pod.UID {
			continue
		}
		if w := k.worker(p.UID); w != nil {
			p = w.allocatedPod(p)
		}
		for name, q := range resource.PodRequests(p, resource.PodResourcesOptions{}) {
			sum := used[name]
			sum.Add(q)
			used[name] = sum
		}
	}
	want := resource.PodRequests(pod, resource.PodResourcesOptions{})
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, capacity, u := want[name], node.Status.Allocatable[name], used[name]
		total := u.DeepCopy()
		total.Add(req)
		if total.Cmp(capacity) <= 0 {
			continue
		}
		value := func(q apiresource.Quantity) int64 { return q.Value() }
		if name == corev1.ResourceCPU {
			value = func(q apiresource.Quantity) int64 { return q.MilliValue() }
		}
		return fmt.Sprintf("Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d",
			name, value(req), value(u), value(capacity))
	}
	return ""
}

// worker is the pod's worker, if it has one.
func (k *Kubelet) worker(uid types.UID) *podWorker {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.workers[uid]
}

// actuated says whether every running container runs with its allocation
// (nothing left to do: PodResizeInProgress goes).
func (w *podWorker) actuated(allocated *corev1.Pod) bool {
	inst, err := w.instances(w.ctx)
	if err != nil {
		return false
	}
	for _, c := range allContainers(allocated) {
		if last := latest(inst[c.Name]); last != nil && last.State == runtime.StateRunning && !sameCPUMemory(actualResources(*last, c), c.Resources) {
			return false
		}
	}
	return true
}

// actuate gives the running containers their allocation: restarted for a
// resource whose resizePolicy is RestartContainer, else updated in place,
// with the pod cgroup at the larger of its old and new limits meanwhile
// (upstream's order: a growing pod level first, shrinking containers
// first), so no container's limit ever exceeds its pod's.
func (w *podWorker) actuate(ctx context.Context, allocated *corev1.Pod, inst map[string][]runtime.ContainerStatus) error {
	type change struct {
		c       *corev1.Container
		last    runtime.ContainerStatus
		restart bool
		init    bool
	}
	var changes []change
	actualPod := allocated.DeepCopy()
	for i, c := range allContainers(allocated) {
		last := latest(inst[c.Name])
		if last == nil || last.State != runtime.StateRunning {
			continue
		}
		actual := actualResources(*last, c)
		if sameCPUMemory(actual, c.Resources) {
			continue
		}
		allContainers(actualPod)[i].Resources = corev1.ResourceRequirements{Requests: actual.Requests, Limits: actual.Limits}
		restart := false
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if !sameResource(actual, c.Resources, name) && resizePolicy(c, name) == corev1.RestartContainer {
				restart = true
			}
		}
		changes = append(changes, change{c: c, last: *last, restart: restart, init: i < len(allocated.Spec.InitContainers)})
	}
	if len(changes) == 0 {
		return nil
	}
	k := w.k
	before, after := podResources(actualPod, k.cfg.PodPidsLimit), podResources(allocated, k.cfg.PodPidsLimit)
	if _, err := k.runtime.EnsurePodCgroup(ctx, podQOS(allocated), string(allocated.UID), largerResources(before, after)); err != nil {
		return fmt.Errorf("pod cgroup: %w", err)
	}
	for _, ch := range changes {
		if ch.restart {
			// Restarted right away with its allocation (containerSpec),
			// as upstream's kubelet kills it for the resize.
			if err := k.runtime.StopContainer(ctx, ch.last.ID, prober.GracePeriod(allocated)); err != nil {
				return fmt.Errorf("restarting %s: %w", ch.c.Name, err)
			}
			w.startContainer(ctx, allocated, ch.c, attempt(ch.last)+1, ch.init, inst[ch.c.Name])
			continue
		}
		if err := k.runtime.UpdateContainerResources(ctx, ch.last.ID, containerResources(ch.c),
			map[string]string{labelResources: encodeResources(ch.c.Resources)}); err != nil {
			return fmt.Errorf("updating container %s: %w", ch.c.Name, err)
		}
	}
	if _, err := k.runtime.EnsurePodCgroup(ctx, podQOS(allocated), string(allocated.UID), after); err != nil {
		return fmt.Errorf("pod cgroup: %w", err)
	}
	k.event(allocated, corev1.EventTypeNormal, "ResizeCompleted", "Pod resize completed: %s", resizeSummary(allocated))
	return nil
}

// resizePolicy is the container's restart policy for resizing name
// (NotRequired when not given, upstream's default).
func resizePolicy(c *corev1.Container, name corev1.ResourceName) corev1.ResourceResizeRestartPolicy {
	for _, p := range c.ResizePolicy {
		if p.ResourceName == name {
			return p.RestartPolicy
		}
	}
	return corev1.NotRequired
}

// largerResources is, limit by limit, the looser of a and b (0 is no
// limit, the loosest): the pod cgroup while its containers change.
func largerResources(a, b runtime.Resources) runtime.Resources {
	looser := func(x, y int64) int64 {
		if x == 0 || y == 0 {
			return 0
		}
		return max(x, y)
	}
	out := runtime.Resources{CPUShares: max(a.CPUShares, b.CPUShares), MemoryLimit: looser(a.MemoryLimit, b.MemoryLimit),
		PidsLimit: looser(a.PidsLimit, b.PidsLimit), CPUQuota: looser(a.CPUQuota, b.CPUQuota)}
	if out.CPUQuota > 0 {
		out.CPUPeriod = max(a.CPUPeriod, b.CPUPeriod)
	}
	return out
}

// resizeConditions are the pod's resize conditions for its status.
func (w *podWorker) resizeConditions() []corev1.PodCondition {
	var out []corev1.PodCondition
	for _, c := range []*corev1.PodCondition{w.resize.pending, w.resize.inProgress} {
		if c != nil {
			out = append(out, *c)
		}
	}
	return out
}

// containerResourcesStatus fills a container status' allocatedResources
// and, for a running instance, its actual resources.
func (w *podWorker) containerResourcesStatus(cs *corev1.ContainerStatus, c *corev1.Container, last *runtime.ContainerStatus) {
	if a, ok := w.alloc.get(c.Name); ok {
		cs.AllocatedResources = a.Requests
	} else {
		cs.AllocatedResources = c.Resources.Requests
	}
	if last != nil && last.State == runtime.StateRunning {
		r := actualResources(*last, c)
		cs.Resources = &r
	}
}
