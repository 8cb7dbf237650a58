package statefulset

import (
	"context"
	"fmt"
	"sync"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	intstrutil "k8s.io/apimachinery/pkg/util/intstr"
)

// maxBatch caps the concurrent writes of one Parallel step (upstream's
// MaxBatchSize).
const maxBatch = 500

type stepKind int

const (
	stepCreate     stepKind = iota // create the pod (its missing claims first)
	stepDelete                     // delete the pod
	stepClaims                     // create the pod's missing claims
	stepConform                    // identity labels, missing claims, claim owners
	stepClaimOwner                 // claim owners only (a condemned pod)
)

type step struct {
	kind stepKind
	pod  *v1.Pod
	// forUpdate marks a deletion that replaces an old-revision pod
	// (status.currentReplicas drops with it, as upstream).
	forUpdate bool
}

// plan is what one sync does, in phases run one after another: the
// replicas (creates, replacements, conformance), the condemned pods'
// claims, the condemned pods, the rolling update. Within a phase the
// steps run in order (OrderedReady) or at once in slow-start batches
// (Parallel).
type plan struct {
	phases [][]step
}

func (p *plan) add(phase int, s step) {
	for len(p.phases) <= phase {
		p.phases = append(p.phases, nil)
	}
	p.phases[phase] = append(p.phases[phase], s)
}

func (p *plan) count() (creates int, deletes []*v1.Pod) {
	for _, ph := range p.phases {
		for _, s := range ph {
			switch s.kind {
			case stepCreate:
				creates++
			case stepDelete:
				deletes = append(deletes, s.pod)
			}
		}
	}
	return creates, deletes
}

// planner holds what deciding a sync's steps needs.
type planner struct {
	set, currentSet, updateSet *apps.StatefulSet
	cur, upd                   *apps.ControllerRevision
	now                        time.Time
	claim                      func(ns, name string) (*v1.PersistentVolumeClaim, bool)
}

// claimsUpToDate: every existing claim of pod has the owners the
// retention policy wants (a missing claim is created later: it matches).
func (p *planner) claimsUpToDate(set *apps.StatefulSet, pod *v1.Pod) bool {
	for _, want := range claimsOf(set, ordinalOf(pod)) {
		if got, ok := p.claim(want.Namespace, want.Name); ok && !claimOwnersUpToDate(got, set, pod) {
			return false
		}
	}
	return true
}

func (p *planner) claimsMissing(set *apps.StatefulSet, pod *v1.Pod) bool {
	for _, want := range claimsOf(set, ordinalOf(pod)) {
		if _, ok := p.claim(want.Namespace, want.Name); !ok {
			return true
		}
	}
	return false
}

// claimIsStale: under whenScaled=Delete, a claim still referring to an
// earlier pod of this name is about to be garbage collected; the new pod
// waits for it to go rather than mount it.
func (p *planner) claimIsStale(pod *v1.Pod) bool {
	if retentionOf(p.set).WhenScaled == apps.RetainPersistentVolumeClaimRetentionPolicyType {
		return false
	}
	for _, want := range claimsOf(p.set, ordinalOf(pod)) {
		if got, ok := p.claim(want.Namespace, want.Name); ok && hasStaleOwner(got, pod, podKind) {
			return true
		}
	}
	return false
}

// replica decides for the pod of one ordinal in range (upstream's
// processReplica); stop means an OrderedReady set goes no further.
func (p *planner) replica(pl *plan, pod *v1.Pod, monotonic bool) (stop bool) {
	if isFinished(pod) {
		// Failed or succeeded: replaced once the deletion is through.
		if !isTerminating(pod) {
			pl.add(0, step{kind: stepDelete, pod: pod})
		}
		return true
	}
	if !isCreated(pod) {
		if p.claimIsStale(pod) {
			return true
		}
		pl.add(0, step{kind: stepCreate, pod: pod})
		return monotonic
	}
	if pod.Status.Phase == v1.PodPending && p.claimsMissing(p.set, pod) {
		pl.add(0, step{kind: stepClaims, pod: pod})
	}
	if monotonic && (isTerminating(pod) || !isRunningAndReady(pod) || !isAvailable(pod, p.set.Spec.MinReadySeconds, p.now)) {
		return true
	}
	if identityMatches(p.set, pod) && storageMatches(p.set, pod) && p.claimsUpToDate(p.updateSet, pod) {
		return false
	}
	if !isTerminating(pod) {
		pl.add(0, step{kind: stepConform, pod: pod})
	}
	return false
}

// decide is upstream's updateStatefulSet without the writes: it returns
// the plan and the status of the pods as observed.
func (p *planner) decide(pods []*v1.Pod) plan {
	var pl plan
	set := p.set
	start, n := startOrdinal(set), replicasOf(set)
	replicas := make([]*v1.Pod, n)
	var condemned []*v1.Pod
	for _, pod := range pods {
		o := ordinalOf(pod)
		switch {
		case o < 0:
		case o >= start && o < start+n:
			replicas[o-start] = pod
		default:
			condemned = append(condemned, pod)
		}
	}
	partition := 0
	if ru := set.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
		partition = int(*ru.Partition)
	}
	for i := range replicas {
		if replicas[i] != nil {
			continue
		}
		// Below the partition a missing pod comes back at the current
		// revision; at and above it (and under OnDelete), at the update one.
		rolling := set.Spec.UpdateStrategy.Type == apps.RollingUpdateStatefulSetStrategyType || set.Spec.UpdateStrategy.Type == ""
		ru := set.Spec.UpdateStrategy.RollingUpdate
		if (rolling && ru == nil && i < int(set.Status.CurrentReplicas)) || (ru != nil && i < partition) {
			replicas[i] = newPod(p.currentSet, start+i, p.cur.Name)
		} else {
			replicas[i] = newPod(p.updateSet, start+i, p.upd.Name)
		}
	}
	sortByOrdinal(condemned, true)

	var firstUnhealthy *v1.Pod
	for _, pod := range replicas {
		if isUnavailable(pod, set.Spec.MinReadySeconds, p.now) {
			firstUnhealthy = pod
			break
		}
	}
	for i := len(condemned) - 1; i >= 0 && firstUnhealthy == nil; i-- {
		if isUnavailable(condemned[i], set.Spec.MinReadySeconds, p.now) {
			firstUnhealthy = condemned[i]
		}
	}

	monotonic := set.Spec.PodManagementPolicy != apps.ParallelPodManagement
	for _, pod := range replicas {
		if p.replica(&pl, pod, monotonic) && monotonic {
			return pl
		}
	}
	for _, pod := range condemned {
		if !p.claimsUpToDate(p.updateSet, pod) {
			pl.add(1, step{kind: stepClaimOwner, pod: pod})
		}
	}
	// Scale down, highest ordinal first; OrderedReady one at a time, and
	// only past healthy pods (or the first unhealthy one itself).
	for _, pod := range condemned {
		if isTerminating(pod) {
			if monotonic {
				return pl
			}
			continue
		}
		if monotonic && pod != firstUnhealthy &&
			(!isRunningAndReady(pod) || !isAvailable(pod, set.Spec.MinReadySeconds, p.now)) {
			return pl
		}
		pl.add(2, step{kind: stepDelete, pod: pod})
		if monotonic {
			return pl
		}
	}
	if set.Spec.UpdateStrategy.Type == apps.OnDeleteStatefulSetStrategyType {
		return pl
	}
	// Rolling update: at most maxUnavailable replicas unavailable, old
	// pods replaced from the highest ordinal down to the partition.
	maxUnavailable := 1
	if ru := set.Spec.UpdateStrategy.RollingUpdate; ru != nil {
		m, err := intstrutil.GetScaledValueFromIntOrPercent(intstrutil.ValueOrDefault(ru.MaxUnavailable, intstrutil.FromInt32(1)), n, false)
		if err == nil {
			maxUnavailable = max(m, 1)
		}
	}
	unavailable := 0
	for _, pod := range replicas {
		if isUnavailable(pod, set.Spec.MinReadySeconds, p.now) {
			unavailable++
		}
	}
	if unavailable > maxUnavailable {
		return pl
	}
	room := maxUnavailable - unavailable
	for i := n - 1; i >= partition && room > 0; i-- {
		pod := replicas[i]
		if isCreated(pod) && revisionOf(pod) != p.upd.Name && !isTerminating(pod) {
			pl.add(3, step{kind: stepDelete, pod: pod, forUpdate: true})
			room--
		}
	}
	return pl
}

// update plans the sync and, when act, carries the plan out. It returns
// the status of the pods as observed, less the pods this sync deleted to
// update them.
func (c *Controller) update(ctx context.Context, key string, set *apps.StatefulSet, cur, upd *apps.ControllerRevision, pods []*v1.Pod, act bool) (apps.StatefulSetStatus, error) {
	now := c.now()
	status := apps.StatefulSetStatus{CurrentRevision: cur.Name, UpdateRevision: upd.Name}
	countStatus(&status, set, pods, cur, upd, now)
	if !act {
		return status, nil
	}
	currentSet, err := atRevision(set, cur)
	if err != nil {
		return status, err
	}
	updateSet, err := atRevision(set, upd)
	if err != nil {
		return status, err
	}
	p := &planner{set: set, currentSet: currentSet, updateSet: updateSet, cur: cur, upd: upd, now: now,
		claim: func(ns, name string) (*v1.PersistentVolumeClaim, bool) {
			pvc, err := c.pvcLister.PersistentVolumeClaims(ns).Get(name)
			return pvc, err == nil
		}}
	pl := p.decide(pods)

	creates, deletes := pl.count()
	if creates > 0 || len(deletes) > 0 {
		delKeys := make([]string, len(deletes))
		for i, d := range deletes {
			delKeys[i] = d.Namespace + "/" + d.Name
		}
		c.expectations.Expect(key, creates, delKeys)
	}
	monotonic := set.Spec.PodManagementPolicy != apps.ParallelPodManagement
	for _, phase := range pl.phases {
		if len(phase) == 0 {
			continue
		}
		done, err := c.run(phase, monotonic, func(s step) error {
			return c.do(ctx, key, p, s)
		})
		// Steps never tried will never be observed.
		for _, s := range phase[done:] {
			switch s.kind {
			case stepCreate:
				c.expectations.CreationsObserved(key, 1)
			case stepDelete:
				c.expectations.DeletionObserved(key, s.pod.Namespace+"/"+s.pod.Name)
			}
		}
		for _, s := range phase[:done] {
			if s.kind == stepDelete && s.forUpdate {
				status.CurrentReplicas--
			}
		}
		if err != nil {
			return status, err
		}
	}
	return status, nil
}

// run carries out steps: in order, stopping at the first error
// (OrderedReady), or in slow-start batches of 1, 2, 4, ... stopping after
// a batch with an error (Parallel), so a step that always fails costs a
// few calls. It returns how many steps were tried.
func (c *Controller) run(steps []step, monotonic bool, do func(step) error) (int, error) {
	if monotonic {
		for i, s := range steps {
			if err := do(s); err != nil {
				return i + 1, err
			}
		}
		return len(steps), nil
	}
	pos := 0
	for batch := min(len(steps), 1); batch > 0; batch = min(2*batch, len(steps)-pos, maxBatch) {
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			errs []error
		)
		for _, s := range steps[pos : pos+batch] {
			wg.Add(1)
			go func(s step) {
				defer wg.Done()
				if err := do(s); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}(s)
		}
		wg.Wait()
		pos += batch
		if len(errs) > 0 {
			return pos, utilerrors.NewAggregate(errs)
		}
	}
	return pos, nil
}

// do carries out one step, recording events as upstream.
func (c *Controller) do(ctx context.Context, key string, p *planner, s step) error {
	set := p.set
	switch s.kind {
	case stepCreate:
		err := c.createPod(ctx, set, s.pod)
		if err != nil {
			c.expectations.CreationsObserved(key, 1)
		}
		return err
	case stepDelete:
		err := c.client.CoreV1().Pods(s.pod.Namespace).Delete(ctx, s.pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &s.pod.UID}})
		if err == nil {
			c.recorder.Eventf(set, v1.EventTypeNormal, SuccessfulDeleteReason, "delete Pod %s in StatefulSet %s successful", s.pod.Name, set.Name)
			return nil
		}
		c.expectations.DeletionObserved(key, s.pod.Namespace+"/"+s.pod.Name)
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		c.recorder.Eventf(set, v1.EventTypeWarning, FailedDeleteReason, "delete Pod %s in StatefulSet %s failed error: %v", s.pod.Name, set.Name, err)
		return err
	case stepClaims:
		return c.createClaims(ctx, set, s.pod)
	case stepConform:
		return c.conform(ctx, p.updateSet, s.pod)
	case stepClaimOwner:
		return c.fixClaimOwners(ctx, p.updateSet, s.pod)
	}
	return nil
}

// createPod creates pod's missing claims, then pod, then brings the
// claims' owners in line with the retention policy.
func (c *Controller) createPod(ctx context.Context, set *apps.StatefulSet, pod *v1.Pod) error {
	if err := c.createClaims(ctx, set, pod); err != nil {
		c.recorder.Eventf(set, v1.EventTypeWarning, FailedCreateReason, "create Pod %s in StatefulSet %s failed error: %v", pod.Name, set.Name, err)
		return err
	}
	_, err := c.client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return err
	}
	if err != nil {
		if !apierrors.HasStatusCause(err, v1.NamespaceTerminatingCause) {
			c.recorder.Eventf(set, v1.EventTypeWarning, FailedCreateReason, "create Pod %s in StatefulSet %s failed error: %v", pod.Name, set.Name, err)
		}
		return err
	}
	c.recorder.Eventf(set, v1.EventTypeNormal, SuccessfulCreateReason, "create Pod %s in StatefulSet %s successful", pod.Name, set.Name)
	return c.fixClaimOwners(ctx, set, pod)
}

// createClaims creates the claims of pod's ordinal that do not exist,
// their owners already as the retention policy wants. A claim being
// deleted is an error: the pod must not start on it.
func (c *Controller) createClaims(ctx context.Context, set *apps.StatefulSet, pod *v1.Pod) error {
	var errs []error
	for _, claim := range claimsOf(set, ordinalOf(pod)) {
		got, err := c.pvcLister.PersistentVolumeClaims(claim.Namespace).Get(claim.Name)
		switch {
		case apierrors.IsNotFound(err):
			setClaimOwners(claim, set, pod)
			_, err := c.client.CoreV1().PersistentVolumeClaims(claim.Namespace).Create(ctx, claim, metav1.CreateOptions{})
			switch {
			case err == nil:
				c.recorder.Eventf(set, v1.EventTypeNormal, SuccessfulCreateReason, "create Claim %s Pod %s in StatefulSet %s success", claim.Name, pod.Name, set.Name)
			case apierrors.IsAlreadyExists(err):
			default:
				c.recorder.Eventf(set, v1.EventTypeWarning, FailedCreateReason, "create Claim %s for Pod %s in StatefulSet %s failed error: %v", claim.Name, pod.Name, set.Name, err)
				errs = append(errs, fmt.Errorf("failed to create PVC %s: %w", claim.Name, err))
			}
		case err != nil:
			errs = append(errs, fmt.Errorf("failed to retrieve PVC %s: %w", claim.Name, err))
		case got.DeletionTimestamp != nil:
			errs = append(errs, fmt.Errorf("pvc %s is being deleted", claim.Name))
		}
	}
	return utilerrors.NewAggregate(errs)
}

// fixClaimOwners updates the existing claims of pod whose owners are not
// what the retention policy wants.
func (c *Controller) fixClaimOwners(ctx context.Context, set *apps.StatefulSet, pod *v1.Pod) error {
	var errs []error
	for _, want := range claimsOf(set, ordinalOf(pod)) {
		got, err := c.pvcLister.PersistentVolumeClaims(want.Namespace).Get(want.Name)
		if err != nil {
			continue // missing: created with its owners when needed
		}
		if claimOwnersUpToDate(got, set, pod) {
			continue
		}
		fixed := got.DeepCopy()
		setClaimOwners(fixed, set, pod)
		if _, err := c.client.CoreV1().PersistentVolumeClaims(fixed.Namespace).Update(ctx, fixed, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("could not update claim %s for the retention policy: %w", fixed.Name, err))
		}
	}
	return utilerrors.NewAggregate(errs)
}

// conform gives an existing pod its identity labels, creates its missing
// claims and fixes its claims' owners. (A pod's volumes cannot change
// once created: a pod lacking a template's volume keeps running without
// it until it is replaced.)
func (c *Controller) conform(ctx context.Context, set *apps.StatefulSet, pod *v1.Pod) error {
	if !identityMatches(set, pod) {
		fixed := pod.DeepCopy()
		setIdentity(fixed)
		if _, err := c.client.CoreV1().Pods(fixed.Namespace).Update(ctx, fixed, metav1.UpdateOptions{}); err != nil {
			if !apierrors.IsNotFound(err) {
				c.recorder.Eventf(set, v1.EventTypeWarning, FailedUpdateReason, "update Pod %s in StatefulSet %s failed error: %v", pod.Name, set.Name, err)
			}
			return err
		}
		c.recorder.Eventf(set, v1.EventTypeNormal, SuccessfulUpdateReason, "update Pod %s in StatefulSet %s successful", pod.Name, set.Name)
	}
	if err := c.createClaims(ctx, set, pod); err != nil {
		return err
	}
	return c.fixClaimOwners(ctx, set, pod)
}
