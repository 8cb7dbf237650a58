package defaults

import (
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// replicationController is SetDefaults_ReplicationController: an empty
// selector and empty object labels are taken from the template labels.
func ReplicationController(rc *corev1.ReplicationController) {
	if rc.Spec.Template != nil {
		if labels := rc.Spec.Template.Labels; labels != nil {
			if len(rc.Spec.Selector) == 0 {
				rc.Spec.Selector = copyMap(labels)
			}
			if len(rc.Labels) == 0 {
				rc.Labels = copyMap(labels)
			}
		}
		podTemplateSpec(rc.Spec.Template)
	}
	if rc.Spec.Replicas == nil {
		rc.Spec.Replicas = ptr.To(int32(1))
	}
}

func Deployment(d *appsv1.Deployment) {
	if d.Spec.Replicas == nil {
		d.Spec.Replicas = ptr.To(int32(1))
	}
	st := &d.Spec.Strategy
	if ru := rollingStrategy(&st.Type, appsv1.RollingUpdateDeploymentStrategyType, &st.RollingUpdate); ru != nil {
		rollingUpdateBudget(&ru.MaxUnavailable, &ru.MaxSurge, intstr.FromString("25%"), intstr.FromString("25%"))
	}
	if d.Spec.RevisionHistoryLimit == nil {
		d.Spec.RevisionHistoryLimit = ptr.To(int32(10))
	}
	if d.Spec.ProgressDeadlineSeconds == nil {
		d.Spec.ProgressDeadlineSeconds = ptr.To(int32(600))
	}
	podTemplateSpec(&d.Spec.Template)
}

func ReplicaSet(rs *appsv1.ReplicaSet) {
	if rs.Spec.Replicas == nil {
		rs.Spec.Replicas = ptr.To(int32(1))
	}
	podTemplateSpec(&rs.Spec.Template)
}

func StatefulSet(s *appsv1.StatefulSet) {
	spec := &s.Spec
	if spec.PodManagementPolicy == "" {
		spec.PodManagementPolicy = appsv1.OrderedReadyPodManagement
	}
	// Note the upstream quirk: rollingUpdate is only allocated when the type
	// itself was defaulted; an explicit RollingUpdate with no rollingUpdate
	// block stays nil.
	if spec.UpdateStrategy.Type == "" {
		spec.UpdateStrategy.Type = appsv1.RollingUpdateStatefulSetStrategyType
		if spec.UpdateStrategy.RollingUpdate == nil {
			spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{}
		}
	}
	if spec.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType &&
		spec.UpdateStrategy.RollingUpdate != nil && spec.UpdateStrategy.RollingUpdate.Partition == nil {
		spec.UpdateStrategy.RollingUpdate.Partition = ptr.To(int32(0))
	}
	if spec.PersistentVolumeClaimRetentionPolicy == nil {
		spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{}
	}
	if spec.PersistentVolumeClaimRetentionPolicy.WhenDeleted == "" {
		spec.PersistentVolumeClaimRetentionPolicy.WhenDeleted = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}
	if spec.PersistentVolumeClaimRetentionPolicy.WhenScaled == "" {
		spec.PersistentVolumeClaimRetentionPolicy.WhenScaled = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}
	if spec.Replicas == nil {
		spec.Replicas = ptr.To(int32(1))
	}
	if spec.RevisionHistoryLimit == nil {
		spec.RevisionHistoryLimit = ptr.To(int32(10))
	}
	podTemplateSpec(&spec.Template)
	// volumeClaimTemplates are full PersistentVolumeClaims, so they get the
	// PVC defaults, including the visible status.phase: Pending quirk.
	for i := range spec.VolumeClaimTemplates {
		PersistentVolumeClaim(&spec.VolumeClaimTemplates[i])
	}
}

func DaemonSet(d *appsv1.DaemonSet) {
	st := &d.Spec.UpdateStrategy
	if ru := rollingStrategy(&st.Type, appsv1.RollingUpdateDaemonSetStrategyType, &st.RollingUpdate); ru != nil {
		rollingUpdateBudget(&ru.MaxUnavailable, &ru.MaxSurge, intstr.FromInt32(1), intstr.FromInt32(0))
	}
	if d.Spec.RevisionHistoryLimit == nil {
		d.Spec.RevisionHistoryLimit = ptr.To(int32(10))
	}
	podTemplateSpec(&d.Spec.Template)
}

// rollingStrategy is the strategy defaulting Deployments and DaemonSets
// share: an unset type becomes the rolling type, and a rolling update gets
// its (empty) parameters allocated. It returns the parameters, or nil when
// the strategy is of another type. (StatefulSets differ; see statefulSet.)
func rollingStrategy[T ~string, R any](typ *T, rolling T, params **R) *R {
	if *typ == "" {
		*typ = rolling
	}
	if *typ != rolling {
		return nil
	}
	if *params == nil {
		*params = new(R)
	}
	return *params
}

// rollingUpdateBudget fills the unset maxUnavailable and maxSurge of a
// Deployment or DaemonSet rolling update with the kind's defaults.
func rollingUpdateBudget(maxUnavailable, maxSurge **intstr.IntOrString, defUnavailable, defSurge intstr.IntOrString) {
	if *maxUnavailable == nil {
		*maxUnavailable = ptr.To(defUnavailable)
	}
	if *maxSurge == nil {
		*maxSurge = ptr.To(defSurge)
	}
}

func Job(j *batchv1.Job) {
	spec := &j.Spec
	// A non-parallel job may leave both unset; both then become 1.
	if spec.Completions == nil && spec.Parallelism == nil {
		spec.Completions = ptr.To(int32(1))
		spec.Parallelism = ptr.To(int32(1))
	}
	if spec.Parallelism == nil {
		spec.Parallelism = ptr.To(int32(1))
	}
	if spec.BackoffLimit == nil {
		if spec.BackoffLimitPerIndex != nil {
			// With a per-index limit the global limit is effectively off.
			spec.BackoffLimit = ptr.To(int32(maxInt32))
		} else {
			spec.BackoffLimit = ptr.To(int32(6))
		}
	}
	if spec.CompletionMode == nil {
		spec.CompletionMode = ptr.To(batchv1.NonIndexedCompletion)
	}
	if spec.Suspend == nil {
		spec.Suspend = ptr.To(false)
	}
	if spec.PodFailurePolicy != nil {
		for i := range spec.PodFailurePolicy.Rules {
			for k := range spec.PodFailurePolicy.Rules[i].OnPodConditions {
				c := &spec.PodFailurePolicy.Rules[i].OnPodConditions[k]
				if c.Status == "" {
					c.Status = corev1.ConditionTrue
				}
			}
		}
	}
	if spec.PodReplacementPolicy == nil {
		// Pod failure policies need terminal pods to be judged, hence Failed.
		if spec.PodFailurePolicy != nil {
			spec.PodReplacementPolicy = ptr.To(batchv1.Failed)
		} else {
			spec.PodReplacementPolicy = ptr.To(batchv1.TerminatingOrFailed)
		}
	}
	if spec.ManualSelector == nil {
		spec.ManualSelector = ptr.To(false)
	}
	podTemplateSpec(&spec.Template)
	// Registry step (upstream job strategy PrepareForCreate): generate the
	// selector once the object has its UID.
	if j.UID != "" {
		GenerateJobSelector(j)
	}
	// Unlabelled Jobs take their template's labels. Upstream copies them in
	// its defaulter, which also runs whenever the stored Job is decoded, so
	// clients see the generated job-name/controller-uid labels there too;
	// copying after selector generation gives that final state at once.
	if labels := spec.Template.Labels; labels != nil && len(j.Labels) == 0 {
		j.Labels = copyMap(labels)
	}
}

// GenerateJobSelector is the upstream Job registry step (job strategy
// PrepareForCreate) that, unless spec.manualSelector is true, adds the
// job-name and controller-uid labels to the pod template and selects on
// batch.kubernetes.io/controller-uid. It needs metadata.uid, so the API
// server must call it (or Apply) after assigning the UID on create; Apply
// calls it itself whenever the UID is already set. It is idempotent and
// never overwrites a label the client set: a conflicting label is left for
// validation to reject as a selector/template mismatch.
func GenerateJobSelector(j *batchv1.Job) {
	if j.Spec.ManualSelector == nil {
		j.Spec.ManualSelector = ptr.To(false)
	}
	if *j.Spec.ManualSelector || j.UID == "" {
		return
	}
	uid := string(j.UID)
	if j.Spec.Template.Labels == nil {
		j.Spec.Template.Labels = map[string]string{}
	}
	tl := j.Spec.Template.Labels
	// Both the legacy and the prefixed labels, as upstream writes them.
	setIfAbsent(tl, "job-name", j.Name)
	setIfAbsent(tl, batchv1.JobNameLabel, j.Name)
	setIfAbsent(tl, "controller-uid", uid)
	setIfAbsent(tl, batchv1.ControllerUidLabel, uid)
	if j.Spec.Selector == nil {
		j.Spec.Selector = &metav1.LabelSelector{}
	}
	if j.Spec.Selector.MatchLabels == nil {
		j.Spec.Selector.MatchLabels = map[string]string{}
	}
	setIfAbsent(j.Spec.Selector.MatchLabels, batchv1.ControllerUidLabel, uid)
}

func CronJob(c *batchv1.CronJob) {
	spec := &c.Spec
	if spec.ConcurrencyPolicy == "" {
		spec.ConcurrencyPolicy = batchv1.AllowConcurrent
	}
	if spec.Suspend == nil {
		spec.Suspend = ptr.To(false)
	}
	if spec.SuccessfulJobsHistoryLimit == nil {
		spec.SuccessfulJobsHistoryLimit = ptr.To(int32(3))
	}
	if spec.FailedJobsHistoryLimit == nil {
		spec.FailedJobsHistoryLimit = ptr.To(int32(1))
	}
	// Upstream's generated CronJob defaulter only reaches the embedded pod
	// template; the job template's JobSpec fields (backoffLimit, ...) are
	// defaulted later, on the Job the controller creates.
	podTemplateSpec(&spec.JobTemplate.Spec.Template)
}

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func setIfAbsent(m map[string]string, k, v string) {
	if _, ok := m[k]; !ok {
		m[k] = v
	}
}
