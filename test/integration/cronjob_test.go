package integration

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kelp-project/kelp/test/simkubelet"
)

// TestCronJob waits for one real minute boundary: a CronJob running every
// minute starts its Job then (named for the time, annotated with it) and
// records it; the Job completes and the CronJob's lastSuccessfulTime
// follows. Meanwhile `kubectl create job --from=cronjob/...` runs one at
// once, and a suspended CronJob with the same schedule starts nothing.
func TestCronJob(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := context.Background()
	simkubelet.Start(t, cs, "node-1")

	cronJob := func(name string, suspend bool) *batchv1.CronJob {
		job := testJob("", 1, 1, 0, "1s")
		return &batchv1.CronJob{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: batchv1.CronJobSpec{
				Schedule: "* * * * *", Suspend: ptr.To(suspend), ConcurrencyPolicy: batchv1.ForbidConcurrent,
				JobTemplate: batchv1.JobTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"cron": name}}, Spec: job.Spec},
			},
		}
	}
	for _, cj := range []*batchv1.CronJob{cronJob("tick", false), cronJob("paused", true)} {
		if _, err := cs.BatchV1().CronJobs("default").Create(ctx, cj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// A Job by hand, from the CronJob's template, runs at once.
	if out, err := s.kubectl("create", "job", "--from=cronjob/tick", "by-hand"); err != nil {
		t.Fatalf("create job --from: %v\n%s", err, out)
	}
	manual := waitJob(t, cs, "by-hand", 30*time.Second, func(j *batchv1.Job) bool { return jobCondition(j, batchv1.JobComplete) != nil })
	if manual.Annotations["cronjob.kubernetes.io/instantiate"] != "manual" || metav1.GetControllerOf(manual) == nil {
		t.Errorf("manual Job's annotations %v, owner %v", manual.Annotations, manual.OwnerReferences)
	}

	// The first minute boundary after creation starts tick's Job.
	var job batchv1.Job
	waitWithin(t, 70*time.Second, "tick's scheduled Job", func() bool {
		l, err := cs.BatchV1().Jobs("default").List(ctx, metav1.ListOptions{LabelSelector: "cron=tick"})
		if err != nil {
			return false
		}
		for _, j := range l.Items {
			if j.Name != "by-hand" {
				job = j
				return true
			}
		}
		return false
	})
	stamp, err := time.Parse(time.RFC3339, job.Annotations[batchv1.CronJobScheduledTimestampAnnotation])
	if err != nil {
		t.Fatalf("scheduled-timestamp annotation: %v (%v)", err, job.Annotations)
	}
	if stamp.Second() != 0 || job.Name != "tick-"+strconv.FormatInt(stamp.Unix()/60, 10) {
		t.Errorf("Job %s for scheduled time %v: want the name tick-<minutes since the epoch> of a whole minute", job.Name, stamp)
	}
	waitJob(t, cs, job.Name, 30*time.Second, func(j *batchv1.Job) bool { return jobCondition(j, batchv1.JobComplete) != nil })
	waitWithin(t, 30*time.Second, "tick's status: last schedule and last success, nothing active", func() bool {
		cj, err := cs.BatchV1().CronJobs("default").Get(ctx, "tick", metav1.GetOptions{})
		return err == nil && cj.Status.LastScheduleTime != nil && cj.Status.LastScheduleTime.Time.Equal(stamp) &&
			cj.Status.LastSuccessfulTime != nil && len(cj.Status.Active) == 0
	})
	out := s.mustKubectl("get", "cronjob", "tick")
	if !strings.Contains(out, "LAST SCHEDULE") || !strings.Contains(out, "* * * * *") {
		t.Errorf("kubectl get cronjob:\n%s", out)
	}
	events := s.mustKubectl("get", "events", "--field-selector", "involvedObject.name=tick")
	for _, want := range []string{"SuccessfulCreate", "SawCompletedJob"} {
		if !strings.Contains(events, want) {
			t.Errorf("tick's events lack %s:\n%s", want, events)
		}
	}

	// The suspended one saw the same boundary and started nothing.
	l, err := cs.BatchV1().Jobs("default").List(ctx, metav1.ListOptions{LabelSelector: "cron=paused"})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 0 {
		t.Errorf("a suspended CronJob started %d Jobs", len(l.Items))
	}
}
