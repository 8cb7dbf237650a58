package scheduler

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
)

// cache holds nodes and the pods bound or assumed on them. Pods may refer
// to nodes the cache does not know yet; their nodeInfo is then created
// without a node object and is ignored for scheduling until the node
// arrives.
type cache struct {
	mu      sync.Mutex
	nodes   map[string]*nodeInfo
	podNode map[types.UID]string // pod -> node it is accounted on
	assumed map[types.UID]bool
	// nominated are pending pods with status.nominatedNodeName, by that
	// node: the room their preemption made there is theirs against pods
	// of no higher priority (upstream's nominator). nominatedOn is each
	// one's node.
	nominated   map[string]map[types.UID]*podInfo
	nominatedOn map[types.UID]string
}

func newCache() *cache {
	return &cache{
		nodes:       map[string]*nodeInfo{},
		podNode:     map[types.UID]string{},
		assumed:     map[types.UID]bool{},
		nominated:   map[string]map[types.UID]*podInfo{},
		nominatedOn: map[types.UID]string{},
	}
}

func (c *cache) nodeInfoLocked(name string) *nodeInfo {
	ni := c.nodes[name]
	if ni == nil {
		ni = newNodeInfo()
		c.nodes[name] = ni
	}
	return ni
}

func (c *cache) addOrUpdateNode(node *v1.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nodeInfoLocked(node.Name).setNode(node)
}

func (c *cache) removeNode(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ni := c.nodes[name]
	if ni == nil {
		return
	}
	if len(ni.pods) == 0 {
		delete(c.nodes, name)
		return
	}
	ni.node = nil // keep pod accounting until the pods go away
}

// addOrUpdatePod accounts a bound pod (spec.nodeName set). It replaces any
// assumption made for it.
func (c *cache) addOrUpdatePod(pod *v1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removePodLocked(pod.UID)
	delete(c.assumed, pod.UID)
	c.nodeInfoLocked(pod.Spec.NodeName).addPod(newPodInfo(pod))
	c.podNode[pod.UID] = pod.Spec.NodeName
}

func (c *cache) removePod(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removePodLocked(uid)
	delete(c.assumed, uid)
}

func (c *cache) removePodLocked(uid types.UID) {
	name, ok := c.podNode[uid]
	if !ok {
		return
	}
	delete(c.podNode, uid)
	if ni := c.nodes[name]; ni != nil {
		ni.removePod(uid)
		if ni.node == nil && len(ni.pods) == 0 {
			delete(c.nodes, name)
		}
	}
}

// nominate records a pending pod's nominated node ("" drops it).
func (c *cache) nominate(pod *v1.Pod, node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.unnominateLocked(pod.UID)
	if node == "" {
		return
	}
	on := c.nominated[node]
	if on == nil {
		on = map[types.UID]*podInfo{}
		c.nominated[node] = on
	}
	on[pod.UID] = newPodInfo(pod)
	c.nominatedOn[pod.UID] = node
}

func (c *cache) unnominateLocked(uid types.UID) {
	node, ok := c.nominatedOn[uid]
	if !ok {
		return
	}
	delete(c.nominatedOn, uid)
	delete(c.nominated[node], uid)
	if len(c.nominated[node]) == 0 {
		delete(c.nominated, node)
	}
}

// nominatedBelow drops and returns the pods nominated to node whose
// priority is below prio.
func (c *cache) nominatedBelow(node string, prio int32) []*v1.Pod {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*v1.Pod
	for uid, pi := range c.nominated[node] {
		if corev1helpers.PodPriority(pi.pod) < prio {
			out = append(out, pi.pod)
			c.unnominateLocked(uid)
		}
	}
	return out
}

// withNominatedLocked is ni as pod must see it: with the pods nominated to
// the node whose priority is not lower than pod's (a copy; ni itself when
// there are none).
func (c *cache) withNominatedLocked(ni *nodeInfo, pod *v1.Pod) *nodeInfo {
	on := c.nominated[ni.node.Name]
	if len(on) == 0 {
		return ni
	}
	prio := corev1helpers.PodPriority(pod)
	var out *nodeInfo
	for uid, pi := range on {
		if uid == pod.UID || corev1helpers.PodPriority(pi.pod) < prio {
			continue
		}
		if _, placed := ni.pods[uid]; placed {
			continue
		}
		if out == nil {
			out = ni.clone()
		}
		out.addPod(pi)
	}
	if out == nil {
		return ni
	}
	return out
}

// assumeLocked records pod as placed on node before the binding is written.
func (c *cache) assumeLocked(pi *podInfo, node string) {
	c.unnominateLocked(pi.pod.UID)
	c.removePodLocked(pi.pod.UID)
	c.nodeInfoLocked(node).addPod(pi)
	c.podNode[pi.pod.UID] = node
	c.assumed[pi.pod.UID] = true
}

// forget drops an assumption (bind failed). A pod the informer has
// meanwhile confirmed as bound is left alone.
func (c *cache) forget(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.assumed[uid] {
		return
	}
	delete(c.assumed, uid)
	c.removePodLocked(uid)
}

func (c *cache) isAccounted(uid types.UID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.podNode[uid]
	return ok
}
