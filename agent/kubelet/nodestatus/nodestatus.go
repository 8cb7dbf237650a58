// Package nodestatus is the kubelet's side of the Node object: it
// registers the node, computes and posts its status, and renews its Lease
// in kube-node-lease. It knows the container runtime and the host only
// through the small interfaces it declares.
package nodestatus

import (
	"context"
	"fmt"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
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

	// A renewal that fails (the server is down, restarting or cut off) is
	// retried with upstream's lease-controller backoff. Each attempt has a
	// deadline shorter than the interval, so a dead server shows in the
	// log before the next renewal is due, whatever the connection does.
	leaseRetryFirst     = 200 * time.Millisecond
	leaseRetryMax       = 7 * time.Second
	leaseRequestTimeout = 5 * time.Second
)

// Runtime is what the node status needs from the container runtime: its
// version, which is also the health check (*runtime.Runtime implements
// it).
type Runtime interface {
	Version(ctx context.Context) (string, error)
}

// Config describes the node.
type Config struct {
	NodeName string
	NodeIP   string
	// Labels are more labels the kubelet sets. Under NodeRestriction they
	// must be the kubelet's own (kubelet.kubernetes.io/, node.kubernetes.io/
	// or outside kubernetes.io and k8s.io); a role such as
	// node-role.kubernetes.io/control-plane is set by the server.
	Labels      map[string]string
	KubeletPort int    // the kubelet's HTTPS endpoint, in daemonEndpoints
	Version     string // the kubelet's version
}

// Reporter keeps this node's Node object and Lease up to date.
type Reporter struct {
	cfg     Config
	client  kubernetes.Interface
	runtime Runtime
	machine Machine

	// networkReady: the node is Ready only once the pod network is set up,
	// which needs the podCIDR that registration waits for.
	networkReady atomic.Bool

	// syncMu serializes SyncStatus: the periodic loop and the kubelet's
	// sync once its caches are ready may run it at the same time.
	syncMu         sync.Mutex
	lastStatusPost time.Time
	// last is the node as last read, for Node; never written to once
	// stored.
	last atomic.Pointer[corev1.Node]
}

// New builds the reporter; Register, then Start.
func New(cfg Config, client kubernetes.Interface, rt Runtime, m Machine) *Reporter {
	return &Reporter{cfg: cfg, client: client, runtime: rt, machine: m}
}

// NetworkReady records that the pod network is set up.
func (r *Reporter) NetworkReady() { r.networkReady.Store(true) }

// Start renews the Lease and syncs the status, each at once and then
// periodically, until ctx ends.
func (r *Reporter) Start(ctx context.Context) {
	go r.keepLease(ctx)
	go wait.NonSlidingUntilWithContext(ctx, r.SyncStatus, statusUpdateInterval)
}

// Register creates the Node object, or refreshes an existing one, and
// returns it once it has a podCIDR from node IPAM (the pod network needs
// it).
func (r *Reporter) Register(ctx context.Context) (*corev1.Node, error) {
	nodes := r.client.CoreV1().Nodes()
	desired := r.initialNode()
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		existing, err := nodes.Get(ctx, r.cfg.NodeName, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			if _, err := nodes.Create(ctx, desired, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				logrus.WithError(err).Warn("kubelet: registering the node")
				return false, nil
			}
			logrus.Infof("kubelet: registered node %s", r.cfg.NodeName)
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
		n, err := nodes.Get(ctx, r.cfg.NodeName, metav1.GetOptions{})
		if err != nil || n.Spec.PodCIDR == "" {
			return false, nil
		}
		node = n
		return true, nil
	})
	r.last.Store(node)
	return node, err
}

// Node is the node as last read from the API (at registration, then by
// each status sync), nil before registration.
func (r *Reporter) Node() *corev1.Node { return r.last.Load() }

func (r *Reporter) initialNode() *corev1.Node {
	labels := map[string]string{
		corev1.LabelHostname:      r.cfg.NodeName,
		corev1.LabelOSStable:      goruntime.GOOS,
		corev1.LabelArchStable:    goruntime.GOARCH,
		"beta.kubernetes.io/os":   goruntime.GOOS,
		"beta.kubernetes.io/arch": goruntime.GOARCH,
	}
	for key, v := range r.cfg.Labels {
		labels[key] = v
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: r.cfg.NodeName, Labels: labels}}
	n.Status = r.Status(nil)
	return n
}

// Status computes the status the kubelet reports; conditions keep their
// lastTransitionTime from old while their status stays the same.
func (r *Reporter) Status(old *corev1.Node) corev1.NodeStatus {
	capacity := r.machine.Capacity()
	if old != nil {
		// Extended resources someone else advertised (a patch of the node's
		// status, as a device plugin's owner or the e2e tests do) stay in
		// capacity and allocatable, as upstream's kubelet keeps them.
		for name, q := range old.Status.Capacity {
			if _, ours := capacity[name]; !ours && extendedResource(name) {
				capacity[name] = q.DeepCopy()
			}
		}
	}
	now := metav1.Now()
	version, _ := r.runtimeVersion()
	info := r.machine.SystemInfo()
	info.ContainerRuntimeVersion = "containerd://" + version
	info.KubeletVersion = r.cfg.Version
	info.KubeProxyVersion = ""
	st := corev1.NodeStatus{
		Capacity:    capacity,
		Allocatable: capacity.DeepCopy(),
		Phase:       corev1.NodeRunning,
		Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: r.cfg.NodeIP},
			{Type: corev1.NodeHostName, Address: r.machine.Hostname()},
		},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(r.cfg.KubeletPort)}},
		NodeInfo:        info,
	}
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		Message: "kubelet is posting ready status"}
	if err := r.healthy(); err != nil {
		ready = corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady",
			Message: err.Error()}
	}
	conds := []corev1.NodeCondition{
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", Message: "kubelet has sufficient memory available"},
		r.diskPressure(),
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

// extendedResource is upstream's IsExtendedResourceName: a domain-prefixed
// name outside kubernetes.io, not a quota's requests.<name>.
func extendedResource(name corev1.ResourceName) bool {
	n := string(name)
	return strings.Contains(n, "/") && !strings.Contains(n, "kubernetes.io/") && !strings.HasPrefix(n, corev1.DefaultResourceRequestsPrefix)
}

// DiskPressureAvailable is upstream's hard eviction threshold for the
// node's filesystem, nodefs.available<10%: below it the kubelet reports
// DiskPressure, and the node lifecycle controller taints the node
// node.kubernetes.io/disk-pressure:NoSchedule so no new pods land there.
// (kelp's kubelet evicts nothing for it.)
const DiskPressureAvailable = 0.10

// diskPressure is the DiskPressure condition, with upstream's reasons and
// messages. A filesystem that cannot be read is no pressure: the condition
// says what is known.
func (r *Reporter) diskPressure() corev1.NodeCondition {
	avail, capacity, err := r.machine.Filesystem()
	if err == nil && capacity > 0 && float64(avail) < DiskPressureAvailable*float64(capacity) {
		return corev1.NodeCondition{Type: corev1.NodeDiskPressure, Status: corev1.ConditionTrue, Reason: "KubeletHasDiskPressure",
			Message: "kubelet has disk pressure"}
	}
	return corev1.NodeCondition{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure",
		Message: "kubelet has no disk pressure"}
}

// healthy is nil when the node can run pods: the runtime answers and the
// pod network is set up.
func (r *Reporter) healthy() error {
	if _, err := r.runtimeVersion(); err != nil {
		return fmt.Errorf("container runtime is down: %v", err)
	}
	if !r.networkReady.Load() {
		return fmt.Errorf("container runtime network not ready: the pod network is not set up yet")
	}
	return nil
}

func (r *Reporter) runtimeVersion() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return r.runtime.Version(ctx)
}

// SyncStatus posts the node's status when it differs from the last one
// posted (ignoring heartbeat times), or when statusReportInterval has
// passed, as upstream's kubelet does since node Leases exist.
func (r *Reporter) SyncStatus(ctx context.Context) {
	r.syncMu.Lock()
	defer r.syncMu.Unlock()
	nodes := r.client.CoreV1().Nodes()
	n, err := nodes.Get(ctx, r.cfg.NodeName, metav1.GetOptions{})
	if err != nil {
		logrus.WithError(err).Debug("kubelet: reading the node for its status")
		return
	}
	r.last.Store(n)
	st := r.Status(n)
	if !r.lastStatusPost.IsZero() && time.Since(r.lastStatusPost) < statusReportInterval && sameStatus(n.Status, st) {
		return
	}
	// n is shared through Node from here on: the update goes on a copy.
	upd := n.DeepCopy()
	upd.Status = st
	if _, err := nodes.UpdateStatus(ctx, upd, metav1.UpdateOptions{}); err != nil {
		logrus.WithError(err).Debug("kubelet: posting node status")
		return
	}
	r.lastStatusPost = time.Now()
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

// RenewLease keeps kube-node-lease/<node> fresh; the node lifecycle
// controller reads it as the node's heartbeat.
func (r *Reporter) RenewLease(ctx context.Context) error {
	leases := r.client.CoordinationV1().Leases(nodeLeaseNamespace)
	now := metav1.NewMicroTime(time.Now())
	l, err := leases.Get(ctx, r.cfg.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		d := int32(leaseDuration / time.Second)
		holder := r.cfg.NodeName
		lease := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: r.cfg.NodeName, Namespace: nodeLeaseNamespace},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &d, RenewTime: &now},
		}
		if node, err := r.client.CoreV1().Nodes().Get(ctx, r.cfg.NodeName, metav1.GetOptions{}); err == nil {
			lease.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}
		}
		if _, err := leases.Create(ctx, lease, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating the node Lease: %w", err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the node Lease: %w", err)
	}
	l.Spec.RenewTime = &now
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("renewing the node Lease: %w", err)
	}
	return nil
}

// keepLease renews the Lease every leaseRenewInterval until ctx ends. A
// failed renewal is retried with backoff, each attempt logged, and the
// recovery too: the agent's log tells when it lost the server and when it
// had it back.
func (r *Reporter) keepLease(ctx context.Context) {
	failures := 0
	for {
		attempt, cancel := context.WithTimeout(ctx, leaseRequestTimeout)
		err := r.RenewLease(attempt)
		cancel()
		if ctx.Err() != nil {
			return
		}
		wait := leaseRenewInterval
		switch {
		case err != nil:
			failures++
			wait = leaseRetryBackoff(failures)
			logrus.Warnf("kubelet: cannot reach the API server (attempt %d, retrying in %v): %v", failures, wait, err)
		case failures > 0:
			logrus.Infof("kubelet: the API server answers again; node Lease renewed after %d failed attempts", failures)
			failures = 0
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// leaseRetryBackoff is the wait after the n-th failure in a row: 200 ms,
// doubling, at most 7 s.
func leaseRetryBackoff(n int) time.Duration {
	d := leaseRetryFirst
	for i := 1; i < n && d < leaseRetryMax; i++ {
		d *= 2
	}
	return min(d, leaseRetryMax)
}
