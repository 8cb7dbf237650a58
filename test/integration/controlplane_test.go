package integration

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The control loops run inside kelp server as leader-elected API clients:
// kube-controller-manager holds its Lease, and node IPAM gives each node a
// distinct /24 from the cluster CIDR.
func TestControllerManagerLeaseAndNodeIPAM(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	waitFor(t, "kube-controller-manager Lease", func() bool {
		l, err := cs.CoordinationV1().Leases("kube-system").Get(ctx, "kube-controller-manager", metav1.GetOptions{})
		return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != ""
	})
	startFakeKubelet(t, cs, "node-a", "node-b")
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
}
