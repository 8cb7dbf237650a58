// Package defaultstest defaults any object by its type, for the tests of
// the rule packages (defaults, validation, apply): they cannot import the
// API server's registry, which names each kind's defaulter and imports them.
package defaultstest

import (
	"github.com/kelp-project/kelp/server/apiserver/defaults"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
)

// Apply fills in upstream defaults in place. Unknown types are left alone.
//
// List types (PodList, DeploymentList, ...) are defaulted item by item, as
// the generated upstream defaulters do.
func Apply(obj runtime.Object) {
	switch o := obj.(type) {
	// core/v1
	case *corev1.Pod:
		defaults.Pod(o)
	case *corev1.PodTemplate:
		defaults.PodTemplate(o)
	case *corev1.ReplicationController:
		defaults.ReplicationController(o)
	case *corev1.Service:
		defaults.Service(o)
	case *corev1.Endpoints:
		defaults.Endpoints(o)
	case *corev1.Namespace:
		defaults.Namespace(o)
	case *corev1.Secret:
		defaults.Secret(o)
	case *corev1.Node:
		defaults.Node(o)
	case *corev1.PersistentVolume:
		defaults.PersistentVolume(o)
	case *corev1.PersistentVolumeClaim:
		defaults.PersistentVolumeClaim(o)
	case *corev1.LimitRange:
		defaults.LimitRange(o)
	case *corev1.ResourceQuota:
		defaults.ResourceQuota(o)

	// apps/v1
	case *appsv1.Deployment:
		defaults.Deployment(o)
	case *appsv1.ReplicaSet:
		defaults.ReplicaSet(o)
	case *appsv1.StatefulSet:
		defaults.StatefulSet(o)
	case *appsv1.DaemonSet:
		defaults.DaemonSet(o)

	// batch/v1
	case *batchv1.Job:
		defaults.Job(o)
	case *batchv1.CronJob:
		defaults.CronJob(o)

	// discovery/v1
	case *discoveryv1.EndpointSlice:
		defaults.EndpointSlice(o)

	// networking/v1
	case *networkingv1.NetworkPolicy:
		defaults.NetworkPolicy(o)
	case *networkingv1.IngressClass:
		defaults.IngressClass(o)

	// rbac/v1
	case *rbacv1.RoleBinding:
		defaults.RoleBinding(o)
	case *rbacv1.ClusterRoleBinding:
		defaults.ClusterRoleBinding(o)

	// certificates/v1
	case *certificatesv1.PodCertificateRequest:
		defaults.PodCertificateRequest(o)

	// storage/v1
	case *storagev1.StorageClass:
		defaults.StorageClass(o)
	case *storagev1.CSIDriver:
		defaults.CSIDriver(o)

	// resource/v1
	case *resourcev1.ResourceClaim:
		defaults.ResourceClaim(o)
	case *resourcev1.ResourceClaimTemplate:
		defaults.ResourceClaimTemplate(o)
	case *resourcev1.ResourceSlice:
		defaults.ResourceSlice(o)
	case *resourcev1.DeviceTaintRule:
		defaults.DeviceTaintRule(o)

	// scheduling/v1
	case *schedulingv1.PriorityClass:
		defaults.PriorityClass(o)

	// autoscaling
	case *autoscalingv1.HorizontalPodAutoscaler:
		defaults.HorizontalPodAutoscalerV1(o)
	case *autoscalingv2.HorizontalPodAutoscaler:
		defaults.HorizontalPodAutoscalerV2(o)

	default:
		// Lists: default each item in place. EachListItem hands out
		// pointers into the Items slice for typed lists.
		if meta.IsListType(obj) {
			_ = meta.EachListItem(obj, func(item runtime.Object) error {
				Apply(item)
				return nil
			})
		}
	}
}

// ApplyUpdate is Apply for the update path: before defaulting it carries
// over from the stored object (old) the values the server allocated and a
// client may legitimately omit when it replaces the object, as upstream's
// registries do (Service: clusterIP/clusterIPs, ipFamilies, ipFamilyPolicy,
// nodePorts, healthCheckNodePort). Without this a `kubectl replace` of a
// Service manifest that never named its cluster IP would be rejected as
// changing it. old is not modified; mismatched types just get Apply.
func ApplyUpdate(obj, old runtime.Object) {
	if s, ok := obj.(*corev1.Service); ok {
		if o, ok := old.(*corev1.Service); ok {
			defaults.CarryAllocatedServiceValues(s, o)
		}
	}
	Apply(obj)
}
