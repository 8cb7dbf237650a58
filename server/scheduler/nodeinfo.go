package scheduler

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/kelp-project/kelp/server/scheduler/hostports"
)

// Default requests used for scoring containers that request nothing, as
// upstream (DefaultMilliCPURequest / DefaultMemoryRequest).
const (
	defaultMilliCPURequest int64 = 100
	defaultMemoryRequest   int64 = 200 * 1024 * 1024
)

var nonZeroDefaults = v1.ResourceList{
	v1.ResourceCPU:    *newMilli(defaultMilliCPURequest),
	v1.ResourceMemory: *newInt(defaultMemoryRequest),
}

// resources is a flattened resource vector.
type resources struct {
	MilliCPU         int64
	Memory           int64
	EphemeralStorage int64
	Scalar           map[v1.ResourceName]int64
}

func (r *resources) add(o *resources) {
	r.MilliCPU += o.MilliCPU
	r.Memory += o.Memory
	r.EphemeralStorage += o.EphemeralStorage
	for k, v := range o.Scalar {
		if r.Scalar == nil {
			r.Scalar = map[v1.ResourceName]int64{}
		}
		r.Scalar[k] += v
	}
}

func (r *resources) sub(o *resources) {
	r.MilliCPU -= o.MilliCPU
	r.Memory -= o.Memory
	r.EphemeralStorage -= o.EphemeralStorage
	for k, v := range o.Scalar {
		if r.Scalar != nil {
			r.Scalar[k] -= v
		}
	}
}

func resourcesFromList(l v1.ResourceList) resources {
	var r resources
	for name, q := range l {
		switch name {
		case v1.ResourceCPU:
			r.MilliCPU = q.MilliValue()
		case v1.ResourceMemory:
			r.Memory = q.Value()
		case v1.ResourceEphemeralStorage:
			r.EphemeralStorage = q.Value()
		case v1.ResourcePods:
			// handled separately (pod count)
		default:
			if r.Scalar == nil {
				r.Scalar = map[v1.ResourceName]int64{}
			}
			r.Scalar[name] = q.Value()
		}
	}
	return r
}

// podInfo holds precomputed scheduling data of one pod.
type podInfo struct {
	pod      *v1.Pod
	request  resources // max(sum containers, max init) + overhead
	nonZero  resources // same, with defaults for unset cpu/memory (scoring only)
	ports    []hostports.Port
	ownerUID types.UID // controller owner, "" if none
}

func newPodInfo(pod *v1.Pod) *podInfo {
	pi := &podInfo{pod: pod}
	// UseStatusResources, as upstream with InPlacePodVerticalScaling: a
	// pod being resized counts each container at the largest of its
	// spec, its allocated and its actual resources (status), its spec
	// alone once the kubelet found the resize infeasible.
	pi.request = resourcesFromList(resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{UseStatusResources: true}))
	nz := resourcesFromList(resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{UseStatusResources: true, NonMissingContainerRequests: nonZeroDefaults}))
	pi.nonZero = resources{MilliCPU: nz.MilliCPU, Memory: nz.Memory}
	pi.ports = hostports.Of(pod)
	for _, ref := range pod.OwnerReferences {
		if ref.Controller != nil && *ref.Controller {
			pi.ownerUID = ref.UID
			break
		}
	}
	return pi
}

// scaledDown says whether a bound pod's update lowered the cpu or memory
// it is accounted with (an in-place resize, or its actuation reported in
// status).
func scaledDown(old, cur *v1.Pod) bool {
	before, after := newPodInfo(old).request, newPodInfo(cur).request
	return after.MilliCPU < before.MilliCPU || after.Memory < before.Memory
}

// nodeInfo is the cached state of one node.
type nodeInfo struct {
	node        *v1.Node
	allocatable resources
	allowedPods int64
	pods        map[types.UID]*podInfo
	requested   resources
	nonZeroReq  resources
	usedPorts   hostports.Used
	ownerCount  map[types.UID]int
}

func newNodeInfo() *nodeInfo {
	return &nodeInfo{
		pods:       map[types.UID]*podInfo{},
		usedPorts:  hostports.Used{},
		ownerCount: map[types.UID]int{},
	}
}

func (n *nodeInfo) setNode(node *v1.Node) {
	n.node = node
	n.allocatable = resourcesFromList(node.Status.Allocatable)
	n.allowedPods = 0
	if q, ok := node.Status.Allocatable[v1.ResourcePods]; ok {
		n.allowedPods = q.Value()
	}
}

func (n *nodeInfo) addPod(pi *podInfo) {
	n.pods[pi.pod.UID] = pi
	n.requested.add(&pi.request)
	n.nonZeroReq.add(&pi.nonZero)
	n.usedPorts.Add(pi.ports)
	if pi.ownerUID != "" {
		n.ownerCount[pi.ownerUID]++
	}
}

func (n *nodeInfo) removePod(uid types.UID) bool {
	pi, ok := n.pods[uid]
	if !ok {
		return false
	}
	delete(n.pods, uid)
	n.requested.sub(&pi.request)
	n.nonZeroReq.sub(&pi.nonZero)
	n.usedPorts.Remove(pi.ports)
	if pi.ownerUID != "" {
		if n.ownerCount[pi.ownerUID]--; n.ownerCount[pi.ownerUID] <= 0 {
			delete(n.ownerCount, pi.ownerUID)
		}
	}
	return true
}

// clone copies the node's accounting, for simulations (nominated pods,
// preemption) that add or remove pods.
func (n *nodeInfo) clone() *nodeInfo {
	c := newNodeInfo()
	c.node, c.allocatable, c.allowedPods = n.node, n.allocatable, n.allowedPods
	for _, p := range n.pods {
		c.addPod(p)
	}
	return c
}
