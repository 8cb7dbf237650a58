package validation

import (
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kelp-project/kelp/server/apiserver/conversion"
)

// The tests reach each kind's rules by type, as the API server does through
// its registry (which this package cannot import). Kinds without rules of
// their own get the generic ones, as the registry gives them.

// Validate checks an object on create (metadata + spec).
func Validate(obj runtime.Object) field.ErrorList {
	switch o := obj.(type) {
	case *corev1.Pod:
		return Pod(o)
	case *corev1.PodTemplate:
		return PodTemplate(o)
	case *corev1.ReplicationController:
		return ReplicationController(o)
	case *corev1.Service:
		return Service(o)
	case *corev1.Endpoints:
		return Endpoints(o)
	case *corev1.ConfigMap:
		return ConfigMap(o)
	case *corev1.Secret:
		return Secret(o)
	case *corev1.ServiceAccount:
		return ServiceAccount(o)
	case *corev1.Namespace:
		return Namespace(o)
	case *corev1.Node:
		return Node(o)
	case *corev1.PersistentVolume:
		return PersistentVolume(o)
	case *corev1.PersistentVolumeClaim:
		return PersistentVolumeClaim(o)
	case *corev1.LimitRange:
		return LimitRange(o)
	case *corev1.ResourceQuota:
		return ResourceQuota(o)
	case *corev1.Event:
		return CoreEvent(o)

	case *appsv1.Deployment:
		return Deployment(o)
	case *appsv1.ReplicaSet:
		return ReplicaSet(o)
	case *appsv1.StatefulSet:
		return StatefulSet(o)
	case *appsv1.DaemonSet:
		return DaemonSet(o)
	case *appsv1.ControllerRevision:
		return ControllerRevision(o)

	case *batchv1.Job:
		return Job(o)
	case *batchv1.CronJob:
		return CronJob(o)

	case *discoveryv1.EndpointSlice:
		return EndpointSlice(o)
	case *networkingv1.NetworkPolicy:
		return NetworkPolicy(o)
	case *networkingv1.Ingress:
		return Ingress(o)
	case *networkingv1.IngressClass:
		return IngressClass(o)
	case *networkingv1.ServiceCIDR:
		return ServiceCIDR(o)
	case *networkingv1.IPAddress:
		return IPAddress(o)
	case *nodev1.RuntimeClass:
		return RuntimeClass(o)

	case *rbacv1.Role:
		return Role(o)
	case *rbacv1.ClusterRole:
		return ClusterRole(o)
	case *rbacv1.RoleBinding:
		return RoleBinding(o)
	case *rbacv1.ClusterRoleBinding:
		return ClusterRoleBinding(o)

	case *storagev1.StorageClass:
		return StorageClass(o)
	case *storagev1.CSIDriver:
		return CSIDriver(o)
	case *storagev1.CSINode:
		return CSINode(o)
	case *storagev1.VolumeAttachment:
		return VolumeAttachment(o)
	case *storagev1.CSIStorageCapacity:
		return CSIStorageCapacity(o)
	case *storagev1.VolumeAttributesClass:
		return VolumeAttributesClass(o)
	case *policyv1.PodDisruptionBudget:
		return PodDisruptionBudget(o)
	case *coordinationv1.Lease:
		return Lease(o)
	case *eventsv1.Event:
		return EventV1(o)
	case *schedulingv1.PriorityClass:
		return PriorityClass(o)
	case *autoscalingv1.HorizontalPodAutoscaler:
		// The registry validates a v1 HPA in its stored v2 form.
		return HorizontalPodAutoscaler(conversion.HorizontalPodAutoscalerV1ToV2(o))
	case *autoscalingv2.HorizontalPodAutoscaler:
		return HorizontalPodAutoscaler(o)
	}
	return Generic(obj)
}

// ValidateUpdate checks new against old: metadata update rules (immutable
// name/namespace/uid/creationTimestamp...), the new object's validity, and
// the kind's immutable fields.
func ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	if errs := SameType(obj, old); errs != nil {
		return errs
	}
	switch o := obj.(type) {
	case *corev1.Pod:
		return PodUpdate(o, old.(*corev1.Pod))
	case *corev1.Service:
		return ServiceUpdate(o, old.(*corev1.Service))
	case *corev1.ConfigMap:
		return ConfigMapUpdate(o, old.(*corev1.ConfigMap))
	case *corev1.Secret:
		return SecretUpdate(o, old.(*corev1.Secret))
	case *corev1.Node:
		return NodeUpdate(o, old.(*corev1.Node))
	case *corev1.PersistentVolume:
		return PersistentVolumeUpdate(o, old.(*corev1.PersistentVolume))
	case *corev1.PersistentVolumeClaim:
		return PersistentVolumeClaimUpdate(o, old.(*corev1.PersistentVolumeClaim))
	case *corev1.Event:
		// Legacy events stay as free-form on update as on create.
		return dedupe(append(validateObjectMetaUpdate(&o.ObjectMeta, &old.(*corev1.Event).ObjectMeta), CoreEvent(o)...))

	case *appsv1.Deployment:
		return DeploymentUpdate(o, old.(*appsv1.Deployment))
	case *appsv1.ReplicaSet:
		return ReplicaSetUpdate(o, old.(*appsv1.ReplicaSet))
	case *appsv1.StatefulSet:
		return StatefulSetUpdate(o, old.(*appsv1.StatefulSet))
	case *appsv1.DaemonSet:
		return DaemonSetUpdate(o, old.(*appsv1.DaemonSet))
	case *appsv1.ControllerRevision:
		return ControllerRevisionUpdate(o, old.(*appsv1.ControllerRevision))

	case *batchv1.Job:
		return JobUpdate(o, old.(*batchv1.Job))
	case *batchv1.CronJob:
		return CronJobUpdate(o, old.(*batchv1.CronJob))

	case *discoveryv1.EndpointSlice:
		return EndpointSliceUpdate(o, old.(*discoveryv1.EndpointSlice))
	case *nodev1.RuntimeClass:
		return RuntimeClassUpdate(o, old.(*nodev1.RuntimeClass))
	case *networkingv1.ServiceCIDR:
		return ServiceCIDRUpdate(o, old.(*networkingv1.ServiceCIDR))
	case *networkingv1.IPAddress:
		return IPAddressUpdate(o, old.(*networkingv1.IPAddress))
	case *networkingv1.IngressClass:
		errs := GenericUpdate(o, old, Validate)
		return append(errs, validateImmutable(o.Spec.Controller, old.(*networkingv1.IngressClass).Spec.Controller, specPath.Child("controller"))...)

	case *rbacv1.RoleBinding:
		return append(GenericUpdate(o, old, Validate), roleRefImmutable(o.RoleRef, old.(*rbacv1.RoleBinding).RoleRef)...)
	case *rbacv1.ClusterRoleBinding:
		return append(GenericUpdate(o, old, Validate), roleRefImmutable(o.RoleRef, old.(*rbacv1.ClusterRoleBinding).RoleRef)...)

	case *storagev1.StorageClass:
		return StorageClassUpdate(o, old.(*storagev1.StorageClass))
	case *storagev1.CSIDriver:
		return CSIDriverUpdate(o, old.(*storagev1.CSIDriver))
	case *storagev1.CSINode:
		return CSINodeUpdate(o, old.(*storagev1.CSINode))
	case *storagev1.VolumeAttachment:
		return VolumeAttachmentUpdate(o, old.(*storagev1.VolumeAttachment))
	case *storagev1.CSIStorageCapacity:
		return CSIStorageCapacityUpdate(o, old.(*storagev1.CSIStorageCapacity))
	case *storagev1.VolumeAttributesClass:
		return VolumeAttributesClassUpdate(o, old.(*storagev1.VolumeAttributesClass))
	case *eventsv1.Event:
		return EventV1Update(o, old.(*eventsv1.Event))
	case *schedulingv1.PriorityClass:
		return dedupe(append(validatePriorityClassUpdate(o, old.(*schedulingv1.PriorityClass)), PriorityClass(o)...))
	}
	return GenericUpdate(obj, old, Validate)
}

// ValidateStatusUpdate checks a write through the /status subresource:
// metadata update rules plus the kind's status rules.
func ValidateStatusUpdate(obj, old runtime.Object) field.ErrorList {
	if errs := SameType(obj, old); errs != nil {
		return errs
	}
	switch o := obj.(type) {
	case *corev1.Pod:
		return PodStatusUpdate(o, old.(*corev1.Pod))
	case *corev1.Service:
		return ServiceStatusUpdate(o, old.(*corev1.Service))
	case *corev1.Namespace:
		return NamespaceStatusUpdate(o, old.(*corev1.Namespace))
	case *corev1.Node:
		return dedupe(append(validateObjectMetaUpdate(&o.ObjectMeta, &old.(*corev1.Node).ObjectMeta), validateNodeResources(o)...))
	case *corev1.ResourceQuota:
		return ResourceQuotaStatusUpdate(o, old.(*corev1.ResourceQuota))
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
		return JobStatusUpdate(o, old.(*batchv1.Job))
	case *policyv1.PodDisruptionBudget:
		return PodDisruptionBudgetStatusUpdate(o, old.(*policyv1.PodDisruptionBudget))
	case *storagev1.CSINode:
		return CSINodeStatusUpdate(o, old.(*storagev1.CSINode))
	case *storagev1.VolumeAttachment:
		return VolumeAttachmentUpdate(o, old.(*storagev1.VolumeAttachment))
	}
	return MetaUpdate(obj, old)
}
