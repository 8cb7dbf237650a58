package kubelet

import (
	"context"
	"net/netip"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kelp-project/kelp/agent/kubelet/prober"
	"github.com/kelp-project/kelp/runtime"
)

// Labels on every container, so that the kubelet can rebuild its view of
// a pod from containerd alone after a restart.
const (
	labelPodUID        = "io.kubernetes.pod.uid"
	labelPodName       = "io.kubernetes.pod.name"
	labelPodNamespace  = "io.kubernetes.pod.namespace"
	labelContainerName = "io.kubernetes.container.name"
	labelAttempt       = "io.kubernetes.container.attempt"
	labelInit          = "io.kelp.container.init"
	labelImage         = "io.kelp.image"
	labelImageID       = "io.kelp.image.id"
)

// podWorker owns one pod: it alone starts, stops and removes the pod's
// containers, so no two goroutines ever act on the same pod.
type podWorker struct {
	k   *Kubelet
	uid types.UID

	mu   sync.Mutex
	pod  *corev1.Pod
	gone bool // the API object is deleted

	kickCh chan struct{}
	ctx    context.Context
	cancel context.CancelFunc

	// sandboxMu orders the worker's writes of netnsPath with the HTTPS
	// endpoint's reads (port-forward, through sandbox()).
	sandboxMu sync.Mutex
	// Only the worker goroutine touches what follows (and writes
	// netnsPath, under sandboxMu).
	netnsPath string
	podIP     netip.Addr
	backoff   map[string]*restartBackoff // per container name: crash and image-pull backoff
	waiting   map[string]waitingState    // why a container is not running, for the status
	probes    *prober.Manager
	started   map[string]bool // container IDs whose postStart hook ran
	startTime time.Time
	posted    *corev1.PodStatus
	// admitted: admission let the pod start (admission.go); rejectEvent:
	// its rejection's Event was recorded.
	admitted, rejectEvent bool
	// created is when the kubelet first saw the pod: its Secrets and
	// ConfigMaps are read fresh once after it (objects.go).
	created time.Time
	// retry: the last sync failed a step or left a container waiting, so
	// the next one comes after resyncInterval rather than syncFrequency.
	retry bool
	// nextSync is when relist wakes the worker without a reason (Unix
	// nanoseconds; relist reads it from its own goroutine).
	nextSync atomic.Int64
	// deadline wakes the worker when activeDeadlineSeconds runs out;
	// failed is set once the pod is failed for it (the phase the status
	// reports from then on, whatever its containers did).
	deadline *time.Timer
	failed   *waitingState
	// alloc is the pod's allocated resources and resize its resize
	// conditions (resize.go); alloc is read by other workers too.
	alloc  allocation
	resize resizeState
}

type waitingState struct{ reason, message string }

func newPodWorker(k *Kubelet, pod *corev1.Pod) *podWorker {
	ctx, cancel := context.WithCancel(context.Background())
	w := &podWorker{k: k, uid: pod.UID, pod: pod, kickCh: make(chan struct{}, 1), ctx: ctx, cancel: cancel, created: time.Now(),
		backoff: map[string]*restartBackoff{}, waiting: map[string]waitingState{}, started: map[string]bool{}}
	w.probes = prober.NewManager(ctx, k.runtime, k.recorder, w.kick)
	return w
}

func (w *podWorker) update(pod *corev1.Pod, kick bool) {
	w.mu.Lock()
	w.pod = pod
	w.mu.Unlock()
	if kick {
		w.kick()
	}
}

func (w *podWorker) deleted() {
	w.mu.Lock()
	w.gone = true
	w.mu.Unlock()
	w.kick()
}

func (w *podWorker) kick() {
	select {
	case w.kickCh <- struct{}{}:
	default:
	}
}

// stop ends the worker without touching the pod's containers (agent
// shutdown: the containers keep running).
func (w *podWorker) stop() { w.cancel() }

func (w *podWorker) run() {
	defer w.probes.StopAll()
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-w.kickCh:
		}
		w.mu.Lock()
		pod, gone := w.pod, w.gone
		w.mu.Unlock()
		if done := w.sync(pod, gone); done {
			w.k.forget(w.uid)
			w.cancel()
			return
		}
		w.scheduleSync(time.Now())
	}
}

// scheduleSync sets when relist next wakes the worker, from how the sync
// that just ended went.
func (w *podWorker) scheduleSync(now time.Time) {
	after := syncFrequency
	if w.retry {
		after = resyncInterval
	}
	w.nextSync.Store(now.Add(after).UnixNano())
}

// syncDue says whether relist should wake the worker at now.
func (w *podWorker) syncDue(now time.Time) bool {
	return now.UnixNano() >= w.nextSync.Load()
}

// instances returns the pod's containers in containerd, by container
// name, oldest attempt first. Only this pod's containers are queried: a
// sync runs for every kick, and asking containerd for every container's
// task each time would cost O(containers) per pod.
func (w *podWorker) instances(ctx context.Context) (map[string][]runtime.ContainerStatus, error) {
	list, err := w.k.runtime.ListContainers(ctx, map[string]string{labelPodUID: string(w.uid)})
	if err != nil {
		return nil, err
	}
	out := map[string][]runtime.ContainerStatus{}
	for _, c := range list {
		name := c.Labels[labelContainerName]
		out[name] = append(out[name], c)
	}
	for _, l := range out {
		sort.Slice(l, func(i, j int) bool { return attempt(l[i]) < attempt(l[j]) })
	}
	return out, nil
}

func attempt(c runtime.ContainerStatus) int {
	n, _ := strconv.Atoi(c.Labels[labelAttempt])
	return n
}

func latest(l []runtime.ContainerStatus) *runtime.ContainerStatus {
	if len(l) == 0 {
		return nil
	}
	return &l[len(l)-1]
}

// running maps the IDs of the pod's running app and sidecar container
// instances to their containers: what gets probed.
func running(pod *corev1.Pod, inst map[string][]runtime.ContainerStatus) map[string]*corev1.Container {
	out := map[string]*corev1.Container{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if last := latest(inst[c.Name]); isSidecar(c) && last != nil && last.State == runtime.StateRunning {
			out[last.ID] = c
		}
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if last := latest(inst[c.Name]); last != nil && last.State == runtime.StateRunning {
			out[last.ID] = c
		}
	}
	return out
}

// hook runs a postStart or preStop handler against container instance id.
func (w *podWorker) hook(ctx context.Context, c *corev1.Container, id string, h *corev1.LifecycleHandler) error {
	return prober.RunHook(ctx, w.k.runtime, prober.Target{Container: c, ID: id, PodIP: w.podIP.String()}, h)
}

// sync takes the pod one step towards its spec; it returns true when the
// pod is finished with and the worker can end.
func (w *podWorker) sync(pod *corev1.Pod, gone bool) bool {
	ctx := w.ctx
	w.retry = true // unless the sync gets to its end with every container running
	if gone {
		w.killAll(ctx, pod, 2*time.Second)
		w.cleanup(ctx, pod)
		return true
	}
	if pod.DeletionTimestamp != nil {
		return w.terminate(ctx, pod)
	}
	inst, err := w.instances(ctx)
	if err != nil {
		logrus.WithError(err).Warnf("kubelet: listing containers of %s/%s", pod.Namespace, pod.Name)
		return false
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed ||
		(w.posted != nil && (w.posted.Phase == corev1.PodSucceeded || w.posted.Phase == corev1.PodFailed)) {
		// A finished pod keeps its status; its containers stay stopped.
		w.probes.StopAll()
		w.stopInOrder(ctx, pod, inst, prober.GracePeriod(pod))
		w.killAll(ctx, pod, 0)
		return false
	}
	if !w.admitted {
		if a := w.k.admit(ctx, pod); !a.ok {
			w.reject(ctx, pod, a)
			return false
		}
		w.admitted = true
	}
	if w.startTime.IsZero() {
		w.startTime = time.Now()
		if pod.Status.StartTime != nil {
			w.startTime = pod.Status.StartTime.Time
		}
	}
	if w.pastDeadline(pod) {
		w.failPastDeadline(ctx, pod)
		return false
	}
	if err := w.ensureSandbox(ctx, pod); err != nil {
		w.k.event(pod, corev1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: %v", err)
		w.postStatus(ctx, pod, inst)
		return false
	}
	if err := w.k.prepareVolumes(ctx, pod); err != nil {
		w.k.event(pod, corev1.EventTypeWarning, "FailedMount", "%v", err)
		w.postStatus(ctx, pod, inst)
		return false
	}
	// From here on the pod is as allocated: a resize the node cannot take
	// yet leaves its containers as they are, and a restarted one gets
	// what was allocated.
	pod = w.syncResize(ctx, pod, inst)
	if w.finish(ctx, pod, inst) {
		return false
	}
	plan := w.syncInit(ctx, pod, inst)
	if plan.initialized {
		for i := range pod.Spec.Containers {
			w.syncContainer(ctx, pod, &pod.Spec.Containers[i], inst[pod.Spec.Containers[i].Name], false)
		}
	}
	w.syncEphemeral(ctx, pod, inst)
	inst, _ = w.instances(ctx)
	if w.finish(ctx, pod, inst) {
		return false
	}
	w.probes.Sync(pod, w.podIP.String(), running(pod, inst))
	// A sidecar started by this sync (one without a startupProbe is
	// started as soon as it runs) lets the next init or the app
	// containers go: nothing else would wake the worker for that.
	if next := planInit(pod, inst, w.probes.Started); next.initialized != plan.initialized || len(next.sync) != len(plan.sync) {
		w.kick()
	}
	w.postStatus(ctx, pod, inst)
	// A deferred or failed resize is tried again at the next resync.
	w.retry = len(w.waiting) > 0 || w.resize.pending != nil || w.resize.inProgress != nil
	return false
}

func (w *podWorker) ensureSandbox(ctx context.Context, pod *corev1.Pod) error {
	if w.netnsPath != "" && !pod.Spec.HostNetwork {
		return nil
	}
	if err := w.k.checkRuntimeHandler(ctx, pod); err != nil {
		return err
	}
	if err := w.k.writePodFiles(pod); err != nil {
		return err
	}
	if pod.Spec.HostNetwork {
		ip, _ := netip.ParseAddr(w.k.cfg.NodeIP)
		w.setSandbox("", ip)
		return nil
	}
	path, ip, err := w.k.network.Setup(string(pod.UID))
	if err != nil {
		return err
	}
	if err := w.k.writeHosts(pod, ip.String()); err != nil {
		return err
	}
	// Host ports, as CNI's portmap after the bridge plugin: before the
	// sandbox is recorded, so a failure is retried with it.
	if err := w.k.network.MapHostPorts(pod, ip); err != nil {
		return err
	}
	w.setSandbox(path, ip)
	return nil
}

func (w *podWorker) setSandbox(netnsPath string, ip netip.Addr) {
	w.sandboxMu.Lock()
	defer w.sandboxMu.Unlock()
	w.netnsPath, w.podIP = netnsPath, ip
}

// sandbox is netnsPath for goroutines other than the worker's.
func (w *podWorker) sandbox() string {
	w.sandboxMu.Lock()
	defer w.sandboxMu.Unlock()
	return w.netnsPath
}

// syncInit runs init containers in order (planInit): plain ones each to
// completion, sidecars until they have started, then kept running; it
// returns its plan, initialized once the pod is.
func (w *podWorker) syncInit(ctx context.Context, pod *corev1.Pod, inst map[string][]runtime.ContainerStatus) initPlan {
	plan := planInit(pod, inst, w.probes.Started)
	for _, c := range plan.sync {
		w.syncContainer(ctx, pod, c, inst[c.Name], true)
	}
	return plan
}

// finish ends a pod whose app containers are all done for good
// (restartPolicy Never, or OnFailure with every one succeeded) while
// sidecars still run, as upstream does for a Job with a sidecar: the
// sidecars are stopped (preStop hooks, reverse order, the pod's grace
// period) and the pod's final status is written. It returns true when it
// did so.
func (w *podWorker) finish(ctx context.Context, pod *corev1.Pod, inst map[string][]runtime.ContainerStatus) bool {
	st := w.podStatus(pod, inst)
	if st.Phase != corev1.PodSucceeded && st.Phase != corev1.PodFailed {
		return false
	}
	w.probes.StopAll()
	if len(runningSidecars(pod, inst)) > 0 {
		w.stopInOrder(ctx, pod, inst, prober.GracePeriod(pod))
		if fresh, err := w.instances(ctx); err == nil {
			inst = fresh
		}
	}
	w.postStatus(ctx, pod, inst)
	w.retry = false
	return true
}

// syncEphemeral starts each ephemeral container that has not run yet in
// the pod's sandbox; one that ran is never restarted, as upstream.
func (w *podWorker) syncEphemeral(ctx context.Context, pod *corev1.Pod, inst map[string][]runtime.ContainerStatus) {
	for i := range pod.Spec.EphemeralContainers {
		c := (*corev1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
		last := latest(inst[c.Name])
		switch {
		case last == nil:
			w.startContainer(ctx, pod, c, 0, false, nil)
		case last.State == runtime.StateCreated:
			if err := w.k.runtime.StartContainer(ctx, last.ID); err != nil {
				w.waiting[c.Name] = waitingState{"RunContainerError", err.Error()}
			}
		default:
			delete(w.waiting, c.Name)
		}
	}
}

// syncContainer starts a container that has never run, or restarts an
// exited one when the restart policy and the crash backoff allow.
func (w *podWorker) syncContainer(ctx context.Context, pod *corev1.Pod, c *corev1.Container, inst []runtime.ContainerStatus, init bool) {
	last := latest(inst)
	next := 0
	if last != nil {
		switch last.State {
		case runtime.StateRunning:
			if !w.started[last.ID] {
				w.started[last.ID] = true // adopted after an agent restart: its hook already ran
			}
			delete(w.waiting, c.Name)
			return
		case runtime.StateCreated:
			if err := w.k.runtime.StartContainer(ctx, last.ID); err != nil {
				w.waiting[c.Name] = waitingState{"RunContainerError", err.Error()}
			}
			return
		}
		if !shouldRestart(pod.Spec.RestartPolicy, last.ExitCode, init && !isSidecar(c), isSidecar(c)) {
			return
		}
		next = attempt(*last) + 1
		b := w.backoffFor(c.Name)
		if wait := b.remaining(last.FinishedAt); wait > 0 {
			w.waiting[c.Name] = waitingState{"CrashLoopBackOff", "back-off " + b.current().String() + " restarting failed container=" +
				c.Name + " pod=" + pod.Name + "_" + pod.Namespace + "(" + string(pod.UID) + ")"}
			time.AfterFunc(wait, w.kick)
			return
		}
		b.next(last.StartedAt, last.FinishedAt)
	}
	w.startContainer(ctx, pod, c, next, init, inst)
}

// shouldRestart says whether an exited container comes back: a sidecar
// always (whatever the pod's policy: the pod is not terminating here),
// others by the pod's restart policy.
func shouldRestart(policy corev1.RestartPolicy, exitCode int32, init, sidecar bool) bool {
	if sidecar {
		return true
	}
	switch policy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return exitCode != 0
	default:
		// Init containers of an Always pod are retried only on failure.
		return !init || exitCode != 0
	}
}

func (w *podWorker) backoffFor(name string) *restartBackoff {
	b := w.backoff[name]
	if b == nil {
		b = &restartBackoff{max: w.k.cfg.CrashLoopMaxBackoff}
		w.backoff[name] = b
	}
	return b
}

// killAll stops every running container of the pod within grace.
func (w *podWorker) killAll(ctx context.Context, pod *corev1.Pod, grace time.Duration) {
	inst, err := w.instances(ctx)
	if err != nil {
		return
	}
	var wg sync.WaitGroup
	for _, l := range inst {
		for _, c := range l {
			if c.State != runtime.StateRunning {
				continue
			}
			wg.Add(1)
			go func(id string) {
				defer wg.Done()
				if err := w.k.runtime.StopContainer(ctx, id, grace); err != nil {
					logrus.WithError(err).Warnf("kubelet: stopping %s", id)
				}
			}(c.ID)
		}
	}
	wg.Wait()
}

// pastDeadline says whether the pod has been active longer than its
// activeDeadlineSeconds (counted from its start time, as upstream; the
// field may be lowered on a running pod). Before that it arms a timer
// that wakes the worker when the deadline comes.
func (w *podWorker) pastDeadline(pod *corev1.Pod) bool {
	if w.deadline != nil {
		w.deadline.Stop()
	}
	d := pod.Spec.ActiveDeadlineSeconds
	if d == nil {
		return false
	}
	left := time.Duration(*d)*time.Second - time.Since(w.startTime)
	if left <= 0 {
		return true
	}
	w.deadline = time.AfterFunc(left, w.kick)
	return false
}

// failPastDeadline stops the pod's containers with the pod's grace period
// and reports it Failed with upstream's reason and message; the pod stays
// (its owner, a Job, decides what comes next).
func (w *podWorker) failPastDeadline(ctx context.Context, pod *corev1.Pod) {
	if w.failed == nil {
		w.failed = &waitingState{reason: "DeadlineExceeded", message: "Pod was active on the node longer than the specified deadline"}
		w.k.event(pod, corev1.EventTypeNormal, w.failed.reason, "%s", w.failed.message)
	}
	grace := time.Duration(corev1.DefaultTerminationGracePeriodSeconds) * time.Second
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = time.Duration(*g) * time.Second
	}
	w.probes.StopAll()
	w.killAll(ctx, pod, grace)
	if inst, err := w.instances(ctx); err == nil {
		w.postStatus(ctx, pod, inst)
	}
}

// cleanup removes the pod's containers, sandbox and files.
func (w *podWorker) cleanup(ctx context.Context, pod *corev1.Pod) {
	w.probes.StopAll()
	if inst, err := w.instances(ctx); err == nil {
		for _, l := range inst {
			for _, c := range l {
				_ = w.k.runtime.RemoveContainer(ctx, c.ID)
			}
		}
	}
	if err := w.k.runtime.RemovePodCgroup(ctx, podQOS(pod), string(w.uid)); err != nil {
		logrus.WithError(err).Warnf("kubelet: removing the cgroup of %s", w.uid)
	}
	if err := w.k.network.Teardown(string(w.uid)); err != nil {
		logrus.WithError(err).Warnf("kubelet: tearing down the sandbox of %s", w.uid)
	}
	w.k.removePodFiles(w.uid)
	// After the unmount in removePodFiles.
	if err := w.k.runtime.ReleaseImageVolumes(ctx, string(w.uid)); err != nil {
		logrus.WithError(err).Warnf("kubelet: releasing the image volumes of %s", w.uid)
	}
}
