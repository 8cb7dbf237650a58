package printers

import (
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"
)

// Upstream describes these columns with the extensions/v1beta1 and
// batch/v1beta1 swagger docs; the apps/v1 and batch/v1 docs say the same.
func init() {
	deploymentSpecDoc := appsv1.DeploymentSpec{}.SwaggerDoc()
	deploymentStatusDoc := appsv1.DeploymentStatus{}.SwaggerDoc()
	cells([]metav1.TableColumnDefinition{
		nameColumn(),
		column("Ready", "string", "Number of the pod with ready state"),
		column("Up-to-date", "string", deploymentStatusDoc["updatedReplicas"]),
		column("Available", "string", deploymentStatusDoc["availableReplicas"]),
		ageColumn(),
		containersColumn(),
		imagesColumn(),
		wide(column("Selector", "string", deploymentSpecDoc["selector"])),
	}, func(d *appsv1.Deployment, now time.Time) []interface{} {
		// Unlike the other workloads, deployments print an empty selector
		// as "" rather than "<none>".
		selector := "<invalid>"
		if s, err := metav1.LabelSelectorAsSelector(d.Spec.Selector); err == nil {
			selector = s.String()
		}
		names, images := containerCells(d.Spec.Template.Spec.Containers)
		return []interface{}{
			d.Name,
			fmt.Sprintf("%d/%d", d.Status.ReadyReplicas, deref(d.Spec.Replicas)),
			int64(d.Status.UpdatedReplicas),
			int64(d.Status.AvailableReplicas),
			age(d.ObjectMeta, now),
			names, images, selector,
		}
	})

	rsSpecDoc := appsv1.ReplicaSetSpec{}.SwaggerDoc()
	rsStatusDoc := appsv1.ReplicaSetStatus{}.SwaggerDoc()
	cells([]metav1.TableColumnDefinition{
		nameColumn(),
		column("Desired", "integer", rsSpecDoc["replicas"]),
		column("Current", "integer", rsStatusDoc["replicas"]),
		column("Ready", "integer", rsStatusDoc["readyReplicas"]),
		ageColumn(),
		containersColumn(),
		imagesColumn(),
		wide(column("Selector", "string", rsSpecDoc["selector"])),
	}, func(rs *appsv1.ReplicaSet, now time.Time) []interface{} {
		names, images := containerCells(rs.Spec.Template.Spec.Containers)
		return []interface{}{
			rs.Name,
			int64(deref(rs.Spec.Replicas)),
			int64(rs.Status.Replicas),
			int64(rs.Status.ReadyReplicas),
			age(rs.ObjectMeta, now),
			names, images, metav1.FormatLabelSelector(rs.Spec.Selector),
		}
	})

	rcSpecDoc := corev1.ReplicationControllerSpec{}.SwaggerDoc()
	rcStatusDoc := corev1.ReplicationControllerStatus{}.SwaggerDoc()
	cells([]metav1.TableColumnDefinition{
		nameColumn(),
		column("Desired", "integer", rcSpecDoc["replicas"]),
		column("Current", "integer", rcStatusDoc["replicas"]),
		column("Ready", "integer", rcStatusDoc["readyReplicas"]),
		ageColumn(),
		containersColumn(),
		imagesColumn(),
		wide(column("Selector", "string", rcSpecDoc["selector"])),
	}, func(rc *corev1.ReplicationController, now time.Time) []interface{} {
		var containers []corev1.Container
		if rc.Spec.Template != nil {
			containers = rc.Spec.Template.Spec.Containers
		}
		names, images := containerCells(containers)
		return []interface{}{
			rc.Name,
			int64(deref(rc.Spec.Replicas)),
			int64(rc.Status.Replicas),
			int64(rc.Status.ReadyReplicas),
			age(rc.ObjectMeta, now),
			names, images, labels.FormatLabels(rc.Spec.Selector),
		}
	})

	cells([]metav1.TableColumnDefinition{
		nameColumn(),
		column("Ready", "string", "Number of the pod with ready state"),
		ageColumn(),
		containersColumn(),
		imagesColumn(),
	}, func(ss *appsv1.StatefulSet, now time.Time) []interface{} {
		names, images := containerCells(ss.Spec.Template.Spec.Containers)
		return []interface{}{
			ss.Name,
			fmt.Sprintf("%d/%d", ss.Status.ReadyReplicas, deref(ss.Spec.Replicas)),
			age(ss.ObjectMeta, now),
			names, images,
		}
	})

	dsStatusDoc := appsv1.DaemonSetStatus{}.SwaggerDoc()
	cells([]metav1.TableColumnDefinition{
		nameColumn(),
		column("Desired", "integer", dsStatusDoc["desiredNumberScheduled"]),
		column("Current", "integer", dsStatusDoc["currentNumberScheduled"]),
		column("Ready", "integer", dsStatusDoc["numberReady"]),
		column("Up-to-date", "integer", dsStatusDoc["updatedNumberScheduled"]),
		column("Available", "integer", dsStatusDoc["numberAvailable"]),
		column("Node Selector", "string", corev1.PodSpec{}.SwaggerDoc()["nodeSelector"]),
		ageColumn(),
		containersColumn(),
		imagesColumn(),
		wide(column("Selector", "string", appsv1.DaemonSetSpec{}.SwaggerDoc()["selector"])),
	}, func(ds *appsv1.DaemonSet, now time.Time) []interface{} {
		names, images := containerCells(ds.Spec.Template.Spec.Containers)
		return []interface{}{
			ds.Name,
			int64(ds.Status.DesiredNumberScheduled),
			int64(ds.Status.CurrentNumberScheduled),
			int64(ds.Status.NumberReady),
			int64(ds.Status.UpdatedNumberScheduled),
			int64(ds.Status.NumberAvailable),
			labels.FormatLabels(ds.Spec.Template.Spec.NodeSelector),
			age(ds.ObjectMeta, now),
			names, images, metav1.FormatLabelSelector(ds.Spec.Selector),
		}
	})

	cells([]metav1.TableColumnDefinition{
		nameColumn(),
		column("Status", "string", "Status of the job."),
		column("Completions", "string", batchv1.JobStatus{}.SwaggerDoc()["succeeded"]),
		column("Duration", "string", "Time required to complete the job."),
		ageColumn(),
		containersColumn(),
		imagesColumn(),
		wide(column("Selector", "string", batchv1.JobSpec{}.SwaggerDoc()["selector"])),
	}, func(j *batchv1.Job, now time.Time) []interface{} {
		names, images := containerCells(j.Spec.Template.Spec.Containers)
		return []interface{}{
			j.Name,
			jobStatus(j),
			jobCompletions(j),
			jobDuration(j, now),
			age(j.ObjectMeta, now),
			names, images, metav1.FormatLabelSelector(j.Spec.Selector),
		}
	})

	cjSpecDoc := batchv1.CronJobSpec{}.SwaggerDoc()
	cells([]metav1.TableColumnDefinition{
		nameColumn(),
		column("Schedule", "string", cjSpecDoc["schedule"]),
		column("Timezone", "string", cjSpecDoc["timeZone"]),
		column("Suspend", "boolean", cjSpecDoc["suspend"]),
		column("Active", "integer", batchv1.CronJobStatus{}.SwaggerDoc()["active"]),
		column("Last Schedule", "string", batchv1.CronJobStatus{}.SwaggerDoc()["lastScheduleTime"]),
		ageColumn(),
		containersColumn(),
		imagesColumn(),
		wide(column("Selector", "string", batchv1.JobSpec{}.SwaggerDoc()["selector"])),
	}, func(cj *batchv1.CronJob, now time.Time) []interface{} {
		lastSchedule := "<none>"
		if cj.Status.LastScheduleTime != nil {
			lastSchedule = since(*cj.Status.LastScheduleTime, now)
		}
		tmpl := &cj.Spec.JobTemplate.Spec
		names, images := containerCells(tmpl.Template.Spec.Containers)
		return []interface{}{
			cj.Name,
			cj.Spec.Schedule,
			orNone(deref(cj.Spec.TimeZone)),
			// Declared "boolean" upstream, yet rendered as a string so that
			// an unset value can show as <unset>.
			boolPtrString(cj.Spec.Suspend),
			int64(len(cj.Status.Active)),
			lastSchedule,
			age(cj.ObjectMeta, now),
			names, images, metav1.FormatLabelSelector(tmpl.Selector),
		}
	})

	rows([]metav1.TableColumnDefinition{
		nameColumn(),
		column("Controller", "string", "Controller of the object"),
		column("Revision", "string", appsv1.ControllerRevision{}.SwaggerDoc()["revision"]),
		ageColumn(),
	}, func(cr *appsv1.ControllerRevision, now time.Time) (metav1.TableRow, error) {
		controller := "<none>"
		if ref := metav1.GetControllerOf(cr); ref != nil {
			gv, err := schema.ParseGroupVersion(ref.APIVersion)
			if err != nil {
				return metav1.TableRow{}, err
			}
			controller = kindName(gv.WithKind(ref.Kind).GroupKind(), ref.Name)
		}
		return metav1.TableRow{Cells: []interface{}{cr.Name, controller, cr.Revision, age(cr.ObjectMeta, now)}}, nil
	})
}

// kindName renders "kind.group/name" in lower case, e.g. "statefulset.apps/web".
func kindName(gk schema.GroupKind, name string) string {
	if gk.Empty() {
		return name
	}
	return strings.ToLower(gk.String()) + "/" + name
}

// jobStatus reports terminal conditions first so that a finished job that is
// being deleted still shows how it ended.
func jobStatus(j *batchv1.Job) string {
	switch {
	case jobConditionTrue(j, batchv1.JobComplete):
		return "Complete"
	case jobConditionTrue(j, batchv1.JobFailed):
		return "Failed"
	case j.DeletionTimestamp != nil:
		return "Terminating"
	case jobConditionTrue(j, batchv1.JobSuspended):
		return "Suspended"
	case jobConditionTrue(j, batchv1.JobFailureTarget):
		return "FailureTarget"
	default:
		return "Running"
	}
}

// jobConditionTrue looks only at the first condition of the given type.
func jobConditionTrue(j *batchv1.Job, t batchv1.JobConditionType) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// jobCompletions shows succeeded/completions; a job without completions is a
// work queue that finishes after one success, hence "/1".
func jobCompletions(j *batchv1.Job) string {
	if j.Spec.Completions != nil {
		return fmt.Sprintf("%d/%d", j.Status.Succeeded, *j.Spec.Completions)
	}
	if p := deref(j.Spec.Parallelism); p > 1 {
		return fmt.Sprintf("%d/1 of %d", j.Status.Succeeded, p)
	}
	return fmt.Sprintf("%d/1", j.Status.Succeeded)
}

// jobDuration is empty until the job starts and keeps growing until it
// completes.
func jobDuration(j *batchv1.Job, now time.Time) string {
	switch {
	case j.Status.StartTime == nil:
		return ""
	case j.Status.CompletionTime == nil:
		return duration.HumanDuration(now.Sub(j.Status.StartTime.Time))
	default:
		return duration.HumanDuration(j.Status.CompletionTime.Sub(j.Status.StartTime.Time))
	}
}
