// Package nodeipam gives every Node a pod CIDR: a /24 (by default) from
// the cluster CIDR, written once to spec.podCIDR and spec.podCIDRs, as
// kube-controller-manager's range allocator does. The bridge on each node
// takes its gateway and pod addresses from it.
package nodeipam

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/kelp-project/kelp/server/controllers"
)

// Controller allocates pod CIDRs to nodes.
type Controller struct {
	client   kubernetes.Interface
	nodes    corelisters.NodeLister
	synced   cache.InformerSynced
	queue    workqueue.TypedRateLimitingInterface[string]
	recorder record.EventRecorder
	cidr     netip.Prefix
	maskBits int
	// assigned remembers what this controller handed out, because the
	// cache may not show a node's new podCIDR by the next sync; only the
	// single worker touches it.
	assigned map[netip.Prefix]string
	mu       sync.Mutex
}

// New allocates /maskBits subnets of clusterCIDR.
func New(client kubernetes.Interface, nodes coreinformers.NodeInformer, recorder record.EventRecorder, clusterCIDR string, maskBits int) (*Controller, error) {
	p, err := netip.ParsePrefix(clusterCIDR)
	if err != nil || !p.Addr().Is4() {
		return nil, fmt.Errorf("cluster CIDR %q: an IPv4 CIDR is required", clusterCIDR)
	}
	if maskBits < p.Bits() || maskBits > 30 {
		return nil, fmt.Errorf("node CIDR mask /%d does not fit in cluster CIDR %s", maskBits, p)
	}
	c := &Controller{client: client, nodes: nodes.Lister(), synced: nodes.Informer().HasSynced, recorder: recorder,
		cidr: p.Masked(), maskBits: maskBits, assigned: map[netip.Prefix]string{},
		queue: controllers.NewQueue("nodeipam")}
	_, _ = nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.enqueue(obj) },
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if n, ok := obj.(*corev1.Node); ok {
				c.mu.Lock()
				for p, owner := range c.assigned {
					if owner == n.Name {
						delete(c.assigned, p)
					}
				}
				c.mu.Unlock()
			}
		},
	})
	return c, nil
}

func (c *Controller) enqueue(obj any) {
	if n, ok := obj.(*corev1.Node); ok && n.Spec.PodCIDR == "" {
		c.queue.Add(n.Name)
	}
}

// Run allocates until ctx ends. One worker: allocation reads the set of
// used subnets from the cache and its own memory, so two workers could
// pick the same one.
func (c *Controller) Run(ctx context.Context) {
	loop := controllers.Loop{Name: "nodeipam", Queue: c.queue, Synced: []cache.InformerSynced{c.synced}, Sync: c.sync}
	loop.Run(ctx, 1)
}

func (c *Controller) sync(ctx context.Context, name string) error {
	node, err := c.nodes.Get(name)
	if err != nil || node.Spec.PodCIDR != "" {
		return nil // gone, or already has one: nothing to do
	}
	used := map[netip.Prefix]bool{}
	all, err := c.nodes.List(labels.Everything())
	if err != nil {
		return err
	}
	for _, n := range all {
		for _, s := range append([]string{n.Spec.PodCIDR}, n.Spec.PodCIDRs...) {
			if p, err := netip.ParsePrefix(s); err == nil {
				used[p.Masked()] = true
			}
		}
	}
	c.mu.Lock()
	for p := range c.assigned {
		used[p] = true
	}
	c.mu.Unlock()
	subnet, ok := c.free(used)
	if !ok {
		c.recorder.Eventf(node, corev1.EventTypeWarning, "CIDRNotAvailable", "Node %s status is now: CIDRNotAvailable", name)
		return fmt.Errorf("no free /%d left in %s", c.maskBits, c.cidr)
	}
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"podCIDR": subnet.String(), "podCIDRs": []string{subnet.String()}}})
	if _, err := c.client.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: "node-ipam-controller"}); err != nil {
		return err
	}
	c.mu.Lock()
	c.assigned[subnet] = name
	c.mu.Unlock()
	c.recorder.Eventf(node, corev1.EventTypeNormal, "CIDRAssigned", "Node %s was assigned pod CIDR %s", name, subnet)
	return nil
}

// free returns the lowest subnet not in used.
func (c *Controller) free(used map[netip.Prefix]bool) (netip.Prefix, bool) {
	count := 1 << (c.maskBits - c.cidr.Bits())
	step := uint32(1) << (32 - c.maskBits)
	base := c.cidr.Addr().As4()
	start := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
	for i := 0; i < count; i++ {
		v := start + uint32(i)*step
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), c.maskBits)
		if !used[p] {
			return p, true
		}
	}
	return netip.Prefix{}, false
}
