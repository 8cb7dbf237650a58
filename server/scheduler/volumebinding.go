package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/component-helpers/storage/ephemeral"
	volumehelper "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2"

	"github.com/kelp-project/kelp/server/claims"
)

// Upstream's VolumeBinding plugin: its PreFilter, Filter, Reserve,
// PreBind and Unreserve, written for kelp's serial scheduling loop and
// asynchronous bind goroutine.
//
// PreFilter (preFilter) reads the pod's claims; Filter (podVolumes.filter)
// decides per node which unbound WaitForFirstConsumer claim takes which
// static PV and which is provisioned; Reserve (podVolumes.reserve) records
// the chosen PV claimRefs and selected-node annotations in memory
// ("assumed"), so that the next pods' filters see them before the API
// does; PreBind (volumeBinder.bind) writes them and waits, on informer
// events, until every claim of the pod is Bound; the assumptions go when
// the informer shows a newer object or the attempt ends.

const (
	volumeBindingPlugin = "VolumeBinding"
	// defaultBindTimeout is upstream's VolumeBindingArgs.BindTimeoutSeconds.
	defaultBindTimeout = 600 * time.Second
	// volumeAPITimeout bounds each PV/PVC write of PreBind.
	volumeAPITimeout = 30 * time.Second

	// Filter reasons, verbatim from upstream's volume binder. Its
	// "node(s) did not have enough free storage" needs CSIStorageCapacity,
	// which kelp's provisioners do not publish, so it never applies.
	reasonVolumeNodeConflict = "node(s) had volume node affinity conflict"
	reasonVolumeBindConflict = "node(s) didn't find available persistent volumes to bind"
	reasonVolumePVNotExist   = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
	// msgUnboundImmediate is upstream's PreFilter rejection.
	msgUnboundImmediate = "pod has unbound immediate PersistentVolumeClaims"
)

// podClaim is a claim a pod's volume names: a persistentVolumeClaim
// volume's claimName, or a generic ephemeral volume's "<pod>-<volume>".
type podClaim struct {
	name      string
	ephemeral bool
}

// podClaims lists the pod's claims; nil (no allocation) for a pod without.
func podClaims(pod *v1.Pod) []podClaim {
	var out []podClaim
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		switch {
		case vol.PersistentVolumeClaim != nil:
			out = append(out, podClaim{name: vol.PersistentVolumeClaim.ClaimName})
		case vol.Ephemeral != nil:
			out = append(out, podClaim{name: claims.Name(pod, vol), ephemeral: true})
		}
	}
	return out
}

// claimBound: the claim names its volume and the PV controller has
// completed the binding (annotation, or status Bound).
func claimBound(pvc *v1.PersistentVolumeClaim) bool {
	if pvc.Spec.VolumeName == "" {
		return false
	}
	return metav1.HasAnnotation(pvc.ObjectMeta, volumehelper.AnnBindCompleted) || pvc.Status.Phase == v1.ClaimBound
}

// An assumed object stands in for the informer's copy whose
// resourceVersion is base, until the informer shows another version or
// the attempt that assumed it ends.
type assumedPV struct {
	pv   *v1.PersistentVolume
	base string
}

type assumedPVC struct {
	pvc  *v1.PersistentVolumeClaim
	base string
}

// volumeBinder holds the PVC, PV and StorageClass listers, the assumed
// bindings of pods in flight, and the wake-up of PreBind waiters.
type volumeBinder struct {
	client  kubernetes.Interface
	pods    corelisters.PodLister
	pvcs    corelisters.PersistentVolumeClaimLister
	pvs     corelisters.PersistentVolumeLister
	classes storagelisters.StorageClassLister

	mu          sync.Mutex
	timeout     time.Duration
	assumedPVs  map[string]*assumedPV  // PV name ->
	assumedPVCs map[string]*assumedPVC // namespace/name ->
	// changed is closed (and replaced) at every PVC, PV or pod deletion
	// event: the PreBind waiters look again.
	changed chan struct{}
}

// newVolumeBinder takes the PVC, PV and StorageClass informers from
// factory; requeue is called for events that may make parked pods
// schedulable. It returns the informers' HasSynced.
func newVolumeBinder(client kubernetes.Interface, factory informers.SharedInformerFactory, pods corelisters.PodLister, requeue func()) (*volumeBinder, []toolscache.InformerSynced) {
	pvcInf := factory.Core().V1().PersistentVolumeClaims()
	pvInf := factory.Core().V1().PersistentVolumes()
	classInf := factory.Storage().V1().StorageClasses()
	b := &volumeBinder{
		client:      client,
		pods:        pods,
		pvcs:        pvcInf.Lister(),
		pvs:         pvInf.Lister(),
		classes:     classInf.Lister(),
		timeout:     defaultBindTimeout,
		assumedPVs:  map[string]*assumedPV{},
		assumedPVCs: map[string]*assumedPVC{},
		changed:     make(chan struct{}),
	}
	// Upstream's VolumeBinding requeues on PVC, PV and StorageClass adds
	// and updates; deletions only wake the waiters.
	_, _ = pvcInf.Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { b.observePVC(obj); requeue() },
		UpdateFunc: func(oldObj, newObj any) {
			b.observePVC(newObj)
			if changedVersion(oldObj, newObj) {
				requeue()
			}
		},
		DeleteFunc: b.observePVC,
	})
	_, _ = pvInf.Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { b.observePV(obj); requeue() },
		UpdateFunc: func(oldObj, newObj any) {
			b.observePV(newObj)
			if changedVersion(oldObj, newObj) {
				requeue()
			}
		},
		DeleteFunc: b.observePV,
	})
	_, _ = classInf.Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { requeue() },
		UpdateFunc: func(oldObj, newObj any) {
			if changedVersion(oldObj, newObj) {
				requeue()
			}
		},
	})
	return b, []toolscache.InformerSynced{pvcInf.Informer().HasSynced, pvInf.Informer().HasSynced, classInf.Informer().HasSynced}
}

// changedVersion is false for a resync (same object delivered again).
func changedVersion(oldObj, newObj any) bool {
	o, ok1 := oldObj.(metav1.Object)
	n, ok2 := newObj.(metav1.Object)
	return !ok1 || !ok2 || o.GetResourceVersion() != n.GetResourceVersion() || o.GetResourceVersion() == ""
}

func unwrapTombstone(obj any) any {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		return tomb.Obj
	}
	return obj
}

func (b *volumeBinder) observePVC(obj any) {
	if pvc, ok := unwrapTombstone(obj).(*v1.PersistentVolumeClaim); ok {
		key := pvc.Namespace + "/" + pvc.Name
		b.mu.Lock()
		if a := b.assumedPVCs[key]; a != nil && a.base != pvc.ResourceVersion {
			delete(b.assumedPVCs, key)
		}
		b.mu.Unlock()
	}
	b.signal()
}

func (b *volumeBinder) observePV(obj any) {
	if pv, ok := unwrapTombstone(obj).(*v1.PersistentVolume); ok {
		b.mu.Lock()
		if a := b.assumedPVs[pv.Name]; a != nil && a.base != pv.ResourceVersion {
			delete(b.assumedPVs, pv.Name)
		}
		b.mu.Unlock()
	}
	b.signal()
}

// signal wakes every PreBind waiter.
func (b *volumeBinder) signal() {
	b.mu.Lock()
	close(b.changed)
	b.changed = make(chan struct{})
	b.mu.Unlock()
}

func (b *volumeBinder) changes() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.changed
}

// claim is the informer's claim, or the assumed one standing in for it.
func (b *volumeBinder) claim(namespace, name string) (*v1.PersistentVolumeClaim, error) {
	pvc, err := b.pvcs.PersistentVolumeClaims(namespace).Get(name)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if a := b.assumedPVCs[namespace+"/"+name]; a != nil && a.base == pvc.ResourceVersion {
		return a.pvc, nil
	}
	return pvc, nil
}

// volume is the informer's PV, or the assumed one standing in for it.
func (b *volumeBinder) volume(name string) (*v1.PersistentVolume, error) {
	pv, err := b.pvs.Get(name)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if a := b.assumedPVs[name]; a != nil && a.base == pv.ResourceVersion {
		return a.pv, nil
	}
	return pv, nil
}

// volumesOfClass lists the PVs of a storage class, assumptions applied.
func (b *volumeBinder) volumesOfClass(class string) []*v1.PersistentVolume {
	all, _ := b.pvs.List(labels.Everything())
	var out []*v1.PersistentVolume
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, pv := range all {
		if volumehelper.GetPersistentVolumeClass(pv) != class {
			continue
		}
		if a := b.assumedPVs[pv.Name]; a != nil && a.base == pv.ResourceVersion {
			pv = a.pv
		}
		out = append(out, pv)
	}
	return out
}

// podVolumes is the VolumeBinding state of one scheduling attempt of a pod
// with claims.
type podVolumes struct {
	b      *volumeBinder
	pod    *v1.Pod
	claims []podClaim
	bound  []*v1.PersistentVolumeClaim
	// unbound are the WaitForFirstConsumer claims without a volume,
	// smallest request first (so the smallest fitting PVs go first).
	unbound []*v1.PersistentVolumeClaim
	// candidates are the PVs of each class of the unbound claims.
	candidates map[string][]*v1.PersistentVolume
	// decisions are Filter's choices for each feasible node.
	decisions map[string]*volumeDecision
}

// volumeDecision: which unbound claim takes which static PV on a node, and
// which are to be provisioned there.
type volumeDecision struct {
	static    []staticBinding
	provision []*v1.PersistentVolumeClaim
}

type staticBinding struct {
	pv  *v1.PersistentVolume
	pvc *v1.PersistentVolumeClaim
}

// preFilter is upstream's VolumeBinding PreFilter for a pod with claims:
// each must exist, not be lost or being deleted, a generic ephemeral
// volume's must be owned by the pod, and none may be an unbound claim of
// immediate binding. A non-empty msg rejects the pod on every node
// (UnschedulableAndUnresolvable); err is an internal error.
func (b *volumeBinder) preFilter(pod *v1.Pod, claims []podClaim) (pv *podVolumes, msg string, err error) {
	pv = &podVolumes{b: b, pod: pod, claims: claims}
	immediate := false
	for _, c := range claims {
		pvc, err := b.claim(pod.Namespace, c.name)
		if err != nil {
			if c.ephemeral && apierrors.IsNotFound(err) {
				return nil, fmt.Sprintf("waiting for ephemeral volume controller to create the persistentvolumeclaim %q", c.name), nil
			}
			return nil, err.Error(), nil
		}
		if pvc.Status.Phase == v1.ClaimLost {
			return nil, fmt.Sprintf("persistentvolumeclaim %q bound to non-existent persistentvolume %q", pvc.Name, pvc.Spec.VolumeName), nil
		}
		if pvc.DeletionTimestamp != nil {
			return nil, fmt.Sprintf("persistentvolumeclaim %q is being deleted", pvc.Name), nil
		}
		if c.ephemeral {
			if err := ephemeral.VolumeIsForPod(pod, pvc); err != nil {
				return nil, err.Error(), nil
			}
		}
		if claimBound(pvc) {
			pv.bound = append(pv.bound, pvc)
			continue
		}
		delay, err := volumehelper.IsDelayBindingMode(pvc, b.classes)
		if err != nil {
			return nil, "", err
		}
		if delay && pvc.Spec.VolumeName == "" {
			pv.unbound = append(pv.unbound, pvc)
		} else {
			immediate = true // pre-bound claims count as immediate, as upstream
		}
	}
	if immediate {
		return nil, msgUnboundImmediate, nil
	}
	if len(pv.unbound) > 0 {
		sort.SliceStable(pv.unbound, func(i, j int) bool {
			qi := pv.unbound[i].Spec.Resources.Requests[v1.ResourceStorage]
			qj := pv.unbound[j].Spec.Resources.Requests[v1.ResourceStorage]
			return qi.Cmp(qj) < 0
		})
		pv.candidates = map[string][]*v1.PersistentVolume{}
		for _, pvc := range pv.unbound {
			class := volumehelper.GetPersistentVolumeClaimClass(pvc)
			if _, ok := pv.candidates[class]; !ok {
				pv.candidates[class] = b.volumesOfClass(class)
			}
		}
		pv.decisions = map[string]*volumeDecision{}
	}
	return pv, "", nil
}

// filter is upstream's VolumeBinding Filter on one node: bound claims' PVs
// must exist and their node affinity match; unbound claims must each find
// an available matching PV there (never two claims the same PV) or be
// provisionable there. Its failures are UnschedulableAndUnresolvable.
func (pv *podVolumes) filter(node *v1.Node) *filterStatus {
	boundOK, pvsFound := true, true
	for _, pvc := range pv.bound {
		vol, err := pv.b.volume(pvc.Spec.VolumeName)
		if err != nil {
			pvsFound = false
			break
		}
		if volumehelper.CheckNodeAffinity(vol, node.Labels) != nil {
			boundOK = false
			break
		}
	}
	unboundOK := true
	var dec *volumeDecision
	if len(pv.unbound) > 0 {
		dec, unboundOK = pv.findUnbound(node)
	}
	var reasons []string
	if !boundOK {
		reasons = append(reasons, reasonVolumeNodeConflict)
	}
	if !unboundOK {
		reasons = append(reasons, reasonVolumeBindConflict)
	}
	if !pvsFound {
		reasons = append(reasons, reasonVolumePVNotExist)
	}
	if len(reasons) > 0 {
		return &filterStatus{reasons: reasons, unresolvable: true}
	}
	if dec != nil {
		pv.decisions[node.Name] = dec
	}
	return nil
}

func (pv *podVolumes) findUnbound(node *v1.Node) (*volumeDecision, bool) {
	dec := &volumeDecision{}
	var toMatch []*v1.PersistentVolumeClaim
	for _, pvc := range pv.unbound {
		if selected, ok := pvc.Annotations[volumehelper.AnnSelectedNode]; ok {
			if selected != node.Name {
				return nil, false // being provisioned for another node
			}
			dec.provision = append(dec.provision, pvc)
			continue
		}
		toMatch = append(toMatch, pvc)
	}
	var chosen map[string]*v1.PersistentVolume
	for _, pvc := range toMatch {
		if chosen == nil {
			chosen = map[string]*v1.PersistentVolume{}
		}
		class := volumehelper.GetPersistentVolumeClaimClass(pvc)
		vol, err := volumehelper.FindMatchingVolume(pvc, pv.candidates[class], node, chosen, true, true)
		if err != nil {
			klog.V(4).InfoS("matching a volume failed", "pvc", klog.KObj(pvc), "err", err)
			return nil, false
		}
		if vol == nil {
			dec.provision = append(dec.provision, pvc)
			continue
		}
		chosen[vol.Name] = vol
		dec.static = append(dec.static, staticBinding{pv: vol, pvc: pvc})
	}
	for _, pvc := range dec.provision {
		class, err := pv.b.classes.Get(volumehelper.GetPersistentVolumeClaimClass(pvc))
		if err != nil || !canProvision(class, node) {
			return nil, false
		}
	}
	return dec, true
}

// canProvision: the class has a provisioner and its allowedTopologies
// admit the node.
func canProvision(class *storagev1.StorageClass, node *v1.Node) bool {
	if class.Provisioner == "" || class.Provisioner == volumehelper.NotSupportedProvisioner {
		return false
	}
	return matchTopology(class.AllowedTopologies, node.Labels)
}

// matchTopology: no terms match every node; otherwise some term's label
// expressions must all hold (an empty term matches nothing).
func matchTopology(terms []v1.TopologySelectorTerm, nodeLabels map[string]string) bool {
	if len(terms) == 0 {
		return true
	}
	for _, term := range terms {
		if len(term.MatchLabelExpressions) == 0 {
			continue
		}
		ok := true
		for _, req := range term.MatchLabelExpressions {
			v, has := nodeLabels[req.Key]
			if !has || !slices.Contains(req.Values, v) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// volumePlan is what PreBind writes for a pod on its node and then waits
// for. It owns the assumptions Reserve made.
type volumePlan struct {
	pod        *v1.Pod
	node       *v1.Node
	claims     []podClaim
	static     []plannedPV
	provision  []plannedPVC
	assumedPV  []*assumedPV
	assumedPVC []*assumedPVC
}

// A planned write is checked against the informer once the informer has
// shown it (seen): before that, the informer's older copy says nothing.
type plannedPV struct {
	pv      *v1.PersistentVolume // with the claimRef to write
	pvc     *v1.PersistentVolumeClaim
	write   bool
	written string // resourceVersion of the write
	seen    bool
}

type plannedPVC struct {
	pvc     *v1.PersistentVolumeClaim // with the selected-node annotation
	write   bool
	written string
	seen    bool
}

// reserve is upstream's Reserve: the node's decision is assumed (PV
// claimRefs, selected-node annotations) so the next pods' filters see it.
// A nil plan means every claim is bound already.
func (pv *podVolumes) reserve(node *v1.Node) (*volumePlan, error) {
	dec := pv.decisions[node.Name]
	if dec == nil {
		return nil, nil
	}
	plan := &volumePlan{pod: pv.pod, node: node, claims: pv.claims}
	b := pv.b
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, sb := range dec.static {
		newPV, dirty, err := volumehelper.GetBindVolumeToClaim(sb.pv, sb.pvc)
		if err != nil {
			b.unreserveLocked(plan)
			return nil, err
		}
		if dirty {
			a := &assumedPV{pv: newPV, base: sb.pv.ResourceVersion}
			b.assumedPVs[newPV.Name] = a
			plan.assumedPV = append(plan.assumedPV, a)
		}
		plan.static = append(plan.static, plannedPV{pv: newPV, pvc: sb.pvc, write: dirty, seen: !dirty})
	}
	for _, pvc := range dec.provision {
		if pvc.Annotations[volumehelper.AnnSelectedNode] == node.Name {
			plan.provision = append(plan.provision, plannedPVC{pvc: pvc, seen: true})
			continue
		}
		clone := pvc.DeepCopy()
		metav1.SetMetaDataAnnotation(&clone.ObjectMeta, volumehelper.AnnSelectedNode, node.Name)
		a := &assumedPVC{pvc: clone, base: pvc.ResourceVersion}
		b.assumedPVCs[clone.Namespace+"/"+clone.Name] = a
		plan.assumedPVC = append(plan.assumedPVC, a)
		plan.provision = append(plan.provision, plannedPVC{pvc: clone, write: true})
	}
	return plan, nil
}

// unreserve drops the plan's assumptions that still stand.
func (b *volumeBinder) unreserve(plan *volumePlan) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.unreserveLocked(plan)
}

func (b *volumeBinder) unreserveLocked(plan *volumePlan) {
	for _, a := range plan.assumedPV {
		if b.assumedPVs[a.pv.Name] == a {
			delete(b.assumedPVs, a.pv.Name)
		}
	}
	for _, a := range plan.assumedPVC {
		key := a.pvc.Namespace + "/" + a.pvc.Name
		if b.assumedPVCs[key] == a {
			delete(b.assumedPVCs, key)
		}
	}
}

// errPodGone: the pod went away while its volumes were being bound.
var errPodGone = errors.New("pod does not exist any more")

// bind is upstream's PreBind: write the planned PV claimRefs and claim
// annotations, then wait (on informer events, up to the bind timeout)
// until every claim of the pod is Bound to a PV whose claimRef names it.
// It fails early, as upstream, when a written claimRef is reset, a
// provisioner drops the selected-node annotation, a PV's node affinity
// does not match the node, or the pod is deleted.
func (b *volumeBinder) bind(ctx context.Context, plan *volumePlan) error {
	for i := range plan.static {
		p := &plan.static[i]
		if !p.write {
			continue
		}
		wctx, cancel := context.WithTimeout(ctx, volumeAPITimeout)
		newPV, err := b.client.CoreV1().PersistentVolumes().Update(wctx, p.pv, metav1.UpdateOptions{})
		cancel()
		if err != nil {
			return err
		}
		klog.V(2).InfoS("claim bound to volume", "pvc", klog.KObj(p.pvc), "pv", klog.KObj(p.pv))
		p.written = newPV.ResourceVersion
	}
	for i := range plan.provision {
		p := &plan.provision[i]
		if !p.write {
			continue
		}
		wctx, cancel := context.WithTimeout(ctx, volumeAPITimeout)
		newPVC, err := b.client.CoreV1().PersistentVolumeClaims(p.pvc.Namespace).Update(wctx, p.pvc, metav1.UpdateOptions{})
		cancel()
		if err != nil {
			return err
		}
		p.written = newPVC.ResourceVersion
	}
	b.mu.Lock()
	timeout := b.timeout
	b.mu.Unlock()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		changed := b.changes()
		done, err := b.checkBound(plan)
		if err != nil {
			if errors.Is(err, errPodGone) {
				return err
			}
			return fmt.Errorf("binding volumes: %w", err)
		}
		if done {
			return nil
		}
		select {
		case <-changed:
		case <-timer.C:
			return fmt.Errorf("binding volumes: %w", context.DeadlineExceeded)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// olderThan: the informer's version predates what PreBind wrote.
func olderThan(seen, written string) bool {
	s, err1 := strconv.ParseUint(seen, 10, 64)
	w, err2 := strconv.ParseUint(written, 10, 64)
	return err1 == nil && err2 == nil && s < w
}

// caughtUp: the informer's version is at least what PreBind wrote (false
// when either is not a number).
func caughtUp(seen, written string) bool {
	s, err1 := strconv.ParseUint(seen, 10, 64)
	w, err2 := strconv.ParseUint(written, 10, 64)
	return err1 == nil && err2 == nil && s >= w
}

// checkBound reads the informers: done once every claim of the pod is
// Bound (status phase) to a PV whose claimRef names it.
func (b *volumeBinder) checkBound(plan *volumePlan) (bool, error) {
	pod := plan.pod
	if p, err := b.pods.Pods(pod.Namespace).Get(pod.Name); err != nil || p.UID != pod.UID {
		return false, errPodGone
	}
	node := plan.node
	for i := range plan.static {
		p := &plan.static[i]
		pv, err := b.pvs.Get(p.pv.Name)
		if err != nil {
			return false, fmt.Errorf("failed to check binding: %w", err)
		}
		if olderThan(pv.ResourceVersion, p.written) {
			return false, nil
		}
		if !p.seen {
			if !caughtUp(pv.ResourceVersion, p.written) && !volumehelper.IsVolumeBoundToClaim(pv, p.pvc) {
				return false, nil // our write is not in the informer yet
			}
			p.seen = true
		}
		if err := volumehelper.CheckNodeAffinity(pv, node.Labels); err != nil {
			return false, fmt.Errorf("pv %q node affinity doesn't match node %q: %w", pv.Name, node.Name, err)
		}
		if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID == "" {
			return false, fmt.Errorf("ClaimRef got reset for pv %q", pv.Name)
		}
	}
	for i := range plan.provision {
		p := &plan.provision[i]
		pvc, err := b.pvcs.PersistentVolumeClaims(p.pvc.Namespace).Get(p.pvc.Name)
		if err != nil {
			return false, fmt.Errorf("failed to check provisioning pvc: %w", err)
		}
		if olderThan(pvc.ResourceVersion, p.written) {
			return false, nil
		}
		if !p.seen {
			if !caughtUp(pvc.ResourceVersion, p.written) && pvc.Annotations[volumehelper.AnnSelectedNode] != node.Name {
				return false, nil // our write is not in the informer yet
			}
			p.seen = true
		}
		if pvc.Annotations[volumehelper.AnnSelectedNode] != node.Name {
			// A provisioner that fails drops the annotation to ask for
			// another node.
			return false, fmt.Errorf("provisioning failed for PVC %q", pvc.Name)
		}
		if pvc.Spec.VolumeName != "" {
			pv, err := b.pvs.Get(pvc.Spec.VolumeName)
			if err != nil {
				return false, nil // not seen yet
			}
			if err := volumehelper.CheckNodeAffinity(pv, node.Labels); err != nil {
				return false, fmt.Errorf("pv %q node affinity doesn't match node %q: %w", pv.Name, node.Name, err)
			}
		}
	}
	for _, c := range plan.claims {
		pvc, err := b.pvcs.PersistentVolumeClaims(pod.Namespace).Get(c.name)
		if err != nil {
			return false, fmt.Errorf("failed to check binding: %w", err)
		}
		if pvc.Spec.VolumeName == "" || pvc.Status.Phase != v1.ClaimBound {
			return false, nil
		}
		pv, err := b.pvs.Get(pvc.Spec.VolumeName)
		if err != nil || !volumehelper.IsVolumeBoundToClaim(pv, pvc) {
			return false, nil
		}
	}
	return true, nil
}
