package job

import (
	"strings"
	"testing"
	"time"

	batch "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// newPerIndexJob is an Indexed Job with backoffLimitPerIndex, its
// backoffLimit defaulted as the API server does.
func newPerIndexJob(completions, parallelism, perIndex int32) *batch.Job {
	job := newJob(ptr.To(completions), ptr.To(parallelism))
	job.Spec.CompletionMode = ptr.To(batch.IndexedCompletion)
	job.Spec.BackoffLimitPerIndex = ptr.To(perIndex)
	job.Spec.BackoffLimit = ptr.To(int32(1<<31 - 1))
	return job
}

func withFailureCount(p *v1.Pod, n string) *v1.Pod {
	p.Annotations[batch.JobIndexFailureCountAnnotation] = n
	return p
}

// An index whose pod fails for the backoffLimitPerIndex+1-th time is
// failed: recorded in failedIndexes and never recreated, while the other
// indexes run on; once they complete the Job fails with FailedIndexes.
func TestBackoffLimitPerIndexFailsIndex(t *testing.T) {
	job := newPerIndexJob(3, 3, 1)
	third := withFailureCount(withIndex(newPod(job, v1.PodFailed), "1"), "1")
	f := newFixture(t, job,
		withIndex(newPod(job, v1.PodRunning), "0"), third, withIndex(newPod(job, v1.PodRunning), "2"))
	f.c.PodFailureBackoff = time.Millisecond
	f.sync(job)
	if n := len(f.createdPods()); n != 0 {
		t.Fatalf("failed index recreated (%d pods)", n)
	}
	st := f.lastStatus()
	if st.FailedIndexes == nil || *st.FailedIndexes != "1" || st.Failed != 1 || len(st.Conditions) != 0 {
		t.Fatalf("status: failedIndexes %v failed %d conditions %s", st.FailedIndexes, st.Failed, condTypes(st))
	}
	if n := len(f.actions("patch", "pods")); n != 1 {
		t.Errorf("%d finalizer removals, want 1 (the failed index's pod)", n)
	}

	// The other indexes succeed: every index is done, one failed.
	job2 := job.DeepCopy()
	job2.Status = st
	f = newFixture(t, job2, withIndex(newPod(job, v1.PodSucceeded), "0"), withIndex(newPod(job, v1.PodSucceeded), "2"))
	f.sync(job2)
	st = f.lastStatus()
	if got := condTypes(st); got != "FailureTarget=True/FailedIndexes,Failed=True/FailedIndexes" {
		t.Errorf("conditions %s", got)
	}
	if c := st.Conditions[1]; c.Message != "Job has failed indexes" {
		t.Errorf("message %q", c.Message)
	}
	if *st.FailedIndexes != "1" || st.CompletedIndexes != "0,2" || st.Succeeded != 2 || st.Failed != 1 {
		t.Errorf("status %+v", st)
	}
}

// Below the limit the failed pod is replaced, the replacement carrying
// the index's failure count; the failed pod keeps its finalizer until then
// and is counted once the replacement exists.
func TestBackoffLimitPerIndexFailureCountAnnotation(t *testing.T) {
	job := newPerIndexJob(2, 2, 2)
	first := withIndex(newPod(job, v1.PodFailed), "0") // created before any failure: no annotation
	second := withFailureCount(withIndex(newPod(job, v1.PodFailed), "1"), "1")
	second.Annotations[batch.JobIndexIgnoredFailureCountAnnotation] = "2"
	f := newFixture(t, job, first, second)
	f.c.PodFailureBackoff = time.Millisecond
	f.sync(job)
	got := map[string]*v1.Pod{}
	for _, p := range f.createdPods() {
		got[p.Annotations[batch.JobCompletionIndexAnnotation]] = p
	}
	if len(got) != 2 {
		t.Fatalf("created %d pods, want 2", len(got))
	}
	if a := got["0"].Annotations; a[batch.JobIndexFailureCountAnnotation] != "1" || a[batch.JobIndexIgnoredFailureCountAnnotation] != "" {
		t.Errorf("index 0 replacement annotations %v", a)
	}
	if a := got["1"].Annotations; a[batch.JobIndexFailureCountAnnotation] != "2" || a[batch.JobIndexIgnoredFailureCountAnnotation] != "2" {
		t.Errorf("index 1 replacement annotations %v", a)
	}
	if n := len(f.actions("patch", "pods")); n != 0 {
		t.Errorf("%d finalizer removals before the replacements were seen, want 0", n)
	}
	st := f.lastStatus()
	if st.FailedIndexes == nil || *st.FailedIndexes != "" || st.Failed != 0 {
		t.Errorf("failedIndexes %v failed %d", st.FailedIndexes, st.Failed)
	}

	// The replacements seen: the failed pods are counted and released.
	r0, r1 := withIndex(newPod(job, v1.PodRunning), "0"), withIndex(newPod(job, v1.PodRunning), "1")
	f = newFixture(t, job, first, second, r0, r1)
	f.sync(job)
	if n := len(f.actions("patch", "pods")); n != 2 {
		t.Errorf("%d finalizer removals, want 2", n)
	}
	if st := f.lastStatus(); st.Failed != 2 || len(st.Conditions) != 0 {
		t.Errorf("failed %d conditions %s", st.Failed, condTypes(st))
	}

	// An ignored failure is counted apart.
	job = newPerIndexJob(1, 1, 0)
	job.Spec.PodFailurePolicy = &batch.PodFailurePolicy{Rules: []batch.PodFailurePolicyRule{
		{Action: batch.PodFailurePolicyActionIgnore, OnExitCodes: &batch.PodFailurePolicyOnExitCodesRequirement{Operator: batch.PodFailurePolicyOnExitCodesOpIn, Values: []int32{137}}},
	}}
	job.Spec.PodReplacementPolicy = ptr.To(batch.Failed)
	ignored := withIndex(exitPod(job, 137), "0")
	f = newFixture(t, job, ignored)
	f.c.PodFailureBackoff = time.Millisecond
	f.sync(job)
	if p := f.createdPods(); len(p) != 1 || p[0].Annotations[batch.JobIndexFailureCountAnnotation] != "0" || p[0].Annotations[batch.JobIndexIgnoredFailureCountAnnotation] != "1" {
		t.Errorf("replacement of an ignored failure: %v", p)
	}
}

// Each index backs off on its own failures: a fresh second failure of
// index 0 holds index 0 back but not index 1.
func TestBackoffLimitPerIndexDelay(t *testing.T) {
	job := newPerIndexJob(2, 2, 5)
	failed := withFailureCount(withIndex(newPod(job, v1.PodFailed), "0"), "1")
	failed.Status.ContainerStatuses[0].State.Terminated.FinishedAt = metav1.NewTime(now.Add(-time.Second))
	f := newFixture(t, job, failed)
	f.sync(job)
	p := f.createdPods()
	if len(p) != 1 || p[0].Annotations[batch.JobCompletionIndexAnnotation] != "1" {
		t.Fatalf("created %d pods, want index 1 only", len(p))
	}
	// 2 failures: 20 s from the last one.
	if _, wait := f.c.indexesReadyNow([]int{0}, map[int]*v1.Pod{0: failed}); wait != 19*time.Second {
		t.Errorf("index 0 waits %v, want 19s", wait)
	}
}

// More failed indexes than maxFailedIndexes: the Job fails at once with
// MaxFailedIndexesExceeded and its running pods are deleted.
func TestMaxFailedIndexesExceeded(t *testing.T) {
	job := newPerIndexJob(4, 3, 0)
	job.Spec.MaxFailedIndexes = ptr.To(int32(0))
	f := newFixture(t, job, withIndex(newPod(job, v1.PodFailed), "0"),
		withIndex(newPod(job, v1.PodRunning), "1"), withIndex(newPod(job, v1.PodRunning), "2"))
	f.sync(job)
	if n := len(f.actions("delete", "pods")); n != 2 {
		t.Errorf("%d deletes, want the 2 running pods", n)
	}
	if n := len(f.createdPods()); n != 0 {
		t.Errorf("%d pods created", n)
	}
	st := f.lastStatus()
	if got := condTypes(st); got != "FailureTarget=True/MaxFailedIndexesExceeded" {
		t.Fatalf("conditions %s", got)
	}
	if c := st.Conditions[0]; c.Message != "Job has exceeded the specified maximal number of failed indexes" {
		t.Errorf("message %q", c.Message)
	}
	// The deleted pods count failed, once, with the failed one.
	if *st.FailedIndexes != "0" || st.Failed != 3 {
		t.Errorf("failedIndexes %q failed %d", *st.FailedIndexes, st.Failed)
	}
	// Next sync, the pods gone: the Job fails.
	job2 := job.DeepCopy()
	job2.Status = st
	f = newFixture(t, job2)
	f.sync(job2)
	st = f.lastStatus()
	if got := condTypes(st); got != "FailureTarget=True/MaxFailedIndexesExceeded,Failed=True/MaxFailedIndexesExceeded" {
		t.Errorf("conditions %s", got)
	}
	if *st.FailedIndexes != "0" || st.Failed != 3 {
		t.Errorf("failedIndexes %q failed %d", *st.FailedIndexes, st.Failed)
	}
	if ev := f.events(); !strings.Contains(ev, "Warning MaxFailedIndexesExceeded Job has exceeded the specified maximal number of failed indexes") {
		t.Errorf("events %q", ev)
	}
}

// A failure matching a FailIndex rule fails its index at once, whatever
// backoffLimitPerIndex allows.
func TestFailIndexAction(t *testing.T) {
	job := newPerIndexJob(2, 2, 1)
	job.Spec.PodFailurePolicy = &batch.PodFailurePolicy{Rules: []batch.PodFailurePolicyRule{
		{Action: batch.PodFailurePolicyActionFailIndex, OnExitCodes: &batch.PodFailurePolicyOnExitCodesRequirement{Operator: batch.PodFailurePolicyOnExitCodesOpIn, Values: []int32{1}}},
	}}
	job.Spec.PodReplacementPolicy = ptr.To(batch.Failed)
	f := newFixture(t, job, withIndex(newPod(job, v1.PodSucceeded), "0"), withIndex(exitPod(job, 1), "1"))
	f.c.PodFailureBackoff = time.Millisecond
	f.sync(job)
	if n := len(f.createdPods()); n != 0 {
		t.Errorf("%d pods created", n)
	}
	st := f.lastStatus()
	if got := condTypes(st); got != "FailureTarget=True/FailedIndexes,Failed=True/FailedIndexes" {
		t.Errorf("conditions %s", got)
	}
	if *st.FailedIndexes != "1" || st.CompletedIndexes != "0" || st.Failed != 1 || st.Succeeded != 1 {
		t.Errorf("status %+v", st)
	}

	// Another exit code is only counted: the index gets a new pod.
	job = job.DeepCopy()
	f = newFixture(t, job, withIndex(exitPod(job, 2), "1"))
	f.c.PodFailureBackoff = time.Millisecond
	f.sync(job)
	if n := len(f.createdPods()); n != 2 {
		t.Errorf("%d pods created, want 2", n)
	}
	if st := f.lastStatus(); *st.FailedIndexes != "" {
		t.Errorf("failedIndexes %q", *st.FailedIndexes)
	}
}
