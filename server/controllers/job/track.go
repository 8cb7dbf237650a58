package job

import (
	"context"
	"fmt"
	"sort"
	"sync"

	batch "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
)

// track counts finished pods through status.uncountedTerminatedPods and
// the pods' finalizers (see the package comment), then, once nothing is
// left uncounted or terminating, turns the interim condition into
// Complete or Failed.
func (c *Controller) track(ctx context.Context, key string, s *state, needsFlush bool) error {
	job := s.job
	indexed := isIndexed(job)
	if indexed {
		// Completed indexes enter in order.
		sort.SliceStable(s.pods, func(i, j int) bool { return completionIndex(s.pods[i]) < completionIndex(s.pods[j]) })
	}
	withFinalizer := map[types.UID]bool{}
	for _, p := range s.pods {
		if _, gone := s.expectedRemoved[p.UID]; hasTrackingFinalizer(p) && !gone {
			withFinalizer[p.UID] = true
		}
	}
	if moveCounted(&job.Status, withFinalizer) {
		needsFlush = true
	}
	uncounted := job.Status.UncountedTerminatedPods
	var toRelease []*v1.Pod
	var newIndexes []int
	full := false
	for _, p := range s.pods {
		if !withFinalizer[p.UID] {
			continue // counted in an earlier sync
		}
		failed := isFailed(p, job)
		// A pod's finalizer may go once the pod is terminal, or when the
		// whole Job is ending.
		if !(job.DeletionTimestamp != nil || s.finished != nil || p.Status.Phase == v1.PodSucceeded || failed) {
			continue
		}
		if job.DeletionTimestamp == nil && s.finished == nil && p.Status.Phase != v1.PodSucceeded {
			// backoffLimitPerIndex: the index's last failed pod keeps its
			// finalizer (and is counted) once its replacement exists.
			if r, ok := s.awaitingReplace[completionIndex(p)]; ok && r.UID == p.UID {
				continue
			}
		}
		toRelease = append(toRelease, p)
		switch {
		case p.Status.Phase == v1.PodSucceeded && !s.uncountedFailed[p.UID]:
			if indexed {
				// The index alone tells whether it was counted.
				if ix := completionIndex(p); validIndex(job, p) && !s.prevSucceededIndexes.has(ix) {
					newIndexes = append(newIndexes, ix)
					needsFlush = true
				}
			} else if !s.uncountedSucceeded[p.UID] {
				uncounted.Succeeded = append(uncounted.Succeeded, p.UID)
				needsFlush = true
			}
		case failed || (s.finished != nil && s.finished.Type != batch.JobSuccessCriteriaMet):
			// Once the Job fails, every pod not succeeded counts failed.
			if s.uncountedFailed[p.UID] || (indexed && !validIndex(job, p)) {
				break
			}
			if _, counts := matchFailurePolicy(job.Spec.PodFailurePolicy, p); counts {
				uncounted.Failed = append(uncounted.Failed, p.UID)
				needsFlush = true
			}
		}
		if len(newIndexes)+len(uncounted.Succeeded)+len(uncounted.Failed) >= MaxUncountedPods {
			full = true // the rest next sync; our own writes requeue the Job
			break
		}
	}
	if indexed {
		s.succeededIndexes = s.succeededIndexes.with(newIndexes)
		if str := s.succeededIndexes.String(); str != job.Status.CompletedIndexes {
			job.Status.CompletedIndexes = str
			needsFlush = true
		}
		job.Status.Succeeded = int32(s.succeededIndexes.total())
		var failedIndexes *string
		if hasBackoffLimitPerIndex(job) {
			str := s.failedIndexes.String()
			failedIndexes = &str
		}
		if !equalStringPtr(job.Status.FailedIndexes, failedIndexes) {
			job.Status.FailedIndexes = failedIndexes
			needsFlush = true
		}
	}
	now := c.now()
	if s.finished != nil && s.finished.Type == batch.JobFailureTarget {
		// Written before any finalizer goes, so that the reason survives
		// a crash between the two.
		job.Status.Conditions = append(job.Status.Conditions, *s.finished)
		needsFlush = true
		f := newCondition(batch.JobFailed, v1.ConditionTrue, s.finished.Reason, s.finished.Message, now)
		s.finished = &f
	}
	if s.finished != nil && s.finished.Type == batch.JobSuccessCriteriaMet {
		if cond := findCondition(job.Status.Conditions, batch.JobSuccessCriteriaMet); cond == nil || cond.Status != v1.ConditionTrue {
			job.Status.Conditions = append(job.Status.Conditions, *s.finished)
			needsFlush = true
		}
		f := newCondition(batch.JobComplete, v1.ConditionTrue, s.finished.Reason, s.finished.Message, now)
		s.finished = &f
	}

	// 1. The uncounted UIDs (and interim condition) reach the API first.
	if needsFlush {
		updated, err := c.writeStatus(ctx, key, job)
		if err != nil {
			return fmt.Errorf("adding uncounted pods to status: %w", err)
		}
		job = updated
		s.job = updated
		c.backoff.set(key, s.newBackoff)
		needsFlush = false
	}
	// 2. Then the finalizers go.
	var releaseErr error
	if len(toRelease) > 0 {
		done, err := c.releasePods(ctx, key, toRelease)
		for i, p := range toRelease {
			if done[i] {
				delete(withFinalizer, p.UID)
			}
		}
		releaseErr = err
	}
	// 3. Then the released pods move from uncounted to the counters.
	if moveCounted(&job.Status, withFinalizer) {
		needsFlush = true
	}
	if releaseErr != nil {
		if needsFlush {
			if _, err := c.writeStatus(ctx, key, job); err != nil {
				return fmt.Errorf("removing uncounted pods from status: %w", err)
			}
		}
		return releaseErr
	}
	finishedNow := !full && c.enactFinished(s)
	if finishedNow || needsFlush {
		updated, err := c.writeStatus(ctx, key, job)
		if err != nil {
			return fmt.Errorf("removing uncounted pods from status: %w", err)
		}
		if finishedNow {
			c.finished.Store(updated.UID, struct{}{})
			c.recordFinished(updated, s.finished)
		}
	}
	return nil
}

// moveCounted moves the uncounted UIDs whose pods no longer hold the
// finalizer into succeeded/failed, and reports a change.
func moveCounted(st *batch.JobStatus, withFinalizer map[types.UID]bool) bool {
	u := st.UncountedTerminatedPods
	keep := func(list []types.UID) ([]types.UID, int32) {
		var out []types.UID
		for _, uid := range list {
			if withFinalizer[uid] {
				out = append(out, uid)
			}
		}
		return out, int32(len(list) - len(out))
	}
	var ns, nf int32
	u.Succeeded, ns = keep(u.Succeeded)
	u.Failed, nf = keep(u.Failed)
	st.Succeeded += ns
	st.Failed += nf
	return ns > 0 || nf > 0
}

// releasePods removes the tracking finalizer from pods, expecting each
// removal before it is made so that a sync in between never counts the
// pod again. done[i] reports pod i's finalizer gone (or the pod gone).
func (c *Controller) releasePods(ctx context.Context, key string, pods []*v1.Pod) ([]bool, error) {
	uids := make([]types.UID, len(pods))
	for i, p := range pods {
		uids[i] = p.UID
	}
	c.finalizers.expectRemoved(key, uids)
	done := make([]bool, len(pods))
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for i, p := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.removeFinalizer(ctx, p); err != nil {
				c.finalizers.observed(key, p.UID) // no update will come
				mu.Lock()
				errs = append(errs, fmt.Errorf("removing tracking finalizer: %w", err))
				mu.Unlock()
				return
			}
			done[i] = true
		}()
	}
	wg.Wait()
	return done, utilerrors.NewAggregate(errs)
}

// enactFinished sets Complete or Failed once every pod is counted and none
// is still terminating.
func (c *Controller) enactFinished(s *state) bool {
	if s.finished == nil {
		return false
	}
	job := s.job
	if u := job.Status.UncountedTerminatedPods; u != nil && len(u.Succeeded)+len(u.Failed) > 0 {
		return false
	}
	if s.terminating > 0 {
		return false
	}
	f := s.finished
	job.Status.Conditions, _ = setCondition(job.Status.Conditions, f.Type, f.Status, f.Reason, f.Message, c.now())
	if f.Type == batch.JobComplete {
		t := findCondition(job.Status.Conditions, batch.JobComplete).LastTransitionTime
		job.Status.CompletionTime = &t
	}
	return true
}

func (c *Controller) recordFinished(job *batch.Job, f *batch.JobCondition) {
	if f.Type == batch.JobComplete {
		if job.Spec.Completions != nil && job.Status.Succeeded > *job.Spec.Completions {
			c.recorder.Event(job, v1.EventTypeWarning, "TooManySucceededPods", "Too many succeeded pods running after completion count reached")
		}
		c.recorder.Event(job, v1.EventTypeNormal, "Completed", "Job completed")
		return
	}
	c.recorder.Event(job, v1.EventTypeWarning, f.Reason, f.Message)
}

func (c *Controller) writeStatus(ctx context.Context, key string, job *batch.Job) (*batch.Job, error) {
	updated, err := c.client.BatchV1().Jobs(job.Namespace).UpdateStatus(ctx, job, metav1.UpdateOptions{})
	if err != nil {
		return nil, err
	}
	if updated.Status.UncountedTerminatedPods == nil {
		updated.Status.UncountedTerminatedPods = &batch.UncountedTerminatedPods{}
	}
	c.recordWritten(key, updated)
	return updated, nil
}

func equalStringPtr(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
