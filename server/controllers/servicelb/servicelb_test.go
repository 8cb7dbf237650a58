package servicelb

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

func node(name, ip string, ready bool) *corev1.Node {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{
		Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}},
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}}}}
}

// A LoadBalancer Service gets the Ready nodes' InternalIPs as ingress and
// follows the nodes; other Services are left alone.
func TestIngressFollowsReadyNodes(t *testing.T) {
	lb := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}}
	plain := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "default"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP}}
	cs := fake.NewSimpleClientset(lb, plain, node("a", "192.0.2.11", true), node("b", "192.0.2.12", false))
	f := informers.NewSharedInformerFactory(cs, 0)
	c := New(cs, f)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.Start(ctx.Done())
	go c.Run(ctx, 1)
	ingress := func() []corev1.LoadBalancerIngress {
		s, _ := cs.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
		return s.Status.LoadBalancer.Ingress
	}
	poll := func(what string, cond func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
	}
	poll("the ready node's IP", func() bool { i := ingress(); return len(i) == 1 && i[0].IP == "192.0.2.11" })
	if _, err := cs.CoreV1().Nodes().Update(ctx, node("b", "192.0.2.12", true), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll("both nodes", func() bool { i := ingress(); return len(i) == 2 && i[1].IP == "192.0.2.12" })
	if s, _ := cs.CoreV1().Services("default").Get(ctx, "db", metav1.GetOptions{}); len(s.Status.LoadBalancer.Ingress) != 0 {
		t.Errorf("a ClusterIP Service got ingress %v", s.Status.LoadBalancer.Ingress)
	}
}
