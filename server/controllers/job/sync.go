package job

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	batch "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/cache"
	"k8s.io/kubectl/pkg/util/podutils"
)

// Condition reasons and messages, as upstream's.
const (
	reasonCompletionsReached = "CompletionsReached"
	reasonBackoffLimit       = batch.JobReasonBackoffLimitExceeded
	reasonDeadline           = batch.JobReasonDeadlineExceeded
	reasonPodFailurePolicy   = batch.JobReasonPodFailurePolicy
)

// state is what one sync learned about a Job and its pods.
type state struct {
	job         *batch.Job
	pods        []*v1.Pod // all pods the Job controls
	active      []*v1.Pod
	ready       int32
	terminating int32
	succeeded   int32 // counted + uncounted + newly finished
	failed      int32
	// uncounted is status.uncountedTerminatedPods as sets.
	uncountedSucceeded, uncountedFailed map[types.UID]bool
	// expectedRemoved: finalizers removed by us, not yet seen removed.
	expectedRemoved map[types.UID]struct{}
	// Indexed Jobs: succeeded indexes before and including this sync.
	prevSucceededIndexes, succeededIndexes intervals
	// backoffLimitPerIndex: the failed indexes, and per index awaiting a
	// new pod its last failed pod (see perindex.go).
	failedIndexes   intervals
	awaitingReplace map[int]*v1.Pod
	// finished is the condition the Job is heading for: SuccessCriteriaMet
	// or FailureTarget until its pods are all counted, then Complete or
	// Failed.
	finished   *batch.JobCondition
	newBackoff backoffRecord
}

func uidSet(uids []types.UID) map[types.UID]bool {
	m := make(map[types.UID]bool, len(uids))
	for _, u := range uids {
		m[u] = true
	}
	return m
}

func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	shared, err := c.jobLister.Jobs(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.expectations.Remove(key)
		c.finalizers.remove(key)
		c.backoff.remove(key)
		c.written.Delete(key)
		return nil
	}
	if err != nil {
		return err
	}
	if managedElsewhere(shared) {
		return nil
	}
	if isFinished(shared) {
		c.backoff.remove(key)
		c.finished.Delete(shared.UID)
		return nil
	}
	if _, ok := c.finished.Load(shared.UID); ok {
		return nil // our Complete/Failed write is not in the cache yet
	}
	if c.stale(key, shared) {
		return nil // the watch will bring our last write, and a sync with it
	}
	if m := shared.Spec.CompletionMode; m != nil && *m != batch.NonIndexedCompletion && *m != batch.IndexedCompletion {
		c.recorder.Event(shared, v1.EventTypeWarning, "UnknownCompletionMode", "Skipped Job sync because completion mode is unknown")
		return nil
	}
	job := shared.DeepCopy()
	if job.Status.UncountedTerminatedPods == nil {
		job.Status.UncountedTerminatedPods = &batch.UncountedTerminatedPods{}
	}
	// Read the expectations before the pods: a pod arriving in between
	// only defers this Job's management to the next sync.
	satisfied := c.expectations.Satisfied(key)
	pods, err := c.podsForJob(ctx, job)
	if err != nil {
		return err
	}
	now := c.now()
	s := &state{
		job: job, pods: pods,
		uncountedSucceeded: uidSet(job.Status.UncountedTerminatedPods.Succeeded),
		uncountedFailed:    uidSet(job.Status.UncountedTerminatedPods.Failed),
		expectedRemoved:    c.finalizers.expected(key),
	}
	for _, p := range pods {
		if isActive(p) {
			s.active = append(s.active, p)
		} else if isTerminating(p) {
			s.terminating++
		}
	}
	s.ready = countReady(s.active)
	active := int32(len(s.active))
	newSucceeded, newFailed := s.newlyFinished()
	s.succeeded = job.Status.Succeeded + int32(len(newSucceeded)) + int32(len(s.uncountedSucceeded))
	s.failed = job.Status.Failed + int32(countedFailures(job, newFailed)) + int32(len(s.uncountedFailed))

	if job.Status.StartTime == nil && !suspended(job) {
		t := metav1.NewTime(now)
		job.Status.StartTime = &t
	}
	s.newBackoff = nextBackoff(c.backoff.get(key), newSucceeded, newFailed)

	// The end state, in upstream's order: an earlier sync's verdict stands;
	// then failure (pod failure policy, backoff limit, deadline); then
	// success.
	if cond := findCondition(job.Status.Conditions, batch.JobSuccessCriteriaMet); cond != nil && cond.Status == v1.ConditionTrue {
		s.finished = cond.DeepCopy()
	} else if cond := findCondition(job.Status.Conditions, batch.JobFailureTarget); cond != nil && cond.Status == v1.ConditionTrue {
		f := newCondition(batch.JobFailed, v1.ConditionTrue, cond.Reason, cond.Message, now)
		s.finished = &f
	} else if msg := failJobMessage(job, pods); msg != nil {
		f := newCondition(batch.JobFailureTarget, v1.ConditionTrue, reasonPodFailurePolicy, *msg, now)
		s.finished = &f
	}
	if s.finished == nil {
		switch {
		case s.failed > *job.Spec.BackoffLimit || pastBackoffLimitOnFailure(job, pods):
			f := newCondition(batch.JobFailureTarget, v1.ConditionTrue, reasonBackoffLimit, "Job has reached the specified backoff limit", now)
			s.finished = &f
		case c.pastDeadline(job):
			f := newCondition(batch.JobFailureTarget, v1.ConditionTrue, reasonDeadline, "Job was active longer than specified deadline", now)
			s.finished = &f
		case job.Spec.ActiveDeadlineSeconds != nil && !suspended(job):
			left := time.Duration(*job.Spec.ActiveDeadlineSeconds)*time.Second - now.Sub(job.Status.StartTime.Time)
			c.queue.AddAfter(key, left)
		}
	}
	if isIndexed(job) {
		s.prevSucceededIndexes, s.succeededIndexes = succeededIndexes(job, pods)
		s.succeeded = int32(s.succeededIndexes.total())
		if hasBackoffLimitPerIndex(job) {
			s.failedIndexes = calcFailedIndexes(job, pods)
			failed, done := s.failedIndexes.total(), s.failedIndexes.total()+s.succeededIndexes.total()
			if s.finished == nil {
				switch {
				case job.Spec.MaxFailedIndexes != nil && failed > int(*job.Spec.MaxFailedIndexes):
					f := newCondition(batch.JobFailureTarget, v1.ConditionTrue, reasonMaxFailedIndexes, "Job has exceeded the specified maximal number of failed indexes", now)
					s.finished = &f
				case failed > 0 && done >= int(*job.Spec.Completions):
					f := newCondition(batch.JobFailureTarget, v1.ConditionTrue, reasonFailedIndexes, "Job has failed indexes", now)
					s.finished = &f
				}
			}
			s.awaitingReplace = podsAwaitingReplacement(s)
		}
		// successPolicy: a matched rule ends the Job as succeeded; the
		// pods still running are stopped and not counted as failures.
		if s.finished == nil {
			if msg, met := matchSuccessPolicy(job.Spec.SuccessPolicy, *job.Spec.Completions, s.succeededIndexes); met {
				f := newCondition(batch.JobSuccessCriteriaMet, v1.ConditionTrue, reasonSuccessPolicy, msg, now)
				s.finished = &f
			}
		}
	}

	var manageErr error
	conditionsChanged := false
	if s.finished != nil {
		// Finishing (failed, or successPolicy met): stop every active pod.
		// The finalizers stay; tracking removes them once the pods are
		// counted (as failed only if the Job failed).
		deleted, deletedReady, err := c.deletePods(ctx, job, key, s.active, false)
		if deleted != active || !satisfied {
			s.finished = nil // not all gone, or the cache is behind: decide later
		}
		active -= deleted
		s.terminating += deleted
		s.ready -= deletedReady
		manageErr = err
	} else {
		managed := false
		if satisfied && job.DeletionTimestamp == nil {
			active, manageErr = c.manage(ctx, key, s)
			managed = true
		}
		complete := false
		if job.Spec.Completions == nil {
			// Any success ends a work-queue Job once the rest have stopped.
			complete = s.succeeded > 0 && active == 0
		} else {
			complete = s.succeeded >= *job.Spec.Completions && active == 0
		}
		switch {
		case complete:
			f := newCondition(batch.JobSuccessCriteriaMet, v1.ConditionTrue, reasonCompletionsReached, "Reached expected number of succeeded pods", now)
			s.finished = &f
		case managed && suspended(job):
			var changed bool
			job.Status.Conditions, changed = setCondition(job.Status.Conditions, batch.JobSuspended, v1.ConditionTrue, "JobSuspended", "Job suspended", now)
			if changed {
				conditionsChanged = true
				c.recorder.Event(job, v1.EventTypeNormal, "Suspended", "Job suspended")
			}
		case managed:
			var changed bool
			job.Status.Conditions, changed = setCondition(job.Status.Conditions, batch.JobSuspended, v1.ConditionFalse, "JobResumed", "Job resumed", now)
			if changed {
				conditionsChanged = true
				c.recorder.Event(job, v1.EventTypeNormal, "Resumed", "Job resumed")
				// activeDeadlineSeconds counts continuous activity: it
				// starts again on resume.
				t := metav1.NewTime(now)
				job.Status.StartTime = &t
			}
		}
	}

	needsFlush := conditionsChanged || active != job.Status.Active || job.Status.Ready == nil || *job.Status.Ready != s.ready ||
		job.Status.Terminating == nil || *job.Status.Terminating != s.terminating
	job.Status.Active = active
	job.Status.Ready = &s.ready
	job.Status.Terminating = &s.terminating
	if err := c.track(ctx, key, s, needsFlush); err != nil {
		return fmt.Errorf("tracking status: %w", err)
	}
	return manageErr
}

// newlyFinished returns the finished pods not yet counted: they still have
// the finalizer, are not in the uncounted lists, and (Indexed) have a valid
// index.
func (s *state) newlyFinished() (succeeded, failed []*v1.Pod) {
	for _, p := range s.pods {
		if !hasTrackingFinalizer(p) || s.uncountedSucceeded[p.UID] || s.uncountedFailed[p.UID] {
			continue
		}
		if _, ok := s.expectedRemoved[p.UID]; ok {
			continue
		}
		if isIndexed(s.job) && !validIndex(s.job, p) {
			continue
		}
		if p.Status.Phase == v1.PodSucceeded {
			succeeded = append(succeeded, p)
		} else if isFailed(p, s.job) {
			failed = append(failed, p)
		}
	}
	return succeeded, failed
}

func countedFailures(job *batch.Job, failed []*v1.Pod) int {
	n := 0
	for _, p := range failed {
		if _, counts := matchFailurePolicy(job.Spec.PodFailurePolicy, p); counts {
			n++
		}
	}
	return n
}

func failJobMessage(job *batch.Job, pods []*v1.Pod) *string {
	if job.Spec.PodFailurePolicy == nil {
		return nil
	}
	for _, p := range pods {
		if isFailed(p, job) {
			if msg, _ := matchFailurePolicy(job.Spec.PodFailurePolicy, p); msg != nil {
				return msg
			}
		}
	}
	return nil
}

// pastBackoffLimitOnFailure: under restartPolicy OnFailure failures are
// container restarts in running pods, summed against backoffLimit.
func pastBackoffLimitOnFailure(job *batch.Job, pods []*v1.Pod) bool {
	if job.Spec.Template.Spec.RestartPolicy != v1.RestartPolicyOnFailure {
		return false
	}
	var restarts int32
	for _, p := range pods {
		if p.Status.Phase != v1.PodRunning && p.Status.Phase != v1.PodPending {
			continue
		}
		for _, cs := range p.Status.InitContainerStatuses {
			restarts += cs.RestartCount
		}
		for _, cs := range p.Status.ContainerStatuses {
			restarts += cs.RestartCount
		}
	}
	if *job.Spec.BackoffLimit == 0 {
		return restarts > 0
	}
	return restarts >= *job.Spec.BackoffLimit
}

func (c *Controller) pastDeadline(job *batch.Job) bool {
	if job.Spec.ActiveDeadlineSeconds == nil || job.Status.StartTime == nil || suspended(job) {
		return false
	}
	return c.now().Sub(job.Status.StartTime.Time) >= time.Duration(*job.Spec.ActiveDeadlineSeconds)*time.Second
}

// succeededIndexes returns status.completedIndexes and the same plus the
// indexes of succeeded pods not yet counted.
func succeededIndexes(job *batch.Job, pods []*v1.Pod) (prev, now intervals) {
	completions := int(*job.Spec.Completions)
	prev = parseIntervals(job.Status.CompletedIndexes, completions)
	var add []int
	for _, p := range pods {
		if p.Status.Phase == v1.PodSucceeded && hasTrackingFinalizer(p) && validIndex(job, p) {
			add = append(add, completionIndex(p))
		}
	}
	return prev, prev.with(add)
}

// manage creates or deletes pods towards the wanted number of active ones
// and returns the resulting active count.
func (c *Controller) manage(ctx context.Context, key string, s *state) (int32, error) {
	job := s.job
	active := int32(len(s.active))
	if suspended(job) {
		deleted, deletedReady, err := c.deletePods(ctx, job, key, rankForRemoval(job, s.active, len(s.active)), true)
		s.terminating += deleted
		s.ready -= deletedReady
		return active - deleted, err
	}
	want := wantActive(job, s.succeeded, active)
	if rm := rankForRemoval(job, s.active, int(max(active-want, 0))); len(rm) > 0 {
		if len(rm) > MaxPodCreateDeletePerSync {
			rm = rm[:MaxPodCreateDeletePerSync]
		}
		// Deleting takes precedence: one kind of step per sync.
		deleted, deletedReady, err := c.deletePods(ctx, job, key, rm, true)
		s.terminating += deleted
		s.ready -= deletedReady
		return active - deleted, err
	}
	var terminating int32
	if onlyReplaceFailed(job) {
		terminating = s.terminating
	}
	diff := want - terminating - active
	if diff <= 0 {
		return active, nil
	}
	if !hasBackoffLimitPerIndex(job) {
		// Per index, each index waits on its own failures (below).
		if left := s.newBackoff.remaining(c.now(), c.PodFailureBackoff, c.MaxBackoff); left > 0 {
			c.queue.AddAfter(key, left)
			return active, nil
		}
	}
	diff = min(diff, MaxPodCreateDeletePerSync)
	var indexes []int
	if isIndexed(job) {
		var busy []int
		for _, p := range s.active {
			if ix := completionIndex(p); ix != unknownIndex {
				busy = append(busy, ix)
			}
		}
		if onlyReplaceFailed(job) {
			for _, p := range s.pods {
				if ix := completionIndex(p); isTerminating(p) && ix != unknownIndex {
					busy = append(busy, ix)
				}
			}
		}
		done := s.succeededIndexes
		if hasBackoffLimitPerIndex(job) {
			done = canonical(append(append([]interval(nil), done...), s.failedIndexes...))
		}
		indexes = pendingIndexes(done, busy, int(diff), int(*job.Spec.Completions))
		if hasBackoffLimitPerIndex(job) {
			var wait time.Duration
			if indexes, wait = c.indexesReadyNow(indexes, s.awaitingReplace); wait > 0 {
				c.queue.AddAfter(key, wait)
				return active, nil
			}
		}
		diff = int32(len(indexes))
	}
	created, err := c.createPods(ctx, job, key, int(diff), indexes, s.awaitingReplace)
	return active + int32(created), err
}

// wantActive is how many pods should run: parallelism, but never more than
// the completions still missing; without completions, once one pod
// succeeded, whatever still runs.
func wantActive(job *batch.Job, succeeded, active int32) int32 {
	parallelism := *job.Spec.Parallelism
	if job.Spec.Completions == nil {
		if succeeded > 0 {
			return active
		}
		return parallelism
	}
	return max(min(*job.Spec.Completions-succeeded, parallelism), 0)
}

// rankForRemoval picks at least n active pods to delete: Indexed Jobs'
// duplicate or out-of-range indexes first, then the least advanced pods
// (unscheduled < scheduled, pending < running, not ready < ready, newer).
func rankForRemoval(job *batch.Job, pods []*v1.Pod, n int) []*v1.Pod {
	var rm, rest []*v1.Pod
	if isIndexed(job) {
		rm, rest = duplicateIndexPods(job, pods)
	} else {
		rest = append(rest, pods...)
	}
	if len(rm) < n {
		sort.Sort(podutils.ActivePods(rest))
		rm = append(rm, rest[:min(n-len(rm), len(rest))]...)
	}
	return rm
}

// createPods creates n pods (for Indexed Jobs, one per index) in batches
// that start at one and double, so that a Job whose pods all fail to
// create (quota, admission) costs a few requests, not n.
func (c *Controller) createPods(ctx context.Context, job *batch.Job, key string, n int, indexes []int, replaced map[int]*v1.Pod) (int, error) {
	c.expectations.Expect(key, n, nil)
	template := job.Spec.Template.DeepCopy()
	if isIndexed(job) {
		addIndexEnv(template)
	}
	if !hasString(template.Finalizers, batch.JobTrackingFinalizer) {
		template.Finalizers = append(template.Finalizers, batch.JobTrackingFinalizer)
	}
	var created atomic.Int32
	var errs []error
	var mu sync.Mutex
	next := 0
	for batchSize := min(n, 1); next < n; batchSize = min(2*batchSize, n-next) {
		var wg sync.WaitGroup
		failedBefore := len(errs)
		for i := 0; i < batchSize; i++ {
			ix := unknownIndex
			if indexes != nil {
				ix = indexes[next+i]
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := c.createPod(ctx, job, template, ix, replaced[ix])
				if err == nil {
					created.Add(1)
					return
				}
				c.expectations.CreationsObserved(key, 1) // never to be seen
				if apierrors.HasStatusCause(err, v1.NamespaceTerminatingCause) {
					return
				}
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}()
		}
		wg.Wait()
		next += batchSize
		if len(errs) > failedBefore {
			// Skip the rest; the next sync tries again.
			c.expectations.CreationsObserved(key, n-next)
			break
		}
	}
	return int(created.Load()), utilerrors.NewAggregate(errs)
}

// createPod creates one pod; for an Indexed Job with backoffLimitPerIndex,
// replaced is the index's failed pod it replaces (nil if none).
func (c *Controller) createPod(ctx context.Context, job *batch.Job, template *v1.PodTemplateSpec, ix int, replaced *v1.Pod) error {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    job.Name + "-",
			Labels:          copyMap(template.Labels),
			Annotations:     copyMap(template.Annotations),
			Finalizers:      append([]string(nil), template.Finalizers...),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, controllerKind)},
		},
		Spec: *template.Spec.DeepCopy(),
	}
	if ix != unknownIndex {
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		if pod.Labels == nil {
			pod.Labels = map[string]string{}
		}
		pod.Annotations[batch.JobCompletionIndexAnnotation] = strconv.Itoa(ix)
		pod.Labels[batch.JobCompletionIndexAnnotation] = strconv.Itoa(ix)
		pod.Spec.Hostname = fmt.Sprintf("%s-%d", job.Name, ix)
		pod.GenerateName = generateNameWithIndex(job.Name, ix)
		if hasBackoffLimitPerIndex(job) {
			setIndexFailureCounts(pod, job, replaced)
		}
	}
	if len(pod.Labels) == 0 {
		return fmt.Errorf("unable to create pods, no labels")
	}
	created, err := c.client.CoreV1().Pods(job.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		if !apierrors.HasStatusCause(err, v1.NamespaceTerminatingCause) {
			c.recorder.Eventf(job, v1.EventTypeWarning, "FailedCreate", "Error creating: %v", err)
		}
		return err
	}
	c.recorder.Eventf(job, v1.EventTypeNormal, "SuccessfulCreate", "Created pod: %v", created.Name)
	return nil
}

// generateNameWithIndex keeps "-<index>-" whole within the 58 characters a
// generated name prefix may have.
func generateNameWithIndex(job string, ix int) string {
	suffix := "-" + strconv.Itoa(ix) + "-"
	const maxPrefix = 58
	if len(job)+len(suffix) > maxPrefix {
		job = job[:maxPrefix-len(suffix)]
	}
	return job + suffix
}

// addIndexEnv gives every container JOB_COMPLETION_INDEX from the pod's
// index label through the downward API, as upstream does; a container
// that sets the variable itself keeps its own.
func addIndexEnv(t *v1.PodTemplateSpec) {
	add := func(c *v1.Container) {
		for _, e := range c.Env {
			if e.Name == completionIndexEnv {
				return
			}
		}
		c.Env = append(c.Env, v1.EnvVar{Name: completionIndexEnv, ValueFrom: &v1.EnvVarSource{
			FieldRef: &v1.ObjectFieldSelector{FieldPath: fmt.Sprintf("metadata.labels['%s']", batch.JobCompletionIndexAnnotation)}}})
	}
	for i := range t.Spec.InitContainers {
		add(&t.Spec.InitContainers[i])
	}
	for i := range t.Spec.Containers {
		add(&t.Spec.Containers[i])
	}
}

// deletePods deletes pods in parallel and returns how many (and how many
// Ready ones) are going. With dropFinalizer the tracking finalizer goes
// first: such a pod is being replaced, not counted (an active pod removed
// for parallelism or suspend is no failure). Without it (the Job failed)
// the pods stay until tracking counts them.
func (c *Controller) deletePods(ctx context.Context, job *batch.Job, key string, pods []*v1.Pod, dropFinalizer bool) (deleted, deletedReady int32, err error) {
	if len(pods) == 0 {
		return 0, 0, nil
	}
	if dropFinalizer {
		keys := make([]string, len(pods))
		for i, p := range pods {
			keys[i], _ = cache.MetaNamespaceKeyFunc(p)
		}
		c.expectations.Expect(key, 0, keys)
	}
	var ok, okReady atomic.Int32
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for _, p := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fail := func(err error) {
				if dropFinalizer {
					c.expectations.DeletionObserved(key, podKey(p))
				}
				if apierrors.IsNotFound(err) {
					return
				}
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
			if dropFinalizer {
				if err := c.removeFinalizer(ctx, p); err != nil {
					fail(fmt.Errorf("removing tracking finalizer: %w", err))
					return
				}
			}
			err := c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				c.recorder.Eventf(job, v1.EventTypeWarning, "FailedDelete", "Error deleting: %v", err)
				fail(err)
				return
			}
			if err == nil {
				c.recorder.Eventf(job, v1.EventTypeNormal, "SuccessfulDelete", "Deleted pod: %v", p.Name)
			} else if dropFinalizer {
				c.expectations.DeletionObserved(key, podKey(p))
			}
			ok.Add(1)
			if podutils.IsPodReady(p) {
				okReady.Add(1)
			}
		}()
	}
	wg.Wait()
	return ok.Load(), okReady.Load(), utilerrors.NewAggregate(errs)
}

// podsForJob returns the pods the Job controls, adopting matching orphans
// (with the tracking finalizer) and releasing its pods that no longer
// match, after a live check that the Job is still the one we cached.
func (c *Controller) podsForJob(ctx context.Context, job *batch.Job) ([]*v1.Pod, error) {
	sel, err := metav1.LabelSelectorAsSelector(job.Spec.Selector)
	if err != nil || sel.Empty() {
		return nil, nil
	}
	all, err := c.podLister.Pods(job.Namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	var (
		owned     []*v1.Pod
		errs      []error
		checkOnce sync.Once
		checkErr  error
	)
	canAdopt := func() error {
		checkOnce.Do(func() {
			fresh, err := c.client.BatchV1().Jobs(job.Namespace).Get(ctx, job.Name, metav1.GetOptions{})
			switch {
			case err != nil:
				checkErr = err
			case fresh.UID != job.UID:
				checkErr = fmt.Errorf("original Job %s/%s is gone: got uid %v, wanted %v", job.Namespace, job.Name, fresh.UID, job.UID)
			case fresh.DeletionTimestamp != nil:
				checkErr = fmt.Errorf("%s/%s has just been deleted at %v", job.Namespace, job.Name, fresh.DeletionTimestamp)
			}
		})
		return checkErr
	}
	for _, p := range all {
		matches := sel.Matches(labels.Set(p.Labels))
		ref := metav1.GetControllerOf(p)
		switch {
		case ref != nil && ref.UID != job.UID:
			continue
		case ref != nil && matches:
			owned = append(owned, p)
		case ref != nil:
			if job.DeletionTimestamp == nil {
				if err := c.patchOwner(ctx, job, p, false); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsInvalid(err) {
					errs = append(errs, err)
				}
			}
		case matches && job.DeletionTimestamp == nil && p.DeletionTimestamp == nil:
			if err := canAdopt(); err != nil {
				errs = append(errs, err)
				continue
			}
			if err := c.patchOwner(ctx, job, p, true); err != nil {
				if !apierrors.IsNotFound(err) {
					errs = append(errs, err)
				}
				continue
			}
			owned = append(owned, p)
		}
	}
	return owned, utilerrors.NewAggregate(errs)
}

// patchOwner adopts (with the tracking finalizer, so the adopted pod is
// counted) or releases a pod, with the pod's UID as precondition.
func (c *Controller) patchOwner(ctx context.Context, job *batch.Job, p *v1.Pod, adopt bool) error {
	meta := map[string]interface{}{"uid": p.UID}
	if adopt {
		meta["ownerReferences"] = []map[string]interface{}{{
			"apiVersion": controllerKind.GroupVersion().String(), "kind": controllerKind.Kind,
			"name": job.Name, "uid": job.UID, "controller": true, "blockOwnerDeletion": true,
		}}
		meta["finalizers"] = []string{batch.JobTrackingFinalizer}
	} else {
		meta["ownerReferences"] = []map[string]interface{}{{"$patch": "delete", "uid": job.UID}}
	}
	data, err := json.Marshal(map[string]interface{}{"metadata": meta})
	if err != nil {
		return err
	}
	_, err = c.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, data, metav1.PatchOptions{})
	return err
}

func copyMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func hasString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// podKey is p's key in the pod informer, as the expectations name pods.
func podKey(p *v1.Pod) string {
	k, _ := cache.MetaNamespaceKeyFunc(p)
	return k
}
