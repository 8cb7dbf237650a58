package integration

import (
	"sort"
	"strings"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kelp-project/kelp/test/simkubelet"
)

// A Service's EndpointSlice and Endpoints follow its pods' readiness both
// ways: a pod that stops being Ready leaves the ready set (and moves to
// notReadyAddresses), and comes back when Ready again.
func TestEndpointsFollowReadiness(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	simkubelet.Start(t, cs, "node-1", "node-2", "node-3")
	s.mustKubectl("apply", "-f", "testdata/deployment.yaml", "-f", "testdata/service.yaml")
	rolloutStatus(t, s, "default", "container-lab")

	slice := func() *discoveryv1.EndpointSlice {
		l, err := cs.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=container-lab"})
		if err != nil || len(l.Items) != 1 {
			return nil
		}
		return &l.Items[0]
	}
	readyIPs := func() (ready, notReady []string) {
		sl := slice()
		if sl == nil {
			return nil, nil
		}
		for _, e := range sl.Endpoints {
			if e.Conditions.Ready != nil && *e.Conditions.Ready {
				ready = append(ready, e.Addresses[0])
			} else {
				notReady = append(notReady, e.Addresses[0])
			}
		}
		sort.Strings(ready)
		sort.Strings(notReady)
		return ready, notReady
	}
	waitFor(t, "3 ready endpoints", func() bool { r, n := readyIPs(); return len(r) == 3 && len(n) == 0 })
	sl := slice()
	if sl.AddressType != discoveryv1.AddressTypeIPv4 || len(sl.Ports) != 1 || *sl.Ports[0].Port != 8000 ||
		sl.Labels["endpointslice.kubernetes.io/managed-by"] != "endpointslice-controller.k8s.io" {
		t.Errorf("slice %+v", sl)
	}
	if ref := metav1.GetControllerOf(sl); ref == nil || ref.Kind != "Service" || ref.Name != "container-lab" {
		t.Errorf("slice owner %+v", sl.OwnerReferences)
	}
	nodes := map[string]bool{}
	for _, e := range sl.Endpoints {
		if e.TargetRef == nil || e.TargetRef.Kind != "Pod" || e.NodeName == nil {
			t.Fatalf("endpoint %+v", e)
		}
		nodes[*e.NodeName] = true
	}
	if len(nodes) != 3 {
		t.Errorf("endpoints on nodes %v", nodes)
	}

	pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=container-lab"})
	if err != nil {
		t.Fatal(err)
	}
	victim := pods.Items[0]
	s.mustKubectl("label", "pod", victim.Name, simkubelet.NeverReadyLabel+"=true")
	waitFor(t, "the pod's endpoint not ready", func() bool {
		r, n := readyIPs()
		return len(r) == 2 && len(n) == 1 && n[0] == victim.Status.PodIP
	})
	waitFor(t, "Endpoints: 2 addresses and 1 not ready", func() bool {
		ep, err := cs.CoreV1().Endpoints("default").Get(ctx, "container-lab", metav1.GetOptions{})
		if err != nil || len(ep.Subsets) != 1 {
			return false
		}
		ss := ep.Subsets[0]
		return len(ss.Addresses) == 2 && len(ss.NotReadyAddresses) == 1 && ss.NotReadyAddresses[0].IP == victim.Status.PodIP &&
			ss.Ports[0].Port == 8000
	})
	s.mustKubectl("label", "pod", victim.Name, simkubelet.NeverReadyLabel+"-")
	waitFor(t, "the pod's endpoint ready again", func() bool { r, n := readyIPs(); return len(r) == 3 && len(n) == 0 })
	out := s.mustKubectl("get", "endpoints", "container-lab")
	if strings.Count(out, ":8000") != 3 {
		t.Errorf("kubectl get endpoints:\n%s", out)
	}
}
