package cronjob

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
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

type fixture struct {
	t        *testing.T
	client   *fake.Clientset
	c        *Controller
	recorder *record.FakeRecorder
}

// newFixture loads objects into the fake API and the informers' caches
// (not started: sync reads the caches as given) with the clock at now.
func newFixture(t *testing.T, now time.Time, objs ...runtime.Object) *fixture {
	client := fake.NewSimpleClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	rec := record.NewFakeRecorder(100)
	c := New(client, factory, rec)
	c.clock = clocktesting.NewFakePassiveClock(now)
	c.local = time.UTC
	for _, o := range objs {
		switch o := o.(type) {
		case *batch.CronJob:
			_ = factory.Batch().V1().CronJobs().Informer().GetIndexer().Add(o)
		case *batch.Job:
			_ = factory.Batch().V1().Jobs().Informer().GetIndexer().Add(o)
		}
	}
	return &fixture{t: t, client: client, c: c, recorder: rec}
}

func (f *fixture) sync(cj *batch.CronJob) {
	f.t.Helper()
	if err := f.c.sync(context.Background(), cj.Namespace+"/"+cj.Name); err != nil {
		f.t.Fatalf("sync: %v", err)
	}
}

func (f *fixture) actions(verb, resource string) []core.Action {
	var out []core.Action
	for _, a := range f.client.Actions() {
		if a.GetVerb() == verb && a.GetResource().Resource == resource && a.GetSubresource() == "" {
			out = append(out, a)
		}
	}
	return out
}

func (f *fixture) status() batch.CronJobStatus {
	f.t.Helper()
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "update" && a.GetSubresource() == "status" {
			return a.(core.UpdateAction).GetObject().(*batch.CronJob).Status
		}
	}
	f.t.Fatal("no status update")
	return batch.CronJobStatus{}
}

func (f *fixture) events() string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return strings.Join(out, "\n")
		}
	}
}

// everyFive was created at 11:59:30 and runs every five minutes.
func everyFive(mutate ...func(*batch.CronJob)) *batch.CronJob {
	cj := scheduleCJ("*/5 * * * *", at("11:59:30"), nil)
	cj.Spec.ConcurrencyPolicy = batch.AllowConcurrent
	cj.Spec.JobTemplate = batch.JobTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "backup"}, Annotations: map[string]string{"note": "kept"}},
		Spec: batch.JobSpec{Template: v1.PodTemplateSpec{Spec: v1.PodSpec{
			RestartPolicy: v1.RestartPolicyNever,
			Containers:    []v1.Container{{Name: "c", Image: "busybox:1.35"}},
		}}},
	}
	for _, m := range mutate {
		m(cj)
	}
	return cj
}

func ownedJob(cj *batch.CronJob, name string, started time.Time, finished batch.JobConditionType) *batch.Job {
	j := &batch.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cj.Namespace, UID: types.UID("uid-" + name),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(cj, controllerKind)}},
		Status: batch.JobStatus{StartTime: &metav1.Time{Time: started}},
	}
	if finished != "" {
		j.Status.Conditions = []batch.JobCondition{{Type: finished, Status: v1.ConditionTrue}}
		j.Status.CompletionTime = &metav1.Time{Time: started.Add(time.Minute)}
	}
	return j
}

func activeRef(j *batch.Job) v1.ObjectReference {
	return v1.ObjectReference{Kind: "Job", APIVersion: "batch/v1", Namespace: j.Namespace, Name: j.Name, UID: j.UID}
}

func TestDueTimeCreatesItsJob(t *testing.T) {
	cj := everyFive()
	f := newFixture(t, at("12:00:02"), cj)
	f.sync(cj)
	creates := f.actions("create", "jobs")
	if len(creates) != 1 {
		t.Fatalf("want 1 Job created, got %d", len(creates))
	}
	job := creates[0].(core.CreateAction).GetObject().(*batch.Job)
	if want := fmt.Sprintf("cj-%d", at("12:00:00").Unix()/60); job.Name != want {
		t.Errorf("Job name %q, want %q", job.Name, want)
	}
	if got := job.Annotations[batch.CronJobScheduledTimestampAnnotation]; got != "2026-12-01T12:00:00Z" {
		t.Errorf("scheduled-timestamp annotation %q", got)
	}
	if job.Labels["app"] != "backup" || job.Annotations["note"] != "kept" {
		t.Errorf("template metadata not carried: %v %v", job.Labels, job.Annotations)
	}
	if ref := metav1.GetControllerOf(job); ref == nil || ref.UID != cj.UID || ref.Kind != "CronJob" {
		t.Errorf("controller reference %+v", ref)
	}
	st := f.status()
	if len(st.Active) != 1 || st.Active[0].Name != job.Name {
		t.Errorf("status.active %+v", st.Active)
	}
	if st.LastScheduleTime == nil || !st.LastScheduleTime.Time.Equal(at("12:00:00")) {
		t.Errorf("lastScheduleTime %v", st.LastScheduleTime)
	}
	if ev := f.events(); !strings.Contains(ev, "SuccessfulCreate Created job "+job.Name) {
		t.Errorf("events: %s", ev)
	}
}

func TestTimeRunAlreadyIsNotRunAgain(t *testing.T) {
	cj := everyFive(func(cj *batch.CronJob) { cj.Status.LastScheduleTime = &metav1.Time{Time: at("12:00:00")} })
	f := newFixture(t, at("12:03:00"), cj)
	f.sync(cj)
	if n := len(f.actions("create", "jobs")); n != 0 {
		t.Errorf("%d Jobs created for a time already run", n)
	}
	// The next wake-up is just after 12:05.
	if d := nextScheduleDelay(cj, at("12:03:00"), mustParse(t, cj)); d < 2*time.Minute || d > 2*time.Minute+nextScheduleDelta {
		t.Errorf("next wake-up in %v", d)
	}
}

func TestForbidSkipsWhileAJobRuns(t *testing.T) {
	cj := everyFive(func(cj *batch.CronJob) { cj.Spec.ConcurrencyPolicy = batch.ForbidConcurrent })
	running := ownedJob(cj, "cj-running", at("11:55:00"), "")
	cj.Status.Active = []v1.ObjectReference{activeRef(running)}
	f := newFixture(t, at("12:00:05"), cj, running)
	f.sync(cj)
	if n := len(f.actions("create", "jobs")); n != 0 {
		t.Errorf("Forbid created %d Jobs while one runs", n)
	}
	if ev := f.events(); !strings.Contains(ev, "JobAlreadyActive") {
		t.Errorf("events: %s", ev)
	}
}

func TestReplaceDeletesTheRunningJob(t *testing.T) {
	cj := everyFive(func(cj *batch.CronJob) { cj.Spec.ConcurrencyPolicy = batch.ReplaceConcurrent })
	running := ownedJob(cj, "cj-running", at("11:55:00"), "")
	cj.Status.Active = []v1.ObjectReference{activeRef(running)}
	f := newFixture(t, at("12:00:05"), cj, running)
	f.sync(cj)
	deletes := f.actions("delete", "jobs")
	if len(deletes) != 1 || deletes[0].(core.DeleteAction).GetName() != "cj-running" {
		t.Fatalf("want the running Job deleted, got %v", deletes)
	}
	if n := len(f.actions("create", "jobs")); n != 1 {
		t.Errorf("want its replacement created, got %d creates", n)
	}
	st := f.status()
	if len(st.Active) != 1 || st.Active[0].Name == "cj-running" {
		t.Errorf("status.active %+v", st.Active)
	}
}

func TestAllowRunsConcurrently(t *testing.T) {
	cj := everyFive()
	running := ownedJob(cj, "cj-running", at("11:55:00"), "")
	cj.Status.Active = []v1.ObjectReference{activeRef(running)}
	f := newFixture(t, at("12:00:05"), cj, running)
	f.sync(cj)
	if n := len(f.actions("create", "jobs")); n != 1 {
		t.Errorf("Allow: want 1 more Job, got %d", n)
	}
	if n := len(f.actions("delete", "jobs")); n != 0 {
		t.Errorf("Allow deleted %d Jobs", n)
	}
	if st := f.status(); len(st.Active) != 2 {
		t.Errorf("want 2 active, got %+v", st.Active)
	}
}

func TestSuspendedCreatesNothing(t *testing.T) {
	cj := everyFive(func(cj *batch.CronJob) { cj.Spec.Suspend = ptr.To(true) })
	f := newFixture(t, at("12:10:00"), cj)
	f.sync(cj)
	if n := len(f.actions("create", "jobs")); n != 0 {
		t.Errorf("a suspended CronJob created %d Jobs", n)
	}
}

func TestStartingDeadlinePassed(t *testing.T) {
	cj := everyFive(func(cj *batch.CronJob) { cj.Spec.StartingDeadlineSeconds = ptr.To[int64](30) })
	f := newFixture(t, at("12:01:00"), cj) // 60 s late for 12:00
	f.sync(cj)
	if n := len(f.actions("create", "jobs")); n != 0 {
		t.Errorf("a time past its starting deadline created %d Jobs", n)
	}
	// Within the deadline it starts.
	f = newFixture(t, at("12:00:20"), cj)
	f.sync(cj)
	if n := len(f.actions("create", "jobs")); n != 1 {
		t.Errorf("a time within its starting deadline: %d Jobs", n)
	}
}

func TestFinishedJobLeavesActiveAndSetsLastSuccessful(t *testing.T) {
	cj := everyFive(func(cj *batch.CronJob) { cj.Status.LastScheduleTime = &metav1.Time{Time: at("12:00:00")} })
	done := ownedJob(cj, "cj-done", at("12:00:01"), batch.JobComplete)
	cj.Status.Active = []v1.ObjectReference{activeRef(done)}
	f := newFixture(t, at("12:02:00"), cj, done)
	f.sync(cj)
	st := f.status()
	if len(st.Active) != 0 {
		t.Errorf("a finished Job stays active: %+v", st.Active)
	}
	if st.LastSuccessfulTime == nil || !st.LastSuccessfulTime.Time.Equal(done.Status.CompletionTime.Time) {
		t.Errorf("lastSuccessfulTime %v", st.LastSuccessfulTime)
	}
	if ev := f.events(); !strings.Contains(ev, "SawCompletedJob") {
		t.Errorf("events: %s", ev)
	}
}

func TestHistoryLimits(t *testing.T) {
	cj := everyFive(func(cj *batch.CronJob) {
		cj.Spec.SuccessfulJobsHistoryLimit = ptr.To[int32](1)
		cj.Spec.FailedJobsHistoryLimit = ptr.To[int32](0)
		cj.Status.LastScheduleTime = &metav1.Time{Time: at("12:00:00")}
	})
	objs := []runtime.Object{cj,
		ownedJob(cj, "ok-1", at("11:40:00"), batch.JobComplete),
		ownedJob(cj, "ok-2", at("11:50:00"), batch.JobComplete),
		ownedJob(cj, "ok-3", at("12:00:00"), batch.JobComplete),
		ownedJob(cj, "bad-1", at("11:45:00"), batch.JobFailed),
	}
	f := newFixture(t, at("12:01:00"), objs...)
	f.sync(cj)
	deleted := map[string]bool{}
	for _, a := range f.actions("delete", "jobs") {
		deleted[a.(core.DeleteAction).GetName()] = true
	}
	if len(deleted) != 3 || !deleted["ok-1"] || !deleted["ok-2"] || !deleted["bad-1"] {
		t.Errorf("want the two oldest successful and the failed Job deleted, got %v", deleted)
	}
}

func TestTimeZoneAndBadZone(t *testing.T) {
	// 21:00 in Tokyo is 12:00 UTC.
	cj := everyFive(func(cj *batch.CronJob) { cj.Spec.Schedule = "0 21 * * *"; cj.Spec.TimeZone = ptr.To("Asia/Tokyo") })
	f := newFixture(t, at("12:00:10"), cj)
	f.sync(cj)
	creates := f.actions("create", "jobs")
	if len(creates) != 1 {
		t.Fatalf("want a Job at 21:00 Tokyo, got %d", len(creates))
	}
	job := creates[0].(core.CreateAction).GetObject().(*batch.Job)
	if got := job.Annotations[batch.CronJobScheduledTimestampAnnotation]; got != "2026-12-01T21:00:00+09:00" {
		t.Errorf("scheduled timestamp in the CronJob's zone: %q", got)
	}
	bad := everyFive(func(cj *batch.CronJob) { cj.Spec.TimeZone = ptr.To("Mars/Olympus") })
	f = newFixture(t, at("12:00:10"), bad)
	f.sync(bad)
	if n := len(f.actions("create", "jobs")); n != 0 {
		t.Errorf("a bad zone created %d Jobs", n)
	}
	if ev := f.events(); !strings.Contains(ev, "UnknownTimeZone") {
		t.Errorf("events: %s", ev)
	}
}

func TestManualJobIsNotAdopted(t *testing.T) {
	// kubectl create job --from=cronjob/cj: controlled by the CronJob,
	// not on its active list, so not counted for Forbid.
	cj := everyFive(func(cj *batch.CronJob) { cj.Spec.ConcurrencyPolicy = batch.ForbidConcurrent })
	manual := ownedJob(cj, "manual", at("11:58:00"), "")
	f := newFixture(t, at("12:00:05"), cj, manual)
	f.sync(cj)
	if n := len(f.actions("create", "jobs")); n != 1 {
		t.Errorf("a manual Job blocked the schedule: %d creates", n)
	}
	if ev := f.events(); !strings.Contains(ev, "UnexpectedJob") {
		t.Errorf("events: %s", ev)
	}
}

func TestUnparseableScheduleDoesNotPanic(t *testing.T) {
	for _, s := range []string{"", "not a schedule", "61 * * * *", "* * * *", "TZ=UTC", "0 0 30 2 *"} {
		cj := everyFive(func(cj *batch.CronJob) { cj.Spec.Schedule = s })
		f := newFixture(t, at("12:00:10"), cj)
		f.sync(cj)
		if n := len(f.actions("create", "jobs")); n != 0 {
			t.Errorf("schedule %q created %d Jobs", s, n)
		}
	}
}

func mustParse(t *testing.T, cj *batch.CronJob) interface{ Next(time.Time) time.Time } {
	t.Helper()
	s, err := parseSchedule(cj, time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
