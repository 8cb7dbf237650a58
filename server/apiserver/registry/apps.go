package registry

import (
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kelp-project/kelp/server/apiserver/defaults"
	"github.com/kelp-project/kelp/server/apiserver/validation"
)

// apps/v1. Deployments, ReplicaSets and StatefulSets have /scale.

func deployments() *Resource {
	return &Resource{
		GVR: gvr("apps", "v1", "deployments"), Kind: "Deployment", Singular: "deployment", ShortNames: []string{"deploy"}, Categories: []string{"all"}, Namespaced: true,
		New: func() runtime.Object { return &appsv1.Deployment{} }, NewList: func() runtime.Object { return &appsv1.DeploymentList{} },
		Status: true,
		Scale: replicasScale(func(o *appsv1.Deployment) (*int32, int32, *metav1.LabelSelector) {
			return o.Spec.Replicas, o.Status.Replicas, o.Spec.Selector
		}, func(o *appsv1.Deployment, n *int32) { o.Spec.Replicas = n }),
		Strategy: Strategy{
			Default:              defaulter(defaults.Deployment),
			Validate:             validator(validation.Deployment),
			ValidateUpdate:       updateValidator(validation.DeploymentUpdate),
			ValidateStatusUpdate: updateValidator(validation.DeploymentStatusUpdate),
		},
	}
}

func replicaSets() *Resource {
	return &Resource{
		GVR: gvr("apps", "v1", "replicasets"), Kind: "ReplicaSet", Singular: "replicaset", ShortNames: []string{"rs"}, Categories: []string{"all"}, Namespaced: true,
		New: func() runtime.Object { return &appsv1.ReplicaSet{} }, NewList: func() runtime.Object { return &appsv1.ReplicaSetList{} },
		Status: true,
		Scale: replicasScale(func(o *appsv1.ReplicaSet) (*int32, int32, *metav1.LabelSelector) {
			return o.Spec.Replicas, o.Status.Replicas, o.Spec.Selector
		}, func(o *appsv1.ReplicaSet, n *int32) { o.Spec.Replicas = n }),
		Fields: func(o runtime.Object) fields.Set {
			return fields.Set{"status.replicas": strconv.Itoa(int(o.(*appsv1.ReplicaSet).Status.Replicas))}
		},
		Strategy: Strategy{
			Default:              defaulter(defaults.ReplicaSet),
			Validate:             validator(validation.ReplicaSet),
			ValidateUpdate:       updateValidator(validation.ReplicaSetUpdate),
			ValidateStatusUpdate: updateValidator(validation.ReplicaSetStatusUpdate),
		},
	}
}

func statefulSets() *Resource {
	return &Resource{
		GVR: gvr("apps", "v1", "statefulsets"), Kind: "StatefulSet", Singular: "statefulset", ShortNames: []string{"sts"}, Categories: []string{"all"}, Namespaced: true,
		New: func() runtime.Object { return &appsv1.StatefulSet{} }, NewList: func() runtime.Object { return &appsv1.StatefulSetList{} },
		Status: true,
		Scale: replicasScale(func(o *appsv1.StatefulSet) (*int32, int32, *metav1.LabelSelector) {
			return o.Spec.Replicas, o.Status.Replicas, o.Spec.Selector
		}, func(o *appsv1.StatefulSet, n *int32) { o.Spec.Replicas = n }),
		Strategy: Strategy{
			Default:              defaulter(defaults.StatefulSet),
			Validate:             validator(validation.StatefulSet),
			ValidateUpdate:       updateValidator(validation.StatefulSetUpdate),
			ValidateStatusUpdate: updateValidator(validation.StatefulSetStatusUpdate),
		},
	}
}

func daemonSets() *Resource {
	return &Resource{
		GVR: gvr("apps", "v1", "daemonsets"), Kind: "DaemonSet", Singular: "daemonset", ShortNames: []string{"ds"}, Categories: []string{"all"}, Namespaced: true,
		New: func() runtime.Object { return &appsv1.DaemonSet{} }, NewList: func() runtime.Object { return &appsv1.DaemonSetList{} },
		Status: true,
		Strategy: Strategy{
			Default:              defaulter(defaults.DaemonSet),
			Validate:             validator(validation.DaemonSet),
			ValidateUpdate:       updateValidator(validation.DaemonSetUpdate),
			ValidateStatusUpdate: updateValidator(validation.DaemonSetStatusUpdate),
			PrepareForCreate: func(obj runtime.Object) {
				metav1.SetMetaDataAnnotation(&obj.(*appsv1.DaemonSet).ObjectMeta, appsv1.DeprecatedTemplateGeneration, "1")
			},
			PrepareForUpdate: func(obj, old runtime.Object) {
				carryTemplateGeneration(obj.(*appsv1.DaemonSet), old.(*appsv1.DaemonSet))
			},
		},
	}
}

// carryTemplateGeneration keeps upstream's spec.templateGeneration, which
// apps/v1 carries as the deprecated.daemonset.template.generation
// annotation: the server owns it (a client's value is ignored) and it
// counts template changes, so the DaemonSet controller can label pods with
// pod-template-generation. PrepareForUpdate runs before defaulting, so the
// new template is compared defaulted, else an apply of an unchanged
// manifest would count as a change.
func carryTemplateGeneration(ds, old *appsv1.DaemonSet) {
	gen, err := strconv.ParseInt(old.Annotations[appsv1.DeprecatedTemplateGeneration], 10, 64)
	if err != nil {
		gen = 0
	}
	defaulted := ds.DeepCopy()
	defaults.DaemonSet(defaulted)
	if !apiequality.Semantic.DeepEqual(defaulted.Spec.Template, old.Spec.Template) {
		gen++
	}
	if gen > 0 {
		metav1.SetMetaDataAnnotation(&ds.ObjectMeta, appsv1.DeprecatedTemplateGeneration, strconv.FormatInt(gen, 10))
	} else {
		delete(ds.Annotations, appsv1.DeprecatedTemplateGeneration)
	}
}

func controllerRevisions() *Resource {
	return &Resource{
		GVR: gvr("apps", "v1", "controllerrevisions"), Kind: "ControllerRevision", Singular: "controllerrevision", Namespaced: true,
		New: func() runtime.Object { return &appsv1.ControllerRevision{} }, NewList: func() runtime.Object { return &appsv1.ControllerRevisionList{} },
		Strategy: Strategy{
			Default:              NoDefaults,
			Validate:             validator(validation.ControllerRevision),
			ValidateUpdate:       updateValidator(validation.ControllerRevisionUpdate),
			ValidateStatusUpdate: metaUpdate,
		},
	}
}

// replicasScale builds the /scale accessors of a workload whose
// spec.replicas defaults to 1 when unset.
func replicasScale[T runtime.Object](get func(T) (*int32, int32, *metav1.LabelSelector), set func(T, *int32)) *Scale {
	return &Scale{
		Replicas: func(o runtime.Object) (int32, int32, *metav1.LabelSelector) {
			spec, status, sel := get(o.(T))
			if spec == nil {
				return 1, status, sel
			}
			return *spec, status, sel
		},
		SetReplicas: func(o runtime.Object, n int32) { set(o.(T), &n) },
	}
}
