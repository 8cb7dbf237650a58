// Package cronjob is kelp's CronJob controller, as upstream's (the
// kube-controller-manager's cronjob-controller, "v2"): at each time a
// CronJob's schedule names it creates a Job from the jobTemplate, honours
// concurrencyPolicy (Allow, Forbid, Replace), startingDeadlineSeconds and
// suspend, keeps status.active, lastScheduleTime and lastSuccessfulTime,
// and deletes finished Jobs beyond the history limits.
//
// Nothing is polled: each sync asks the work queue to bring the CronJob
// back just after its next schedule time (AddAfter), and Job events bring
// it back when one of its Jobs changes. Time comes from a clock, so tests
// run schedules on a fake one.
//
// Invariants:
//   - A scheduled time is run at most once. The Job's name is derived from
//     the time (<cronjob>-<minutes since the epoch>), so a second create
//     for it fails with AlreadyExists whatever the caches say; a time equal
//     to lastScheduleTime, or whose Job is in status.active, is not tried.
//   - Only the most recent missed time is ever started: a controller that
//     was down for hours starts one Job, not one per missed time.
//   - status.active lists the unfinished Jobs this controller created;
//     finished or vanished ones are taken off, one the controller did not
//     create (or forgot) is reported (UnexpectedJob) and left alone.
package cronjob

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	batch "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/tools/reference"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/kelp-project/kelp/server/controllers"
	jobcontroller "github.com/kelp-project/kelp/server/controllers/job"
)

var controllerKind = batch.SchemeGroupVersion.WithKind("CronJob")

// Controller is the CronJob controller.
type Controller struct {
	client   kubernetes.Interface
	factory  informers.SharedInformerFactory
	recorder record.EventRecorder

	cronJobLister batchlisters.CronJobLister
	jobLister     batchlisters.JobLister
	synced        []cache.InformerSynced
	queue         workqueue.TypedRateLimitingInterface[string]

	clock clock.PassiveClock
	// local is the zone of schedules with neither spec.timeZone nor a TZ
	// prefix: the server's own, as kube-controller-manager's. Tests pin it.
	local *time.Location
}

// New wires the controller to the factory's CronJob and Job informers.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, recorder record.EventRecorder) *Controller {
	cjInf := factory.Batch().V1().CronJobs()
	jobInf := factory.Batch().V1().Jobs()
	c := &Controller{
		client: client, factory: factory, recorder: recorder,
		cronJobLister: cjInf.Lister(), jobLister: jobInf.Lister(),
		synced: []cache.InformerSynced{cjInf.Informer().HasSynced, jobInf.Informer().HasSynced},
		queue:  controllers.NewQueue("cronjob"),
		clock:  clock.RealClock{}, local: time.Local,
	}
	_, _ = cjInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: c.updateCronJob,
		DeleteFunc: c.enqueue,
	})
	_, _ = jobInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.jobChanged,
		UpdateFunc: func(old, cur interface{}) {
			if old.(*batch.Job).ResourceVersion == cur.(*batch.Job).ResourceVersion {
				return // a resync: nothing happened
			}
			c.jobChanged(old) // the controller reference may have moved
			c.jobChanged(cur)
		},
		DeleteFunc: c.jobChanged,
	})
	return c
}

// Run starts the informers and runs workers until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.factory.Start(ctx.Done())
	loop := controllers.Loop{Name: "cronjob", Queue: c.queue, Synced: c.synced, Sync: c.sync}
	loop.Run(ctx, workers)
}

// ---- event handlers ----

func (c *Controller) enqueue(obj interface{}) { controllers.Enqueue(c.queue, obj) }

// updateCronJob: a new schedule or zone moves the CronJob's wake-up to
// its new next time (a sooner one wins in the queue; the older, later
// one finds nothing to do); any other change is looked at now.
func (c *Controller) updateCronJob(old, cur interface{}) {
	oldCJ, ok1 := old.(*batch.CronJob)
	curCJ, ok2 := cur.(*batch.CronJob)
	if !ok1 || !ok2 {
		return
	}
	if oldCJ.Spec.Schedule == curCJ.Spec.Schedule && ptr.Equal(oldCJ.Spec.TimeZone, curCJ.Spec.TimeZone) {
		c.enqueue(curCJ)
		return
	}
	sched, err := parseSchedule(curCJ, c.local)
	if err != nil {
		c.recorder.Eventf(curCJ, v1.EventTypeWarning, "UnParseableCronJobSchedule", "unparseable schedule for cronjob: %s", curCJ.Spec.Schedule)
		return
	}
	key, err := cache.MetaNamespaceKeyFunc(curCJ)
	if err != nil {
		return
	}
	c.queue.AddAfter(key, nextScheduleDelay(curCJ, c.clock.Now(), sched))
}

// jobChanged wakes the CronJob that controls a Job.
func (c *Controller) jobChanged(obj interface{}) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	job, ok := obj.(*batch.Job)
	if !ok {
		return
	}
	if cj := c.resolveControllerRef(job.Namespace, metav1.GetControllerOf(job)); cj != nil {
		c.enqueue(cj)
	}
}

// resolveControllerRef returns the cached CronJob ref points at, if it is
// one (same kind, name and UID).
func (c *Controller) resolveControllerRef(ns string, ref *metav1.OwnerReference) *batch.CronJob {
	if ref == nil || ref.Kind != controllerKind.Kind || ref.APIVersion != controllerKind.GroupVersion().String() {
		return nil
	}
	cj, err := c.cronJobLister.CronJobs(ns).Get(ref.Name)
	if err != nil || cj.UID != ref.UID {
		return nil
	}
	return cj
}

// ---- sync ----

func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	cached, err := c.cronJobLister.CronJobs(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil // gone; the garbage collector takes its Jobs
	}
	if err != nil {
		return err
	}
	jobs, err := c.jobsOf(cached)
	if err != nil {
		return err
	}
	cj, requeue, changed, syncErr := c.syncCronJob(ctx, cached.DeepCopy(), jobs)
	if c.cleanupFinishedJobs(ctx, cj, jobs) {
		changed = true
	}
	if changed {
		// A conflict (the cache was behind) fails the sync and it runs
		// again on fresher data; the Job names keep a retry from running
		// a time twice.
		if _, err := c.client.BatchV1().CronJobs(ns).UpdateStatus(ctx, cj, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	if requeue != nil {
		c.queue.AddAfter(key, *requeue)
		return nil
	}
	return syncErr
}

// jobsOf lists the cached Jobs cj controls. Every Job in the namespace is
// looked at, not a selector's: the template's labels may have changed
// since a Job was made.
func (c *Controller) jobsOf(cj *batch.CronJob) ([]*batch.Job, error) {
	all, err := c.jobLister.Jobs(cj.Namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	var out []*batch.Job
	for _, j := range all {
		if metav1.IsControlledBy(j, cj) {
			out = append(out, j)
		}
	}
	return out, nil
}

// syncCronJob brings cj's status up to date with its Jobs and, when a
// schedule time is due, starts its Job. It returns the CronJob to write
// (a fresh read replaces a stale cached one), when to look again (nil:
// only on a change, as for a suspended CronJob), and whether the status
// changed.
func (c *Controller) syncCronJob(ctx context.Context, cj *batch.CronJob, jobs []*batch.Job) (*batch.CronJob, *time.Duration, bool, error) {
	now := c.clock.Now()
	changed := false

	// An unfinished Job of ours missing from status.active was either
	// created just now by a sync whose status write the cache has not
	// shown yet, or really not recorded. A live read tells which.
	for _, j := range jobs {
		if !finished(j) && !inActiveList(cj, j.UID) {
			fresh, err := c.client.BatchV1().CronJobs(cj.Namespace).Get(ctx, cj.Name, metav1.GetOptions{})
			if err != nil {
				return cj, nil, false, err
			}
			if fresh.UID == cj.UID && inActiveList(fresh, j.UID) {
				cj = fresh
			}
			break
		}
	}

	children := make(map[types.UID]bool, len(jobs))
	for _, j := range jobs {
		children[j.UID] = true
		active := inActiveList(cj, j.UID)
		cond, done := finishedCondition(j)
		switch {
		case !done && !active:
			// Not adopted: a Job someone made with our controller
			// reference (kubectl create job --from=cronjob/...), or one
			// whose status write was lost. It is not counted for Forbid.
			c.recorder.Eventf(cj, v1.EventTypeWarning, "UnexpectedJob", "Saw a job that the controller did not create or forgot: %s", j.Name)
		case done:
			if active {
				deleteFromActiveList(cj, j.UID)
				c.recorder.Eventf(cj, v1.EventTypeNormal, "SawCompletedJob", "Saw completed job: %s, condition: %v", j.Name, cond)
				changed = true
			}
			if cond == batch.JobComplete && j.Status.CompletionTime != nil &&
				(cj.Status.LastSuccessfulTime == nil || j.Status.CompletionTime.After(cj.Status.LastSuccessfulTime.Time)) {
				cj.Status.LastSuccessfulTime = j.Status.CompletionTime
				changed = true
			}
		}
	}

	// An active Job the cache does not have may be one it has not shown
	// yet; only a live NotFound takes it off the list. Otherwise a
	// CronJob could stay "active" for ever with nothing running.
	for _, ref := range append([]v1.ObjectReference(nil), cj.Status.Active...) {
		if children[ref.UID] {
			continue
		}
		_, err := c.client.BatchV1().Jobs(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			c.recorder.Eventf(cj, v1.EventTypeNormal, "MissingJob", "Active job went missing: %v", ref.Name)
			deleteFromActiveList(cj, ref.UID)
			changed = true
		case err != nil:
			return cj, nil, changed, err
		}
	}

	if cj.DeletionTimestamp != nil {
		return cj, nil, changed, nil // going away: status only
	}
	if cj.Spec.TimeZone != nil {
		if _, err := time.LoadLocation(*cj.Spec.TimeZone); err != nil {
			c.recorder.Eventf(cj, v1.EventTypeWarning, "UnknownTimeZone", "invalid timeZone: %q: %s", *cj.Spec.TimeZone, err)
			return cj, nil, changed, nil
		}
	}
	if ptr.Deref(cj.Spec.Suspend, false) {
		// No wake-up: unsuspending is an update, and that enqueues.
		return cj, nil, changed, nil
	}
	if strings.Contains(cj.Spec.Schedule, "TZ") {
		c.recorder.Eventf(cj, v1.EventTypeWarning, "UnsupportedSchedule", "CRON_TZ or TZ used in schedule %q is not officially supported, see https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details", cj.Spec.Schedule)
	}
	sched, err := parseSchedule(cj, c.local)
	if err != nil {
		// A user's error: nothing to retry until the spec changes.
		c.recorder.Eventf(cj, v1.EventTypeWarning, "UnparseableSchedule", "unparseable schedule: %q : %s", cj.Spec.Schedule, err)
		return cj, nil, changed, nil
	}
	next := func() *time.Duration { d := nextScheduleDelay(cj, now, sched); return &d }

	_, scheduled, m, err := mostRecentScheduleTime(cj, now, sched, true)
	if err != nil {
		c.recorder.Eventf(cj, v1.EventTypeWarning, "InvalidSchedule", "invalid schedule: %s : %s", cj.Spec.Schedule, err)
		return cj, nil, changed, nil
	}
	if scheduled == nil {
		return cj, next(), changed, nil // nothing due yet
	}
	if m == manyMissed {
		c.recorder.Eventf(cj, v1.EventTypeWarning, "TooManyMissedTimes", "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew")
	}
	if d := cj.Spec.StartingDeadlineSeconds; d != nil && scheduled.Add(time.Duration(*d)*time.Second).Before(now) {
		c.recorder.Eventf(cj, v1.EventTypeWarning, "MissSchedule", "Missed scheduled time to start a job: %s", scheduled.UTC().Format(time.RFC1123Z))
		return cj, next(), changed, nil
	}
	name := jobName(cj, *scheduled)
	if inActiveListByName(cj, cj.Namespace, name) || (cj.Status.LastScheduleTime != nil && cj.Status.LastScheduleTime.Time.Equal(*scheduled)) {
		return cj, next(), changed, nil // this time was run already
	}
	if cj.Spec.ConcurrencyPolicy == batch.ForbidConcurrent && len(cj.Status.Active) > 0 {
		// lastScheduleTime stays, so when the running Job finishes (its
		// update wakes this CronJob) the most recent time still due
		// starts then, late, unless startingDeadlineSeconds has passed.
		c.recorder.Eventf(cj, v1.EventTypeNormal, "JobAlreadyActive", "Not starting job because prior execution is running and concurrency policy is Forbid")
		return cj, next(), changed, nil
	}
	if cj.Spec.ConcurrencyPolicy == batch.ReplaceConcurrent {
		for _, ref := range append([]v1.ObjectReference(nil), cj.Status.Active...) {
			job, err := c.client.BatchV1().Jobs(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				deleteFromActiveList(cj, ref.UID)
				changed = true
				continue
			}
			if err != nil {
				c.recorder.Eventf(cj, v1.EventTypeWarning, "FailedGet", "Get job: %v", err)
				return cj, nil, changed, err
			}
			if !c.deleteJob(ctx, cj, job) {
				return cj, nil, changed, fmt.Errorf("could not replace job %s/%s", job.Namespace, job.Name)
			}
			changed = true
		}
	}

	want, err := jobFromTemplate(cj, *scheduled)
	if err != nil {
		return cj, nil, changed, err
	}
	job, err := c.client.BatchV1().Jobs(cj.Namespace).Create(ctx, want, metav1.CreateOptions{})
	switch {
	case apierrors.HasStatusCause(err, v1.NamespaceTerminatingCause):
		return cj, nil, changed, err
	case apierrors.IsAlreadyExists(err):
		// Made before by this controller (a status write lost), or by
		// someone else. Ours goes back on the active list; another's is
		// left to whoever made it.
		existing, gerr := c.client.BatchV1().Jobs(cj.Namespace).Get(ctx, want.Name, metav1.GetOptions{})
		if gerr != nil {
			return cj, nil, changed, gerr
		}
		if !metav1.IsControlledBy(existing, cj) || inActiveList(cj, existing.UID) {
			return cj, next(), changed, nil
		}
		job = existing
	case err != nil:
		c.recorder.Eventf(cj, v1.EventTypeWarning, "FailedCreate", "Error creating job: %v", err)
		return cj, nil, changed, err
	default:
		c.recorder.Eventf(cj, v1.EventTypeNormal, "SuccessfulCreate", "Created job %v", job.Name)
	}
	// Should the controller stop here, before the status is written, the
	// next sync finds the Job by its name (above), not a second one.
	ref, err := reference.GetReference(scheme.Scheme, job)
	if err != nil {
		return cj, nil, changed, fmt.Errorf("unable to make object reference for job for %s/%s: %w", cj.Namespace, cj.Name, err)
	}
	cj.Status.Active = append(cj.Status.Active, *ref)
	cj.Status.LastScheduleTime = &metav1.Time{Time: *scheduled}
	return cj, next(), true, nil
}

// cleanupFinishedJobs deletes the oldest finished Jobs beyond
// successfulJobsHistoryLimit (Complete) and failedJobsHistoryLimit
// (Failed). It reports whether the status changed.
func (c *Controller) cleanupFinishedJobs(ctx context.Context, cj *batch.CronJob, jobs []*batch.Job) bool {
	if cj.Spec.SuccessfulJobsHistoryLimit == nil && cj.Spec.FailedJobsHistoryLimit == nil {
		return false
	}
	var succeeded, failed []*batch.Job
	for _, j := range jobs {
		if j.DeletionTimestamp != nil {
			continue // already going: not history any more
		}
		switch cond, _ := finishedCondition(j); cond {
		case batch.JobComplete:
			succeeded = append(succeeded, j)
		case batch.JobFailed:
			failed = append(failed, j)
		}
	}
	changed := false
	if l := cj.Spec.SuccessfulJobsHistoryLimit; l != nil && c.removeOldest(ctx, cj, succeeded, *l) {
		changed = true
	}
	if l := cj.Spec.FailedJobsHistoryLimit; l != nil && c.removeOldest(ctx, cj, failed, *l) {
		changed = true
	}
	return changed
}

// removeOldest deletes all but the keep most recently started of jobs
// (never started sort last, then by name, as upstream).
func (c *Controller) removeOldest(ctx context.Context, cj *batch.CronJob, jobs []*batch.Job, keep int32) bool {
	n := len(jobs) - int(keep)
	if n <= 0 {
		return false
	}
	sort.SliceStable(jobs, func(a, b int) bool {
		sa, sb := jobs[a].Status.StartTime, jobs[b].Status.StartTime
		switch {
		case sa == nil && sb != nil:
			return false
		case sa != nil && sb == nil:
			return true
		case sa.Equal(sb):
			return jobs[a].Name < jobs[b].Name
		}
		return sa.Before(sb)
	})
	changed := false
	for _, j := range jobs[:n] {
		if c.deleteJob(ctx, cj, j) {
			changed = true
		}
	}
	return changed
}

// deleteJob deletes job in the background (the garbage collector takes
// its pods after it) and takes it off cj's active list.
func (c *Controller) deleteJob(ctx context.Context, cj *batch.CronJob, job *batch.Job) bool {
	err := c.client.BatchV1().Jobs(job.Namespace).Delete(ctx, job.Name, metav1.DeleteOptions{
		PropagationPolicy: ptr.To(metav1.DeletePropagationBackground),
		Preconditions:     &metav1.Preconditions{UID: &job.UID},
	})
	if err != nil && !apierrors.IsNotFound(err) {
		c.recorder.Eventf(cj, v1.EventTypeWarning, "FailedDelete", "Deleted job: %v", err)
		return false
	}
	deleteFromActiveList(cj, job.UID)
	c.recorder.Eventf(cj, v1.EventTypeNormal, "SuccessfulDelete", "Deleted job %v", job.Name)
	return true
}

// ---- helpers ----

// finishedCondition is the type of the Job's true Complete or Failed
// condition, as the Job controller reads it.
func finishedCondition(j *batch.Job) (batch.JobConditionType, bool) {
	if c := jobcontroller.FinishedCondition(j); c != nil {
		return c.Type, true
	}
	return "", false
}

func finished(j *batch.Job) bool { return jobcontroller.FinishedCondition(j) != nil }

func inActiveList(cj *batch.CronJob, uid types.UID) bool {
	for _, r := range cj.Status.Active {
		if r.UID == uid {
			return true
		}
	}
	return false
}

func inActiveListByName(cj *batch.CronJob, ns, name string) bool {
	for _, r := range cj.Status.Active {
		if r.Name == name && r.Namespace == ns {
			return true
		}
	}
	return false
}

func deleteFromActiveList(cj *batch.CronJob, uid types.UID) {
	kept := cj.Status.Active[:0:0]
	for _, r := range cj.Status.Active {
		if r.UID != uid {
			kept = append(kept, r)
		}
	}
	cj.Status.Active = kept
}
