// Package defaults fills in the upstream (kube-apiserver) v1 defaults for the
// typed k8s.io/api objects kelp serves.
//
// The API server calls Apply on every create and update, after decoding and
// before validation, exactly where kube-apiserver runs the scheme's generated
// SetObjectDefaults_* functions. The rules here mirror those generated
// defaulters (pkg/apis/*/v1/defaults.go plus the +default markers in
// k8s.io/api) for the fields clients can observe, plus a few steps upstream
// performs in registry strategies or built-in admission plugins that clients
// also see on every object (namespace finalizers, service IP families, Job
// selector generation, pod priority); each of those is marked where it lives.
//
// Invariants:
//   - Apply is idempotent: applying it twice gives the same object as once.
//     The API server may default an object on both decode and update paths.
//   - Apply only fills unset (zero / nil) fields; it never overwrites a value
//     the client sent.
//   - Unknown types are left untouched.
package defaults

import (
	"math"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
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
		pod(o)
	case *corev1.PodTemplate:
		podTemplateSpec(&o.Template)
	case *corev1.ReplicationController:
		replicationController(o)
	case *corev1.Service:
		service(o)
	case *corev1.Endpoints:
		endpoints(o)
	case *corev1.Namespace:
		namespace(o)
	case *corev1.Secret:
		secret(o)
	case *corev1.Node:
		node(o)
	case *corev1.PersistentVolume:
		persistentVolume(o)
	case *corev1.PersistentVolumeClaim:
		persistentVolumeClaim(o)
	case *corev1.LimitRange:
		limitRange(o)
	case *corev1.ResourceQuota:
		resourceQuota(o)

	// apps/v1
	case *appsv1.Deployment:
		deployment(o)
	case *appsv1.ReplicaSet:
		replicaSet(o)
	case *appsv1.StatefulSet:
		statefulSet(o)
	case *appsv1.DaemonSet:
		daemonSet(o)

	// batch/v1
	case *batchv1.Job:
		job(o)
	case *batchv1.CronJob:
		cronJob(o)

	// discovery/v1
	case *discoveryv1.EndpointSlice:
		endpointSlice(o)

	// networking/v1
	case *networkingv1.NetworkPolicy:
		networkPolicy(o)
	case *networkingv1.IngressClass:
		ingressClass(o)

	// rbac/v1
	case *rbacv1.RoleBinding:
		roleBinding(o)
	case *rbacv1.ClusterRoleBinding:
		clusterRoleBinding(o)

	// storage/v1
	case *storagev1.StorageClass:
		storageClass(o)
	case *storagev1.CSIDriver:
		csiDriver(o)

	// scheduling/v1
	case *schedulingv1.PriorityClass:
		priorityClass(o)

	// autoscaling
	case *autoscalingv1.HorizontalPodAutoscaler:
		hpaV1(o)
	case *autoscalingv2.HorizontalPodAutoscaler:
		hpaV2(o)

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
			patchAllocatedServiceValues(s, o)
		}
	}
	Apply(obj)
}

// ptr returns a pointer to a copy of v. Each defaulted pointer field gets its
// own allocation so objects never share mutable state.

// maxInt32 is used for Job.spec.backoffLimit when backoffLimitPerIndex is set.
const maxInt32 = math.MaxInt32
