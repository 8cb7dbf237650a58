package nodeipam

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
)

func TestAllocatesDistinctSubnets(t *testing.T) {
	existing := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "old"}, Spec: corev1.NodeSpec{PodCIDR: "10.42.0.0/24", PodCIDRs: []string{"10.42.0.0/24"}}}
	cs := fake.NewClientset(existing,
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "b"}})
	factory := informers.NewSharedInformerFactory(cs, 0)
	c, err := New(cs, factory.Core().V1().Nodes(), record.NewFakeRecorder(10), "10.42.0.0/16", 24)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	go c.Run(ctx)
	deadline := time.Now().Add(10 * time.Second)
	for {
		a, _ := cs.CoreV1().Nodes().Get(ctx, "a", metav1.GetOptions{})
		b, _ := cs.CoreV1().Nodes().Get(ctx, "b", metav1.GetOptions{})
		if a.Spec.PodCIDR != "" && b.Spec.PodCIDR != "" {
			got := map[string]bool{a.Spec.PodCIDR: true, b.Spec.PodCIDR: true}
			if !got["10.42.1.0/24"] || !got["10.42.2.0/24"] || a.Spec.PodCIDRs[0] != a.Spec.PodCIDR {
				t.Fatalf("allocated %s and %s, want 10.42.1.0/24 and 10.42.2.0/24 (10.42.0.0/24 is taken)", a.Spec.PodCIDR, b.Spec.PodCIDR)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not allocated: a=%q b=%q", a.Spec.PodCIDR, b.Spec.PodCIDR)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRejectsBadRanges(t *testing.T) {
	cs := fake.NewClientset()
	f := informers.NewSharedInformerFactory(cs, 0)
	if _, err := New(cs, f.Core().V1().Nodes(), nil, "10.42.0.0/16", 8); err == nil {
		t.Error("a /8 node mask inside a /16 must be refused")
	}
	if _, err := New(cs, f.Core().V1().Nodes(), nil, "not-a-cidr", 24); err == nil {
		t.Error("a bad CIDR must be refused")
	}
}
