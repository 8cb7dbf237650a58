package validation

import (
	"testing"

	"k8s.io/utils/ptr"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestDeploymentCreate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(d *appsv1.Deployment)
		wants  []want
	}{
		{"seed deployment is valid", func(d *appsv1.Deployment) {}, nil},
		{"selector required", func(d *appsv1.Deployment) { d.Spec.Selector = nil },
			[]want{{field.ErrorTypeRequired, "spec.selector", ""}}},
		{"empty selector", func(d *appsv1.Deployment) { d.Spec.Selector = &metav1.LabelSelector{} },
			[]want{{field.ErrorTypeInvalid, "spec.selector", "empty selector is invalid for deployment"}}},
		{"selector must match template", func(d *appsv1.Deployment) { d.Spec.Template.Labels["app"] = "other" },
			[]want{{field.ErrorTypeInvalid, "spec.template.metadata.labels", "`selector` does not match template `labels`"}}},
		{"negative replicas", func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To(int32(-1)) },
			[]want{{field.ErrorTypeInvalid, "spec.replicas", "must be greater than or equal to 0"}}},
		{"template restartPolicy must be Always", func(d *appsv1.Deployment) { d.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever },
			[]want{{field.ErrorTypeNotSupported, "spec.template.spec.restartPolicy", ""}}},
		{"template container checked", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "" },
			[]want{{field.ErrorTypeRequired, "spec.template.spec.containers[0].image", ""}}},
		{"surge and unavailable both zero", func(d *appsv1.Deployment) {
			d.Spec.Strategy.RollingUpdate.MaxSurge = ptr.To(intstr.FromInt32(0))
		}, []want{{field.ErrorTypeInvalid, "spec.strategy.rollingUpdate.maxUnavailable", "may not be 0 when `maxSurge` is 0"}}},
		{"bad percent", func(d *appsv1.Deployment) {
			d.Spec.Strategy.RollingUpdate.MaxSurge = ptr.To(intstr.FromString("lots"))
		}, []want{{field.ErrorTypeInvalid, "spec.strategy.rollingUpdate.maxSurge", "percent"}}},
		{"more than 100% unavailable", func(d *appsv1.Deployment) {
			d.Spec.Strategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromString("150%"))
		}, []want{{field.ErrorTypeInvalid, "spec.strategy.rollingUpdate.maxUnavailable", "must not be greater than 100%"}}},
		{"negative surge", func(d *appsv1.Deployment) {
			d.Spec.Strategy.RollingUpdate.MaxSurge = ptr.To(intstr.FromInt32(-1))
		}, []want{{field.ErrorTypeInvalid, "spec.strategy.rollingUpdate.maxSurge", "must be greater than or equal to 0"}}},
		{"Recreate forbids rollingUpdate", func(d *appsv1.Deployment) { d.Spec.Strategy.Type = appsv1.RecreateDeploymentStrategyType },
			[]want{{field.ErrorTypeForbidden, "spec.strategy.rollingUpdate", ""}}},
		{"unknown strategy", func(d *appsv1.Deployment) { d.Spec.Strategy.Type = "BlueGreen" },
			[]want{{field.ErrorTypeNotSupported, "spec.strategy.type", ""}}},
		{"negative revisionHistoryLimit", func(d *appsv1.Deployment) { d.Spec.RevisionHistoryLimit = ptr.To(int32(-1)) },
			[]want{{field.ErrorTypeInvalid, "spec.revisionHistoryLimit", ""}}},
		{"progress deadline after minReadySeconds", func(d *appsv1.Deployment) { d.Spec.MinReadySeconds = 600 },
			[]want{{field.ErrorTypeInvalid, "spec.progressDeadlineSeconds", "must be greater than minReadySeconds"}}},
		{"activeDeadlineSeconds not supported in templates", func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.ActiveDeadlineSeconds = ptr.To(int64(10))
		}, []want{{field.ErrorTypeInvalid, "spec.template.spec.activeDeadlineSeconds", "not Supported"}}},
		{"template label validated at upstream's path", func(d *appsv1.Deployment) { d.Spec.Template.Labels["bad key!"] = "x" },
			[]want{{field.ErrorTypeInvalid, "spec.template.labels", ""}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := defaulted(seedDeployment())
			tc.mutate(d)
			expectErrors(t, Validate(d), tc.wants)
		})
	}
}

func TestDeploymentUpdate(t *testing.T) {
	old := stored(defaulted(seedDeployment()))

	scaled := old.DeepCopy()
	scaled.Spec.Replicas = ptr.To(int32(5))
	scaled.Spec.Template.Spec.Containers[0].Image = "username/container-lab:v3"
	expectErrors(t, ValidateUpdate(scaled, old), nil)

	reselect := old.DeepCopy()
	reselect.Spec.Selector.MatchLabels["tier"] = "web"
	reselect.Spec.Template.Labels["tier"] = "web"
	expectErrors(t, ValidateUpdate(reselect, old), []want{{field.ErrorTypeInvalid, "spec.selector", "field is immutable"}})

	status := old.DeepCopy()
	status.Status = appsv1.DeploymentStatus{Replicas: 3, ReadyReplicas: 4, AvailableReplicas: 1}
	expectErrors(t, ValidateStatusUpdate(status, old), []want{{field.ErrorTypeInvalid, "status.readyReplicas", "cannot be greater than status.replicas"}})
}

func replicaSet() *appsv1.ReplicaSet {
	d := seedDeployment()
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "container-lab-5d4f", Namespace: "default"},
		Spec:       appsv1.ReplicaSetSpec{Replicas: ptr.To(int32(2)), Selector: d.Spec.Selector, Template: d.Spec.Template},
	}
}

func statefulSet() *appsv1.StatefulSet {
	d := seedDeployment()
	s := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "default"},
		Spec: appsv1.StatefulSetSpec{
			ServiceName: "db", Selector: d.Spec.Selector, Template: d.Spec.Template,
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: mustQ("1Gi")}},
				},
			}},
		},
	}
	s.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/data"}}
	return s
}

func daemonSet() *appsv1.DaemonSet {
	d := seedDeployment()
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "default"},
		Spec:       appsv1.DaemonSetSpec{Selector: d.Spec.Selector, Template: d.Spec.Template},
	}
}

func TestOtherWorkloads(t *testing.T) {
	tests := []struct {
		name  string
		obj   func() runtime.Object
		wants []want
	}{
		{"valid replicaset", func() runtime.Object { return defaulted(replicaSet()) }, nil},
		{"replicaset empty selector", func() runtime.Object {
			rs := defaulted(replicaSet())
			rs.Spec.Selector = &metav1.LabelSelector{}
			return rs
		}, []want{{field.ErrorTypeInvalid, "spec.selector", "empty selector"}}},
		{"replicaset mismatched template", func() runtime.Object {
			rs := defaulted(replicaSet())
			rs.Spec.Template.Labels = nil
			return rs
		}, []want{{field.ErrorTypeInvalid, "spec.template.metadata.labels", "does not match"}}},
		{"valid statefulset mounting its claim template", func() runtime.Object { return defaulted(statefulSet()) }, nil},
		{"statefulset pod management policy", func() runtime.Object {
			s := defaulted(statefulSet())
			s.Spec.PodManagementPolicy = "Random"
			return s
		}, []want{{field.ErrorTypeInvalid, "spec.podManagementPolicy", "must be 'OrderedReady' or 'Parallel'"}}},
		{"statefulset OnDelete with rollingUpdate", func() runtime.Object {
			s := defaulted(statefulSet())
			s.Spec.UpdateStrategy.Type = appsv1.OnDeleteStatefulSetStrategyType
			return s
		}, []want{{field.ErrorTypeInvalid, "spec.updateStrategy.rollingUpdate", "only allowed for updateStrategy 'RollingUpdate'"}}},
		{"statefulset claim template needs storage", func() runtime.Object {
			s := defaulted(statefulSet())
			s.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests = nil
			return s
		}, []want{{field.ErrorTypeRequired, "spec.volumeClaimTemplates[0].spec.resources[storage]", ""}}},
		{"statefulset negative partition", func() runtime.Object {
			s := defaulted(statefulSet())
			s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To(int32(-1))
			return s
		}, []want{{field.ErrorTypeInvalid, "spec.updateStrategy.rollingUpdate.partition", ""}}},
		{"valid daemonset", func() runtime.Object { return defaulted(daemonSet()) }, nil},
		{"daemonset surge and unavailable", func() runtime.Object {
			d := defaulted(daemonSet())
			d.Spec.UpdateStrategy.RollingUpdate.MaxSurge = ptr.To(intstr.FromInt32(1))
			return d
		}, []want{{field.ErrorTypeInvalid, "spec.updateStrategy.rollingUpdate.maxSurge", "may not be set when maxUnavailable is non-zero"}}},
		{"daemonset neither surge nor unavailable", func() runtime.Object {
			d := defaulted(daemonSet())
			d.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(0))
			return d
		}, []want{{field.ErrorTypeRequired, "spec.updateStrategy.rollingUpdate.maxUnavailable", "cannot be 0 when maxSurge is 0"}}},
		{"daemonset restartPolicy", func() runtime.Object {
			d := defaulted(daemonSet())
			d.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
			return d
		}, []want{{field.ErrorTypeNotSupported, "spec.template.spec.restartPolicy", ""}}},
		{"valid replication controller", func() runtime.Object {
			rc := &corev1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Name: "rc"},
				Spec: corev1.ReplicationControllerSpec{Template: &corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "b"}}, Spec: seedPodSpec()}}}
			return defaulted(rc)
		}, nil},
		{"replication controller without template", func() runtime.Object {
			return defaulted(&corev1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Name: "rc"}})
		}, []want{{field.ErrorTypeRequired, "spec.selector", ""}, {field.ErrorTypeRequired, "spec.template", ""}}},
		{"controller revision needs data", func() runtime.Object {
			return &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "r-1"}, Revision: -1}
		}, []want{{field.ErrorTypeRequired, "data", "data is mandatory"}, {field.ErrorTypeInvalid, "revision", ""}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			expectErrors(t, Validate(tc.obj()), tc.wants)
		})
	}
}

func TestStatefulSetUpdate(t *testing.T) {
	old := stored(defaulted(statefulSet()))

	ok := old.DeepCopy()
	ok.Spec.Replicas = ptr.To(int32(4))
	ok.Spec.Template.Spec.Containers[0].Image = "db:2"
	ok.Spec.MinReadySeconds = 5
	expectErrors(t, ValidateUpdate(ok, old), nil)

	renamed := old.DeepCopy()
	renamed.Spec.ServiceName = "other"
	expectErrors(t, ValidateUpdate(renamed, old), []want{{field.ErrorTypeForbidden, "spec", "updates to statefulset spec for fields other than"}})

	status := old.DeepCopy()
	status.Status = appsv1.StatefulSetStatus{Replicas: 1, ReadyReplicas: 2}
	expectErrors(t, ValidateStatusUpdate(status, old), []want{{field.ErrorTypeInvalid, "status.readyReplicas", ""}})
}

func TestDaemonSetAndReplicaSetSelectorImmutable(t *testing.T) {
	oldDS := stored(defaulted(daemonSet()))
	ds := oldDS.DeepCopy()
	ds.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "container-lab", "x": "y"}}
	ds.Spec.Template.Labels["x"] = "y"
	expectErrors(t, ValidateUpdate(ds, oldDS), []want{{field.ErrorTypeInvalid, "spec.selector", "field is immutable"}})

	oldRS := stored(defaulted(replicaSet()))
	rs := oldRS.DeepCopy()
	rs.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "container-lab", "x": "y"}}
	rs.Spec.Template.Labels["x"] = "y"
	expectErrors(t, ValidateUpdate(rs, oldRS), []want{{field.ErrorTypeInvalid, "spec.selector", "field is immutable"}})
}

func TestControllerRevisionUpdate(t *testing.T) {
	old := stored(&appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "r-1"}, Revision: 1,
		Data: runtime.RawExtension{Raw: []byte(`{"spec":{"a":1,"b":2}}`)}})
	same := old.DeepCopy()
	same.Data.Raw = []byte(`{ "spec": {"b":2, "a":1} }`)
	expectErrors(t, ValidateUpdate(same, old), nil)
	changed := old.DeepCopy()
	changed.Data.Raw = []byte(`{"spec":{"a":2}}`)
	expectErrors(t, ValidateUpdate(changed, old), []want{{field.ErrorTypeInvalid, "data", "field is immutable"}})
}
