package job

import (
	"testing"

	batch "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func indexedJob(completions, parallelism int32, rules ...batch.SuccessPolicyRule) *batch.Job {
	job := newJob(ptr.To(completions), ptr.To(parallelism))
	job.Spec.CompletionMode = ptr.To(batch.IndexedCompletion)
	if len(rules) > 0 {
		job.Spec.SuccessPolicy = &batch.SuccessPolicy{Rules: rules}
	}
	return job
}

// afterStatus is job as the next sync sees it: carrying the status the
// previous sync wrote last.
func afterStatus(job *batch.Job, st batch.JobStatus) *batch.Job {
	next := job.DeepCopy()
	next.Status = *st.DeepCopy()
	return next
}

func TestMatchSuccessPolicy(t *testing.T) {
	rules := func(r ...batch.SuccessPolicyRule) *batch.SuccessPolicy { return &batch.SuccessPolicy{Rules: r} }
	tests := []struct {
		name      string
		policy    *batch.SuccessPolicy
		succeeded string
		want      string
	}{
		{"no policy", nil, "0-4", ""},
		{"nothing succeeded", rules(batch.SuccessPolicyRule{SucceededCount: ptr.To(int32(0))}), "", ""},
		{"indexes all in", rules(batch.SuccessPolicyRule{SucceededIndexes: ptr.To("1,3")}), "0-1,3", "Matched rules at index 0"},
		{"indexes one missing", rules(batch.SuccessPolicyRule{SucceededIndexes: ptr.To("1,3")}), "0-2,4", ""},
		{"indexes with count", rules(batch.SuccessPolicyRule{SucceededIndexes: ptr.To("0-3"), SucceededCount: ptr.To(int32(2))}), "1,3-4", "Matched rules at index 0"},
		{"indexes with count short", rules(batch.SuccessPolicyRule{SucceededIndexes: ptr.To("0-3"), SucceededCount: ptr.To(int32(3))}), "1,3-4", ""},
		{"count anywhere, second rule", rules(
			batch.SuccessPolicyRule{SucceededIndexes: ptr.To("0")},
			batch.SuccessPolicyRule{SucceededCount: ptr.To(int32(2))}), "2,4", "Matched rules at index 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			msg, met := matchSuccessPolicy(tc.policy, 5, parseIntervals(tc.succeeded, 5))
			if msg != tc.want || met != (tc.want != "") {
				t.Errorf("got %q %v, want %q", msg, met, tc.want)
			}
		})
	}
}

// A succeededIndexes rule met while other indexes still run:
// SuccessCriteriaMet (SuccessPolicy) at once, the running pods deleted and
// released without counting as failures, no new pods; Complete with the
// same reason and message once no pod is left terminating.
func TestSuccessPolicySucceededIndexes(t *testing.T) {
	job := indexedJob(5, 2, batch.SuccessPolicyRule{SucceededIndexes: ptr.To("0")})
	done := withIndex(newPod(job, v1.PodSucceeded), "0")
	running := withIndex(newPod(job, v1.PodRunning), "1")
	f := newFixture(t, job, done, running)
	f.sync(job)

	if n := len(f.createdPods()); n != 0 {
		t.Errorf("created %d pods after the success policy matched", n)
	}
	dels := f.actions("delete", "pods")
	if len(dels) != 1 || dels[0].(interface{ GetName() string }).GetName() != running.Name {
		t.Fatalf("deletes %v, want the running pod", dels)
	}
	st := f.lastStatus()
	if got := condTypes(st); got != "SuccessCriteriaMet=True/SuccessPolicy" {
		t.Errorf("conditions %s", got)
	}
	if c := findCondition(st.Conditions, batch.JobSuccessCriteriaMet); c == nil || c.Message != "Matched rules at index 0" {
		t.Errorf("condition %+v", c)
	}
	if st.CompletedIndexes != "0" || st.Succeeded != 1 || st.Failed != 0 || st.Active != 0 || *st.Terminating != 1 ||
		len(st.UncountedTerminatedPods.Failed) != 0 || st.CompletionTime != nil {
		t.Errorf("status %+v", st)
	}
	// Both finalizers go: the succeeded pod's and the deleted one's.
	if n := len(f.actions("patch", "pods")); n != 2 {
		t.Errorf("%d finalizer patches, want 2", n)
	}

	// The deleted pod still terminating (its finalizer gone): not yet
	// Complete, and still no failure.
	job2 := afterStatus(job, st)
	terminating := running.DeepCopy()
	terminating.Finalizers = nil
	terminating.DeletionTimestamp = &metav1.Time{Time: now}
	done2 := done.DeepCopy()
	done2.Finalizers = nil
	f = newFixture(t, job2, done2, terminating)
	f.sync(job2)
	for _, st := range f.statuses() {
		if findCondition(st.Conditions, batch.JobComplete) != nil || st.Failed != 0 {
			t.Errorf("while terminating: %s %+v", condTypes(st), st)
		}
	}
	if n := len(f.createdPods()) + len(f.actions("delete", "pods")); n != 0 {
		t.Errorf("%d pod creations/deletions while finishing", n)
	}

	// All gone: Complete.
	f = newFixture(t, job2, done2)
	f.sync(job2)
	st = f.lastStatus()
	if got := condTypes(st); got != "SuccessCriteriaMet=True/SuccessPolicy,Complete=True/SuccessPolicy" {
		t.Errorf("conditions %s", got)
	}
	if c := findCondition(st.Conditions, batch.JobComplete); c == nil || c.Message != "Matched rules at index 0" {
		t.Errorf("complete %+v", c)
	}
	if st.CompletionTime == nil || st.Failed != 0 || st.Succeeded != 1 || *st.Terminating != 0 {
		t.Errorf("status %+v", st)
	}
}

// A succeededCount rule: met by any indexes; the second rule's index in
// the message; a failed pod is still counted as failed.
func TestSuccessPolicySucceededCount(t *testing.T) {
	job := indexedJob(5, 3,
		batch.SuccessPolicyRule{SucceededIndexes: ptr.To("0-1")},
		batch.SuccessPolicyRule{SucceededCount: ptr.To(int32(2))})
	pods := []*v1.Pod{
		withIndex(newPod(job, v1.PodSucceeded), "1"),
		withIndex(newPod(job, v1.PodSucceeded), "3"),
		withIndex(newPod(job, v1.PodFailed), "2"),
		withIndex(newPod(job, v1.PodRunning), "0"),
		withIndex(newPod(job, v1.PodPending), "4"),
	}
	f := newFixture(t, job, pods[0], pods[1], pods[2], pods[3], pods[4])
	f.sync(job)
	if n := len(f.actions("delete", "pods")); n != 2 {
		t.Errorf("%d deletes, want 2", n)
	}
	st := f.lastStatus()
	if got := condTypes(st); got != "SuccessCriteriaMet=True/SuccessPolicy" {
		t.Errorf("conditions %s", got)
	}
	if c := findCondition(st.Conditions, batch.JobSuccessCriteriaMet); c == nil || c.Message != "Matched rules at index 1" {
		t.Errorf("condition %+v", c)
	}
	if st.CompletedIndexes != "1,3" || st.Failed != 1 || *st.Terminating != 2 || st.Active != 0 {
		t.Errorf("status %+v", st)
	}
	next := afterStatus(job, st)
	var left []*v1.Pod
	for _, p := range pods[:3] {
		p = p.DeepCopy()
		p.Finalizers = nil
		left = append(left, p)
	}
	f = newFixture(t, next, left[0], left[1], left[2])
	f.sync(next)
	if got := condTypes(f.lastStatus()); got != "SuccessCriteriaMet=True/SuccessPolicy,Complete=True/SuccessPolicy" {
		t.Errorf("conditions %s", got)
	}
}

// A rule not met while indexes are missing changes nothing: pods keep
// running and the missing index is created. Once every index succeeded
// the rule necessarily matches, so, as upstream, the Job ends with
// reason SuccessPolicy; without a policy the same Job ends with
// CompletionsReached.
func TestSuccessPolicyNotMetUntilAllSucceed(t *testing.T) {
	job := indexedJob(3, 3, batch.SuccessPolicyRule{SucceededIndexes: ptr.To("0-2")})
	a := withIndex(newPod(job, v1.PodSucceeded), "0")
	b := withIndex(newPod(job, v1.PodRunning), "1")
	f := newFixture(t, job, a, b)
	f.sync(job)
	if n := len(f.actions("delete", "pods")); n != 0 {
		t.Errorf("%d deletes before the policy matched", n)
	}
	if created := f.createdPods(); len(created) != 1 || created[0].Annotations[batch.JobCompletionIndexAnnotation] != "2" {
		t.Errorf("created %d pods, want index 2", len(created))
	}
	if got := condTypes(f.lastStatus()); got != "" {
		t.Errorf("conditions %s", got)
	}

	for _, policy := range []*batch.SuccessPolicy{job.Spec.SuccessPolicy, nil} {
		j := job.DeepCopy()
		j.Spec.SuccessPolicy = policy
		var pods []*v1.Pod
		for _, ix := range []string{"0", "1", "2"} {
			pods = append(pods, withIndex(newPod(j, v1.PodSucceeded), ix))
		}
		f := newFixture(t, j, pods[0], pods[1], pods[2])
		f.sync(j)
		want := "SuccessCriteriaMet=True/SuccessPolicy,Complete=True/SuccessPolicy"
		if policy == nil {
			want = "SuccessCriteriaMet=True/CompletionsReached,Complete=True/CompletionsReached"
		}
		st := f.lastStatus()
		if got := condTypes(st); got != want {
			t.Errorf("policy %v: conditions %s, want %s", policy != nil, got, want)
		}
		if st.CompletedIndexes != "0-2" || st.Succeeded != 3 || st.Failed != 0 || st.CompletionTime == nil {
			t.Errorf("status %+v", st)
		}
	}
}
