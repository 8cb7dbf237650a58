// Package kubelet is kelp's node agent core: it registers the Node, renews
// its Lease, and runs the pods bound to it on containerd, reporting their
// status through pods/status. Like every other component it is an API
// client: pods come from a watch with fieldSelector spec.nodeName=<node>,
// and each pod has its own worker that compares the pod's spec with what
// the runtime reports and takes the next step (level-triggered), so a
// restart of the agent adopts running containers instead of restarting
// them.
//
// The pod workers live here; the pieces that only need a narrow view of
// them are subpackages, each behind interfaces it declares and wired in
// Run: prober (probes and hook checks), nodestatus (registration, node
// status, the Lease) and server (the HTTPS endpoint, answered from the
// workers by endpointPods).
package kubelet

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/kelp-project/kelp/agent/kubelet/nodestatus"
	"github.com/kelp-project/kelp/agent/kubelet/server"
	"github.com/kelp-project/kelp/config"
	"github.com/kelp-project/kelp/runtime"
	"github.com/kelp-project/kelp/runtime/cgroups"
)

// Runtime is what the kubelet needs from the container runtime
// (*runtime.Runtime implements it).
type Runtime interface {
	Version(ctx context.Context) (string, error)
	EnsureImage(ctx context.Context, ref string, policy corev1.PullPolicy) (runtime.Image, error)
	CreateContainer(ctx context.Context, spec runtime.ContainerSpec) error
	StartContainer(ctx context.Context, id string) error
	StopContainer(ctx context.Context, id string, grace time.Duration) error
	// UpdateContainerResources changes a running container's cgroup
	// limits in place and merges labels into its labels (resize.go).
	UpdateContainerResources(ctx context.Context, id string, res runtime.Resources, labels map[string]string) error
	RemoveContainer(ctx context.Context, id string) error
	ContainerStatus(ctx context.Context, id string) (runtime.ContainerStatus, error)
	ListContainers(ctx context.Context, labels map[string]string) ([]runtime.ContainerStatus, error)
	// EnsurePodCgroup makes the pod's cgroup under its QoS level with
	// the pod-level limits and returns its containers' cgroup parent;
	// RemovePodCgroup removes it once they are gone (runtime/cgroups).
	EnsurePodCgroup(ctx context.Context, qos cgroups.QOS, uid string, res runtime.Resources) (string, error)
	RemovePodCgroup(ctx context.Context, qos cgroups.QOS, uid string) error
	RemoveOrphanPodCgroups(ctx context.Context, keep map[string]bool) error
	// MountImage mounts an image volume read-only at target, getting the
	// image as its pull policy says; ReleaseImageVolumes lets go of a
	// pod's once unmounted, RemoveOrphanImageVolumes of pods not kept.
	MountImage(ctx context.Context, podUID, volume, ref string, policy corev1.PullPolicy, target string) error
	ReleaseImageVolumes(ctx context.Context, podUID string) error
	RemoveOrphanImageVolumes(ctx context.Context, keep map[string]bool) error
	Exits() <-chan string
	// RemoveOrphanShims kills containerd shims that serve no task (left
	// when kelp died mid-creation), returning their ids.
	RemoveOrphanShims(ctx context.Context) ([]string, error)
	Exec(ctx context.Context, id string, cmd []string, stdin io.Reader, stdout, stderr io.Writer, tty bool) (int, error)
}

// Network gives pods their sandbox: a pinned network namespace with an IP
// (*bridge.Bridge implements it).
type Network interface {
	Setup(podUID string) (netnsPath string, ip netip.Addr, err error)
	Teardown(podUID string) error
	Recover(keep map[string]bool) error
	// MapHostPorts maps the pod's host ports to its IP (netplane/hostport);
	// Teardown and Recover remove them.
	MapHostPorts(pod *corev1.Pod, podIP netip.Addr) error
	// InNetNS runs fn inside the network namespace pinned at netnsPath
	// (port-forward dials the pod's loopback from there).
	InNetNS(netnsPath string, fn func() error) error
}

// Config holds the kubelet's settings; zero timings take upstream defaults.
type Config struct {
	NodeName string
	NodeIP   string
	// DataDir is <data-dir>/agent: pods/<uid>/ holds each pod's files.
	DataDir string
	// NodeLabels are more labels for the Node; NodeRestriction admits only
	// the kubelet's own (see nodestatus.Config.Labels).
	NodeLabels  map[string]string
	KubeletPort int // the HTTPS endpoint's port (upstream 10250; 0 picks one)
	Version     string
	// ClusterDNS and ClusterDomain go into pods' resolv.conf.
	ClusterDNS    string
	ClusterDomain string
	// CgroupRoot is where pod cgroups go (runtime.Options.CgroupRoot).
	CgroupRoot string
	// PodPidsLimit is the pids.max of each pod's cgroup (upstream's
	// --pod-max-pids); 0 or less: no limit, upstream's default.
	PodPidsLimit int64
	// LogRoot is where container logs go (/var/log/pods by default).
	LogRoot string
	// CrashLoopMaxBackoff caps the restart delay (upstream: 5 min).
	CrashLoopMaxBackoff time.Duration
	// ClientCA is the PEM bundle the kubelet's HTTPS endpoint verifies the
	// API server's client certificate with (the cluster CA).
	ClientCA []byte
	// ServingCertFile and ServingKeyFile are the HTTPS endpoint's
	// certificate; empty makes a self-signed one.
	ServingCertFile, ServingKeyFile string
	// NewNetwork builds the pod network once the node has its podCIDR.
	NewNetwork func(podCIDR string) (Network, error)
}

// Kubelet runs the pods of one node.
type Kubelet struct {
	cfg      Config
	client   kubernetes.Interface
	runtime  Runtime
	network  Network
	recorder record.EventRecorder
	machine  nodestatus.Machine

	podLister corelisters.PodLister
	services  corelisters.ServiceLister
	// node is this node as last read (nodestatus.Reporter.Node), for
	// admission.
	node func() *corev1.Node
	// secrets and configs are read per object (objects.go): the node may
	// not list them.
	secrets *objectCache[*corev1.Secret]
	configs *objectCache[*corev1.ConfigMap]
	// claims and volumes back persistentVolumeClaim volumes, read per
	// object the same way (volumes.go).
	claims  *objectCache[*corev1.PersistentVolumeClaim]
	volumes *objectCache[*corev1.PersistentVolume]
	// tokens are the pods' service-account tokens (tokens.go).
	tokens *tokenManager
	// trustBundles answers clusterTrustBundle projections (trustbundles.go).
	trustBundles *trustBundles
	// podCertificates answers podCertificate projections (podcertificates.go).
	podCertificates *podCertificates

	mu      sync.Mutex
	workers map[types.UID]*podWorker
	// claimPaths are the host paths of each pod's persistentVolumeClaim
	// volumes, by volume name, as its last sync resolved them.
	claimPaths map[types.UID]map[string]string

	// admitMu orders admission decisions (admission.go); admitted holds
	// them, by pod, until the pod's worker ends. Taken before mu, never
	// under it.
	admitMu  sync.Mutex
	admitted map[types.UID]admission
}

// New builds a kubelet; Run starts it.
func New(cfg Config, client kubernetes.Interface, rt Runtime, recorder record.EventRecorder) *Kubelet {
	if cfg.CrashLoopMaxBackoff == 0 {
		cfg.CrashLoopMaxBackoff = config.CrashLoopMaxBackoff
	}
	if cfg.ClusterDomain == "" {
		cfg.ClusterDomain = config.ClusterDomain
	}
	if cfg.CgroupRoot == "" {
		cfg.CgroupRoot = config.CgroupRoot
	}
	k := &Kubelet{cfg: cfg, client: client, runtime: rt, recorder: recorder, machine: nodestatus.Host{DataDir: cfg.DataDir},
		secrets: secretCache(client), configs: configMapCache(client), claims: claimCache(client), volumes: volumeCache(client),
		tokens: newTokenManager(client), workers: map[types.UID]*podWorker{}, claimPaths: map[types.UID]map[string]string{},
		admitted: map[types.UID]admission{}}
	k.trustBundles = newTrustBundles(client, k.trustBundlesChanged)
	k.podCertificates = newPodCertificates(k)
	return k
}

// Run registers the node, sets up the pod network, and runs pods until
// ctx ends. Containers keep running after it returns: the data plane
// outlives the agent.
func (k *Kubelet) Run(ctx context.Context) error {
	// The endpoint's port is in the node's status, so listen first
	// (port 0 picks a free one).
	ln, err := net.Listen("tcp", net.JoinHostPort(k.cfg.NodeIP, strconv.Itoa(k.cfg.KubeletPort)))
	if err != nil {
		return fmt.Errorf("kubelet endpoint: %w", err)
	}
	k.cfg.KubeletPort = ln.Addr().(*net.TCPAddr).Port
	reporter := nodestatus.New(nodestatus.Config{NodeName: k.cfg.NodeName, NodeIP: k.cfg.NodeIP,
		Labels: k.cfg.NodeLabels, KubeletPort: k.cfg.KubeletPort, Version: k.cfg.Version}, k.client, k.runtime, k.machine)
	node, err := reporter.Register(ctx)
	if err != nil {
		return fmt.Errorf("registering node %s: %w", k.cfg.NodeName, err)
	}
	network, err := k.cfg.NewNetwork(node.Spec.PodCIDR)
	if err != nil {
		return fmt.Errorf("pod network for %s: %w", node.Spec.PodCIDR, err)
	}
	k.network = network
	reporter.NetworkReady()
	endpoint := server.New(server.Config{NodeName: k.cfg.NodeName, NodeIP: k.cfg.NodeIP, ClientCA: k.cfg.ClientCA,
		ServingCertFile: k.cfg.ServingCertFile, ServingKeyFile: k.cfg.ServingKeyFile},
		endpointPods{k}, k.runtime, k.network)
	go func() {
		if err := endpoint.Serve(ctx, ln); err != nil {
			logrus.WithError(err).Error("kubelet endpoint stopped")
		}
	}()
	k.node = reporter.Node
	reporter.Start(ctx)
	k.trustBundles.informer.run(ctx)
	k.podCertificates.informer.run(ctx)

	factory := informers.NewSharedInformerFactoryWithOptions(k.client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", k.cfg.NodeName).String()
		}))
	// Every API call the kubelet makes is one the Node authorizer allows
	// its node: its pods through spec.nodeName (above), Services for the
	// pods' service links (a node may read them all), and Secrets,
	// ConfigMaps, PersistentVolumeClaims and PersistentVolumes one by one
	// (objects.go); ClusterTrustBundles, public, all of them once a pod
	// projects one (trustbundles.go).
	others := informers.NewSharedInformerFactory(k.client, 0)
	podInf := factory.Core().V1().Pods()
	k.podLister = podInf.Lister()
	k.services = others.Core().V1().Services().Lister()
	_, _ = podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { k.podChanged(obj, true) },
		UpdateFunc: func(old, obj any) {
			o, ok1 := old.(*corev1.Pod)
			n, ok2 := obj.(*corev1.Pod)
			if ok1 && ok2 && !needsSync(o, n) {
				k.podChanged(obj, false)
				return
			}
			k.podChanged(obj, true)
		},
		DeleteFunc: k.podDeleted,
	})
	factory.Start(ctx.Done())
	others.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("kubelet: %v cache never synced", typ)
		}
	}
	for typ, ok := range others.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("kubelet: %v cache never synced", typ)
		}
	}
	reporter.SyncStatus(ctx)
	k.removeOrphans(ctx)
	go k.relist(ctx)
	<-ctx.Done()
	k.mu.Lock()
	for _, w := range k.workers {
		w.stop()
	}
	k.mu.Unlock()
	return nil
}

func (k *Kubelet) podDir(uid types.UID) string {
	return filepath.Join(k.cfg.DataDir, "pods", string(uid))
}

// needsSync: like upstream's pod config source, a change of the pod's
// status alone (often the kubelet's own write) does not wake its worker.
func needsSync(old, cur *corev1.Pod) bool {
	return !apiequality.Semantic.DeepEqual(old.Spec, cur.Spec) ||
		!apiequality.Semantic.DeepEqual(old.ObjectMeta.Labels, cur.ObjectMeta.Labels) ||
		!apiequality.Semantic.DeepEqual(old.ObjectMeta.Annotations, cur.ObjectMeta.Annotations) ||
		!apiequality.Semantic.DeepEqual(old.DeletionTimestamp, cur.DeletionTimestamp) ||
		old.Status.Phase != cur.Status.Phase
}

// podChanged hands the pod to its worker, starting one for a new pod;
// kick says whether the worker should look again now.
func (k *Kubelet) podChanged(obj any, kick bool) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.NodeName != k.cfg.NodeName {
		return
	}
	k.mu.Lock()
	w := k.workers[pod.UID]
	if w == nil {
		w = newPodWorker(k, pod)
		k.workers[pod.UID] = w
		go w.run()
	}
	k.mu.Unlock()
	w.update(pod, kick)
}

// podDeleted: the pod object is gone (confirmed by us, or force-deleted by
// someone); its worker kills what is left and ends.
func (k *Kubelet) podDeleted(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	k.mu.Lock()
	w := k.workers[pod.UID]
	k.mu.Unlock()
	if w != nil {
		w.deleted()
	}
}

func (k *Kubelet) forget(uid types.UID) {
	k.mu.Lock()
	delete(k.workers, uid)
	delete(k.claimPaths, uid)
	k.mu.Unlock()
	k.forgetAdmission(uid)
	k.tokens.forget(uid)
}

// relist is the pod lifecycle event generator, event-driven as upstream's
// evented PLEG: containerd's task exit events wake their pod's worker at
// once, and a new subscription after the stream broke (events may have
// been missed) wakes every worker. Every relistTick it wakes the workers
// whose next sync is due: a minute after a sync that went well
// (upstream's syncFrequency), 10 s after one that failed or left a
// container waiting (upstream's backOffPeriod). That is the safety relist
// (each worker lists its own pod's containers) and what catches drift:
// volume contents, an event dropped. Nothing polls the runtime in between
// (the old relist listed every container's task every second).
func (k *Kubelet) relist(ctx context.Context) {
	resync := time.NewTicker(relistTick)
	defer resync.Stop()
	shims := time.NewTicker(shimsInterval)
	defer shims.Stop()
	shimPasses := 0
	for {
		select {
		case <-ctx.Done():
			return
		case id := <-k.runtime.Exits():
			if id == "" {
				k.kickAll()
				continue
			}
			k.kickByContainer(ctx, id)
		case <-shims.C:
			k.removeOrphanShims(ctx)
			if shimPasses++; shimPasses == shimsEarlyPasses {
				shims.Reset(shimsLaterInterval)
			}
		case now := <-resync.C:
			k.mu.Lock()
			for _, w := range k.workers {
				if w.syncDue(now) {
					w.kick()
				}
			}
			k.mu.Unlock()
		}
	}
}

func (k *Kubelet) kickAll() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, w := range k.workers {
		w.kick()
	}
}

const (
	// syncFrequency is how often a pod whose last sync went well is looked
	// at without a reason (upstream's --sync-frequency).
	syncFrequency = time.Minute
	// resyncInterval is how soon a pod whose last sync failed, or left a
	// container waiting, is looked at again (upstream's pod workers back
	// off 10 s after an error).
	resyncInterval = 10 * time.Second
)

// relistTick is how often relist checks which workers are due; a variable
// so that tests can shrink it.
var relistTick = resyncInterval

// Orphan shims are left by a kelp that died between a shim's start and
// its task's creation, so they are looked for at start, which spares
// shims too young to judge (see runtime), then every shimsInterval for
// shimsEarlyPasses passes (the first minute), which catches those, and
// after that only every shimsLaterInterval: each pass reads the command
// line of every process on the host.
const (
	shimsInterval      = 15 * time.Second
	shimsEarlyPasses   = 4
	shimsLaterInterval = 5 * time.Minute
)

func (k *Kubelet) removeOrphanShims(ctx context.Context) {
	if _, err := k.runtime.RemoveOrphanShims(ctx); err != nil && ctx.Err() == nil {
		logrus.WithError(err).Warn("kubelet: removing orphan shims")
	}
}

func (k *Kubelet) kickByContainer(ctx context.Context, id string) {
	st, err := k.runtime.ContainerStatus(ctx, id)
	if err != nil {
		return
	}
	k.mu.Lock()
	w := k.workers[types.UID(st.Labels[labelPodUID])]
	k.mu.Unlock()
	if w != nil {
		w.kick()
	}
}

// removeOrphans deletes containers and sandboxes that belong to no pod of
// this node (pods deleted while the agent was down).
func (k *Kubelet) removeOrphans(ctx context.Context) {
	pods, err := k.podLister.List(labels.Everything())
	if err != nil {
		return
	}
	keep := map[string]bool{}
	for _, p := range pods {
		keep[string(p.UID)] = true
	}
	list, err := k.runtime.ListContainers(ctx, nil)
	if err != nil {
		logrus.WithError(err).Warn("kubelet: listing containers")
		return
	}
	for _, c := range list {
		uid := c.Labels[labelPodUID]
		if uid == "" || keep[uid] {
			continue
		}
		logrus.Infof("kubelet: removing container %s of a pod that is gone (%s)", c.ID, uid)
		_ = k.runtime.StopContainer(ctx, c.ID, 0)
		_ = k.runtime.RemoveContainer(ctx, c.ID)
	}
	if err := k.runtime.RemoveOrphanPodCgroups(ctx, keep); err != nil {
		logrus.WithError(err).Warn("kubelet: removing the cgroups of pods that are gone")
	}
	if err := k.runtime.RemoveOrphanImageVolumes(ctx, keep); err != nil {
		logrus.WithError(err).Warn("kubelet: removing the image volumes of pods that are gone")
	}
	k.removeOrphanShims(ctx)
	if err := k.network.Recover(keep); err != nil {
		logrus.WithError(err).Warn("kubelet: recovering the pod network")
	}
}
