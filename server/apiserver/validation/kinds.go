package validation

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The entry points below compose the rules of kinds whose update or status
// rules combine several checks; every other kind's entry points are the
// rule functions themselves (Pod, PodUpdate, PodStatusUpdate, ...). The API
// server's registry names them per kind.

func CoreEventUpdate(o, old *corev1.Event) field.ErrorList {
	// Legacy events stay as free-form on update as on create.
	return dedupe(append(validateObjectMetaUpdate(&o.ObjectMeta, &old.ObjectMeta), CoreEvent(o)...))
}

func IngressClassUpdate(o, old *networkingv1.IngressClass) field.ErrorList {
	errs := dedupe(append(validateMetaUpdateOf(o, old), IngressClass(o)...))
	return append(errs, validateImmutable(o.Spec.Controller, old.Spec.Controller, specPath.Child("controller"))...)
}

func RoleBindingUpdate(o, old *rbacv1.RoleBinding) field.ErrorList {
	return append(dedupe(append(validateMetaUpdateOf(o, old), RoleBinding(o)...)), roleRefImmutable(o.RoleRef, old.RoleRef)...)
}

func ClusterRoleBindingUpdate(o, old *rbacv1.ClusterRoleBinding) field.ErrorList {
	return append(dedupe(append(validateMetaUpdateOf(o, old), ClusterRoleBinding(o)...)), roleRefImmutable(o.RoleRef, old.RoleRef)...)
}

func PriorityClassUpdate(o, old *schedulingv1.PriorityClass) field.ErrorList {
	return dedupe(append(validatePriorityClassUpdate(o, old), PriorityClass(o)...))
}

func NodeStatusUpdate(o, old *corev1.Node) field.ErrorList {
	return dedupe(append(validateObjectMetaUpdate(&o.ObjectMeta, &old.ObjectMeta), validateNodeResources(o)...))
}

func ReplicationControllerStatusUpdate(o, old *corev1.ReplicationController) field.ErrorList {
	return append(validateObjectMetaUpdate(&o.ObjectMeta, &old.ObjectMeta), validateReplicationControllerStatus(&o.Status)...)
}

func DeploymentStatusUpdate(o, old *appsv1.Deployment) field.ErrorList {
	return append(validateObjectMetaUpdate(&o.ObjectMeta, &old.ObjectMeta), validateDeploymentStatus(&o.Status)...)
}

func ReplicaSetStatusUpdate(o, old *appsv1.ReplicaSet) field.ErrorList {
	return append(validateObjectMetaUpdate(&o.ObjectMeta, &old.ObjectMeta), validateReplicaSetStatus(&o.Status)...)
}

func StatefulSetStatusUpdate(o, old *appsv1.StatefulSet) field.ErrorList {
	errs := append(validateObjectMetaUpdate(&o.ObjectMeta, &old.ObjectMeta), validateStatefulSetStatus(&o.Status)...)
	return append(errs, collisionCountNotDecremented(o.Status.CollisionCount, old.Status.CollisionCount)...)
}

func DaemonSetStatusUpdate(o, old *appsv1.DaemonSet) field.ErrorList {
	errs := append(validateObjectMetaUpdate(&o.ObjectMeta, &old.ObjectMeta), validateDaemonSetStatus(&o.Status)...)
	return append(errs, collisionCountNotDecremented(o.Status.CollisionCount, old.Status.CollisionCount)...)
}
