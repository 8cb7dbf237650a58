package server

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// The server's own node gets the control-plane role when it registers and
// again if it re-registers without it; other nodes are left alone.
func TestLabelControlPlaneNode(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset()
	labelControlPlaneNode(ctx, client, "server-1")
	nodes := client.CoreV1().Nodes()
	for _, name := range []string{"agent-1", "server-1"} {
		if _, err := nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitLabel := func(what string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			n, err := nodes.Get(ctx, "server-1", metav1.GetOptions{})
			if err == nil && n.Labels[controlPlaneLabel] == "true" && n.Labels["kubernetes.io/hostname"] == "server-1" {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: labels %v", what, n.Labels)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitLabel("registered")
	if err := nodes.Delete(ctx, "server-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "server-1", Labels: map[string]string{"kubernetes.io/hostname": "server-1"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitLabel("re-registered")
	if n, _ := nodes.Get(ctx, "agent-1", metav1.GetOptions{}); n.Labels[controlPlaneLabel] != "" {
		t.Errorf("agent-1 labelled %v", n.Labels)
	}
}
