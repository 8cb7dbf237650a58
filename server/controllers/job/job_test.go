package job

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batch "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
)

var now = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

type fixture struct {
	t        *testing.T
	client   *fake.Clientset
	c        *Controller
	recorder *record.FakeRecorder
}

// newFixture loads objects into both the fake API and the informers'
// caches (the informers are not started: sync reads the caches as given).
func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	client := fake.NewSimpleClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	rec := record.NewFakeRecorder(100)
	c := New(client, factory, rec)
	generated := 0
	// The fake API does not fill generateName in.
	client.PrependReactor("create", "pods", func(a core.Action) (bool, runtime.Object, error) {
		p := a.(core.CreateAction).GetObject().(*v1.Pod)
		if p.Name == "" {
			generated++
			p.Name = fmt.Sprintf("%s%05d", p.GenerateName, generated)
		}
		return false, nil, nil
	})
	c.now = func() time.Time { return now }
	for _, o := range objs {
		switch o := o.(type) {
		case *batch.Job:
			_ = factory.Batch().V1().Jobs().Informer().GetIndexer().Add(o)
		case *v1.Pod:
			_ = factory.Core().V1().Pods().Informer().GetIndexer().Add(o)
		}
	}
	return &fixture{t: t, client: client, c: c, recorder: rec}
}

func (f *fixture) sync(job *batch.Job) {
	f.t.Helper()
	if err := f.c.sync(context.Background(), job.Namespace+"/"+job.Name); err != nil {
		f.t.Fatalf("sync: %v", err)
	}
}

func (f *fixture) actions(verb, resource string) []core.Action {
	var out []core.Action
	for _, a := range f.client.Actions() {
		if a.GetVerb() == verb && a.GetResource().Resource == resource {
			out = append(out, a)
		}
	}
	return out
}

func (f *fixture) createdPods() []*v1.Pod {
	var out []*v1.Pod
	for _, a := range f.actions("create", "pods") {
		out = append(out, a.(core.CreateAction).GetObject().(*v1.Pod))
	}
	return out
}

// statuses returns the Job statuses written, in order.
func (f *fixture) statuses() []batch.JobStatus {
	var out []batch.JobStatus
	for _, a := range f.actions("update", "jobs") {
		if a.GetSubresource() == "status" {
			out = append(out, a.(core.UpdateAction).GetObject().(*batch.Job).Status)
		}
	}
	return out
}

func (f *fixture) lastStatus() batch.JobStatus {
	f.t.Helper()
	st := f.statuses()
	if len(st) == 0 {
		f.t.Fatal("no status written")
	}
	return st[len(st)-1]
}

func (f *fixture) events() string {
	var evs []string
	for {
		select {
		case e := <-f.recorder.Events:
			evs = append(evs, e)
		default:
			return strings.Join(evs, "\n")
		}
	}
}

func newJob(completions, parallelism *int32) *batch.Job {
	uid := types.UID("job-uid")
	labels := map[string]string{batch.ControllerUidLabel: string(uid), batch.JobNameLabel: "pi", "controller-uid": string(uid), "job-name": "pi"}
	return &batch.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "pi", Namespace: "default", UID: uid},
		Spec: batch.JobSpec{
			Completions: completions, Parallelism: parallelism,
			BackoffLimit:   ptr.To(int32(6)),
			CompletionMode: ptr.To(batch.NonIndexedCompletion),
			Suspend:        ptr.To(false),
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{batch.ControllerUidLabel: string(uid)}},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyNever,
					Containers: []v1.Container{{Name: "pi", Image: "perl"}}},
			},
		},
	}
}

var podSeq int

// newPod is a pod of job in the given phase, still carrying the tracking
// finalizer.
func newPod(job *batch.Job, phase v1.PodPhase) *v1.Pod {
	podSeq++
	name := job.Name + "-" + string(rune('a'+podSeq%26)) + strings.Repeat("x", podSeq/26)
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: job.Namespace, UID: types.UID("uid-" + name),
			Labels:            job.Spec.Template.Labels,
			Finalizers:        []string{batch.JobTrackingFinalizer},
			CreationTimestamp: metav1.NewTime(now.Add(-time.Minute)),
			OwnerReferences:   []metav1.OwnerReference{*metav1.NewControllerRef(job, controllerKind)}},
		Spec:   job.Spec.Template.Spec,
		Status: v1.PodStatus{Phase: phase},
	}
	if phase == v1.PodSucceeded || phase == v1.PodFailed {
		code := int32(0)
		if phase == v1.PodFailed {
			code = 1
		}
		p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "pi", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
			ExitCode: code, FinishedAt: metav1.NewTime(now.Add(-time.Second))}}}}
	}
	return p
}

func withIndex(p *v1.Pod, ix string) *v1.Pod {
	p.Annotations = map[string]string{batch.JobCompletionIndexAnnotation: ix}
	return p
}

func condTypes(st batch.JobStatus) string {
	var out []string
	for _, c := range st.Conditions {
		out = append(out, string(c.Type)+"="+string(c.Status)+"/"+c.Reason)
	}
	return strings.Join(out, ",")
}

// A new Job gets parallelism pods, never more than the completions left,
// each with the tracking finalizer, the template's labels and the Job as
// controller.
func TestCreatesUpToParallelismAndRemainingCompletions(t *testing.T) {
	for _, tc := range []struct {
		name                     string
		completions, parallelism *int32
		succeeded                int32
		want                     int
	}{
		{"parallelism bounds", ptr.To(int32(5)), ptr.To(int32(2)), 0, 2},
		{"completions left bound", ptr.To(int32(5)), ptr.To(int32(4)), 3, 2},
		{"all done", ptr.To(int32(2)), ptr.To(int32(2)), 2, 0},
		{"work queue: parallelism", nil, ptr.To(int32(3)), 0, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := newJob(tc.completions, tc.parallelism)
			job.Status.Succeeded = tc.succeeded
			f := newFixture(t, job)
			f.sync(job)
			pods := f.createdPods()
			if len(pods) != tc.want {
				t.Fatalf("created %d pods, want %d", len(pods), tc.want)
			}
			for _, p := range pods {
				ref := metav1.GetControllerOf(p)
				if ref == nil || ref.UID != job.UID || ref.Kind != "Job" || !*ref.BlockOwnerDeletion {
					t.Errorf("owner %+v", ref)
				}
				if p.GenerateName != "pi-" || p.Labels[batch.JobNameLabel] != "pi" || p.Labels["controller-uid"] != "job-uid" {
					t.Errorf("pod meta %+v", p.ObjectMeta)
				}
				if len(p.Finalizers) != 1 || p.Finalizers[0] != batch.JobTrackingFinalizer {
					t.Errorf("finalizers %v", p.Finalizers)
				}
			}
			if tc.want > 0 {
				if st := f.lastStatus(); st.Active != int32(tc.want) || st.StartTime == nil {
					t.Errorf("status active %d start %v", st.Active, st.StartTime)
				}
				if ev := f.events(); strings.Count(ev, "SuccessfulCreate") != tc.want {
					t.Errorf("events %q", ev)
				}
			}
		})
	}
}

// Too many active pods (parallelism lowered): the least advanced go, their
// finalizer removed first so that they are not counted as failures.
func TestDeletesOverParallelism(t *testing.T) {
	job := newJob(ptr.To(int32(10)), ptr.To(int32(1)))
	running := newPod(job, v1.PodRunning)
	running.Spec.NodeName = "n1"
	pending1, pending2 := newPod(job, v1.PodPending), newPod(job, v1.PodPending)
	f := newFixture(t, job, running, pending1, pending2)
	f.sync(job)
	dels := f.actions("delete", "pods")
	if len(dels) != 2 {
		t.Fatalf("%d deletes, want 2", len(dels))
	}
	for _, d := range dels {
		if name := d.(core.DeleteAction).GetName(); name == running.Name {
			t.Errorf("deleted the running pod, not a pending one")
		}
	}
	if n := len(f.actions("patch", "pods")); n != 2 {
		t.Errorf("%d finalizer removals, want 2", n)
	}
	if st := f.lastStatus(); st.Active != 1 || st.Failed != 0 || len(f.createdPods()) != 0 {
		t.Errorf("status %+v, created %d", st, len(f.createdPods()))
	}
}

// A finished pod is counted in three writes: its UID into
// uncountedTerminatedPods, its finalizer off, then the counter.
func TestFinishedPodCountedThroughUncounted(t *testing.T) {
	job := newJob(ptr.To(int32(3)), ptr.To(int32(1)))
	done := newPod(job, v1.PodSucceeded)
	f := newFixture(t, job, done)
	f.sync(job)
	st := f.statuses()
	if len(st) != 2 {
		t.Fatalf("%d status writes, want 2", len(st))
	}
	if u := st[0].UncountedTerminatedPods; len(u.Succeeded) != 1 || u.Succeeded[0] != done.UID || st[0].Succeeded != 0 {
		t.Errorf("first write %+v", st[0])
	}
	if u := st[1].UncountedTerminatedPods; len(u.Succeeded) != 0 || st[1].Succeeded != 1 {
		t.Errorf("second write %+v", st[1])
	}
	var patched bool
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "patch" {
			patched = true
			if !strings.Contains(string(a.(core.PatchAction).GetPatch()), "deleteFromPrimitiveList/finalizers") {
				t.Errorf("patch %s", a.(core.PatchAction).GetPatch())
			}
		}
		if a.GetVerb() == "update" && !patched && len(f.statuses()) > 0 && a.(core.UpdateAction).GetObject().(*batch.Job).Status.Succeeded == 1 {
			t.Error("counter raised before the finalizer was removed")
		}
	}
	if !patched {
		t.Error("finalizer not removed")
	}
	// The replacement for the finished pod's slot.
	if len(f.createdPods()) != 1 {
		t.Errorf("created %d pods, want 1", len(f.createdPods()))
	}
}

// A pod whose finalizer removal is expected but not yet seen is not counted
// again, nor one without the finalizer.
func TestNoDoubleCounting(t *testing.T) {
	job := newJob(ptr.To(int32(3)), ptr.To(int32(1)))
	job.Status.Succeeded = 1
	counted := newPod(job, v1.PodSucceeded)
	counted.Finalizers = nil
	inFlight := newPod(job, v1.PodSucceeded)
	running := newPod(job, v1.PodRunning)
	f := newFixture(t, job, counted, inFlight, running)
	f.c.finalizers.expectRemoved("default/pi", []types.UID{inFlight.UID})
	f.sync(job)
	for _, st := range f.statuses() {
		if st.Succeeded != 1 || len(st.UncountedTerminatedPods.Succeeded) != 0 {
			t.Errorf("status %+v", st)
		}
	}
}

// Completions reached: SuccessCriteriaMet, then Complete, in that order,
// with CompletionsReached, completionTime and a Completed event.
func TestCompleteConditions(t *testing.T) {
	job := newJob(ptr.To(int32(1)), ptr.To(int32(1)))
	f := newFixture(t, job, newPod(job, v1.PodSucceeded))
	f.sync(job)
	st := f.lastStatus()
	if got := condTypes(st); got != "SuccessCriteriaMet=True/CompletionsReached,Complete=True/CompletionsReached" {
		t.Errorf("conditions %s", got)
	}
	if st.CompletionTime == nil || st.Succeeded != 1 || st.Active != 0 {
		t.Errorf("status %+v", st)
	}
	if ev := f.events(); !strings.Contains(ev, "Normal Completed Job completed") {
		t.Errorf("events %q", ev)
	}
	if _, ok := f.c.finished.Load(job.UID); !ok {
		t.Error("finished Job not remembered until the cache shows it")
	}
	// A stale cached copy (still unfinished) must not be acted on.
	f.client.ClearActions()
	f.sync(job)
	if n := len(f.client.Actions()); n != 0 {
		t.Errorf("%d actions on a Job just marked finished", n)
	}
}

// Failures beyond backoffLimit: FailureTarget then Failed, both
// BackoffLimitExceeded, and a warning event.
func TestBackoffLimitExceeded(t *testing.T) {
	job := newJob(ptr.To(int32(3)), ptr.To(int32(1)))
	job.Spec.BackoffLimit = ptr.To(int32(1))
	job.Status.Failed = 1
	f := newFixture(t, job, newPod(job, v1.PodFailed))
	f.sync(job)
	st := f.lastStatus()
	if got := condTypes(st); got != "FailureTarget=True/BackoffLimitExceeded,Failed=True/BackoffLimitExceeded" {
		t.Errorf("conditions %s", got)
	}
	if st.Failed != 2 || st.CompletionTime != nil || len(f.createdPods()) != 0 {
		t.Errorf("status %+v, created %d", st, len(f.createdPods()))
	}
	if ev := f.events(); !strings.Contains(ev, "Warning BackoffLimitExceeded") {
		t.Errorf("events %q", ev)
	}
}

// The pod-recreation backoff: 10 s doubling per failure since the last
// success, at most 6 min; a success resets it.
func TestBackoffDelay(t *testing.T) {
	last := now.Add(-time.Second)
	for _, tc := range []struct {
		failures int32
		want     time.Duration
	}{{0, 0}, {1, 9 * time.Second}, {2, 19 * time.Second}, {3, 39 * time.Second}, {7, 6*time.Minute - time.Second}, {30, 6*time.Minute - time.Second}} {
		r := backoffRecord{failuresAfterLastSuccess: tc.failures, lastFailure: last}
		if got := r.remaining(now, DefaultPodFailureBackoff, MaxPodFailureBackoff); got != tc.want {
			t.Errorf("%d failures: %v, want %v", tc.failures, got, tc.want)
		}
	}
	job := newJob(ptr.To(int32(1)), ptr.To(int32(1)))
	fail := func(at time.Time) *v1.Pod {
		p := newPod(job, v1.PodFailed)
		p.Status.ContainerStatuses[0].State.Terminated.FinishedAt = metav1.NewTime(at)
		return p
	}
	ok := newPod(job, v1.PodSucceeded)
	ok.Status.ContainerStatuses[0].State.Terminated.FinishedAt = metav1.NewTime(now.Add(-time.Minute))
	r := nextBackoff(backoffRecord{failuresAfterLastSuccess: 4, lastFailure: now.Add(-2 * time.Minute)},
		[]*v1.Pod{ok}, []*v1.Pod{fail(now.Add(-90 * time.Second)), fail(now.Add(-30 * time.Second))})
	if r.failuresAfterLastSuccess != 1 || !r.lastFailure.Equal(now.Add(-30*time.Second)) {
		t.Errorf("after a success and a later failure: %+v", r)
	}

	// A pod being deleted ended when its deletion began, not when its
	// grace period will be over.
	deleting := newPod(job, v1.PodRunning)
	deleting.DeletionTimestamp = ptr.To(metav1.NewTime(now.Add(30 * time.Second)))
	deleting.DeletionGracePeriodSeconds = ptr.To(int64(30))
	if got := finishedAt(deleting); !got.Equal(now) {
		t.Errorf("finishedAt of a pod being deleted: %v, want %v", got, now)
	}

	// In a sync: a fresh failure holds the replacement back.
	f := newFixture(t, job, fail(now.Add(-time.Second)))
	f.sync(job)
	if n := len(f.createdPods()); n != 0 {
		t.Errorf("replacement created within the backoff (%d pods)", n)
	}
	if st := f.lastStatus(); st.Failed != 1 {
		t.Errorf("failed %d", st.Failed)
	}
	// With the base shrunk (as tests do) it is replaced at once.
	f = newFixture(t, job, fail(now.Add(-time.Second)))
	f.c.PodFailureBackoff = time.Millisecond
	f.sync(job)
	if n := len(f.createdPods()); n != 1 {
		t.Errorf("%d replacements, want 1", n)
	}
}

// Past activeDeadlineSeconds the active pods are deleted (keeping their
// finalizers to be counted) and the Job heads for DeadlineExceeded.
func TestActiveDeadline(t *testing.T) {
	job := newJob(ptr.To(int32(3)), ptr.To(int32(1)))
	job.Spec.ActiveDeadlineSeconds = ptr.To(int64(60))
	job.Status.StartTime = ptr.To(metav1.NewTime(now.Add(-2 * time.Minute)))
	running := newPod(job, v1.PodRunning)
	f := newFixture(t, job, running)
	f.sync(job)
	if n := len(f.actions("delete", "pods")); n != 1 {
		t.Fatalf("%d deletes, want 1", n)
	}
	if n := len(f.actions("patch", "pods")); n != 1 {
		t.Errorf("%d finalizer removals (the deleted pod is counted failed), want 1", n)
	}
	st := f.lastStatus()
	if got := condTypes(st); got != "FailureTarget=True/DeadlineExceeded" {
		t.Errorf("conditions %s", got)
	}
	// Next sync: the pod is terminating, then gone; the Job fails.
	deleted := running.DeepCopy()
	deleted.DeletionTimestamp = ptr.To(metav1.NewTime(now))
	deleted.Finalizers = nil
	job2 := job.DeepCopy()
	job2.Status = st
	f = newFixture(t, job2)
	f.sync(job2)
	if got := condTypes(f.lastStatus()); got != "FailureTarget=True/DeadlineExceeded,Failed=True/DeadlineExceeded" {
		t.Errorf("conditions %s", got)
	}
}

// Indexed: the lowest missing indexes get pods, each with the index
// annotation and label, hostname <job>-<index>, and JOB_COMPLETION_INDEX
// from the label; succeeded indexes go to completedIndexes.
func TestIndexedCreation(t *testing.T) {
	job := newJob(ptr.To(int32(5)), ptr.To(int32(3)))
	job.Spec.CompletionMode = ptr.To(batch.IndexedCompletion)
	job.Status.CompletedIndexes = "4"
	job.Status.Succeeded = 1
	done := withIndex(newPod(job, v1.PodSucceeded), "0")
	running := withIndex(newPod(job, v1.PodRunning), "2")
	f := newFixture(t, job, done, running)
	f.sync(job)
	got := map[string]*v1.Pod{}
	for _, p := range f.createdPods() {
		got[p.Annotations[batch.JobCompletionIndexAnnotation]] = p
	}
	if len(got) != 2 || got["1"] == nil || got["3"] == nil {
		t.Fatalf("created indexes %v, want 1 and 3", got)
	}
	p := got["3"]
	if p.Labels[batch.JobCompletionIndexAnnotation] != "3" || p.Spec.Hostname != "pi-3" || p.GenerateName != "pi-3-" {
		t.Errorf("pod %+v", p.ObjectMeta)
	}
	env := p.Spec.Containers[0].Env
	if len(env) != 1 || env[0].Name != "JOB_COMPLETION_INDEX" || env[0].ValueFrom.FieldRef.FieldPath != "metadata.labels['batch.kubernetes.io/job-completion-index']" {
		t.Errorf("env %+v", env)
	}
	if st := f.lastStatus(); st.CompletedIndexes != "0,4" || st.Succeeded != 2 {
		t.Errorf("completedIndexes %q succeeded %d", st.CompletedIndexes, st.Succeeded)
	}
}

// Two active pods with one index: the duplicate goes.
func TestIndexedDuplicateDeleted(t *testing.T) {
	job := newJob(ptr.To(int32(3)), ptr.To(int32(3)))
	job.Spec.CompletionMode = ptr.To(batch.IndexedCompletion)
	a, b := withIndex(newPod(job, v1.PodRunning), "1"), withIndex(newPod(job, v1.PodRunning), "1")
	f := newFixture(t, job, a, b)
	f.sync(job)
	if n := len(f.actions("delete", "pods")); n != 1 {
		t.Errorf("%d deletes, want 1", n)
	}
	if n := len(f.createdPods()); n != 0 {
		t.Errorf("created %d in a sync that deletes", n)
	}
}

func TestIntervals(t *testing.T) {
	iv := parseIntervals("0,2-4,7,9-12", 11)
	if iv.String() != "0,2-4,7,9-10" || iv.total() != 7 {
		t.Errorf("parse: %s (%d)", iv, iv.total())
	}
	if got := iv.with([]int{1, 8, 5}).String(); got != "0-5,7-10" {
		t.Errorf("with: %s", got)
	}
	if !iv.has(3) || iv.has(5) || iv.has(11) {
		t.Error("has")
	}
	if got := parseIntervals("x,3-1,-2,5", 10).String(); got != "5" {
		t.Errorf("malformed: %s", got)
	}
	if got := pendingIndexes(parseIntervals("0,3", 6), []int{1}, 10, 6); len(got) != 3 || got[0] != 2 || got[1] != 4 || got[2] != 5 {
		t.Errorf("pending %v", got)
	}
	if got := pendingIndexes(nil, nil, 2, 6); len(got) != 2 || got[1] != 1 {
		t.Errorf("pending capped %v", got)
	}
}

func exitPod(job *batch.Job, code int32) *v1.Pod {
	p := newPod(job, v1.PodFailed)
	p.Status.ContainerStatuses[0].State.Terminated.ExitCode = code
	return p
}

// podFailurePolicy: FailJob ends the Job with PodFailurePolicy; Ignore
// leaves the failure uncounted (and replaced); Count counts it.
func TestPodFailurePolicy(t *testing.T) {
	policy := &batch.PodFailurePolicy{Rules: []batch.PodFailurePolicyRule{
		{Action: batch.PodFailurePolicyActionFailJob, OnExitCodes: &batch.PodFailurePolicyOnExitCodesRequirement{Operator: batch.PodFailurePolicyOnExitCodesOpIn, Values: []int32{42}}},
		{Action: batch.PodFailurePolicyActionIgnore, OnPodConditions: []batch.PodFailurePolicyOnPodConditionsPattern{{Type: v1.DisruptionTarget, Status: v1.ConditionTrue}}},
		{Action: batch.PodFailurePolicyActionCount, OnExitCodes: &batch.PodFailurePolicyOnExitCodesRequirement{Operator: batch.PodFailurePolicyOnExitCodesOpNotIn, Values: []int32{0}}},
	}}
	newPolicyJob := func() *batch.Job {
		job := newJob(ptr.To(int32(2)), ptr.To(int32(1)))
		job.Spec.PodFailurePolicy = policy
		job.Spec.PodReplacementPolicy = ptr.To(batch.Failed)
		return job
	}

	job := newPolicyJob()
	f := newFixture(t, job, exitPod(job, 42))
	f.sync(job)
	st := f.lastStatus()
	if got := condTypes(st); got != "FailureTarget=True/PodFailurePolicy,Failed=True/PodFailurePolicy" {
		t.Errorf("FailJob: conditions %s", got)
	}
	if c := st.Conditions[1]; !strings.Contains(c.Message, "failed with exit code 42 matching FailJob rule at index 0") {
		t.Errorf("FailJob message %q", c.Message)
	}

	job = newPolicyJob()
	disrupted := exitPod(job, 137)
	disrupted.Status.Conditions = []v1.PodCondition{{Type: v1.DisruptionTarget, Status: v1.ConditionTrue}}
	f = newFixture(t, job, disrupted)
	// An ignored failure still delays the replacement, as upstream's
	// backoff counts every failed pod; shrink it to see the replacement.
	f.c.PodFailureBackoff = time.Millisecond
	f.sync(job)
	if st := f.lastStatus(); st.Failed != 0 || len(st.Conditions) != 0 {
		t.Errorf("Ignore: status %+v", st)
	}
	if n := len(f.createdPods()); n != 1 {
		t.Errorf("Ignore: %d replacements, want 1", n)
	}
	if n := len(f.actions("patch", "pods")); n != 1 {
		t.Errorf("Ignore: the pod's finalizer must still go (%d patches)", n)
	}

	job = newPolicyJob()
	f = newFixture(t, job, exitPod(job, 3))
	f.sync(job)
	if st := f.lastStatus(); st.Failed != 1 || len(st.Conditions) != 0 {
		t.Errorf("Count: status %+v", st)
	}
}

// Suspending deletes the active pods (not counted failed) and sets
// JobSuspended; resuming flips it to False and restarts the clock.
func TestSuspend(t *testing.T) {
	job := newJob(ptr.To(int32(4)), ptr.To(int32(2)))
	job.Spec.Suspend = ptr.To(true)
	job.Status.StartTime = ptr.To(metav1.NewTime(now.Add(-time.Hour)))
	f := newFixture(t, job, newPod(job, v1.PodRunning), newPod(job, v1.PodRunning))
	f.sync(job)
	if n := len(f.actions("delete", "pods")); n != 2 {
		t.Errorf("%d deletes, want 2", n)
	}
	st := f.lastStatus()
	if got := condTypes(st); got != "Suspended=True/JobSuspended" || st.Active != 0 || st.Failed != 0 {
		t.Errorf("status %s %+v", got, st)
	}
	if ev := f.events(); !strings.Contains(ev, "Normal Suspended Job suspended") {
		t.Errorf("events %q", ev)
	}

	resumed := job.DeepCopy()
	resumed.Spec.Suspend = ptr.To(false)
	resumed.Status = st
	f = newFixture(t, resumed)
	f.sync(resumed)
	st = f.lastStatus()
	if got := condTypes(st); got != "Suspended=False/JobResumed" || len(f.createdPods()) != 2 || !st.StartTime.Time.Equal(now) {
		t.Errorf("resume: %s start %v created %d", got, st.StartTime, len(f.createdPods()))
	}
}

// A Job managed by another controller is left alone.
func TestManagedBy(t *testing.T) {
	job := newJob(ptr.To(int32(1)), ptr.To(int32(1)))
	job.Spec.ManagedBy = ptr.To("example.com/other")
	f := newFixture(t, job)
	f.sync(job)
	if n := len(f.client.Actions()); n != 0 {
		t.Errorf("%d actions", n)
	}
}

// A pod whose Job is gone (or finished) loses its tracking finalizer, so it
// can go; a running Job's pod keeps it, and so does another kind's pod.
func TestOrphanPodFinalizer(t *testing.T) {
	job := newJob(ptr.To(int32(1)), ptr.To(int32(1)))
	orphan := newPod(job, v1.PodRunning)
	f := newFixture(t, orphan) // no Job
	if err := f.c.syncOrphanPod(context.Background(), "default/"+orphan.Name); err != nil {
		t.Fatal(err)
	}
	if n := len(f.actions("patch", "pods")); n != 1 {
		t.Errorf("Job gone: %d patches, want 1", n)
	}

	kept := newPod(job, v1.PodRunning)
	f = newFixture(t, job, kept)
	if err := f.c.syncOrphanPod(context.Background(), "default/"+kept.Name); err != nil {
		t.Fatal(err)
	}
	if n := len(f.actions("patch", "pods")); n != 0 {
		t.Errorf("running Job: %d patches, want 0", n)
	}

	finished := job.DeepCopy()
	finished.Status.Conditions = []batch.JobCondition{{Type: batch.JobComplete, Status: v1.ConditionTrue}}
	f = newFixture(t, finished, kept)
	if err := f.c.syncOrphanPod(context.Background(), "default/"+kept.Name); err != nil {
		t.Fatal(err)
	}
	if n := len(f.actions("patch", "pods")); n != 1 {
		t.Errorf("finished Job: %d patches, want 1", n)
	}

	foreign := newPod(job, v1.PodRunning)
	foreign.OwnerReferences[0].Kind = "ReplicaSet"
	foreign.OwnerReferences[0].APIVersion = "apps/v1"
	f = newFixture(t, foreign)
	if err := f.c.syncOrphanPod(context.Background(), "default/"+foreign.Name); err != nil {
		t.Fatal(err)
	}
	if n := len(f.actions("patch", "pods")); n != 0 {
		t.Errorf("another controller's pod: %d patches, want 0", n)
	}
}

// A matching pod without a controller is adopted with the tracking
// finalizer (after a live check of the Job), and counted.
func TestAdoption(t *testing.T) {
	job := newJob(ptr.To(int32(2)), ptr.To(int32(1)))
	stray := newPod(job, v1.PodRunning)
	stray.OwnerReferences = nil
	stray.Finalizers = nil
	f := newFixture(t, job, stray)
	f.sync(job)
	patches := f.actions("patch", "pods")
	if len(patches) != 1 {
		t.Fatalf("%d patches, want 1", len(patches))
	}
	body := string(patches[0].(core.PatchAction).GetPatch())
	if !strings.Contains(body, `"controller":true`) || !strings.Contains(body, batch.JobTrackingFinalizer) || !strings.Contains(body, string(stray.UID)) {
		t.Errorf("adoption patch %s", body)
	}
	if st := f.lastStatus(); st.Active != 1 || len(f.createdPods()) != 0 {
		t.Errorf("active %d created %d: the adopted pod should count", st.Active, len(f.createdPods()))
	}
}
