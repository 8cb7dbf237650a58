package integration

import (
	"context"
	"fmt"
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

// neverReadyLabel marks pods the fake kubelet runs but never reports Ready,
// as a real kubelet would for a pod whose readiness probe keeps failing.
const neverReadyLabel = "test.kelp.dev/never-ready"

// fakeKubelet plays the node side for control-loop tests, as a kubelet
// would through the API: it registers Node objects, renews their Leases,
// reports Ready again when the node controller marked it otherwise, marks
// pods bound to its nodes Running and Ready through pods/status (each with
// its own IP), and confirms graceful deletions. No containers run.
type fakeKubelet struct {
	t      testing.TB
	cs     kubernetes.Interface
	mu     sync.Mutex
	nodes  []string
	paused map[string]bool // nodes whose kubelet is cut off: no renewals, no pod work
	ips    map[string]string
	nextIP int
}

func startFakeKubelet(t testing.TB, cs kubernetes.Interface, nodes ...string) *fakeKubelet {
	k := &fakeKubelet{t: t, cs: cs, paused: map[string]bool{}, ips: map[string]string{}}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for _, n := range nodes {
		k.addNode(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, "4", "8Gi")
	}
	go k.loop(ctx)
	return k
}

// addNode registers node (with its labels and taints) with the given
// capacity and starts serving it.
func (k *fakeKubelet) addNode(ctx context.Context, node *corev1.Node, cpu, mem string) {
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	node.Labels["kubernetes.io/hostname"] = node.Name
	node.Labels["kubernetes.io/os"] = "linux"
	list := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem), corev1.ResourcePods: resource.MustParse("110")}
	node.Status = corev1.NodeStatus{Capacity: list, Allocatable: list,
		Conditions: []corev1.NodeCondition{readyCondition()}}
	if _, err := k.cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		k.t.Errorf("fake kubelet: register %s: %v", node.Name, err)
	}
	k.mu.Lock()
	k.nodes = append(k.nodes, node.Name)
	k.mu.Unlock()
}

func readyCondition() corev1.NodeCondition {
	return corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		Message: "kubelet is posting ready status", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}
}

// cutOff stops (or resumes) everything the node's kubelet sends, as when
// the machine loses its network.
func (k *fakeKubelet) cutOff(node string, off bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.paused[node] = off
}

func (k *fakeKubelet) loop(ctx context.Context) {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		k.mu.Lock()
		var live []string
		for _, n := range k.nodes {
			if !k.paused[n] {
				live = append(live, n)
			}
		}
		k.mu.Unlock()
		for _, n := range live {
			k.renew(ctx, n)
		}
		k.syncPods(ctx, live)
	}
}

func (k *fakeKubelet) renew(ctx context.Context, node string) {
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

func (k *fakeKubelet) podIP(p *corev1.Pod) string {
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

func (k *fakeKubelet) syncPods(ctx context.Context, nodes []string) {
	for _, n := range nodes {
		pods, err := k.cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + n})
		if err != nil {
			continue
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.DeletionTimestamp != nil {
				zero := int64(0)
				_ = k.cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero,
					Preconditions: &metav1.Preconditions{UID: &p.UID}})
				continue
			}
			ready := p.Labels[neverReadyLabel] != "true"
			if p.Status.Phase == corev1.PodRunning && podReady(p) == ready {
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
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
