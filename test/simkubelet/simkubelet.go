// Package simkubelet plays the node side for control-loop tests and
// benchmarks, through the API only, as a kubelet would: it registers Node
// objects, renews their Leases, reports Ready again when the node
// controller marked it otherwise, marks pods bound to its nodes Running and
// Ready through pods/status (each with its own IP), and confirms graceful
// deletions. No containers run; the real kubelet is agent/kubelet.
//
// A pod annotated with ExitCodeAnnotation plays a container that ends:
// once it has run for RunForAnnotation (a Go duration, default 0) every
// container terminates with that code, and the pod's phase becomes
// Succeeded (code 0) or Failed, as a kubelet reports a pod with
// restartPolicy Never. Under restartPolicy OnFailure a non-zero exit
// restarts the containers instead (restartCount grows, the pod stays
// Running), and a zero exit still ends the pod Succeeded. A pod being
// deleted that still has finalizers (a Job's tracking finalizer) is first
// reported Failed, as a kubelet reports a pod it killed, so that whoever
// holds the finalizer sees a terminal pod.
package simkubelet

import (
	"context"
	"fmt"
	"k8s.io/kubectl/pkg/util/podutils"
	"strconv"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// NeverReadyLabel marks pods the simulated kubelet runs but never reports
// Ready, as a real kubelet would for a pod whose readiness probe keeps
// failing.
const NeverReadyLabel = "test.kelp.dev/never-ready"

// ExitCodeAnnotation and RunForAnnotation make a pod's containers end (see
// the package comment).
const (
	ExitCodeAnnotation = "test.kelp.dev/exit-code"
	RunForAnnotation   = "test.kelp.dev/run-for"
)

// Kubelet simulates the kubelets of a set of nodes.
type Kubelet struct {
	tb     testing.TB
	cs     kubernetes.Interface
	mu     sync.Mutex
	nodes  map[string]bool // node name → cut off (no renewals, no pod work)
	ips    map[string]string
	nextIP int
}

// Interval is how often the simulated kubelets renew Leases and look at
// their pods.
const Interval = 200 * time.Millisecond

// Start registers nodes (4 CPUs, 8 GiB, 110 pods each) and serves them
// until the test ends.
func Start(tb testing.TB, cs kubernetes.Interface, nodes ...string) *Kubelet {
	k := &Kubelet{tb: tb, cs: cs, nodes: map[string]bool{}, ips: map[string]string{}}
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	for _, n := range nodes {
		k.AddNode(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, "4", "8Gi")
	}
	go k.loop(ctx)
	return k
}

// AddNode registers node (with its labels and taints) with the given
// capacity and starts serving it.
func (k *Kubelet) AddNode(ctx context.Context, node *corev1.Node, cpu, mem string) {
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	node.Labels["kubernetes.io/hostname"] = node.Name
	node.Labels["kubernetes.io/os"] = "linux"
	list := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem), corev1.ResourcePods: resource.MustParse("110")}
	node.Status = corev1.NodeStatus{Capacity: list, Allocatable: list, Conditions: []corev1.NodeCondition{readyCondition()}}
	if _, err := k.cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		k.tb.Errorf("simulated kubelet: register %s: %v", node.Name, err)
	}
	k.mu.Lock()
	k.nodes[node.Name] = false
	k.mu.Unlock()
}

func readyCondition() corev1.NodeCondition {
	return corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		Message: "kubelet is posting ready status", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}
}

// CutOff stops (or resumes) everything the node's kubelet sends, as when
// the machine loses its network.
func (k *Kubelet) CutOff(node string, off bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.nodes[node] = off
}

func (k *Kubelet) loop(ctx context.Context) {
	tick := time.NewTicker(Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		live := map[string]bool{}
		k.mu.Lock()
		for n, off := range k.nodes {
			if !off {
				live[n] = true
			}
		}
		k.mu.Unlock()
		for n := range live {
			k.renew(ctx, n)
		}
		k.syncPods(ctx, live)
	}
}

func (k *Kubelet) renew(ctx context.Context, node string) {
	now := metav1.NowMicro()
	leases := k.cs.CoordinationV1().Leases("kube-node-lease")
	l, err := leases.Get(ctx, node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		d := int32(40)
		_, _ = leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: node},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &node, LeaseDurationSeconds: &d, RenewTime: &now}}, metav1.CreateOptions{})
		return
	}
	if err == nil {
		l.Spec.RenewTime = &now
		_, _ = leases.Update(ctx, l, metav1.UpdateOptions{})
	}
	// A kubelet posts its status when it differs from what it knows.
	n, err := k.cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return
	}
	for i, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
			n.Status.Conditions[i] = readyCondition()
			_, _ = k.cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		}
	}
}

func (k *Kubelet) podIP(p *corev1.Pod) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	key := string(p.UID)
	if ip, ok := k.ips[key]; ok {
		return ip
	}
	k.nextIP++
	ip := fmt.Sprintf("10.42.%d.%d", k.nextIP/250, k.nextIP%250+2)
	k.ips[key] = ip
	return ip
}

// syncPods reads every bound pod that has not finished in one list and
// acts for the live nodes, each node's pods in its own goroutine, as
// separate kubelets would. Finished pods need nothing more from a kubelet
// (the API deletes them without a grace period), and leaving them out
// keeps the list small when a Job has left a thousand behind.
func (k *Kubelet) syncPods(ctx context.Context, live map[string]bool) {
	pods, err := k.cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{
		FieldSelector: "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"})
	if err != nil {
		return
	}
	perNode := map[string][]*corev1.Pod{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if live[p.Spec.NodeName] {
			perNode[p.Spec.NodeName] = append(perNode[p.Spec.NodeName], p)
		}
	}
	var wg sync.WaitGroup
	for _, list := range perNode {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k.syncNodePods(ctx, list)
		}()
	}
	wg.Wait()
}

func (k *Kubelet) syncNodePods(ctx context.Context, pods []*corev1.Pod) {
	for _, p := range pods {
		terminal := p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
		if p.DeletionTimestamp != nil {
			if !terminal && len(p.Finalizers) > 0 {
				k.terminate(ctx, p, 137)
			}
			zero := int64(0)
			_ = k.cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero,
				Preconditions: &metav1.Preconditions{UID: &p.UID}})
			continue
		}
		if terminal {
			continue // a kubelet never restarts a finished pod
		}
		if code, ok := exitCode(p); ok {
			if k.exit(ctx, p, code) {
				continue
			}
		}
		ready := p.Labels[NeverReadyLabel] != "true"
		if p.Status.Phase == corev1.PodRunning && podutils.IsPodReady(p) == ready {
			continue
		}
		status := corev1.ConditionTrue
		if !ready {
			status = corev1.ConditionFalse
		}
		now := metav1.Now()
		ip := k.podIP(p)
		p.Status.Phase = corev1.PodRunning
		p.Status.PodIP = ip
		p.Status.PodIPs = []corev1.PodIP{{IP: ip}}
		p.Status.StartTime = &now
		p.Status.Conditions = []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: status, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: status, LastTransitionTime: now},
		}
		_, _ = k.cs.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	}
}

func exitCode(p *corev1.Pod) (int32, bool) {
	v, ok := p.Annotations[ExitCodeAnnotation]
	if !ok {
		return 0, false
	}
	code, err := strconv.ParseInt(v, 10, 32)
	return int32(code), err == nil
}

// runningSince is when the pod's containers last (re)started.
func runningSince(p *corev1.Pod) (time.Time, bool) {
	if p.Status.Phase != corev1.PodRunning {
		return time.Time{}, false
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running != nil {
			return cs.State.Running.StartedAt.Time, true
		}
	}
	if p.Status.StartTime != nil {
		return p.Status.StartTime.Time, true
	}
	return time.Time{}, false
}

// exit ends (or, under OnFailure, restarts) the pod's containers once they
// have run long enough, and reports whether it wrote the pod's status.
func (k *Kubelet) exit(ctx context.Context, p *corev1.Pod, code int32) bool {
	runFor, _ := time.ParseDuration(p.Annotations[RunForAnnotation])
	if runFor > 0 {
		since, running := runningSince(p)
		if !running || time.Since(since) < runFor {
			return false // start it (below) or let it run
		}
	}
	if code != 0 && p.Spec.RestartPolicy == corev1.RestartPolicyOnFailure {
		k.restart(ctx, p, code)
		return true
	}
	k.terminate(ctx, p, code)
	return true
}

func (k *Kubelet) terminate(ctx context.Context, p *corev1.Pod, code int32) {
	now := metav1.Now()
	started := now
	if p.Status.StartTime != nil {
		started = *p.Status.StartTime
	} else {
		p.Status.StartTime = &now
	}
	reason, phase := "Completed", corev1.PodSucceeded
	if code != 0 {
		reason, phase = "Error", corev1.PodFailed
	}
	p.Status.Phase = phase
	var statuses []corev1.ContainerStatus
	for _, c := range p.Spec.Containers {
		statuses = append(statuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image, RestartCount: restarts(p, c.Name),
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, StartedAt: started, FinishedAt: now}}})
	}
	p.Status.ContainerStatuses = statuses
	p.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, Reason: "PodCompleted", LastTransitionTime: now},
		{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "PodCompleted", LastTransitionTime: now},
	}
	_, _ = k.cs.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
}

func (k *Kubelet) restart(ctx context.Context, p *corev1.Pod, code int32) {
	now := metav1.Now()
	var statuses []corev1.ContainerStatus
	for _, c := range p.Spec.Containers {
		statuses = append(statuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image, RestartCount: restarts(p, c.Name) + 1, Ready: true, Started: ptrTrue(),
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: "Error", FinishedAt: now}},
			State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}})
	}
	p.Status.ContainerStatuses = statuses
	_, _ = k.cs.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
}

func restarts(p *corev1.Pod, name string) int32 {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == name {
			return cs.RestartCount
		}
	}
	return 0
}

func ptrTrue() *bool { t := true; return &t }
