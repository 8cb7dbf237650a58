package job

import (
	"math"
	"strconv"
	"time"

	batch "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
)

// backoffLimitPerIndex, as upstream: an Indexed Job's indexes fail on their
// own. Each replacement pod carries, in the annotation
// batch.kubernetes.io/job-index-failure-count, how many pods of its index
// failed before it (and in job-index-ignored-failure-count those the pod
// failure policy ignored). A failed pod whose count already reached
// backoffLimitPerIndex, or that matched a FailIndex rule, fails its index:
// the index enters status.failedIndexes and gets no new pod. To carry the
// count over, the finalizer of an index's last failed pod stays until its
// replacement exists.

const (
	reasonMaxFailedIndexes = batch.JobReasonMaxFailedIndexesExceeded
	reasonFailedIndexes    = batch.JobReasonFailedIndexes
)

func hasBackoffLimitPerIndex(job *batch.Job) bool { return job.Spec.BackoffLimitPerIndex != nil }

// annotationCount reads a count annotation; absent, malformed, negative or
// beyond int32 reads as 0, as upstream (the annotation is user-writable).
func annotationCount(p *v1.Pod, key string) int32 {
	v, ok := p.Annotations[key]
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > math.MaxInt32 {
		return 0
	}
	return int32(n)
}

func indexFailureCount(p *v1.Pod) int32 {
	return annotationCount(p, batch.JobIndexFailureCountAnnotation)
}

// indexAbsoluteFailureCount counts the ignored failures too: the per-index
// backoff delay grows with them.
func indexAbsoluteFailureCount(p *v1.Pod) int32 {
	return indexFailureCount(p) + annotationCount(p, batch.JobIndexIgnoredFailureCountAnnotation)
}

// isIndexFailed: p failed and either matched a FailIndex rule or was the
// index's attempt number backoffLimitPerIndex+1 (a counted failure).
func isIndexFailed(job *batch.Job, p *v1.Pod) bool {
	if !isFailed(p, job) {
		return false
	}
	_, counts, action := matchFailurePolicyAction(job.Spec.PodFailurePolicy, p)
	if action != nil && *action == batch.PodFailurePolicyActionFailIndex {
		return true
	}
	return counts && indexFailureCount(p) >= *job.Spec.BackoffLimitPerIndex
}

// calcFailedIndexes is status.failedIndexes plus the indexes of pods, not
// yet counted (still holding the finalizer), that failed their index.
func calcFailedIndexes(job *batch.Job, pods []*v1.Pod) intervals {
	completions := int(*job.Spec.Completions)
	var prev intervals
	if job.Status.FailedIndexes != nil {
		prev = parseIntervals(*job.Status.FailedIndexes, completions)
	}
	var add []int
	for _, p := range pods {
		if hasTrackingFinalizer(p) && validIndex(job, p) && isIndexFailed(job, p) {
			add = append(add, completionIndex(p))
		}
	}
	return prev.with(add)
}

// podsAwaitingReplacement returns, per index neither succeeded, failed nor
// running, its latest failed pod still holding the finalizer: the pod its
// replacement takes the failure count from, and whose finalizer (so the
// pod) stays until then.
func podsAwaitingReplacement(s *state) map[int]*v1.Pod {
	job := s.job
	activeIx := map[int]bool{}
	for _, p := range s.active {
		if ix := completionIndex(p); ix != unknownIndex {
			activeIx[ix] = true
		}
	}
	out := map[int]*v1.Pod{}
	for _, p := range s.pods {
		if !hasTrackingFinalizer(p) || s.uncountedSucceeded[p.UID] || s.uncountedFailed[p.UID] {
			continue
		}
		if _, ok := s.expectedRemoved[p.UID]; ok {
			continue
		}
		if !validIndex(job, p) || !isFailed(p, job) {
			continue
		}
		ix := completionIndex(p)
		if s.succeededIndexes.has(ix) || s.failedIndexes.has(ix) || activeIx[ix] {
			continue
		}
		if last, ok := out[ix]; ok {
			if indexAbsoluteFailureCount(last) <= indexAbsoluteFailureCount(p) && !finishedAt(p).Before(finishedAt(last)) {
				out[ix] = p
			}
			continue
		}
		out[ix] = p
	}
	return out
}

// newIndexFailureCounts are the counts for the pod that replaces
// replaced (nil: the index's first pod).
func newIndexFailureCounts(job *batch.Job, replaced *v1.Pod) (failures, ignored int32) {
	if replaced == nil {
		return 0, 0
	}
	failures = indexFailureCount(replaced)
	ignored = annotationCount(replaced, batch.JobIndexIgnoredFailureCountAnnotation)
	if _, counts := matchFailurePolicy(job.Spec.PodFailurePolicy, replaced); counts {
		failures++
	} else {
		ignored++
	}
	return failures, ignored
}

// setIndexFailureCounts writes the counts annotations on a new pod.
func setIndexFailureCounts(pod *v1.Pod, job *batch.Job, replaced *v1.Pod) {
	failures, ignored := newIndexFailureCounts(job, replaced)
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[batch.JobIndexFailureCountAnnotation] = strconv.Itoa(int(failures))
	if ignored > 0 {
		pod.Annotations[batch.JobIndexIgnoredFailureCountAnnotation] = strconv.Itoa(int(ignored))
	}
}

// indexesReadyNow keeps the indexes whose own backoff is over: after n
// failures of an index (ignored ones included), its next pod waits
// base·2^(n-1) from its last failure. With none ready it returns the
// shortest wait.
func (c *Controller) indexesReadyNow(indexes []int, replaced map[int]*v1.Pod) ([]int, time.Duration) {
	var ready []int
	var wait time.Duration
	for _, ix := range indexes {
		left := time.Duration(0)
		if p := replaced[ix]; p != nil {
			r := backoffRecord{failuresAfterLastSuccess: indexAbsoluteFailureCount(p) + 1, lastFailure: finishedAt(p)}
			left = r.remaining(c.now(), c.PodFailureBackoff, c.MaxBackoff)
		}
		if left == 0 {
			ready = append(ready, ix)
		} else if wait == 0 || left < wait {
			wait = left
		}
	}
	if len(ready) > 0 {
		return ready, 0
	}
	return nil, wait
}
