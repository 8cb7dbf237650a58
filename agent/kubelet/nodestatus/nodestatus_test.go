package nodestatus

import (
	"context"
	"errors"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	logtest "github.com/sirupsen/logrus/hooks/test"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

type fakeRuntime struct {
	mu  sync.Mutex
	err error
}

func (r *fakeRuntime) Version(context.Context) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return "1.7.99", r.err
}

// fakeMachine's filesystem has 100 GiB, of which avail (default: half) is
// free.
type fakeMachine struct{ avail *atomic.Uint64 }

func (fakeMachine) Capacity() corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("4"),
		corev1.ResourceMemory:           resource.MustParse("8Gi"),
		corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
		corev1.ResourcePods:             *resource.NewQuantity(MaxPods, resource.DecimalSI),
	}
}

func (fakeMachine) SystemInfo() corev1.NodeSystemInfo {
	return corev1.NodeSystemInfo{MachineID: "m-1", BootID: "b-1", KernelVersion: "6.1.0", OSImage: "Test OS",
		OperatingSystem: "linux", Architecture: "amd64"}
}

func (fakeMachine) Hostname() string { return "host-1.example" }

func (m fakeMachine) Filesystem() (uint64, uint64, error) {
	if m.avail == nil {
		return 50 << 30, 100 << 30, nil
	}
	return m.avail.Load(), 100 << 30, nil
}

var testConfig = Config{NodeName: "node-1", NodeIP: "192.0.2.10",
	Labels: map[string]string{"zone": "a"}, KubeletPort: 10250, Version: "v1.37.2"}

func newReporter(objs ...*corev1.Node) (*Reporter, *fake.Clientset, *fakeRuntime) {
	client := fake.NewClientset()
	for _, n := range objs {
		_ = client.Tracker().Add(n)
	}
	rt := &fakeRuntime{}
	return New(testConfig, client, rt, fakeMachine{}), client, rt
}

func condition(st corev1.NodeStatus, typ corev1.NodeConditionType) corev1.NodeCondition {
	for _, c := range st.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return corev1.NodeCondition{}
}

func TestStatusFromRuntimeMachineAndNetwork(t *testing.T) {
	r, _, rt := newReporter()
	st := r.Status(nil)
	if !apiequality.Semantic.DeepEqual(st.Capacity, fakeMachine{}.Capacity()) || !apiequality.Semantic.DeepEqual(st.Allocatable, st.Capacity) {
		t.Fatalf("capacity %v allocatable %v, want the machine's", st.Capacity, st.Allocatable)
	}
	wantAddrs := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.10"}, {Type: corev1.NodeHostName, Address: "host-1.example"}}
	if !apiequality.Semantic.DeepEqual(st.Addresses, wantAddrs) {
		t.Fatalf("addresses %v", st.Addresses)
	}
	if st.DaemonEndpoints.KubeletEndpoint.Port != 10250 {
		t.Fatalf("kubelet endpoint %v", st.DaemonEndpoints)
	}
	info := st.NodeInfo
	if info.ContainerRuntimeVersion != "containerd://1.7.99" || info.KubeletVersion != "v1.37.2" || info.MachineID != "m-1" || info.OSImage != "Test OS" {
		t.Fatalf("node info %+v", info)
	}
	for _, typ := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
		if c := condition(st, typ); c.Status != corev1.ConditionFalse {
			t.Errorf("%s = %s, want False", typ, c.Status)
		}
	}
	if c := condition(st, corev1.NodeReady); c.Status != corev1.ConditionFalse || c.Reason != "KubeletNotReady" ||
		c.Message != "container runtime network not ready: the pod network is not set up yet" {
		t.Fatalf("Ready before the pod network: %+v", c)
	}

	r.NetworkReady()
	if c := condition(r.Status(nil), corev1.NodeReady); c.Status != corev1.ConditionTrue || c.Reason != "KubeletReady" {
		t.Fatalf("Ready with runtime and network: %+v", c)
	}
	rt.mu.Lock()
	rt.err = errors.New("connection refused")
	rt.mu.Unlock()
	if c := condition(r.Status(nil), corev1.NodeReady); c.Status != corev1.ConditionFalse || c.Message != "container runtime is down: connection refused" {
		t.Fatalf("Ready with the runtime down: %+v", c)
	}
}

func TestStatusKeepsTransitionTimesAndImages(t *testing.T) {
	r, _, _ := newReporter()
	r.NetworkReady()
	long := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	old := &corev1.Node{Status: corev1.NodeStatus{
		Images: []corev1.ContainerImage{{Names: []string{"busybox"}}},
		Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: long},
			{Type: corev1.NodeDiskPressure, Status: corev1.ConditionTrue, LastTransitionTime: long},
		}}}
	st := r.Status(old)
	if c := condition(st, corev1.NodeReady); !c.LastTransitionTime.Equal(&long) || c.LastHeartbeatTime.Equal(&long) {
		t.Fatalf("Ready kept its status: transition %v heartbeat %v, want the old transition and a new heartbeat", c.LastTransitionTime, c.LastHeartbeatTime)
	}
	if c := condition(st, corev1.NodeDiskPressure); c.LastTransitionTime.Equal(&long) {
		t.Fatal("DiskPressure changed status but kept its transition time")
	}
	if len(st.Images) != 1 {
		t.Fatalf("images %v, want the old ones", st.Images)
	}
}

// Extended resources patched into the node's status by others survive the
// kubelet's status updates, in capacity and allocatable; the kubelet's own
// resources are its own.
func TestStatusKeepsExtendedResources(t *testing.T) {
	r, _, _ := newReporter()
	old := &corev1.Node{Status: corev1.NodeStatus{
		Capacity: corev1.ResourceList{"example.com/fakecpu": resource.MustParse("5"), corev1.ResourceCPU: resource.MustParse("64"),
			"kubernetes.io/something": resource.MustParse("1")},
		Allocatable: corev1.ResourceList{"example.com/fakecpu": resource.MustParse("5")},
	}}
	st := r.Status(old)
	for _, l := range []corev1.ResourceList{st.Capacity, st.Allocatable} {
		if q, ok := l["example.com/fakecpu"]; !ok || q.Value() != 5 {
			t.Errorf("extended resource lost: %v", l)
		}
		if _, ok := l["kubernetes.io/something"]; ok {
			t.Errorf("a kubernetes.io resource kept: %v", l)
		}
		if q := l[corev1.ResourceCPU]; q.Cmp(r.machine.Capacity()[corev1.ResourceCPU]) != 0 {
			t.Errorf("cpu %v, want the machine's", q.String())
		}
	}
	// Removed from capacity (as e2e's RemoveExtendedResource does): gone.
	if st := r.Status(&corev1.Node{}); len(st.Capacity) != len(r.machine.Capacity()) || len(st.Allocatable) != len(r.machine.Capacity()) {
		t.Errorf("capacity %v allocatable %v", st.Capacity, st.Allocatable)
	}
}

func TestRegisterCreatesTheNodeAndWaitsForItsPodCIDR(t *testing.T) {
	r, client, _ := newReporter()
	go func() {
		// node IPAM's part.
		for {
			n, err := client.CoreV1().Nodes().Get(context.Background(), "node-1", metav1.GetOptions{})
			if err == nil {
				n.Spec.PodCIDR = "10.42.3.0/24"
				_, _ = client.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{})
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	node, err := r.Register(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if node.Spec.PodCIDR != "10.42.3.0/24" {
		t.Fatalf("podCIDR %q", node.Spec.PodCIDR)
	}
	for k, v := range map[string]string{corev1.LabelHostname: "node-1", corev1.LabelOSStable: goruntime.GOOS,
		corev1.LabelArchStable: goruntime.GOARCH, "zone": "a"} {
		if node.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, node.Labels[k], v)
		}
	}
	// A role is not the kubelet's to claim: NodeRestriction refuses it.
	for k := range node.Labels {
		if strings.HasPrefix(k, "node-role.kubernetes.io/") {
			t.Errorf("the kubelet set %s", k)
		}
	}
	if c := condition(node.Status, corev1.NodeReady); c.Status != corev1.ConditionFalse {
		t.Fatalf("registered Ready %s before the pod network", c.Status)
	}
}

func TestReregistrationKeepsWhatOthersSet(t *testing.T) {
	existing := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: map[string]string{"zone": "old", "team": "x"}},
		Spec: corev1.NodeSpec{PodCIDR: "10.42.1.0/24", Unschedulable: true, Taints: []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}}}
	r, _, _ := newReporter(existing)
	node, err := r.Register(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if node.Labels["zone"] != "a" || node.Labels["team"] != "x" || node.Labels[corev1.LabelHostname] != "node-1" {
		t.Fatalf("labels %v: want the kubelet's refreshed and others' kept", node.Labels)
	}
	if node.Spec.PodCIDR != "10.42.1.0/24" || !node.Spec.Unschedulable || len(node.Spec.Taints) != 1 {
		t.Fatalf("spec %+v, want podCIDR, unschedulable and taints kept", node.Spec)
	}
}

func statusUpdates(client *fake.Clientset) int {
	n := 0
	for _, a := range client.Actions() {
		if a.Matches("update", "nodes") && a.GetSubresource() == "status" {
			n++
		}
	}
	return n
}

func TestSyncStatusPostsOnlyChanges(t *testing.T) {
	r, client, _ := newReporter(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}})
	r.SyncStatus(t.Context())
	if n := statusUpdates(client); n != 1 {
		t.Fatalf("%d status updates after the first sync, want 1", n)
	}
	r.SyncStatus(t.Context())
	if n := statusUpdates(client); n != 1 {
		t.Fatalf("%d status updates after an unchanged sync, want still 1 (heartbeats go to the Lease)", n)
	}
	r.NetworkReady()
	r.SyncStatus(t.Context())
	if n := statusUpdates(client); n != 2 {
		t.Fatalf("%d status updates after Ready changed, want 2", n)
	}
	n, _ := client.CoreV1().Nodes().Get(t.Context(), "node-1", metav1.GetOptions{})
	if c := condition(n.Status, corev1.NodeReady); c.Status != corev1.ConditionTrue {
		t.Fatalf("posted Ready %s", c.Status)
	}
}

func TestRenewLease(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", UID: "node-uid"}}
	r, client, _ := newReporter(node)
	if err := r.RenewLease(t.Context()); err != nil {
		t.Fatal(err)
	}
	l, err := client.CoordinationV1().Leases("kube-node-lease").Get(t.Context(), "node-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *l.Spec.HolderIdentity != "node-1" || *l.Spec.LeaseDurationSeconds != 40 || l.Spec.RenewTime == nil {
		t.Fatalf("lease spec %+v", l.Spec)
	}
	if len(l.OwnerReferences) != 1 || l.OwnerReferences[0].UID != "node-uid" || l.OwnerReferences[0].Kind != "Node" {
		t.Fatalf("lease owners %+v, want the Node", l.OwnerReferences)
	}
	first := l.Spec.RenewTime.Time
	time.Sleep(2 * time.Millisecond)
	client.ClearActions()
	if err := r.RenewLease(t.Context()); err != nil {
		t.Fatal(err)
	}
	l, _ = client.CoordinationV1().Leases("kube-node-lease").Get(t.Context(), "node-1", metav1.GetOptions{})
	if !l.Spec.RenewTime.After(first) {
		t.Fatalf("renewTime %v not after %v", l.Spec.RenewTime, first)
	}
	for _, a := range client.Actions() {
		if a.Matches("create", "leases") {
			t.Fatalf("renewal created a Lease: %v", a)
		}
	}
}

func TestLeaseRetryBackoff(t *testing.T) {
	var got []time.Duration
	for n := 1; n <= 7; n++ {
		got = append(got, leaseRetryBackoff(n))
	}
	want := []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, 1600 * time.Millisecond,
		3200 * time.Millisecond, 6400 * time.Millisecond, 7 * time.Second}
	if !slices.Equal(got, want) {
		t.Errorf("backoff %v, want %v", got, want)
	}
}

// A server that cannot be reached: every renewal attempt is logged with
// its number and the wait before the next, and the recovery is logged.
func TestKeepLeaseLogsEachAttempt(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", UID: "node-uid"}}
	r, client, _ := newReporter(node)
	var calls atomic.Int32
	client.PrependReactor("get", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if calls.Add(1) <= 2 {
			return true, nil, errors.New(`Get "https://192.0.2.1:6443/...": dial tcp 192.0.2.1:6443: connect: connection refused`)
		}
		return false, nil, nil
	})
	logs := logtest.NewGlobal()
	defer logs.Reset()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { r.keepLease(ctx); close(done) }()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(lastMessage(logs), "answers again") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	var msgs []string
	for _, e := range logs.AllEntries() {
		msgs = append(msgs, e.Level.String()+": "+e.Message)
	}
	want := []string{
		"warning: kubelet: cannot reach the API server (attempt 1, retrying in 200ms): reading the node Lease: Get \"https://192.0.2.1:6443/...\": dial tcp 192.0.2.1:6443: connect: connection refused",
		"warning: kubelet: cannot reach the API server (attempt 2, retrying in 400ms): reading the node Lease: Get \"https://192.0.2.1:6443/...\": dial tcp 192.0.2.1:6443: connect: connection refused",
		"info: kubelet: the API server answers again; node Lease renewed after 2 failed attempts",
	}
	if !slices.Equal(msgs, want) {
		t.Errorf("logged:\n%s\nwant:\n%s", strings.Join(msgs, "\n"), strings.Join(want, "\n"))
	}
	if _, err := client.CoordinationV1().Leases("kube-node-lease").Get(t.Context(), "node-1", metav1.GetOptions{}); err != nil {
		t.Errorf("no Lease after the recovery: %v", err)
	}
}

func lastMessage(h *logtest.Hook) string {
	if e := h.LastEntry(); e != nil {
		return e.Message
	}
	return ""
}

// DiskPressure follows the node filesystem's free space against upstream's
// hard eviction threshold, nodefs.available<10%, both ways.
func TestDiskPressure(t *testing.T) {
	avail := &atomic.Uint64{}
	avail.Store(50 << 30)
	r := New(testConfig, fake.NewClientset(), &fakeRuntime{}, fakeMachine{avail: avail})
	if c := condition(r.Status(nil), corev1.NodeDiskPressure); c.Status != corev1.ConditionFalse || c.Reason != "KubeletHasNoDiskPressure" {
		t.Fatalf("50%% free: %+v", c)
	}
	avail.Store(9 << 30)
	old := &corev1.Node{Status: r.Status(nil)}
	c := condition(old.Status, corev1.NodeDiskPressure)
	if c.Status != corev1.ConditionTrue || c.Reason != "KubeletHasDiskPressure" || c.Message != "kubelet has disk pressure" {
		t.Fatalf("9%% free: %+v", c)
	}
	avail.Store(10 << 30)
	if c := condition(r.Status(old), corev1.NodeDiskPressure); c.Status != corev1.ConditionFalse {
		t.Fatalf("10%% free (not below the threshold): %+v", c)
	}
}

// Node is the node the last status sync read, for the kubelet's admission.
func TestNodeIsTheLastRead(t *testing.T) {
	r, client, _ := newReporter(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}})
	if r.Node() != nil {
		t.Fatal("a node before anything was read")
	}
	n, _ := client.CoreV1().Nodes().Get(t.Context(), "node-1", metav1.GetOptions{})
	n.Spec.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoExecute}}
	if _, err := client.CoreV1().Nodes().Update(t.Context(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r.SyncStatus(t.Context())
	if got := r.Node(); got == nil || len(got.Spec.Taints) != 1 {
		t.Fatalf("Node after a sync: %+v, want the node with its taint", got)
	}
}
