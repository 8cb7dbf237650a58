// Package validation checks typed k8s.io/api objects the way kube-apiserver
// does before storing them, returning a field.ErrorList that the API server
// turns into a 422 Invalid status with one cause per error.
//
// Rules, field paths and messages follow upstream (pkg/apis/*/validation)
// for the fields kelp serves; where kelp deviates it says so next to the
// rule. Objects are expected to be defaulted (server/defaults.Apply) first:
// like upstream, several checks require fields that defaulting always sets
// (a Pod's restartPolicy, a Service's sessionAffinity, ...).
//
// Three entry points mirror the three write paths:
//   - Validate on create: metadata and spec.
//   - ValidateUpdate on update of the main resource: metadata update rules
//     (immutable name, namespace, uid, creationTimestamp, ...), the new
//     object's validity, and each kind's immutable fields.
//   - ValidateStatusUpdate on writes through the /status subresource:
//     metadata update rules and the status fields. The API server is
//     expected to keep the stored spec on that path, as upstream does.
//
// Kinds without specific rules still get metadata validation (names must at
// least be URL path segments), so the functions are safe to call for every
// object the server stores.
package validation

import (
	"fmt"
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validate checks an object on create (metadata + spec).
func Validate(obj runtime.Object) field.ErrorList {
	switch o := obj.(type) {
	case *corev1.Pod:
		return validatePod(o)
	case *corev1.PodTemplate:
		return validatePodTemplate(o)
	case *corev1.ReplicationController:
		return validateReplicationController(o)
	case *corev1.Service:
		return validateService(o)
	case *corev1.Endpoints:
		return validateEndpoints(o)
	case *corev1.ConfigMap:
		return validateConfigMap(o)
	case *corev1.Secret:
		return validateSecret(o)
	case *corev1.ServiceAccount:
		return validateServiceAccount(o)
	case *corev1.Namespace:
		return validateNamespace(o)
	case *corev1.Node:
		return validateNode(o)
	case *corev1.PersistentVolume:
		return validatePV(o)
	case *corev1.PersistentVolumeClaim:
		return validatePVC(o)
	case *corev1.LimitRange:
		return validateLimitRange(o)
	case *corev1.ResourceQuota:
		return validateResourceQuota(o)
	case *corev1.Event:
		return validateCoreEvent(o)

	case *appsv1.Deployment:
		return validateDeployment(o)
	case *appsv1.ReplicaSet:
		return validateReplicaSet(o)
	case *appsv1.StatefulSet:
		return validateStatefulSet(o)
	case *appsv1.DaemonSet:
		return validateDaemonSet(o)
	case *appsv1.ControllerRevision:
		return validateControllerRevision(o)

	case *batchv1.Job:
		return validateJob(o)
	case *batchv1.CronJob:
		return validateCronJob(o)

	case *discoveryv1.EndpointSlice:
		return validateEndpointSlice(o)
	case *networkingv1.NetworkPolicy:
		return validateNetworkPolicy(o)
	case *networkingv1.Ingress:
		return validateIngress(o)
	case *networkingv1.IngressClass:
		return validateIngressClass(o)

	case *rbacv1.Role:
		return validateRole(o)
	case *rbacv1.ClusterRole:
		return validateClusterRole(o)
	case *rbacv1.RoleBinding:
		return validateRoleBinding(o)
	case *rbacv1.ClusterRoleBinding:
		return validateClusterRoleBinding(o)

	case *storagev1.StorageClass:
		return validateStorageClass(o)
	case *policyv1.PodDisruptionBudget:
		return validatePDB(o)
	case *coordinationv1.Lease:
		return validateLease(o)
	case *eventsv1.Event:
		return validateEventV1(o)
	case *schedulingv1.PriorityClass:
		return validatePriorityClass(o)
	case *autoscalingv1.HorizontalPodAutoscaler:
		return validateHPAv1(o)
	case *autoscalingv2.HorizontalPodAutoscaler:
		return validateHPAv2(o)
	}
	return validateGenericMeta(obj)
}

// ValidateUpdate checks new against old: metadata update rules (immutable
// name/namespace/uid/creationTimestamp...), the new object's validity, and
// the kind's immutable fields.
func ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	if errs := sameType(obj, old); errs != nil {
		return errs
	}
	switch o := obj.(type) {
	case *corev1.Pod:
		return validatePodUpdate(o, old.(*corev1.Pod))
	case *corev1.Service:
		return validateServiceUpdate(o, old.(*corev1.Service))
	case *corev1.ConfigMap:
		return validateConfigMapUpdate(o, old.(*corev1.ConfigMap))
	case *corev1.Secret:
		return validateSecretUpdate(o, old.(*corev1.Secret))
	case *corev1.Node:
		return validateNodeUpdate(o, old.(*corev1.Node))
	case *corev1.PersistentVolume:
		return validatePVUpdate(o, old.(*corev1.PersistentVolume))
	case *corev1.PersistentVolumeClaim:
		return validatePVCUpdate(o, old.(*corev1.PersistentVolumeClaim))
	case *corev1.Event:
		// Legacy events stay as free-form on update as on create.
		return dedupe(append(validateObjectMetaUpdate(&o.ObjectMeta, &old.(*corev1.Event).ObjectMeta), validateCoreEvent(o)...))

	case *appsv1.Deployment:
		return validateDeploymentUpdate(o, old.(*appsv1.Deployment))
	case *appsv1.ReplicaSet:
		return validateReplicaSetUpdate(o, old.(*appsv1.ReplicaSet))
	case *appsv1.StatefulSet:
		return validateStatefulSetUpdate(o, old.(*appsv1.StatefulSet))
	case *appsv1.DaemonSet:
		return validateDaemonSetUpdate(o, old.(*appsv1.DaemonSet))
	case *appsv1.ControllerRevision:
		return validateControllerRevisionUpdate(o, old.(*appsv1.ControllerRevision))

	case *batchv1.Job:
		return validateJobUpdate(o, old.(*batchv1.Job))
	case *batchv1.CronJob:
		return validateCronJobUpdate(o, old.(*batchv1.CronJob))

	case *discoveryv1.EndpointSlice:
		return validateEndpointSliceUpdate(o, old.(*discoveryv1.EndpointSlice))
	case *networkingv1.IngressClass:
		errs := genericUpdate(o, old)
		return append(errs, validateImmutable(o.Spec.Controller, old.(*networkingv1.IngressClass).Spec.Controller, specPath.Child("controller"))...)

	case *rbacv1.RoleBinding:
		return append(genericUpdate(o, old), roleRefImmutable(o.RoleRef, old.(*rbacv1.RoleBinding).RoleRef)...)
	case *rbacv1.ClusterRoleBinding:
		return append(genericUpdate(o, old), roleRefImmutable(o.RoleRef, old.(*rbacv1.ClusterRoleBinding).RoleRef)...)

	case *storagev1.StorageClass:
		return validateStorageClassUpdate(o, old.(*storagev1.StorageClass))
	case *eventsv1.Event:
		return validateEventV1Update(o, old.(*eventsv1.Event))
	case *schedulingv1.PriorityClass:
		return dedupe(append(validatePriorityClassUpdate(o, old.(*schedulingv1.PriorityClass)), validatePriorityClass(o)...))
	}
	return genericUpdate(obj, old)
}

// ValidateStatusUpdate checks a write through the /status subresource:
// metadata update rules plus the kind's status rules.
func ValidateStatusUpdate(obj, old runtime.Object) field.ErrorList {
	if errs := sameType(obj, old); errs != nil {
		return errs
	}
	switch o := obj.(type) {
	case *corev1.Pod:
		return validatePodStatusUpdate(o, old.(*corev1.Pod))
	case *corev1.Service:
		return validateServiceStatusUpdate(o, old.(*corev1.Service))
	case *corev1.Namespace:
		return validateNamespaceStatusUpdate(o, old.(*corev1.Namespace))
	case *corev1.Node:
		return dedupe(append(validateObjectMetaUpdate(&o.ObjectMeta, &old.(*corev1.Node).ObjectMeta), validateNodeResources(o)...))
	case *corev1.ResourceQuota:
		return validateResourceQuotaStatusUpdate(o, old.(*corev1.ResourceQuota))
	case *corev1.ReplicationController:
		return append(validateObjectMetaUpdate(&o.ObjectMeta, &old.(*corev1.ReplicationController).ObjectMeta), validateReplicationControllerStatus(&o.Status)...)
	case *appsv1.Deployment:
		return append(validateObjectMetaUpdate(&o.ObjectMeta, &old.(*appsv1.Deployment).ObjectMeta), validateDeploymentStatus(&o.Status)...)
	case *appsv1.ReplicaSet:
		return append(validateObjectMetaUpdate(&o.ObjectMeta, &old.(*appsv1.ReplicaSet).ObjectMeta), validateReplicaSetStatus(&o.Status)...)
	case *appsv1.StatefulSet:
		errs := append(validateObjectMetaUpdate(&o.ObjectMeta, &old.(*appsv1.StatefulSet).ObjectMeta), validateStatefulSetStatus(&o.Status)...)
		return append(errs, collisionCountNotDecremented(o.Status.CollisionCount, old.(*appsv1.StatefulSet).Status.CollisionCount)...)
	case *appsv1.DaemonSet:
		errs := append(validateObjectMetaUpdate(&o.ObjectMeta, &old.(*appsv1.DaemonSet).ObjectMeta), validateDaemonSetStatus(&o.Status)...)
		return append(errs, collisionCountNotDecremented(o.Status.CollisionCount, old.(*appsv1.DaemonSet).Status.CollisionCount)...)
	case *batchv1.Job:
		return validateJobStatusUpdate(o, old.(*batchv1.Job))
	case *policyv1.PodDisruptionBudget:
		return validatePDBStatusUpdate(o, old.(*policyv1.PodDisruptionBudget))
	}
	return validateMetaUpdateOf(obj, old)
}

// genericUpdate is the update rule for kinds whose spec is freely mutable:
// metadata update rules plus full validity of the new object. Errors the
// two checks both find (labels, annotations) are reported once.
func genericUpdate(obj, old runtime.Object) field.ErrorList {
	return dedupe(append(validateMetaUpdateOf(obj, old), Validate(obj)...))
}

// validateMetaUpdateOf applies the metadata update rules to any pair of
// objects that embed ObjectMeta.
func validateMetaUpdateOf(obj, old runtime.Object) field.ErrorList {
	n, o := objectMetaOf(obj), objectMetaOf(old)
	if n == nil || o == nil {
		return nil
	}
	return validateObjectMetaUpdate(n, o)
}

// objectMetaOf returns the embedded ObjectMeta of a typed object, or nil
// (lists, unstructured content). meta.Accessor would hand back the object
// itself, while the apimachinery helpers want the struct.
func objectMetaOf(obj runtime.Object) *metav1.ObjectMeta {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return nil
	}
	f := v.Elem().FieldByName("ObjectMeta")
	if !f.IsValid() || f.Type() != reflect.TypeOf(metav1.ObjectMeta{}) {
		return nil
	}
	return f.Addr().Interface().(*metav1.ObjectMeta)
}

// validateGenericMeta covers kinds without specific rules: names must at
// least be usable as a URL path segment, and labels, annotations, owner
// references and finalizers must be well formed.
func validateGenericMeta(obj runtime.Object) field.ErrorList {
	m := objectMetaOf(obj)
	if m == nil {
		return nil
	}
	// Scope is unknown here; a set namespace is only checked for form.
	return validateObjectMeta(m, true, nameIsPathSegment)
}

func sameType(obj, old runtime.Object) field.ErrorList {
	if obj == nil || old == nil || reflect.TypeOf(obj) != reflect.TypeOf(old) {
		return field.ErrorList{field.InternalError(field.NewPath("kind"), fmt.Errorf("cannot compare %T with %T", obj, old))}
	}
	return nil
}

func collisionCountNotDecremented(newC, oldC *int32) field.ErrorList {
	if oldC == nil {
		return nil
	}
	v := int32(0)
	if newC != nil {
		v = *newC
	}
	if v < *oldC {
		return field.ErrorList{field.Invalid(statusPath.Child("collisionCount"), v, "cannot be decremented")}
	}
	return nil
}

// dedupe drops repeated errors (same type, field, value and detail),
// keeping the first occurrence and the order.
func dedupe(errs field.ErrorList) field.ErrorList {
	seen := map[string]bool{}
	out := errs[:0]
	for _, e := range errs {
		key := fmt.Sprintf("%s\x00%s\x00%s\x00%v", e.Type, e.Field, e.Detail, e.BadValue)
		if seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, e)
	}
	return out
}
