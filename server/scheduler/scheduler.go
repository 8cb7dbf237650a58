// Package scheduler is kelp's pod scheduler: a client-go API client that
// watches unscheduled pods, filters and scores nodes like upstream's
// default kube-scheduler profile (a fixed subset of its plugins), assumes
// the placement in its cache and binds through pods/binding.
//
// Filters, in upstream order, first failure wins: NodeUnschedulable,
// NodeName, TaintToleration (NoSchedule/NoExecute), NodeAffinity
// (nodeSelector + required affinity), NodePorts, NodeResourcesFit (pods,
// cpu, memory, ephemeral-storage, extended resources), VolumeBinding
// (volumebinding.go). A Ready condition of
// False/Unknown counts as the node.kubernetes.io/not-ready or
// .../unreachable NoSchedule taint, which upstream's node lifecycle
// controller would add (so tolerating pods still fit); a node with no Ready
// condition at all is treated as ready.
//
// Scores (0-100, upstream default weights): NodeResourcesLeastAllocated 1,
// NodeResourcesBalancedAllocation 1, TaintToleration (PreferNoSchedule) 3,
// NodeAffinity (preferred) 2, and spreading 2: fewer pods with the same
// controller ownerReference on a node score higher (an approximation of the
// default hostname PodTopologySpread constraint; zones are not considered).
// The best node wins, ties broken uniformly at random.
//
// VolumeBinding, as upstream's: PreFilter rejects a pod on every node when
// a claim it names (persistentVolumeClaim volumes, generic ephemeral
// volumes' "<pod>-<volume>") is missing, lost, being deleted, or unbound
// with an Immediate class. Filter checks a bound claim's PV node affinity;
// an unbound WaitForFirstConsumer claim fits a node where an Available PV
// matches it (FindMatchingVolume; never one PV for two claims) or where
// its class can provision (a provisioner other than
// kubernetes.io/no-provisioner, allowedTopologies matching). Reserve
// assumes the choice in memory; PreBind, in the bind goroutine (holding no
// binding slot), writes the PV's claimRef or the claim's selected-node
// annotation, then waits on the PVC/PV informers, up to 600 s, until every
// claim is Bound to a PV naming it; only then is the pod bound. A failure
// unreserves and requeues the pod. PVC, PV and StorageClass adds and
// updates requeue unschedulable pods.
//
// PostFilter: the basics of upstream's DefaultPreemption (preemption.go).
//
// DynamicResources: kelp has no DRA allocator, drivers or kubelet plugin
// support, so a pod that names resourceClaims is rejected on every node
// in PreFilter (dra.go) and stays Pending with that reason, rather than
// being bound as if its devices were there.
//
// Not implemented: inter-pod
// (anti-)affinity, explicit topologySpreadConstraints, the other volume
// plugins (VolumeRestrictions, VolumeZone, NodeVolumeLimits), storage
// capacity (CSIStorageCapacity) checks and volume scoring, image
// locality, percentageOfNodesToScore.
package scheduler

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

// SchedulerName is the name this scheduler answers to (spec.schedulerName).
const SchedulerName = v1.DefaultSchedulerName

// Messages and reasons as upstream.
const (
	noNodesAvailable       = "no nodes available to schedule pods"
	preemptionNotHelpful   = "Preemption is not helpful for scheduling"
	preemptionNoVictims    = "No preemption victims found for incoming pod"
	preemptionPolicyNever  = "not eligible due to preemptionPolicy=Never."
	reasonFailedScheduling = "FailedScheduling"
	reasonScheduled        = "Scheduled"
	flushInterval          = 100 * time.Millisecond
)

// Scheduler places unscheduled pods on nodes.
type Scheduler struct {
	client    kubernetes.Interface
	factory   informers.SharedInformerFactory
	recorder  record.EventRecorder
	podLister corelisters.PodLister
	synced    []toolscache.InformerSynced

	cache   *cache
	queue   *schedulingQueue
	volumes *volumeBinder

	rngMu sync.Mutex
	rng   *rand.Rand

	bindWG sync.WaitGroup
	// binding bounds the bindings in flight. Scheduling decisions are much
	// faster than bindings; letting a thousand pile up at once makes the
	// HTTP/2 client open extra TLS connections (each one a handshake),
	// which costs more than it saves.
	binding chan struct{}
}

// maxBindsInFlight is the most concurrent pods/binding calls.
const maxBindsInFlight = 32

// New builds a scheduler and registers its pod and node event handlers on
// factory. Run starts the factory (idempotent if the caller already did).
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, recorder record.EventRecorder, backoff Backoff) *Scheduler {
	s := &Scheduler{
		client:   client,
		factory:  factory,
		recorder: recorder,
		cache:    newCache(),
		queue:    newSchedulingQueue(time.Now, backoff),
		rng:      rand.New(rand.NewSource(time.Now().UnixNano())),
		binding:  make(chan struct{}, maxBindsInFlight),
	}
	podInf := factory.Core().V1().Pods()
	nodeInf := factory.Core().V1().Nodes()
	s.podLister = podInf.Lister()
	_, _ = podInf.Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.onPodAdd(obj) },
		UpdateFunc: s.onPodUpdate,
		DeleteFunc: s.onPodDelete,
	})
	_, _ = nodeInf.Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    s.onNodeAdd,
		UpdateFunc: s.onNodeUpdate,
		DeleteFunc: s.onNodeDelete,
	})
	var volumeSynced []toolscache.InformerSynced
	s.volumes, volumeSynced = newVolumeBinder(client, factory, s.podLister, s.queue.moveAllUnschedulable)
	s.synced = append([]toolscache.InformerSynced{podInf.Informer().HasSynced, nodeInf.Informer().HasSynced}, volumeSynced...)
	return s
}

// Run starts the informers, waits for their caches and schedules pods one
// at a time until ctx is done. Bindings run asynchronously; Run waits for
// in-flight bindings before returning.
func (s *Scheduler) Run(ctx context.Context) {
	s.factory.Start(ctx.Done())
	if !toolscache.WaitForCacheSync(ctx.Done(), s.synced...) {
		return
	}
	go s.queue.flushLoop(flushInterval, ctx.Done())
	go func() {
		<-ctx.Done()
		s.queue.close()
	}()
	for {
		qp := s.queue.pop()
		if qp == nil {
			break
		}
		s.scheduleOne(ctx, qp)
	}
	s.bindWG.Wait()
}

func podKey(pod *v1.Pod) string { return pod.Namespace + "/" + pod.Name }

func responsibleFor(pod *v1.Pod) bool {
	return pod.Spec.SchedulerName == SchedulerName || pod.Spec.SchedulerName == ""
}

func isTerminal(pod *v1.Pod) bool {
	return pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed
}

// needsScheduling: unassigned, ours, not being deleted.
func needsScheduling(pod *v1.Pod) bool {
	return pod.Spec.NodeName == "" && responsibleFor(pod) && pod.DeletionTimestamp == nil && !isTerminal(pod)
}

func (s *Scheduler) onPodAdd(obj any) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	switch {
	case pod.Spec.NodeName != "":
		if !isTerminal(pod) {
			s.cache.addOrUpdatePod(pod)
		}
	case needsScheduling(pod):
		s.cache.nominate(pod, pod.Status.NominatedNodeName)
		s.queue.add(podKey(pod), pod)
	}
}

func (s *Scheduler) onPodUpdate(oldObj, newObj any) {
	oldPod, ok1 := oldObj.(*v1.Pod)
	pod, ok2 := newObj.(*v1.Pod)
	if !ok1 || !ok2 {
		return
	}
	if oldPod.Status.NominatedNodeName != "" || pod.Status.NominatedNodeName != "" {
		node := pod.Status.NominatedNodeName
		if !needsScheduling(pod) {
			node = ""
		}
		s.cache.nominate(pod, node)
	}
	if pod.Spec.NodeName != "" {
		s.queue.delete(podKey(pod))
		if isTerminal(pod) {
			if s.cache.isAccounted(pod.UID) {
				s.cache.removePod(pod.UID)
				s.queue.moveAllUnschedulable() // resources freed
			}
			return
		}
		s.cache.addOrUpdatePod(pod)
		if scaledDown(oldPod, pod) {
			// A resize gave some of the node back: pods that did not
			// fit may now (upstream's UpdatePodScaleDown event).
			s.queue.moveAllUnschedulable()
		}
		return
	}
	if !needsScheduling(pod) {
		s.queue.delete(podKey(pod))
		return
	}
	changed := !reflect.DeepEqual(oldPod.Spec, pod.Spec) ||
		!reflect.DeepEqual(oldPod.Labels, pod.Labels) ||
		!reflect.DeepEqual(oldPod.Annotations, pod.Annotations)
	s.queue.update(podKey(pod), pod, changed)
}

func (s *Scheduler) onPodDelete(obj any) {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	s.queue.delete(podKey(pod))
	s.cache.nominate(pod, "")
	if s.volumes != nil {
		s.volumes.signal() // a pod waiting for its volumes stops waiting
	}
	if s.cache.isAccounted(pod.UID) {
		s.cache.removePod(pod.UID)
		s.queue.moveAllUnschedulable()
	}
}

func (s *Scheduler) onNodeAdd(obj any) {
	node, ok := obj.(*v1.Node)
	if !ok {
		return
	}
	s.cache.addOrUpdateNode(node)
	s.queue.moveAllUnschedulable()
}

func (s *Scheduler) onNodeUpdate(oldObj, newObj any) {
	oldNode, ok1 := oldObj.(*v1.Node)
	node, ok2 := newObj.(*v1.Node)
	if !ok1 || !ok2 {
		return
	}
	s.cache.addOrUpdateNode(node)
	if nodeSchedulingPropertiesChanged(oldNode, node) {
		s.queue.moveAllUnschedulable()
	}
}

func nodeSchedulingPropertiesChanged(a, b *v1.Node) bool {
	if a.Spec.Unschedulable != b.Spec.Unschedulable ||
		!reflect.DeepEqual(a.Labels, b.Labels) ||
		!reflect.DeepEqual(a.Spec.Taints, b.Spec.Taints) ||
		!reflect.DeepEqual(a.Status.Allocatable, b.Status.Allocatable) {
		return true
	}
	return readyStatus(a) != readyStatus(b)
}

func readyStatus(n *v1.Node) v1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status
		}
	}
	return ""
}

func (s *Scheduler) onNodeDelete(obj any) {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if node, ok := obj.(*v1.Node); ok {
		s.cache.removeNode(node.Name)
	}
}

// fitError describes why no node fits.
type fitError struct {
	numNodes int
	statuses map[string]*filterStatus // node -> failure
	pod      *v1.Pod
	// preFilterMsg is a PreFilter rejection (UnschedulableAndUnresolvable
	// on every node), reported instead of the per-node reasons.
	preFilterMsg string
	// notEligible is why the pod may not preempt (preemption.go), instead
	// of the no-victims message; preemption is what it will preempt, and
	// the message then has no PostFilter part, as upstream's on success.
	notEligible string
	preemption  *preemption
}

func histogram(counts map[string]int) string {
	parts := make([]string, 0, len(counts))
	for reason, n := range counts {
		parts = append(parts, fmt.Sprintf("%d %s", n, reason))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// Error renders upstream's FitError message including the message of the
// default preemption PostFilter, e.g.
// "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are
// available: 3 No preemption victims found for incoming pod..".
// When the pod preempts, the PostFilter part is left out, as upstream's.
func (e *fitError) Error() string {
	if e.numNodes == 0 {
		return noNodesAvailable
	}
	if e.preFilterMsg != "" {
		return fmt.Sprintf("0/%d nodes are available: %s. %s.", e.numNodes, e.preFilterMsg,
			e.postFilterMsg(map[string]int{preemptionNotHelpful: e.numNodes}))
	}
	reasons := map[string]int{}
	preempt := map[string]int{}
	for _, st := range e.statuses {
		for _, r := range st.reasons {
			reasons[r]++
		}
		if st.unresolvable {
			preempt[preemptionNotHelpful]++
		} else {
			preempt[preemptionNoVictims]++
		}
	}
	msg := fmt.Sprintf("0/%d nodes are available: %s.", e.numNodes, histogram(reasons))
	if e.preemption != nil {
		return msg
	}
	return msg + " " + e.postFilterMsg(preempt) + "."
}

// postFilterMsg is the default preemption PostFilter's message.
func (e *fitError) postFilterMsg(preempt map[string]int) string {
	if p := e.pod.Spec.PreemptionPolicy; p != nil && *p == v1.PreemptNever {
		return preemptionPolicyNever
	}
	if e.notEligible != "" {
		return e.notEligible
	}
	return fmt.Sprintf("preemption: 0/%d nodes are available: %s.", e.numNodes, histogram(preempt))
}

// schedulePod runs prefilter, filter and score under the cache lock and,
// on success, reserves: assumes the pod on the chosen node and, for a pod
// whose claims need binding, the volume plan its bind goroutine carries
// out. It returns the node name and plan, or a *fitError (no node fits),
// or another error (an internal one, as upstream's Error status).
func (s *Scheduler) schedulePod(pi *podInfo) (string, *volumePlan, error) {
	ps := newPodState(pi)
	s.cache.mu.Lock()
	defer s.cache.mu.Unlock()

	all := make([]*nodeInfo, 0, len(s.cache.nodes))
	for _, ni := range s.cache.nodes {
		if ni.node != nil {
			all = append(all, ni)
		}
	}
	fe := &fitError{numNodes: len(all), statuses: map[string]*filterStatus{}, pod: pi.pod}
	if len(all) == 0 {
		return "", nil, fe
	}
	// PreFilter (VolumeBinding; the other plugins' PreFilters cannot
	// reject here).
	if claims := podClaims(pi.pod); claims != nil && s.volumes != nil {
		vols, msg, err := s.volumes.preFilter(pi.pod, claims)
		if err != nil {
			return "", nil, fmt.Errorf("running PreFilter plugin %q: %w", volumeBindingPlugin, err)
		}
		if msg != "" {
			fe.preFilterMsg = msg
			return "", nil, fe
		}
		ps.volumes = vols
	}
	// PreFilter (DynamicResources): kelp allocates no claims (dra.go).
	if msg := dynamicResourcesPreFilter(pi.pod); msg != "" {
		fe.preFilterMsg = msg
		return "", nil, fe
	}
	feasible := make([]*nodeInfo, 0, len(all))
	for _, ni := range all {
		if st := runFilters(ps, s.cache.withNominatedLocked(ni, pi.pod)); st != nil {
			fe.statuses[ni.node.Name] = st
			continue
		}
		feasible = append(feasible, ni)
	}
	if len(feasible) == 0 {
		// PostFilter: preemption.
		if fe.notEligible = eligibleToPreempt(pi.pod, s.cache.nodes, fe); fe.notEligible == "" {
			fe.preemption = findPreemption(ps, all, fe, s.cache.withNominatedLocked)
		}
		return "", nil, fe
	}
	chosen := feasible[0]
	if len(feasible) > 1 {
		scores := scoreNodes(ps, feasible)
		best, ties := int64(-1), 0
		s.rngMu.Lock()
		for i, sc := range scores {
			switch {
			case sc > best:
				best, ties, chosen = sc, 1, feasible[i]
			case sc == best:
				ties++
				if s.rng.Intn(ties) == 0 { // reservoir sampling: uniform among ties
					chosen = feasible[i]
				}
			}
		}
		s.rngMu.Unlock()
	}
	var plan *volumePlan
	if ps.volumes != nil {
		var err error
		if plan, err = ps.volumes.reserve(chosen.node); err != nil {
			return "", nil, fmt.Errorf("running Reserve plugin %q: %w", volumeBindingPlugin, err)
		}
	}
	s.cache.assumeLocked(pi, chosen.node.Name)
	return chosen.node.Name, plan, nil
}

func (s *Scheduler) scheduleOne(ctx context.Context, qp *queuedPod) {
	// Use the freshest object: it may have been bound or deleted meanwhile.
	pod, err := s.podLister.Pods(qp.pod.Namespace).Get(qp.pod.Name)
	if err != nil || pod.UID != qp.pod.UID || !needsScheduling(pod) || s.cache.isAccounted(pod.UID) {
		s.queue.done(qp)
		return
	}
	qp.pod = pod
	pi := newPodInfo(pod)
	node, plan, err := s.schedulePod(pi)
	if err != nil {
		var fe *fitError
		if errors.As(err, &fe) {
			nominated := ""
			if fe.preemption != nil && s.preempt(ctx, pod, fe.preemption) {
				nominated = fe.preemption.node
				s.cache.nominate(pod, nominated)
				s.clearNominations(ctx, pod, nominated)
			}
			s.recordStatus(ctx, pod, err.Error(), v1.PodReasonUnschedulable, nominated)
			s.queue.requeue(qp, true)
			return
		}
		s.recordFailure(ctx, pod, err.Error(), v1.PodReasonSchedulerError)
		s.queue.requeue(qp, false)
		return
	}
	if plan != nil {
		// The volume wait may take minutes: it holds no binding slot, and
		// the loop goes on with the next pod.
		s.bindWG.Add(1)
		go func() {
			defer s.bindWG.Done()
			if !s.bindVolumes(ctx, qp, pod, plan) {
				return
			}
			s.binding <- struct{}{}
			defer func() { <-s.binding }()
			s.bind(ctx, qp, pod, node)
		}()
		return
	}
	s.bindWG.Add(1)
	s.binding <- struct{}{}
	go func() {
		defer func() { <-s.binding; s.bindWG.Done() }()
		s.bind(ctx, qp, pod, node)
	}()
}

// bindVolumes runs VolumeBinding's PreBind for an assumed pod. On failure
// it unreserves (the volume assumptions and the pod's placement), records
// the failure and requeues the pod, and reports false. The volume
// assumptions go in any case: afterwards the informers show what was
// written.
func (s *Scheduler) bindVolumes(ctx context.Context, qp *queuedPod, pod *v1.Pod, plan *volumePlan) bool {
	defer s.volumes.unreserve(plan)
	err := s.volumes.bind(ctx, plan)
	if err == nil {
		return true
	}
	s.cache.forget(pod.UID)
	if errors.Is(err, errPodGone) || ctx.Err() != nil { // deleted, or shutting down
		s.queue.done(qp)
		return false
	}
	klog.V(2).InfoS("binding volumes failed", "pod", klog.KObj(pod), "node", plan.node.Name, "err", err)
	s.recordFailure(ctx, pod, fmt.Sprintf("running PreBind plugin %q: %v", volumeBindingPlugin, err), v1.PodReasonSchedulerError)
	s.queue.requeue(qp, false)
	return false
}

func (s *Scheduler) bind(ctx context.Context, qp *queuedPod, pod *v1.Pod, node string) {
	binding := &v1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Target:     v1.ObjectReference{Kind: "Node", Name: node},
	}
	// Bind with a context detached from shutdown so an assumed placement is
	// not abandoned halfway; bounded by a timeout.
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	err := s.client.CoreV1().Pods(pod.Namespace).Bind(bctx, binding, metav1.CreateOptions{})
	if err != nil {
		s.cache.forget(pod.UID)
		if apierrors.IsNotFound(err) {
			s.queue.done(qp)
			return
		}
		klog.V(2).InfoS("binding failed", "pod", klog.KObj(pod), "node", node, "err", err)
		s.recordFailure(ctx, pod, fmt.Sprintf("Binding rejected: %v", err), v1.PodReasonSchedulerError)
		s.queue.requeue(qp, false)
		return
	}
	if s.recorder != nil {
		s.recorder.Eventf(pod, v1.EventTypeNormal, reasonScheduled, "Successfully assigned %v/%v to %v", pod.Namespace, pod.Name, node)
	}
	s.queue.done(qp)
}

// recordFailure emits FailedScheduling and sets PodScheduled=False with
// reason Unschedulable (no node fits) or SchedulerError (e.g. the binding
// failed), as upstream.
func (s *Scheduler) recordFailure(ctx context.Context, pod *v1.Pod, msg, reason string) {
	s.recordStatus(ctx, pod, msg, reason, "")
}

// recordStatus is recordFailure that also sets status.nominatedNodeName
// when nominated is not empty (the pod preempted pods there).
func (s *Scheduler) recordStatus(ctx context.Context, pod *v1.Pod, msg, reason, nominated string) {
	if s.recorder != nil {
		s.recorder.Event(pod, v1.EventTypeWarning, reasonFailedScheduling, msg)
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse && c.Reason == reason && c.Message == msg &&
			(nominated == "" || nominated == pod.Status.NominatedNodeName) {
			return
		}
	}
	if ctx.Err() != nil {
		return
	}
	updated := pod.DeepCopy()
	cond := v1.PodCondition{
		Type:               v1.PodScheduled,
		Status:             v1.ConditionFalse,
		Reason:             reason,
		Message:            msg,
		LastTransitionTime: metav1.Now(),
	}
	replaced := false
	for i := range updated.Status.Conditions {
		c := &updated.Status.Conditions[i]
		if c.Type != v1.PodScheduled {
			continue
		}
		if c.Status == cond.Status {
			cond.LastTransitionTime = c.LastTransitionTime
		}
		*c = cond
		replaced = true
	}
	if !replaced {
		updated.Status.Conditions = append(updated.Status.Conditions, cond)
	}
	if nominated != "" {
		updated.Status.NominatedNodeName = nominated
	}
	if _, err := s.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
		klog.V(2).InfoS("updating PodScheduled condition failed", "pod", klog.KObj(pod), "err", err)
	}
}
