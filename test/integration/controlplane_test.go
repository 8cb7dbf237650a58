package integration

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kelp-project/kelp/test/simkubelet"
)

// The control loops run inside kelp server as API clients without leader
// election (one server per cluster, as k3s on its single-node datastore):
// no component Lease is written to kube-system; node IPAM gives each node
// a distinct /24 from the cluster CIDR.
func TestControlLoopsWithoutLeaderElectionAndNodeIPAM(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	simkubelet.Start(t, cs, "node-a", "node-b")
	cidrs := map[string]string{}
	waitFor(t, "pod CIDRs on both nodes", func() bool {
		for _, n := range []string{"node-a", "node-b"} {
			node, err := cs.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
			if err != nil || node.Spec.PodCIDR == "" {
				return false
			}
			cidrs[n] = node.Spec.PodCIDR
		}
		return true
	})
	if cidrs["node-a"] == cidrs["node-b"] {
		t.Fatalf("both nodes got %s", cidrs["node-a"])
	}
	// Events are recorded asynchronously, as upstream's broadcaster does.
	var evs *corev1.EventList
	waitFor(t, "a CIDRAssigned event per node", func() bool {
		var err error
		evs, err = cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "reason=CIDRAssigned"})
		return err == nil && len(evs.Items) >= 2
	})
	if evs.Items[0].Source.Component != "node-ipam-controller" || evs.Items[0].Type != corev1.EventTypeNormal {
		t.Errorf("event source %+v", evs.Items[0].Source)
	}
	// The loops have been working all along: had they been elected, their
	// Leases would be there by now.
	leases, err := cs.CoordinationV1().Leases("kube-system").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range leases.Items {
		t.Errorf("Lease kube-system/%s written (holder %v): the components run without leader election", l.Name, l.Spec.HolderIdentity)
	}
}

// The ReplicaSet controller keeps the pod count, replaces a deleted pod
// and removes the surplus when scaled down.
func TestReplicaSetController(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	replicas := int32(3)
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.ReplicaSetSpec{Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox:1.36"}}}}},
	}
	if _, err := cs.AppsV1().ReplicaSets("default").Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := func() []corev1.Pod {
		l, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			t.Fatal(err)
		}
		var live []corev1.Pod
		for _, p := range l.Items {
			if p.DeletionTimestamp == nil {
				live = append(live, p)
			}
		}
		return live
	}
	waitFor(t, "3 pods", func() bool { return len(pods()) == 3 })
	first := pods()
	for _, p := range first {
		ref := metav1.GetControllerOf(&p)
		if ref == nil || ref.Kind != "ReplicaSet" || ref.Name != "web" || !strings.HasPrefix(p.Name, "web-") {
			t.Fatalf("pod %s owner %+v", p.Name, ref)
		}
	}
	if err := cs.CoreV1().Pods("default").Delete(ctx, first[0].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a replacement pod", func() bool {
		ps := pods()
		if len(ps) != 3 {
			return false
		}
		for _, p := range ps {
			if p.Name == first[0].Name {
				return false
			}
		}
		return true
	})
	waitFor(t, "status.replicas 3", func() bool {
		got, err := cs.AppsV1().ReplicaSets("default").Get(ctx, "web", metav1.GetOptions{})
		return err == nil && got.Status.Replicas == 3 && got.Status.ObservedGeneration == got.Generation
	})
	s.mustKubectl("scale", "rs", "web", "--replicas=1")
	waitFor(t, "scale down to 1", func() bool { return len(pods()) == 1 })
}

// The Deployment controller makes one ReplicaSet per template, which makes
// the pods; a test kubelet marks them Ready once bound (here by hand, as no
// scheduler runs in this test), and the Deployment reports Available.
func TestDeploymentController(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	s.mustKubectl("apply", "-f", "testdata/deployment.yaml")
	var rsName string
	waitFor(t, "a ReplicaSet named with the pod-template-hash", func() bool {
		l, err := cs.AppsV1().ReplicaSets("default").List(ctx, metav1.ListOptions{LabelSelector: "app=container-lab"})
		if err != nil || len(l.Items) != 1 {
			return false
		}
		rsName = l.Items[0].Name
		return strings.HasPrefix(rsName, "container-lab-") && l.Items[0].Labels["pod-template-hash"] != ""
	})
	waitFor(t, "3 pods", func() bool {
		l, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=container-lab"})
		return err == nil && len(l.Items) == 3
	})
	out := s.mustKubectl("get", "rs", "-o", "wide")
	if !strings.Contains(out, rsName) {
		t.Errorf("get rs: %s", out)
	}
	d, err := cs.AppsV1().Deployments("default").Get(ctx, "container-lab", metav1.GetOptions{})
	if err != nil || d.Annotations["deployment.kubernetes.io/revision"] != "1" {
		t.Fatalf("revision annotation: %v %v", err, d.Annotations)
	}
	waitFor(t, "observedGeneration", func() bool {
		d, err := cs.AppsV1().Deployments("default").Get(ctx, "container-lab", metav1.GetOptions{})
		return err == nil && d.Status.ObservedGeneration == d.Generation && d.Status.Replicas == 3
	})
}

// The seed's Deployment end to end through the control loops: a
// ReplicaSet, 3 pods spread over 3 nodes by the scheduler, Ready through
// the test kubelet, and `kubectl rollout status` returns.
func TestApplySpreadAndRollout(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	simkubelet.Start(t, cs, "node-1", "node-2", "node-3")
	s.mustKubectl("apply", "-f", "testdata/deployment.yaml")
	out, err := s.kubectl("rollout", "status", "deployment/container-lab", "--timeout=60s")
	if err != nil || !strings.Contains(out, `deployment "container-lab" successfully rolled out`) {
		t.Fatalf("rollout status: %v\n%s", err, out)
	}
	l, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=container-lab"})
	if err != nil {
		t.Fatal(err)
	}
	perNode := map[string]int{}
	for _, p := range l.Items {
		perNode[p.Spec.NodeName]++
	}
	if len(perNode) != 3 || perNode["node-1"] != 1 || perNode["node-2"] != 1 || perNode["node-3"] != 1 {
		t.Errorf("pods per node %v, want one on each of 3 nodes", perNode)
	}
	evs, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "reason=Scheduled"})
	if err != nil || len(evs.Items) < 3 {
		t.Errorf("Scheduled events: %v %d", err, len(evs.Items))
	}
	s.mustKubectl("scale", "deploy", "container-lab", "--replicas=5")
	if out, err := s.kubectl("rollout", "status", "deployment/container-lab", "--timeout=60s"); err != nil {
		t.Fatalf("rollout status after scale to 5: %v\n%s", err, out)
	}
	d, _ := cs.AppsV1().Deployments("default").Get(ctx, "container-lab", metav1.GetOptions{})
	if d.Status.AvailableReplicas != 5 {
		t.Errorf("available %d after scaling to 5", d.Status.AvailableReplicas)
	}
	live := func() []corev1.Pod {
		l, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=container-lab"})
		if err != nil {
			t.Fatal(err)
		}
		var out []corev1.Pod
		for _, p := range l.Items {
			if p.DeletionTimestamp == nil {
				out = append(out, p)
			}
		}
		return out
	}
	s.mustKubectl("scale", "deploy", "container-lab", "--replicas=2")
	waitFor(t, "2 pods after scaling to 2", func() bool { return len(live()) == 2 })
	rolloutStatus(t, s, "default", "container-lab")
	before := live()
	s.mustKubectl("delete", "pod", before[0].Name)
	waitFor(t, "a replacement with a new name", func() bool {
		now := live()
		return len(now) == 2 && now[0].Name != before[0].Name && now[1].Name != before[0].Name
	})
}

// Every namespace gets its default ServiceAccount and kube-root-ca.crt;
// deleting a namespace full of objects empties it, and it disappears.
func TestNamespaceLifecycle(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	s.mustKubectl("create", "namespace", "team")
	waitFor(t, "default ServiceAccount and kube-root-ca.crt", func() bool {
		_, e1 := cs.CoreV1().ServiceAccounts("team").Get(ctx, "default", metav1.GetOptions{})
		cm, e2 := cs.CoreV1().ConfigMaps("team").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return e1 == nil && e2 == nil && strings.Contains(cm.Data["ca.crt"], "BEGIN CERTIFICATE")
	})
	s.mustKubectl("-n", "team", "create", "configmap", "a", "--from-literal=x=1")
	s.mustKubectl("-n", "team", "create", "secret", "generic", "s", "--from-literal=x=1")
	s.mustKubectl("-n", "team", "apply", "-f", "testdata/deployment.yaml", "-f", "testdata/service.yaml")
	out, err := s.kubectl("delete", "namespace", "team", "--timeout=60s")
	if err != nil || !strings.Contains(out, `namespace "team" deleted`) {
		t.Fatalf("delete namespace: %v\n%s", err, out)
	}
	if _, err := cs.CoreV1().Namespaces().Get(ctx, "team", metav1.GetOptions{}); err == nil {
		t.Fatal("namespace still exists after kubectl delete returned")
	}
	for _, r := range []string{"configmaps", "secrets", "deployments", "services", "serviceaccounts"} {
		if out := s.mustKubectl("-n", "team", "get", r, "-o", "name"); strings.TrimSpace(out) != "" {
			t.Errorf("%s left in the deleted namespace: %s", r, out)
		}
	}
	if out, err := s.kubectl("delete", "namespace", "kube-system"); err == nil || !strings.Contains(out, "forbidden") {
		t.Errorf("kube-system must not be deletable: %v %s", err, out)
	}
}
