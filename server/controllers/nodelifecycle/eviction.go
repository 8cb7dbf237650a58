package nodelifecycle

import (
	"context"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// scheduledEviction is a pending timed deletion: at fires the pod's key
// back into the queue, and the sync then decides again from the current
// state, so a timer that outlived its reason deletes nothing.
type scheduledEviction struct {
	at    time.Time
	timer clock.Timer
}

func taintID(t *corev1.Taint) string { return t.Key + "=" + t.Value + ":" + string(t.Effect) }

func noExecuteTaints(node *corev1.Node) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range node.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoExecute {
			out = append(out, t)
		}
	}
	return out
}

// nodeChanged feeds both the NoSchedule loop and, when the node's
// NoExecute taints changed, the eviction manager for its pods.
func (c *Controller) nodeChanged(old, obj any) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	c.noSchedQueue.Add(node.Name)
	taints := noExecuteTaints(node)
	c.evictMu.Lock()
	seen := c.firstSeen[node.Name]
	keep := map[string]time.Time{}
	for i := range taints {
		if taints[i].TimeAdded != nil {
			continue
		}
		id := taintID(&taints[i])
		if t, ok := seen[id]; ok {
			keep[id] = t
		} else {
			keep[id] = c.clock.Now()
		}
	}
	if len(keep) > 0 {
		c.firstSeen[node.Name] = keep
	} else {
		delete(c.firstSeen, node.Name)
	}
	c.evictMu.Unlock()
	if o, ok := old.(*corev1.Node); ok && taintsEqual(noExecuteTaints(o), taints) {
		return
	}
	c.enqueuePodsOn(node.Name)
}

func taintsEqual(a, b []corev1.Taint) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].MatchTaint(&b[i]) || a[i].Value != b[i].Value || !a[i].TimeAdded.Equal(b[i].TimeAdded) {
			return false
		}
	}
	return true
}

func (c *Controller) nodeDeleted(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	node, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	c.evictMu.Lock()
	delete(c.firstSeen, node.Name)
	c.evictMu.Unlock()
	c.enqueuePodsOn(node.Name)
}

func (c *Controller) enqueuePodsOn(node string) {
	pods, err := c.podsOnNode(node)
	if err != nil {
		logrus.WithError(err).Warnf("%s: pods on node %s", name, node)
		return
	}
	for _, p := range pods {
		c.enqueuePod(p)
	}
}

func (c *Controller) enqueuePod(obj any) {
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		c.evictQueue.Add(key)
	}
}

// syncPod deletes the pod now, schedules its deletion, or cancels a
// scheduled one, from its node's NoExecute taints and its tolerations.
func (c *Controller) syncPod(ctx context.Context, key string) error {
	ns, podName, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pod, err := c.pods.Pods(ns).Get(podName)
	if err != nil {
		c.cancelEviction(key)
		return ignoreNotFound(err)
	}
	// A terminating pod is already on its way out; deleting again would
	// only shorten its grace period.
	if pod.DeletionTimestamp != nil || pod.Spec.NodeName == "" {
		c.cancelEviction(key)
		return nil
	}
	node, err := c.nodes.Get(pod.Spec.NodeName)
	if err != nil {
		c.cancelEviction(key)
		return ignoreNotFound(err)
	}
	taints := noExecuteTaints(node)
	if len(taints) == 0 {
		c.cancelEviction(key)
		return nil
	}
	now := c.clock.Now()
	at, forever := c.evictionTime(pod, node.Name, taints, now)
	if forever {
		c.cancelEviction(key)
		return nil
	}
	if at.After(now) {
		c.scheduleEviction(key, at, now)
		return nil
	}
	c.cancelEviction(key)
	return c.evict(ctx, pod)
}

// evictionTime is when the pod must go: now if some taint is not
// tolerated, else the earliest taint start plus the tolerationSeconds of
// the toleration matching it (upstream takes the first match). Tolerations
// without tolerationSeconds tolerate forever.
func (c *Controller) evictionTime(pod *corev1.Pod, node string, taints []corev1.Taint, now time.Time) (at time.Time, forever bool) {
	forever = true
	for i := range taints {
		taint := &taints[i]
		var match *corev1.Toleration
		for j := range pod.Spec.Tolerations {
			if pod.Spec.Tolerations[j].ToleratesTaint(klog.Background(), taint, false) {
				match = &pod.Spec.Tolerations[j]
				break
			}
		}
		if match == nil {
			return now, false
		}
		if match.TolerationSeconds == nil {
			continue
		}
		if *match.TolerationSeconds <= 0 {
			return now, false
		}
		deadline := c.taintStart(node, taint, now).Add(time.Duration(*match.TolerationSeconds) * time.Second)
		if forever || deadline.Before(at) {
			at, forever = deadline, false
		}
	}
	return at, forever
}

// taintStart is the taint's timeAdded or, lacking one, when this
// controller first saw it.
func (c *Controller) taintStart(node string, taint *corev1.Taint, now time.Time) time.Time {
	if taint.TimeAdded != nil {
		return taint.TimeAdded.Time
	}
	c.evictMu.Lock()
	defer c.evictMu.Unlock()
	id := taintID(taint)
	if c.firstSeen[node] == nil {
		c.firstSeen[node] = map[string]time.Time{}
	}
	if t, ok := c.firstSeen[node][id]; ok {
		return t
	}
	c.firstSeen[node][id] = now
	return now
}

func (c *Controller) scheduleEviction(key string, at, now time.Time) {
	c.evictMu.Lock()
	defer c.evictMu.Unlock()
	if s, ok := c.evictions[key]; ok {
		if s.at.Equal(at) {
			return
		}
		s.timer.Stop()
	}
	c.evictions[key] = &scheduledEviction{at: at, timer: c.clock.AfterFunc(at.Sub(now), func() { c.evictQueue.Add(key) })}
}

func (c *Controller) cancelEviction(key string) {
	c.evictMu.Lock()
	defer c.evictMu.Unlock()
	if s, ok := c.evictions[key]; ok {
		s.timer.Stop()
		delete(c.evictions, key)
	}
}

func (c *Controller) cancelAllEvictions() {
	c.evictMu.Lock()
	defer c.evictMu.Unlock()
	for key, s := range c.evictions {
		s.timer.Stop()
		delete(c.evictions, key)
	}
}

// evict marks the pod with a DisruptionTarget condition, as upstream, and
// deletes it gracefully. The UID precondition keeps a recreated pod of the
// same name safe.
func (c *Controller) evict(ctx context.Context, pod *corev1.Pod) error {
	p := pod.DeepCopy()
	cond := corev1.PodCondition{
		Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		Reason: "DeletionByTaintManager", Message: "Taint manager: deleting due to NoExecute taint",
		LastTransitionTime: metav1.NewTime(c.clock.Now()),
	}
	if setPodCondition(p, cond) {
		if _, err := c.client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			return ignoreNotFound(err)
		}
	}
	c.recorder.Eventf(pod, corev1.EventTypeNormal, "TaintManagerEviction", "Marking for deletion Pod %s/%s", pod.Namespace, pod.Name)
	uid := pod.UID
	err := c.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	return ignoreNotFound(err)
}

// setPodCondition puts cond on p unless a condition of its type already
// has its status; it reports whether p changed.
func setPodCondition(p *corev1.Pod, cond corev1.PodCondition) bool {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == cond.Type {
			if p.Status.Conditions[i].Status == cond.Status {
				return false
			}
			p.Status.Conditions[i] = cond
			return true
		}
	}
	p.Status.Conditions = append(p.Status.Conditions, cond)
	return true
}
