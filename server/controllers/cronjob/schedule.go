package cronjob

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	batch "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kelp-project/kelp/server/cronschedule"
)

// nextScheduleDelta pads every requeue past the scheduled instant, as
// upstream, so a clock a little behind the queue's does not wake the
// sync just before the time it is waiting for.
const nextScheduleDelta = 100 * time.Millisecond

// tooManyMissed is upstream's bound: more missed start times than this
// (an hourly CronJob left four days, or a clock off by decades) draws the
// TooManyMissedTimes warning. Only the most recent one is ever started.
const tooManyMissed = 100

type missed int

const (
	noneMissed missed = iota
	fewMissed
	manyMissed
)

// scheduleString is the spec as robfig/cron reads it: spec.timeZone
// becomes its TZ= prefix. A schedule that carries TZ or CRON_TZ itself
// (grandfathered: validation refuses it on create) is read as written.
func scheduleString(cj *batch.CronJob) string {
	if strings.Contains(cj.Spec.Schedule, "TZ") || cj.Spec.TimeZone == nil {
		return cj.Spec.Schedule
	}
	return "TZ=" + *cj.Spec.TimeZone + " " + cj.Spec.Schedule
}

// parseSchedule parses cj's schedule with robfig/cron's standard grammar
// (five fields, or @hourly, @daily, @every 1h30m...). A schedule with no
// zone at all is read in local, the zone kube-controller-manager would
// read it in (its own), which is the server's: kelp's controller manager
// runs inside it.
func parseSchedule(cj *batch.CronJob, local *time.Location) (cron.Schedule, error) {
	s := scheduleString(cj)
	sched, err := cronschedule.Parse(s)
	if err != nil {
		return nil, err
	}
	if spec, ok := sched.(*cron.SpecSchedule); ok && s == cj.Spec.Schedule && !strings.Contains(s, "TZ") && local != nil {
		spec.Location = local
	}
	return sched, nil
}

// mostRecentScheduleTime returns the time the search starts from
// (lastScheduleTime, else the creation time; with withDeadline, no
// earlier than startingDeadlineSeconds ago), the latest schedule time in
// (that, now] or nil, and how many were missed. A schedule that parses
// but never comes twice a second apart (30 February) is an error.
//
// Walking every missed time would cost a decade of minutes after a clock
// jump, so the count is estimated from the interval between the first two
// times, as upstream, and the walk starts two intervals before the end.
func mostRecentScheduleTime(cj *batch.CronJob, now time.Time, sched cron.Schedule, withDeadline bool) (time.Time, *time.Time, missed, error) {
	earliest := cj.CreationTimestamp.Time
	if cj.Status.LastScheduleTime != nil {
		earliest = cj.Status.LastScheduleTime.Time
	}
	if withDeadline && cj.Spec.StartingDeadlineSeconds != nil {
		if d := now.Add(-time.Duration(*cj.Spec.StartingDeadlineSeconds) * time.Second); d.After(earliest) {
			earliest = d
		}
	}
	t1 := sched.Next(earliest)
	t2 := sched.Next(t1)
	if now.Before(t1) {
		return earliest, nil, noneMissed, nil
	}
	if now.Before(t2) {
		return earliest, &t1, noneMissed, nil
	}
	interval := int64(t2.Sub(t1).Round(time.Second).Seconds())
	if interval < 1 {
		return earliest, nil, noneMissed, fmt.Errorf("time difference between two schedules is less than 1 second")
	}
	count := int64(now.Sub(t1).Seconds())/interval + 1
	// Two intervals back, so an irregular schedule (30 6-16/4 * * 1-5)
	// or an @every one still lands on its real most recent time.
	var recent time.Time
	for t := sched.Next(t1.Add(time.Duration((count-2)*interval) * time.Second)); !t.After(now); t = sched.Next(t) {
		recent = t
	}
	m := fewMissed
	if count > tooManyMissed {
		m = manyMissed
	}
	if recent.IsZero() {
		return earliest, nil, m, nil
	}
	return earliest, &recent, m, nil
}

// nextScheduleDelay is how long until the sync after now should run: the
// schedule time after the most recent one (or after now, when times were
// missed or the schedule cannot be counted), plus the padding.
func nextScheduleDelay(cj *batch.CronJob, now time.Time, sched cron.Schedule) time.Duration {
	earliest, recent, m, err := mostRecentScheduleTime(cj, now, sched, false)
	switch {
	case err != nil:
		recent = &now
	case recent == nil && m == noneMissed:
		recent = &earliest
	case recent == nil:
		recent = &now
	}
	next := sched.Next(*recent)
	if next.IsZero() {
		// An impossible schedule (30 February) has no next time: look at
		// once, and that sync reports it (InvalidSchedule) and stops.
		return 0
	}
	return next.Add(nextScheduleDelta).Sub(now)
}

// jobName is upstream's <cronjob>-<scheduled time in minutes since the
// epoch>: one name per scheduled time, so the name itself is the lock
// that keeps a time from being run twice (by a restarted controller, or
// one reading a stale cache). Validation keeps CronJob names to 52
// characters so this fits a label value.
func jobName(cj *batch.CronJob, scheduled time.Time) string {
	return fmt.Sprintf("%s-%d", cj.Name, scheduled.Unix()/60)
}

// jobFromTemplate is the Job for one scheduled time: the template's
// labels, annotations and spec, upstream's scheduled-timestamp annotation
// (RFC 3339 in the CronJob's time zone, UTC without one) and a controller
// reference that blocks the CronJob's foreground deletion until the Job
// is gone.
func jobFromTemplate(cj *batch.CronJob, scheduled time.Time) (*batch.Job, error) {
	loc, err := time.LoadLocation(ptr.Deref(cj.Spec.TimeZone, ""))
	if err != nil {
		return nil, err
	}
	labels := make(map[string]string, len(cj.Spec.JobTemplate.Labels))
	for k, v := range cj.Spec.JobTemplate.Labels {
		labels[k] = v
	}
	annotations := make(map[string]string, len(cj.Spec.JobTemplate.Annotations)+1)
	for k, v := range cj.Spec.JobTemplate.Annotations {
		annotations[k] = v
	}
	annotations[batch.CronJobScheduledTimestampAnnotation] = scheduled.In(loc).Format(time.RFC3339)
	job := &batch.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:            jobName(cj, scheduled),
			Namespace:       cj.Namespace,
			Labels:          labels,
			Annotations:     annotations,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(cj, controllerKind)},
		},
	}
	cj.Spec.JobTemplate.Spec.DeepCopyInto(&job.Spec)
	return job, nil
}
