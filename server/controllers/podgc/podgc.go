// Package podgc is kelp's pod garbage collector, as upstream's
// pkg/controller/podgc: every Period it force-deletes the pods nobody else
// will finish: pods bound to a Node that no longer exists (after a
// quarantine and a fresh GET, since an informer may lag a Node's
// creation), terminating pods that were never scheduled (no kubelet will
// confirm them), terminating pods on a NotReady node tainted
// out-of-service, and finished pods beyond the threshold, oldest first.
package podgc

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/kelp-project/kelp/config"
)

// Config holds kube-controller-manager's pod GC settings.
type Config struct {
	// TerminatedPodThreshold is --terminated-pod-gc-threshold: finished
	// pods kept before the oldest go (0 keeps all).
	TerminatedPodThreshold int
	// Quarantine is how long a pod's Node must stay missing from the
	// informer before a GET confirms it gone (upstream: 40 s).
	Quarantine time.Duration
	// Period is how often the collector looks; zero is upstream's 20 s.
	Period time.Duration
}

// DefaultConfig is upstream's.
func DefaultConfig() Config {
	return Config{TerminatedPodThreshold: config.TerminatedPodGCThreshold, Quarantine: config.PodGCQuarantine, Period: config.PodGCPeriod}
}

// Controller is the pod garbage collector.
type Controller struct {
	client     kubernetes.Interface
	factory    informers.SharedInformerFactory
	podLister  corelisters.PodLister
	nodeLister corelisters.NodeLister
	synced     []cache.InformerSynced
	cfg        Config
	// nodeQueue holds the names of missing Nodes until their quarantine
	// is over; a name queued twice is kept once.
	nodeQueue workqueue.TypedDelayingInterface[string]
}

// New wires the collector to the factory's pod and node informers.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, cfg Config) *Controller {
	pods, nodes := factory.Core().V1().Pods(), factory.Core().V1().Nodes()
	if cfg.Period <= 0 {
		cfg.Period = config.PodGCPeriod
	}
	return &Controller{
		client: client, factory: factory, cfg: cfg,
		podLister: pods.Lister(), nodeLister: nodes.Lister(),
		synced:    []cache.InformerSynced{pods.Informer().HasSynced, nodes.Informer().HasSynced},
		nodeQueue: workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[string]{Name: "orphaned_pods_nodes"}),
	}
}

// Run collects every Period until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	defer c.nodeQueue.ShutDown()
	c.factory.Start(ctx.Done())
	if !cache.WaitForNamedCacheSync("pod-garbage-collector", ctx.Done(), c.synced...) {
		return
	}
	wait.UntilWithContext(ctx, c.gc, c.cfg.Period)
}

func (c *Controller) gc(ctx context.Context) {
	pods, err := c.podLister.List(labels.Everything())
	if err != nil {
		return
	}
	nodes, err := c.nodeLister.List(labels.Everything())
	if err != nil {
		return
	}
	existing := map[string]bool{}
	for _, n := range nodes {
		existing[n.Name] = true
	}
	for _, p := range Terminated(pods, c.cfg.TerminatedPodThreshold) {
		c.forceDelete(ctx, p, nil, "terminated pod beyond the threshold")
	}
	for _, p := range c.terminatingOutOfService(pods) {
		c.forceDelete(ctx, p, nil, "terminating pod on an out-of-service node")
	}
	for _, name := range MissingNodes(pods, existing) {
		c.nodeQueue.AddAfter(name, c.cfg.Quarantine)
	}
	gone := c.deletedNodes(ctx, existing)
	for _, p := range pods {
		if p.Spec.NodeName != "" && gone[p.Spec.NodeName] {
			c.forceDelete(ctx, p, &corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
				Reason: "DeletionByPodGC", Message: "PodGC: node no longer exists"}, "orphaned pod")
		}
	}
	for _, p := range UnscheduledTerminating(pods) {
		c.forceDelete(ctx, p, nil, "unscheduled terminating pod")
	}
}

// Terminated picks the finished pods beyond threshold: evicted ones
// first, then oldest first, as upstream's byEvictionAndCreationTimestamp.
func Terminated(pods []*corev1.Pod, threshold int) []*corev1.Pod {
	if threshold <= 0 {
		return nil
	}
	var done []*corev1.Pod
	for _, p := range pods {
		if ph := p.Status.Phase; ph != corev1.PodPending && ph != corev1.PodRunning && ph != corev1.PodUnknown {
			done = append(done, p)
		}
	}
	if len(done) <= threshold {
		return nil
	}
	slices.SortStableFunc(done, func(a, b *corev1.Pod) int {
		ea, eb := evicted(a), evicted(b)
		switch {
		case ea != eb && ea:
			return -1
		case ea != eb:
			return 1
		case !a.CreationTimestamp.Equal(&b.CreationTimestamp):
			return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
		}
		return compareStrings(a.Name, b.Name)
	})
	return done[:len(done)-threshold]
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// evicted is the kubelet's eviction mark (upstream's PodIsEvicted).
func evicted(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodFailed && p.Status.Reason == "Evicted"
}

// MissingNodes names the nodes pods are bound to that the informer does
// not hold, each once.
func MissingNodes(pods []*corev1.Pod, existing map[string]bool) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range pods {
		if n := p.Spec.NodeName; n != "" && !existing[n] && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

// UnscheduledTerminating picks the terminating pods bound to no node: no
// kubelet will ever confirm their deletion.
func UnscheduledTerminating(pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if p.DeletionTimestamp != nil && p.Spec.NodeName == "" {
			out = append(out, p)
		}
	}
	return out
}

func (c *Controller) terminatingOutOfService(pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if p.DeletionTimestamp == nil || p.Spec.NodeName == "" {
			continue
		}
		node, err := c.nodeLister.Get(p.Spec.NodeName)
		if err != nil {
			continue
		}
		if !nodeReady(node) && slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeOutOfService }) {
			out = append(out, p)
		}
	}
	return out
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// deletedNodes takes the names whose quarantine is over and keeps those a
// GET still does not find: only the API, not a lagging cache, may say a
// Node is gone.
func (c *Controller) deletedNodes(ctx context.Context, existing map[string]bool) map[string]bool {
	gone := map[string]bool{}
	for c.nodeQueue.Len() > 0 {
		name, quit := c.nodeQueue.Get()
		if quit {
			return gone
		}
		if !existing[name] {
			_, err := c.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				gone[name] = true
			case err != nil:
				logrus.WithError(err).Debugf("pod-garbage-collector: get node %s", name)
			}
		}
		c.nodeQueue.Done(name)
	}
	return gone
}

// forceDelete marks a pod that has not finished Failed (with cond, if
// any), as upstream does so its controller counts it as gone for a
// reason, then deletes it with grace 0.
func (c *Controller) forceDelete(ctx context.Context, p *corev1.Pod, cond *corev1.PodCondition, why string) {
	if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
		if err := c.markFailed(ctx, p, cond); err != nil && !apierrors.IsNotFound(err) {
			logrus.WithError(err).Warnf("pod-garbage-collector: mark %s/%s failed", p.Namespace, p.Name)
			return
		}
	}
	zero := int64(0)
	err := c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero,
		Preconditions: &metav1.Preconditions{UID: &p.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		logrus.WithError(err).Warnf("pod-garbage-collector: delete %s/%s", p.Namespace, p.Name)
		return
	}
	logrus.Infof("pod-garbage-collector: force-deleted %s %s/%s", why, p.Namespace, p.Name)
}

func (c *Controller) markFailed(ctx context.Context, p *corev1.Pod, cond *corev1.PodCondition) error {
	status := map[string]any{"phase": corev1.PodFailed}
	if cond != nil {
		now := metav1.Now()
		cc := *cond
		cc.LastTransitionTime = now
		status["conditions"] = []corev1.PodCondition{cc}
	}
	// A strategic merge patch merges conditions by type; the uid is the
	// precondition that this is still the pod the collector looked at.
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": p.UID}, "status": status})
	if err != nil {
		return err
	}
	_, err = c.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}
