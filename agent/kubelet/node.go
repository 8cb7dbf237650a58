package kubelet

import (
	"context"
	"fmt"
	"os"
	goruntime "runtime"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Upstream's node timings: the Lease is renewed every 10 s (a quarter of
// its 40 s duration); status is computed every 10 s and posted when it
// changed, and at least every 5 minutes.
const (
	leaseDuration        = 40 * time.Second
	leaseRenewInterval   = 10 * time.Second
	statusUpdateInterval = 10 * time.Second
	statusReportInterval = 5 * time.Minute
	nodeLeaseNamespace   = "kube-node-lease"
	maxPods              = 110
)

// register creates the Node object, or refreshes an existing one, and
// returns it once it has a podCIDR from node IPAM (the bridge needs it).
func (k *Kubelet) register(ctx context.Context) (*corev1.Node, error) {
	nodes := k.client.CoreV1().Nodes()
	desired := k.initialNode()
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		existing, err := nodes.Get(ctx, k.cfg.NodeName, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			if _, err := nodes.Create(ctx, desired, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				logrus.WithError(err).Warn("kubelet: registering the node")
				return false, nil
			}
			logrus.Infof("kubelet: registered node %s", k.cfg.NodeName)
			return true, nil
		case err != nil:
			logrus.WithError(err).Warn("kubelet: reading the node")
			return false, nil
		}
		// Re-registration keeps what others set (taints, podCIDR,
		// unschedulable) and refreshes the kubelet's own labels.
		changed := false
		for key, v := range desired.Labels {
			if existing.Labels[key] != v {
				if existing.Labels == nil {
					existing.Labels = map[string]string{}
				}
				existing.Labels[key] = v
				changed = true
			}
		}
		if changed {
			if _, err := nodes.Update(ctx, existing, metav1.UpdateOptions{}); err != nil {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	var node *corev1.Node
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		n, err := nodes.Get(ctx, k.cfg.NodeName, metav1.GetOptions{})
		if err != nil || n.Spec.PodCIDR == "" {
			return false, nil
		}
		node = n
		return true, nil
	})
	return node, err
}

func (k *Kubelet) initialNode() *corev1.Node {
	labels := map[string]string{
		corev1.LabelHostname:      k.cfg.NodeName,
		corev1.LabelOSStable:      goruntime.GOOS,
		corev1.LabelArchStable:    goruntime.GOARCH,
		"beta.kubernetes.io/os":   goruntime.GOOS,
		"beta.kubernetes.io/arch": goruntime.GOARCH,
	}
	if k.cfg.ControlPlane {
		labels["node-role.kubernetes.io/control-plane"] = "true"
	}
	for key, v := range k.cfg.NodeLabels {
		labels[key] = v
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: k.cfg.NodeName, Labels: labels}}
	n.Status = k.nodeStatus(nil)
	return n
}

// capacity reads what the machine has: CPUs, memory, the data dir's
// filesystem, and 110 pods as upstream.
func (k *Kubelet) capacity() corev1.ResourceList {
	list := corev1.ResourceList{
		corev1.ResourceCPU:  *resource.NewQuantity(int64(goruntime.NumCPU()), resource.DecimalSI),
		corev1.ResourcePods: *resource.NewQuantity(maxPods, resource.DecimalSI),
	}
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) == nil {
		list[corev1.ResourceMemory] = *resource.NewQuantity(int64(si.Totalram)*int64(si.Unit), resource.BinarySI)
	}
	var fs unix.Statfs_t
	if unix.Statfs(k.cfg.DataDir, &fs) == nil {
		list[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(int64(fs.Blocks)*fs.Bsize, resource.BinarySI)
	}
	return list
}

// nodeStatus computes the status the kubelet reports; conditions keep
// their lastTransitionTime while their status stays the same.
func (k *Kubelet) nodeStatus(old *corev1.Node) corev1.NodeStatus {
	capacity := k.capacity()
	now := metav1.Now()
	version, _ := k.runtimeVersion()
	hostname, _ := os.Hostname()
	st := corev1.NodeStatus{
		Capacity:    capacity,
		Allocatable: capacity.DeepCopy(),
		Phase:       corev1.NodeRunning,
		Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: k.cfg.NodeIP},
			{Type: corev1.NodeHostName, Address: hostname},
		},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(k.cfg.KubeletPort)}},
		NodeInfo: corev1.NodeSystemInfo{
			MachineID:               readTrimmed("/etc/machine-id"),
			SystemUUID:              readTrimmed("/sys/class/dmi/id/product_uuid"),
			BootID:                  readTrimmed("/proc/sys/kernel/random/boot_id"),
			KernelVersion:           kernelVersion(),
			OSImage:                 osImage(),
			ContainerRuntimeVersion: "containerd://" + version,
			KubeletVersion:          k.cfg.Version,
			KubeProxyVersion:        "",
			OperatingSystem:         goruntime.GOOS,
			Architecture:            goruntime.GOARCH,
		},
	}
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		Message: "kubelet is posting ready status"}
	if err := k.healthy(); err != nil {
		ready = corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady",
			Message: err.Error()}
	}
	conds := []corev1.NodeCondition{
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", Message: "kubelet has sufficient memory available"},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", Message: "kubelet has no disk pressure"},
		{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID", Message: "kubelet has sufficient PID available"},
		ready,
	}
	for i := range conds {
		conds[i].LastHeartbeatTime = now
		conds[i].LastTransitionTime = now
		if old == nil {
			continue
		}
		for _, o := range old.Status.Conditions {
			if o.Type == conds[i].Type && o.Status == conds[i].Status {
				conds[i].LastTransitionTime = o.LastTransitionTime
			}
		}
	}
	st.Conditions = conds
	if old != nil {
		st.Images = old.Status.Images
	}
	return st
}

// healthy is nil when the node can run pods: the runtime answers and the
// pod network is set up.
func (k *Kubelet) healthy() error {
	if _, err := k.runtimeVersion(); err != nil {
		return fmt.Errorf("container runtime is down: %v", err)
	}
	if k.network == nil {
		return fmt.Errorf("container runtime network not ready: the pod network is not set up yet")
	}
	return nil
}

func (k *Kubelet) runtimeVersion() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return k.runtime.Version(ctx)
}

// syncNodeStatus posts the node's status when it differs from the last
// one posted (ignoring heartbeat times), or when statusReportInterval has
// passed, as upstream's kubelet does since node Leases exist.
func (k *Kubelet) syncNodeStatus(ctx context.Context) {
	nodes := k.client.CoreV1().Nodes()
	n, err := nodes.Get(ctx, k.cfg.NodeName, metav1.GetOptions{})
	if err != nil {
		logrus.WithError(err).Debug("kubelet: reading the node for its status")
		return
	}
	st := k.nodeStatus(n)
	if !k.lastStatusPost.IsZero() && time.Since(k.lastStatusPost) < statusReportInterval && sameStatus(n.Status, st) {
		return
	}
	n.Status = st
	if _, err := nodes.UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		logrus.WithError(err).Debug("kubelet: posting node status")
		return
	}
	k.lastStatusPost = time.Now()
}

// sameStatus compares two statuses without heartbeat times.
func sameStatus(a, b corev1.NodeStatus) bool {
	strip := func(s corev1.NodeStatus) corev1.NodeStatus {
		s = *s.DeepCopy()
		for i := range s.Conditions {
			s.Conditions[i].LastHeartbeatTime = metav1.Time{}
		}
		return s
	}
	return apiequality.Semantic.DeepEqual(strip(a), strip(b))
}

// renewLease keeps kube-node-lease/<node> fresh; the node lifecycle
// controller reads it as the node's heartbeat.
func (k *Kubelet) renewLease(ctx context.Context) {
	leases := k.client.CoordinationV1().Leases(nodeLeaseNamespace)
	now := metav1.NewMicroTime(time.Now())
	l, err := leases.Get(ctx, k.cfg.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		d := int32(leaseDuration / time.Second)
		holder := k.cfg.NodeName
		lease := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: k.cfg.NodeName, Namespace: nodeLeaseNamespace},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &d, RenewTime: &now},
		}
		if node, err := k.client.CoreV1().Nodes().Get(ctx, k.cfg.NodeName, metav1.GetOptions{}); err == nil {
			lease.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}
		}
		if _, err := leases.Create(ctx, lease, metav1.CreateOptions{}); err != nil {
			logrus.WithError(err).Debug("kubelet: creating the node Lease")
		}
		return
	}
	if err != nil {
		logrus.WithError(err).Debug("kubelet: reading the node Lease")
		return
	}
	l.Spec.RenewTime = &now
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		logrus.WithError(err).Debug("kubelet: renewing the node Lease")
	}
}

func readTrimmed(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func kernelVersion() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}

func osImage() string {
	b, err := os.ReadFile("/etc/os-release")
	if err != nil {
		return "Linux"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return "Linux"
}
