package integration

import (
	"context"
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

// fakeKubelet plays the node side for control-loop tests, as a kubelet
// would through the API: it registers Node objects, renews their Leases,
// marks pods bound to its nodes Running and Ready through pods/status, and
// confirms graceful deletions. No containers run.
type fakeKubelet struct {
	t        testing.TB
	cs       kubernetes.Interface
	mu       sync.Mutex
	paused   map[string]bool // nodes whose Lease renewal is stopped
	notReady map[string]bool // pods (ns/name) never to mark Ready
}

func startFakeKubelet(t testing.TB, cs kubernetes.Interface, nodes ...string) *fakeKubelet {
	k := &fakeKubelet{t: t, cs: cs, paused: map[string]bool{}, notReady: map[string]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for _, n := range nodes {
		k.addNode(ctx, n, "4", "8Gi")
	}
	go k.loop(ctx, nodes)
	return k
}

func (k *fakeKubelet) addNode(ctx context.Context, name, cpu, mem string) {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem), corev1.ResourcePods: resource.MustParse("110")},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem), corev1.ResourcePods: resource.MustParse("110")},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
				LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
		},
	}
	if _, err := k.cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		k.t.Errorf("fake kubelet: register %s: %v", name, err)
	}
}

func (k *fakeKubelet) pauseLease(node string, paused bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.paused[node] = paused
}

func (k *fakeKubelet) loop(ctx context.Context, nodes []string) {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for _, n := range nodes {
			k.mu.Lock()
			paused := k.paused[n]
			k.mu.Unlock()
			if !paused {
				k.renew(ctx, n)
			}
		}
		k.syncPods(ctx, nodes)
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
			k.mu.Lock()
			ready := !k.notReady[p.Namespace+"/"+p.Name]
			k.mu.Unlock()
			if p.Status.Phase == corev1.PodRunning && podReady(p) == ready {
				continue
			}
			status := corev1.ConditionTrue
			if !ready {
				status = corev1.ConditionFalse
			}
			now := metav1.Now()
			p.Status.Phase = corev1.PodRunning
			p.Status.PodIP = "10.42.0.9"
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
