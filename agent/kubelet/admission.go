package kubelet

import (
	"context"
	"os"
	"sort"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/kelp-project/kelp/server/scheduler/hostports"
)

// Admission, as upstream's kubelet admits a pod bound to its node
// (pkg/kubelet/lifecycle/predicate.go): before a pod's first sync starts
// anything, it is checked against the node and against the pods this
// kubelet already admitted that are still active. A pod that does not fit
// is rejected: Failed, with the predicate's name as reason, and a Warning
// Event; nothing of it ever starts. The predicates, in upstream's order
// (the first failure is the one reported):
//
//   - NodeAffinity: nodeSelector and required node affinity match the Node;
//   - NodePorts: no host port taken by an active admitted pod (the
//     scheduler's rule, hostports);
//   - TaintToleration: every NoExecute taint of the Node is tolerated;
//
// after the sysctl allowlist (sysctls.go: reason SysctlForbidden), which
// upstream's kubelet checks first among its admit handlers.
//
// Pods are admitted in creation order: the undecided pods older than the
// one asking are decided first, so a pod is never rejected because of one
// created after it that happened to reach its worker first. A pod this
// kubelet already started (a Running phase, containers, its pod directory:
// a kelp restart finds it so) is admitted without checks.
const (
	predicateNodeAffinity    = "NodeAffinity"
	predicateNodePorts       = "NodePorts"
	predicateTaintToleration = "TaintToleration"

	// The upstream plugins' ErrReason strings, verbatim.
	reasonNodeAffinityMismatch = "node(s) didn't match Pod's node affinity/selector"
	reasonNodePortsTaken       = "node(s) didn't have free ports for the requested pod ports"
	reasonTaintsNotTolerated   = "node(s) had taints that the pod didn't tolerate"
)

// admission is one pod's decision; pod is the pod as decided (its host
// ports count while it is active).
type admission struct {
	pod             *corev1.Pod
	ok              bool
	reason, message string
}

// admit returns this kubelet's decision on the pod, making it (and those
// of the undecided pods before it) the first time.
func (k *Kubelet) admit(ctx context.Context, pod *corev1.Pod) admission {
	k.admitMu.Lock()
	defer k.admitMu.Unlock()
	if a, ok := k.admitted[pod.UID]; ok {
		return a
	}
	active := k.activeAdmitted()
	started := k.startedPods(ctx)
	// Pods already started are admitted first, whatever their age: a
	// restart of kelp rejects nothing that runs. Then the pending pods
	// older than this one, oldest first, then this one.
	var older []*corev1.Pod
	if pods, err := k.podLister.List(labels.Everything()); err == nil {
		for _, p := range pods {
			if _, decided := k.admitted[p.UID]; decided || p.UID == pod.UID || p.Spec.NodeName != k.cfg.NodeName ||
				p.DeletionTimestamp != nil || terminal(p) {
				continue
			}
			if started(p) {
				k.admitted[p.UID] = admission{pod: p, ok: true}
				active = append(active, p)
				continue
			}
			if createdBefore(p, pod) {
				older = append(older, p)
			}
		}
	}
	sort.Slice(older, func(i, j int) bool { return createdBefore(older[i], older[j]) })
	var node *corev1.Node
	if len(older) > 0 || !started(pod) {
		// The node as the status loop last read it (at most one status
		// period old, as upstream's node informer may be): no API call
		// per new pod. Before registration there is none, and only the
		// host ports are checked.
		if k.node != nil {
			node = k.node()
		}
	}
	fresh := false
	for _, p := range append(older, pod) {
		a := admission{pod: p, ok: true}
		if !started(p) {
			a = decide(p, node, active)
		}
		if !a.ok && a.reason == predicateNodeAffinity && !fresh {
			// As upstream's kubelet: the scheduler may have matched labels
			// newer than the node read last (a label added, then a pod
			// asking for it at once), so read the node from the API and
			// decide again before rejecting on affinity.
			if n, err := k.client.CoreV1().Nodes().Get(ctx, k.cfg.NodeName, metav1.GetOptions{}); err == nil {
				node, fresh = n, true
				a = decide(p, node, active)
			}
		}
		k.admitted[p.UID] = a
		if a.ok {
			active = append(active, p)
		}
	}
	return k.admitted[pod.UID]
}

// decide runs the predicates on a pod not started yet.
func decide(pod *corev1.Pod, node *corev1.Node, active []*corev1.Pod) admission {
	reject := func(predicate, reason string) admission {
		return admission{pod: pod, reason: predicate, message: "Predicate " + predicate + " failed: " + reason}
	}
	if msg := forbiddenSysctl(pod); msg != "" {
		return admission{pod: pod, reason: reasonSysctlForbidden, message: msg}
	}
	if node != nil {
		if ok, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); err != nil || !ok {
			return reject(predicateNodeAffinity, reasonNodeAffinityMismatch)
		}
	}
	if want := hostports.Of(pod); len(want) > 0 {
		used := hostports.Used{}
		for _, p := range active {
			used.Add(hostports.Of(p))
		}
		if !used.Fits(want) {
			return reject(predicateNodePorts, reasonNodePortsTaken)
		}
	}
	if node != nil {
		if _, bad := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, pod.Spec.Tolerations,
			func(t *corev1.Taint) bool { return t.Effect == corev1.TaintEffectNoExecute }, false); bad {
			return reject(predicateTaintToleration, reasonTaintsNotTolerated)
		}
	}
	return admission{pod: pod, ok: true}
}

// activeAdmitted returns the admitted pods that still hold what they
// asked for: not terminal, and either in the API or still being torn
// down by their worker. Decisions on pods that are gone are dropped.
// admitMu is held.
func (k *Kubelet) activeAdmitted() []*corev1.Pod {
	var out []*corev1.Pod
	for uid, a := range k.admitted {
		cur := a.pod
		if p, err := k.podLister.Pods(a.pod.Namespace).Get(a.pod.Name); err == nil && p.UID == uid {
			cur = p
		} else {
			k.mu.Lock()
			_, live := k.workers[uid]
			k.mu.Unlock()
			if !live {
				delete(k.admitted, uid)
				continue
			}
		}
		if a.ok && !terminal(cur) {
			out = append(out, cur)
		}
	}
	return out
}

// startedPods returns whether a pod was already started by this kubelet
// (before a restart of kelp, or by an admission since lost): it has left
// Pending, or has containers, or its pod directory (written before its
// sandbox) exists.
func (k *Kubelet) startedPods(ctx context.Context) func(*corev1.Pod) bool {
	withContainers := map[string]bool{}
	if list, err := k.runtime.ListContainers(ctx, nil); err == nil {
		for _, c := range list {
			withContainers[c.Labels[labelPodUID]] = true
		}
	}
	return func(p *corev1.Pod) bool {
		if p.Status.Phase != "" && p.Status.Phase != corev1.PodPending {
			return true
		}
		if withContainers[string(p.UID)] {
			return true
		}
		_, err := os.Stat(k.podDir(p.UID))
		return err == nil
	}
}

// forgetAdmission drops the decision on a pod whose worker ended.
func (k *Kubelet) forgetAdmission(uid types.UID) {
	k.admitMu.Lock()
	delete(k.admitted, uid)
	k.admitMu.Unlock()
}

func terminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// createdBefore orders pods by creation, as upstream's PodsByCreationTime;
// the UID breaks ties so that the order is the same for every caller.
func createdBefore(a, b *corev1.Pod) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.UID < b.UID
}

// reject fails a pod that admission refused, as upstream's rejectPod: a
// Warning Event with the predicate's reason and message, and the status
// Failed with them (the message prefixed "Pod was rejected: "), written
// once through patchStatus. Its worker then treats it as finished: the
// Failed phase keeps it from ever starting.
func (w *podWorker) reject(ctx context.Context, pod *corev1.Pod, a admission) {
	if !w.rejectEvent {
		w.rejectEvent = true
		w.k.event(pod, corev1.EventTypeWarning, a.reason, "%s", a.message)
		logrus.Infof("kubelet: rejected pod %s/%s: %s", pod.Namespace, pod.Name, a.message)
	}
	if w.posted != nil && w.posted.Phase == corev1.PodFailed {
		return // written; the informer has not shown it yet
	}
	st := corev1.PodStatus{Phase: corev1.PodFailed, Reason: a.reason, Message: "Pod was rejected: " + a.message,
		QOSClass: pod.Status.QOSClass}
	if err := w.k.patchStatus(ctx, pod, st); err != nil {
		logrus.WithError(err).Debugf("kubelet: status of rejected pod %s/%s", pod.Namespace, pod.Name)
		return
	}
	w.posted = &st
}
