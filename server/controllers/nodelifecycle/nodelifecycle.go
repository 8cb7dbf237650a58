// Package nodelifecycle is kelp's node lifecycle controller, the
// equivalent of kube-controller-manager's node-lifecycle controller and
// its NoExecute taint-eviction manager.
//
// Every NodeMonitorPeriod it looks at each Node's heartbeats (the node
// Lease and the Ready condition). A node that stops sending them for
// NodeMonitorGracePeriod has its conditions set to Unknown; a node whose
// Ready is not True gets its pods marked not ready and a NoExecute taint
// (unreachable for Unknown, not-ready for False), added at a per-zone rate
// that slows down when much of a zone is failing and stops when every zone
// is failing (then the control plane, not the nodes, is the likely cause).
// The eviction manager deletes pods that do not tolerate a node's NoExecute
// taints, after the tolerationSeconds they asked for. Deletion is always
// graceful: a pod on a dead node stays Terminating until its kubelet
// confirms or an operator force-deletes it.
package nodelifecycle

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	coordlisters "k8s.io/client-go/listers/coordination/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/kelp-project/kelp/config"
	"github.com/kelp-project/kelp/server/controllers"
)

// Config holds the controller's timings and eviction rates. Field names
// follow kube-controller-manager's flags.
type Config struct {
	// NodeMonitorPeriod is how often every node's health is checked.
	NodeMonitorPeriod time.Duration
	// NodeMonitorGracePeriod is how long a node may go without a heartbeat
	// before it is marked Unknown.
	NodeMonitorGracePeriod time.Duration
	// NodeStartupGracePeriod replaces NodeMonitorGracePeriod for a node
	// that has never posted a Ready condition.
	NodeStartupGracePeriod time.Duration
	// NodeEvictionRate is how many nodes per second may get a NoExecute
	// taint in a healthy (or fully disrupted) zone.
	NodeEvictionRate float64
	// SecondaryNodeEvictionRate replaces NodeEvictionRate in a partially
	// disrupted zone larger than LargeClusterSizeThreshold; smaller
	// partially disrupted zones get no new NoExecute taints at all.
	SecondaryNodeEvictionRate float64
	LargeClusterSizeThreshold int
	// UnhealthyZoneThreshold is the fraction of not-ready nodes (with more
	// than two of them) at which a zone counts as partially disrupted.
	UnhealthyZoneThreshold float64
}

// DefaultConfig returns upstream's defaults, declared in package config
// with the flags that override them.
func DefaultConfig() Config {
	return Config{
		NodeMonitorPeriod:         config.NodeMonitorPeriod,
		NodeMonitorGracePeriod:    config.NodeMonitorGracePeriod,
		NodeStartupGracePeriod:    config.NodeStartupGracePeriod,
		NodeEvictionRate:          config.NodeEvictionRate,
		SecondaryNodeEvictionRate: config.SecondaryNodeEvictionRate,
		LargeClusterSizeThreshold: config.LargeClusterSizeThreshold,
		UnhealthyZoneThreshold:    config.UnhealthyZoneThreshold,
	}
}

func (c Config) validate() error {
	switch {
	case c.NodeMonitorPeriod <= 0:
		return fmt.Errorf("node monitor period must be positive, got %v", c.NodeMonitorPeriod)
	case c.NodeMonitorGracePeriod <= 0:
		return fmt.Errorf("node monitor grace period must be positive, got %v", c.NodeMonitorGracePeriod)
	case c.NodeStartupGracePeriod <= 0:
		return fmt.Errorf("node startup grace period must be positive, got %v", c.NodeStartupGracePeriod)
	case c.NodeEvictionRate < 0 || c.SecondaryNodeEvictionRate < 0:
		return fmt.Errorf("node eviction rates must not be negative")
	case c.UnhealthyZoneThreshold <= 0 || c.UnhealthyZoneThreshold > 1:
		return fmt.Errorf("unhealthy zone threshold must be in (0, 1], got %v", c.UnhealthyZoneThreshold)
	}
	return nil
}

const (
	name           = "nodelifecycle"
	leaseNamespace = "kube-node-lease"
	podNodeIndex   = "nodelifecycle:spec.nodeName"
)

// Controller is the node lifecycle controller with its taint-eviction
// manager.
type Controller struct {
	cfg      Config
	client   kubernetes.Interface
	recorder record.EventRecorder
	// clock is the only source of time, so tests can drive it.
	clock clock.WithDelayedExecution

	nodes   corelisters.NodeLister
	pods    corelisters.PodLister
	podInf  cache.SharedIndexInformer
	indexed bool // podInf has podNodeIndex
	leases  coordlisters.LeaseLister
	synced  []cache.InformerSynced

	// Monitor state: only the monitor goroutine touches these.
	health       map[string]*nodeHealth
	zoneStates   map[string]zoneState
	limiters     map[string]*limiter
	allDisrupted bool
	// pending is when each node became due for a NoExecute taint that the
	// zone's rate limiter has not let through yet; oldest go first.
	pending map[string]time.Time
	// passes counts finished monitor passes (tests wait on it).
	passes atomic.Int64

	// taintMu serialises this controller's own read-modify-write of node
	// taints, so the monitor and the NoSchedule loop do not race each other.
	taintMu sync.Mutex

	noSchedQueue workqueue.TypedRateLimitingInterface[string] // node names
	evictQueue   workqueue.TypedRateLimitingInterface[string] // pod keys

	evictMu sync.Mutex
	// evictions are the pending timed deletions, by pod key.
	evictions map[string]*scheduledEviction
	// firstSeen is, per node and taint, when a NoExecute taint without
	// timeAdded was first seen; its toleration time counts from there.
	firstSeen map[string]map[string]time.Time
}

// New returns the controller. It only adds handlers (and a pod index) to
// the factory's informers; the caller starts the factory.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, recorder record.EventRecorder, cfg Config) (*Controller, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	nodeInf := factory.Core().V1().Nodes()
	podInf := factory.Core().V1().Pods()
	leaseInf := factory.Coordination().V1().Leases()
	c := &Controller{
		cfg: cfg, client: client, recorder: recorder, clock: clock.RealClock{},
		nodes: nodeInf.Lister(), pods: podInf.Lister(), podInf: podInf.Informer(), leases: leaseInf.Lister(),
		synced:       []cache.InformerSynced{nodeInf.Informer().HasSynced, podInf.Informer().HasSynced, leaseInf.Informer().HasSynced},
		health:       map[string]*nodeHealth{},
		zoneStates:   map[string]zoneState{},
		limiters:     map[string]*limiter{},
		pending:      map[string]time.Time{},
		noSchedQueue: controllers.NewQueue(name + "-noschedule"),
		evictQueue:   controllers.NewQueue(name + "-eviction"),
		evictions:    map[string]*scheduledEviction{},
		firstSeen:    map[string]map[string]time.Time{},
	}
	// The index may already exist or the informer may be running (the
	// factory is shared); podsOnNode falls back to a full scan then.
	err := c.podInf.AddIndexers(cache.Indexers{podNodeIndex: func(obj any) ([]string, error) {
		if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
			return []string{p.Spec.NodeName}, nil
		}
		return nil, nil
	}})
	c.indexed = err == nil
	if err != nil {
		logrus.WithError(err).Debugf("%s: pod index", name)
	}
	_, _ = nodeInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.nodeChanged(nil, obj) },
		UpdateFunc: func(old, obj any) { c.nodeChanged(old, obj) },
		DeleteFunc: c.nodeDeleted,
	})
	_, _ = podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueuePod,
		UpdateFunc: func(_, obj any) { c.enqueuePod(obj) },
		DeleteFunc: c.enqueuePod,
	})
	return c, nil
}

// Run runs the health monitor, the NoSchedule tainting loop and the
// eviction manager (with workers workers) until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		loop := controllers.Loop{Name: name + "-noschedule", Queue: c.noSchedQueue, Synced: c.synced, Sync: c.syncNoSchedule}
		loop.Run(ctx, 1)
	}()
	go func() {
		defer wg.Done()
		loop := controllers.Loop{Name: name + "-eviction", Queue: c.evictQueue, Synced: c.synced, Sync: c.syncPod}
		loop.Run(ctx, workers)
	}()
	go func() {
		defer wg.Done()
		if !cache.WaitForNamedCacheSync(name, ctx.Done(), c.synced...) {
			return
		}
		wait.UntilWithContext(ctx, c.monitorNodeHealth, c.cfg.NodeMonitorPeriod)
	}()
	<-ctx.Done()
	wg.Wait()
	c.cancelAllEvictions()
}

// monitorNodeHealth is one pass over every node: update health, act on
// not-ready nodes, recompute zone states, then add or remove NoExecute
// taints.
func (c *Controller) monitorNodeHealth(ctx context.Context) {
	defer c.passes.Add(1)
	// One time for the whole pass, so every node and zone is judged at
	// the same instant.
	now := c.clock.Now()
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		logrus.WithError(err).Errorf("%s: list nodes", name)
		return
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	type result struct {
		node  *corev1.Node
		ready corev1.ConditionStatus
	}
	var results []result
	zoneReady := map[string][]corev1.ConditionStatus{}
	present := map[string]bool{}
	for _, node := range nodes {
		present[node.Name] = true
		observed, current, err := c.tryUpdateNodeHealth(ctx, node, now)
		if err != nil {
			// Skipped this round, as upstream: no decision on stale data.
			logrus.WithError(err).Warnf("%s: update health of node %s", name, node.Name)
			continue
		}
		h := c.health[node.Name]
		prev := h.lastReady
		if prev == "" {
			prev = observed
		}
		h.lastReady = current
		if current != corev1.ConditionTrue {
			if prev == corev1.ConditionTrue {
				c.recorder.Eventf(node, corev1.EventTypeNormal, "NodeNotReady", "Node %s status is now: %s", node.Name, "NodeNotReady")
			}
			if err := c.markPodsNotReady(ctx, node.Name, now); err != nil {
				logrus.WithError(err).Warnf("%s: mark pods on node %s not ready", name, node.Name)
			}
		}
		zone := zoneKey(node)
		zoneReady[zone] = append(zoneReady[zone], current)
		results = append(results, result{node, current})
	}
	for n := range c.health {
		if !present[n] {
			delete(c.health, n)
			delete(c.pending, n)
		}
	}
	c.handleDisruption(zoneReady, now)

	if c.allDisrupted {
		// Every zone is down: most likely the control plane lost the
		// nodes, not the other way round. Evicting would only churn, so
		// take the NoExecute taints back off and add none.
		clear(c.pending)
		for _, r := range results {
			if hasTaint(r.node, unreachableNoExecute) || hasTaint(r.node, notReadyNoExecute) {
				if _, err := c.updateTaints(ctx, r.node.Name, nil, []corev1.Taint{unreachableNoExecute, notReadyNoExecute}); err != nil {
					logrus.WithError(err).Warnf("%s: remove NoExecute taints from node %s", name, r.node.Name)
				}
			}
		}
		return
	}
	for _, r := range results {
		c.processTaintBaseEviction(ctx, r.node, r.ready, now)
	}
	c.taintPending(ctx, now)
}

// podsOnNode returns the cached pods bound to node.
func (c *Controller) podsOnNode(node string) ([]*corev1.Pod, error) {
	if !c.indexed {
		all, err := c.pods.List(labels.Everything())
		if err != nil {
			return nil, err
		}
		var out []*corev1.Pod
		for _, p := range all {
			if p.Spec.NodeName == node {
				out = append(out, p)
			}
		}
		return out, nil
	}
	objs, err := c.podInf.GetIndexer().ByIndex(podNodeIndex, node)
	if err != nil {
		return nil, err
	}
	out := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			out = append(out, p)
		}
	}
	return out, nil
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
