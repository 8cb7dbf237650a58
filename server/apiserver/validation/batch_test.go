package validation

import (
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestJobCreate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(j *batchv1.Job)
		wants  []want
	}{
		{"valid job with generated selector", func(j *batchv1.Job) {}, nil},
		{"restartPolicy Always is rejected", func(j *batchv1.Job) { j.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways },
			[]want{{field.ErrorTypeRequired, "spec.template.spec.restartPolicy", `valid values: "OnFailure", "Never"`}}},
		{"negative parallelism", func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To(int32(-1)) },
			[]want{{field.ErrorTypeInvalid, "spec.parallelism", ""}}},
		{"negative completions", func(j *batchv1.Job) { j.Spec.Completions = ptr.To(int32(-1)) },
			[]want{{field.ErrorTypeInvalid, "spec.completions", ""}}},
		{"negative backoffLimit", func(j *batchv1.Job) { j.Spec.BackoffLimit = ptr.To(int32(-1)) },
			[]want{{field.ErrorTypeInvalid, "spec.backoffLimit", ""}}},
		{"selector required", func(j *batchv1.Job) { j.Spec.Selector = nil },
			[]want{{field.ErrorTypeRequired, "spec.selector", ""}}},
		{"selector must match template", func(j *batchv1.Job) {
			j.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"x": "y"}}
		}, []want{{field.ErrorTypeInvalid, "spec.template.metadata.labels", "does not match"}}},
		{"indexed needs completions", func(j *batchv1.Job) {
			j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
			j.Spec.Completions = nil
		}, []want{{field.ErrorTypeRequired, "spec.completions", "when completion mode is Indexed"}}},
		{"completion mode value", func(j *batchv1.Job) { j.Spec.CompletionMode = ptr.To(batchv1.CompletionMode("Sometimes")) },
			[]want{{field.ErrorTypeNotSupported, "spec.completionMode", ""}}},
		{"pod failure policy needs Never", func(j *batchv1.Job) {
			j.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
			j.Spec.PodReplacementPolicy = ptr.To(batchv1.Failed)
			j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
				Action: batchv1.PodFailurePolicyActionFailJob,
				OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
					Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{42}},
			}}}
		}, []want{{field.ErrorTypeInvalid, "spec.template.spec.restartPolicy", `only "Never" is supported`}}},
		{"FailIndex needs backoffLimitPerIndex", func(j *batchv1.Job) {
			j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
			j.Spec.Completions = ptr.To(int32(2))
			j.Spec.PodReplacementPolicy = ptr.To(batchv1.Failed)
			j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
				Action: batchv1.PodFailurePolicyActionFailIndex,
				OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
					Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{42}},
			}}}
		}, []want{{field.ErrorTypeInvalid, "spec.podFailurePolicy.rules[0].action", "requires the backoffLimitPerIndex to be set"}}},
		{"maxFailedIndexes needed above 100000 completions with backoffLimitPerIndex", func(j *batchv1.Job) {
			j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
			j.Spec.Completions = ptr.To(int32(100001))
			j.Spec.BackoffLimitPerIndex = ptr.To(int32(1))
		}, []want{{field.ErrorTypeRequired, "spec.maxFailedIndexes", "must be specified when completions is above 100000"}}},
		{"valid successPolicy", func(j *batchv1.Job) {
			indexedFive(j)
			j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{
				{SucceededIndexes: ptr.To("0,2-4"), SucceededCount: ptr.To(int32(4))}, {SucceededCount: ptr.To(int32(5))}}}
		}, nil},
		{"successPolicy needs indexed", func(j *batchv1.Job) {
			j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{SucceededCount: ptr.To(int32(1))}}}
		}, []want{{field.ErrorTypeInvalid, "spec.successPolicy", "requires indexed completion mode"}}},
		{"successPolicy needs rules", func(j *batchv1.Job) {
			indexedFive(j)
			j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{}
		}, []want{{field.ErrorTypeRequired, "spec.successPolicy.rules", "at least one rules must be specified"}}},
		{"successPolicy at most 20 rules", func(j *batchv1.Job) {
			indexedFive(j)
			j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: make([]batchv1.SuccessPolicyRule, 21)}
			for i := range j.Spec.SuccessPolicy.Rules {
				j.Spec.SuccessPolicy.Rules[i].SucceededCount = ptr.To(int32(1))
			}
		}, []want{{field.ErrorTypeTooMany, "spec.successPolicy.rules", ""}}},
		{"successPolicy empty rule", func(j *batchv1.Job) {
			indexedFive(j)
			j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{}}}
		}, []want{{field.ErrorTypeRequired, "spec.successPolicy.rules[0]", "at least one of succeededCount or succeededIndexes"}}},
		{"successPolicy index too large", func(j *batchv1.Job) {
			indexedFive(j)
			j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{SucceededIndexes: ptr.To("1-5")}}}
		}, []want{{field.ErrorTypeInvalid, "spec.successPolicy.rules[0].succeededIndexes", `error parsing succeededIndexes: too large index: "5"`}}},
		{"successPolicy indexes not increasing", func(j *batchv1.Job) {
			indexedFive(j)
			j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{SucceededIndexes: ptr.To("1-3,2")}}}
		}, []want{{field.ErrorTypeInvalid, "spec.successPolicy.rules[0].succeededIndexes", "non-increasing order, previous: 3, current: 2"}}},
		{"successPolicy count over completions and listed indexes", func(j *batchv1.Job) {
			indexedFive(j)
			j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{
				{SucceededIndexes: ptr.To("0-1"), SucceededCount: ptr.To(int32(3))}, {SucceededCount: ptr.To(int32(6))}}}
		}, []want{
			{field.ErrorTypeInvalid, "spec.successPolicy.rules[0].succeededCount", "must be less than or equal to 2 (the number of indexes in the specified succeededIndexes field)"},
			{field.ErrorTypeInvalid, "spec.successPolicy.rules[1].succeededCount", "must be less than or equal to 5 (the number of specified completions)"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j := defaulted(simpleJob())
			tc.mutate(j)
			expectErrors(t, Validate(j), tc.wants)
		})
	}
}

func TestJobUpdate(t *testing.T) {
	old := defaulted(simpleJob())
	old.ResourceVersion = "1"

	ok := old.DeepCopy()
	ok.Spec.Parallelism = ptr.To(int32(3))
	ok.Spec.ActiveDeadlineSeconds = ptr.To(int64(600))
	expectErrors(t, ValidateUpdate(ok, old), nil)

	tmpl := old.DeepCopy()
	tmpl.Spec.Template.Spec.Containers[0].Image = "perl:5.36"
	expectErrors(t, ValidateUpdate(tmpl, old), []want{{field.ErrorTypeInvalid, "spec.template", "field is immutable"}})

	sel := old.DeepCopy()
	sel.Spec.Selector.MatchLabels["extra"] = "x"
	sel.Spec.Template.Labels["extra"] = "x"
	expectErrors(t, ValidateUpdate(sel, old), []want{{field.ErrorTypeInvalid, "spec.selector", "field is immutable"}})

	comp := old.DeepCopy()
	comp.Spec.Completions = ptr.To(int32(5))
	expectErrors(t, ValidateUpdate(comp, old), []want{{field.ErrorTypeInvalid, "spec.completions", "field is immutable"}})

	// A suspended Job that never ran may be re-targeted.
	suspended := old.DeepCopy()
	suspended.Spec.Suspend = ptr.To(true)
	retarget := suspended.DeepCopy()
	retarget.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "batch"}
	expectErrors(t, ValidateUpdate(retarget, suspended), nil)

	status := old.DeepCopy()
	status.Status.Active = -1
	expectErrors(t, ValidateStatusUpdate(status, old), []want{{field.ErrorTypeInvalid, "status.active", ""}})
}

func cronJob() *batchv1.CronJob {
	j := simpleJob()
	return &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "default"},
		Spec: batchv1.CronJobSpec{
			Schedule:    "0 3 * * *",
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: j.Spec.Template}},
		},
	}
}

func TestCronJob(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(c *batchv1.CronJob)
		wants  []want
	}{
		{"valid", func(c *batchv1.CronJob) {}, nil},
		{"descriptor", func(c *batchv1.CronJob) { c.Spec.Schedule = "@hourly" }, nil},
		{"steps, ranges and names", func(c *batchv1.CronJob) { c.Spec.Schedule = "*/15 9-17 * JAN-MAR mon-fri" }, nil},
		{"time zone field", func(c *batchv1.CronJob) { c.Spec.TimeZone = ptr.To("Europe/Berlin") }, nil},
		{"schedule required", func(c *batchv1.CronJob) { c.Spec.Schedule = "" },
			[]want{{field.ErrorTypeRequired, "spec.schedule", ""}}},
		{"four fields", func(c *batchv1.CronJob) { c.Spec.Schedule = "* * * *" },
			[]want{{field.ErrorTypeInvalid, "spec.schedule", "expected exactly 5 fields, found 4: [* * * *]"}}},
		{"minute out of range", func(c *batchv1.CronJob) { c.Spec.Schedule = "61 * * * *" },
			[]want{{field.ErrorTypeInvalid, "spec.schedule", "end of range (61) above maximum (59): 61"}}},
		{"garbage", func(c *batchv1.CronJob) { c.Spec.Schedule = "every day" },
			[]want{{field.ErrorTypeInvalid, "spec.schedule", ""}}},
		{"TZ in schedule", func(c *batchv1.CronJob) { c.Spec.Schedule = "TZ=UTC 0 3 * * *" },
			[]want{{field.ErrorTypeInvalid, "spec.schedule", "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"}}},
		{"unknown time zone", func(c *batchv1.CronJob) { c.Spec.TimeZone = ptr.To("Mars/Olympus") },
			[]want{{field.ErrorTypeInvalid, "spec.timeZone", ""}}},
		{"concurrency policy", func(c *batchv1.CronJob) { c.Spec.ConcurrencyPolicy = "Sometimes" },
			[]want{{field.ErrorTypeNotSupported, "spec.concurrencyPolicy", ""}}},
		{"job template restartPolicy", func(c *batchv1.CronJob) {
			c.Spec.JobTemplate.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
		}, []want{{field.ErrorTypeRequired, "spec.jobTemplate.spec.template.spec.restartPolicy", ""}}},
		{"job template selector is generated", func(c *batchv1.CronJob) {
			c.Spec.JobTemplate.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}
		}, []want{{field.ErrorTypeInvalid, "spec.jobTemplate.spec.selector", "`selector` will be auto-generated"}}},
		{"name length", func(c *batchv1.CronJob) { c.Name = "a-very-long-cronjob-name-that-exceeds-the-fifty-two-limit" },
			[]want{{field.ErrorTypeInvalid, "metadata.name", "must be no more than 52 characters"}}},
		{"negative history limit", func(c *batchv1.CronJob) { c.Spec.SuccessfulJobsHistoryLimit = ptr.To(int32(-1)) },
			[]want{{field.ErrorTypeInvalid, "spec.successfulJobsHistoryLimit", ""}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := defaulted(cronJob())
			tc.mutate(c)
			expectErrors(t, Validate(c), tc.wants)
		})
	}

	t.Run("update keeps grandfathered TZ", func(t *testing.T) {
		old := stored(defaulted(cronJob()))
		old.Spec.Schedule = "CRON_TZ=UTC 0 3 * * *"
		upd := old.DeepCopy()
		upd.Spec.Suspend = ptr.To(true)
		expectErrors(t, ValidateUpdate(upd, old), nil)
	})
}

func TestCronParser(t *testing.T) {
	valid := []string{
		"* * * * *", "0 0 1 1 0", "*/5 * * * *", "0 0 * * 6", "5/10 * * * *", "0 0 ? * *",
		"0,15,30,45 * * * *", "@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight",
		"@every 1h30m", "CRON_TZ=America/New_York 0 9 * * 1-5",
	}
	for _, s := range valid {
		if err := parseCronSchedule(s); err != nil {
			t.Errorf("%q: unexpected error %v", s, err)
		}
	}
	invalid := map[string]string{
		"":                       "empty spec string",
		"* * * * * *":            "expected exactly 5 fields, found 6",
		"* 24 * * *":             "end of range (24) above maximum (23): 24",
		"* * 0 * *":              "beginning of range (0) below minimum (1): 0",
		"* * * 13 *":             "end of range (13) above maximum (12): 13",
		"* * * * 7":              "end of range (7) above maximum (6): 7",
		"5-1 * * * *":            "beginning of range (5) beyond end of range (1): 5-1",
		"*/0 * * * *":            "step of range should be a positive number: */0",
		"1-2-3 * * * *":          "too many hyphens: 1-2-3",
		"*/2/3 * * * *":          "too many slashes: */2/3",
		"x * * * *":              "failed to parse int from x",
		"@fortnightly":           "unrecognized descriptor: @fortnightly",
		"@every forever":         "failed to parse duration @every forever",
		"TZ=Nowhere/X * * * * *": "provided bad location Nowhere/X",
	}
	for s, msg := range invalid {
		err := parseCronSchedule(s)
		if err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: error %v, want it to contain %q", s, err, msg)
		}
	}
}

func indexedFive(j *batchv1.Job) {
	j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
	j.Spec.Completions = ptr.To(int32(5))
}
