package cronjob

import (
	"fmt"
	"strings"
	"testing"
	"time"

	batch "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// t0 is a Tuesday noon, UTC.
var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func at(hhmmss string) time.Time {
	d, err := time.Parse("15:04:05", hhmmss)
	if err != nil {
		panic(err)
	}
	return time.Date(t0.Year(), t0.Month(), t0.Day(), d.Hour(), d.Minute(), d.Second(), 0, time.UTC)
}

func scheduleCJ(schedule string, created time.Time, tz *string) *batch.CronJob {
	return &batch.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "cj", Namespace: "default", UID: "uid-cj", CreationTimestamp: metav1.NewTime(created)},
		Spec:       batch.CronJobSpec{Schedule: schedule, TimeZone: tz},
	}
}

func TestMostRecentScheduleTime(t *testing.T) {
	kolkata, err := time.LoadLocation("Asia/Kolkata")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		cj       *batch.CronJob
		local    *time.Location
		now      time.Time
		deadline bool
		want     time.Time // zero: none due
		missed   missed
		wantErr  bool
	}{
		{"nothing due yet", scheduleCJ("*/5 * * * *", at("11:59:30"), nil), time.UTC, at("11:59:59"), false, time.Time{}, noneMissed, false},
		{"due at the time", scheduleCJ("*/5 * * * *", at("11:59:30"), nil), time.UTC, at("12:00:00"), false, at("12:00:00"), noneMissed, false},
		{"the latest of several missed", scheduleCJ("*/5 * * * *", at("11:59:30"), nil), time.UTC, at("12:17:00"), false, at("12:15:00"), fewMissed, false},
		{"from lastScheduleTime, not creation", func() *batch.CronJob {
			cj := scheduleCJ("*/5 * * * *", at("10:00:00"), nil)
			cj.Status.LastScheduleTime = &metav1.Time{Time: at("12:10:00")}
			return cj
		}(), time.UTC, at("12:14:59"), false, time.Time{}, noneMissed, false},
		{"@hourly", scheduleCJ("@hourly", at("10:30:00"), nil), time.UTC, at("11:10:00"), false, at("11:00:00"), noneMissed, false},
		{"@every 90m counts from creation", scheduleCJ("@every 90m", at("09:00:00"), nil), time.UTC, at("12:10:00"), false, at("12:00:00"), fewMissed, false},
		{"irregular hours and weekdays", scheduleCJ("30 6-16/4 * * 1-5", at("06:00:00"), nil), time.UTC, at("15:00:00"), false, at("14:30:00"), fewMissed, false},
		{"timeZone: 09:00 Tokyo is 00:00 UTC", scheduleCJ("0 9 * * *", at("12:00:00"), ptr.To("Asia/Tokyo")), time.UTC, t0.Add(12*time.Hour + 30*time.Minute), false, t0.Add(12 * time.Hour), noneMissed, false},
		{"no zone: the server's local one", scheduleCJ("0 * * * *", at("11:00:00"), nil), kolkata, at("12:10:00"), false, at("11:30:00"), noneMissed, false},
		{"timeZone wins over local", scheduleCJ("0 * * * *", at("11:00:00"), ptr.To("UTC")), kolkata, at("12:10:00"), false, at("12:00:00"), noneMissed, false},
		{"grandfathered TZ= prefix", scheduleCJ("TZ=Asia/Kolkata 0 * * * *", at("11:00:00"), nil), time.UTC, at("12:10:00"), false, at("11:30:00"), noneMissed, false},
		{"startingDeadline: a time past it is not due", func() *batch.CronJob {
			cj := scheduleCJ("*/5 * * * *", at("11:59:30"), nil)
			cj.Spec.StartingDeadlineSeconds = ptr.To(int64(10))
			return cj
		}(), time.UTC, at("12:00:30"), true, time.Time{}, noneMissed, false},
		{"startingDeadline: a time within it is", func() *batch.CronJob {
			cj := scheduleCJ("*/5 * * * *", at("11:59:30"), nil)
			cj.Spec.StartingDeadlineSeconds = ptr.To(int64(60))
			return cj
		}(), time.UTC, at("12:00:30"), true, at("12:00:00"), noneMissed, false},
		{"many missed", scheduleCJ("* * * * *", at("09:00:00"), nil), time.UTC, at("12:00:30"), false, at("12:00:00"), manyMissed, false},
		{"impossible date", scheduleCJ("0 0 30 2 *", at("09:00:00"), nil), time.UTC, at("12:00:00"), false, time.Time{}, noneMissed, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sched, err := parseSchedule(tc.cj, tc.local)
			if err != nil {
				t.Fatal(err)
			}
			_, got, m, err := mostRecentScheduleTime(tc.cj, tc.now, sched, tc.deadline)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			switch {
			case tc.want.IsZero() && got != nil:
				t.Errorf("got %v, want none due", got)
			case !tc.want.IsZero() && (got == nil || !got.Equal(tc.want)):
				t.Errorf("got %v, want %v", got, tc.want)
			}
			if m != tc.missed {
				t.Errorf("missed %v, want %v", m, tc.missed)
			}
		})
	}
}

func TestNextScheduleDelay(t *testing.T) {
	cj := scheduleCJ("*/5 * * * *", at("11:59:30"), nil)
	sched, _ := parseSchedule(cj, time.UTC)
	if d := nextScheduleDelay(cj, at("11:58:00"), sched); d != 2*time.Minute+nextScheduleDelta {
		t.Errorf("before the first time: %v", d)
	}
	// Missed times (no lastScheduleTime yet): the time after now.
	if d := nextScheduleDelay(cj, at("12:13:00"), sched); d != 2*time.Minute+nextScheduleDelta {
		t.Errorf("after missed times: %v", d)
	}
	cj.Status.LastScheduleTime = &metav1.Time{Time: at("12:10:00")}
	if d := nextScheduleDelay(cj, at("12:10:00"), sched); d != 5*time.Minute+nextScheduleDelta {
		t.Errorf("just after a run: %v", d)
	}
	// An impossible schedule has no next time: looked at once more (that
	// sync reports it), never a negative delay.
	bad := scheduleCJ("0 0 30 2 *", at("11:00:00"), nil)
	bs, _ := parseSchedule(bad, time.UTC)
	if d := nextScheduleDelay(bad, at("12:00:00"), bs); d != 0 {
		t.Errorf("impossible schedule: %v", d)
	}
}

// Bad schedules are errors, never panics (robfig/cron slices a TZ= prefix
// with no schedule after it out of range).
func TestParseScheduleRefusesBadInput(t *testing.T) {
	for _, s := range []string{"", "TZ=UTC", "CRON_TZ=Asia/Tokyo", "TZ=Nowhere/Land * * * * *", "* * * *", "61 * * * *", "@fortnightly", "@every soon"} {
		if _, err := parseSchedule(scheduleCJ(s, t0, nil), time.UTC); err == nil {
			t.Errorf("%q parsed", s)
		}
	}
	if _, err := parseSchedule(scheduleCJ("*/5 * * * *", t0, ptr.To("Nowhere/Land")), time.UTC); err == nil {
		t.Error("an unknown timeZone parsed")
	}
}

func TestJobFromTemplate(t *testing.T) {
	cj := scheduleCJ("0 9 * * *", t0, ptr.To("Asia/Tokyo"))
	cj.Spec.JobTemplate.Labels = map[string]string{"app": "report"}
	cj.Spec.JobTemplate.Annotations = map[string]string{"note": "nightly"}
	cj.Spec.JobTemplate.Spec.BackoffLimit = ptr.To(int32(2))
	scheduled := t0.Add(12 * time.Hour) // 09:00 in Tokyo
	job, err := jobFromTemplate(cj, scheduled)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("cj-%d", scheduled.Unix()/60); job.Name != want {
		t.Errorf("name %q, want %q", job.Name, want)
	}
	if got := job.Annotations[batch.CronJobScheduledTimestampAnnotation]; got != "2026-12-02T09:00:00+09:00" {
		t.Errorf("scheduled-timestamp %q, want RFC 3339 in the CronJob's zone", got)
	}
	if job.Labels["app"] != "report" || job.Annotations["note"] != "nightly" || ptr.Deref(job.Spec.BackoffLimit, 0) != 2 {
		t.Errorf("template not copied: %+v", job.ObjectMeta)
	}
	ref := metav1.GetControllerOf(job)
	if ref == nil || ref.Kind != "CronJob" || ref.APIVersion != "batch/v1" || ref.UID != cj.UID || !ptr.Deref(ref.BlockOwnerDeletion, false) {
		t.Errorf("controller reference %+v", ref)
	}
	// The copy is the Job's own: changing it leaves the template alone.
	job.Labels["app"] = "x"
	if cj.Spec.JobTemplate.Labels["app"] != "report" {
		t.Error("the Job shares the template's labels")
	}
	utc, _ := jobFromTemplate(scheduleCJ("0 * * * *", t0, nil), t0)
	if got := utc.Annotations[batch.CronJobScheduledTimestampAnnotation]; !strings.HasSuffix(got, "Z") {
		t.Errorf("without a timeZone the timestamp is UTC, got %q", got)
	}
}
