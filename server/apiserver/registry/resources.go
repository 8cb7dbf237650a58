package registry

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kelp-project/kelp/server/apiserver/allocator"
)

// Options carries what some kinds' strategies need from the API server.
type Options struct {
	// Services allocates Service cluster IPs and node ports.
	Services *allocator.Services
}

// All returns every served resource, in discovery order. A resource that
// is StoredAs another comes after it.
func All(opts Options) []*Resource {
	return []*Resource{
		// core/v1
		namespaces(), pods(), services(opts.Services), endpoints(), configMaps(), secrets(), serviceAccounts(),
		nodes(), coreEventsResource(), persistentVolumeClaims(), persistentVolumes(), limitRanges(), resourceQuotas(),
		podTemplates(), replicationControllers(),
		// apps/v1
		deployments(), replicaSets(), statefulSets(), daemonSets(), controllerRevisions(),
		// batch/v1
		jobs(), cronJobs(),
		// autoscaling/v2 (stored) and autoscaling/v1
		horizontalPodAutoscalers(), horizontalPodAutoscalersV1(),
		// coordination.k8s.io/v1, discovery.k8s.io/v1, events.k8s.io/v1, policy/v1
		leases(), endpointSlices(), eventsV1Resource(), podDisruptionBudgets(),
		// rbac.authorization.k8s.io/v1
		roles(), roleBindings(), clusterRoles(), clusterRoleBindings(),
		// networking.k8s.io/v1
		ingresses(), ingressClasses(), networkPolicies(), serviceCIDRs(), ipAddresses(),
		// node.k8s.io/v1
		runtimeClasses(),
		// scheduling.k8s.io/v1
		priorityClasses(),
		// flowcontrol.apiserver.k8s.io/v1
		flowSchemas(), priorityLevelConfigurations(),
		// authentication.k8s.io/v1 and authorization.k8s.io/v1: reviews.
		tokenReviews(), selfSubjectReviews(), selfSubjectAccessReviews(), selfSubjectRulesReviews(), subjectAccessReviews(), localSubjectAccessReviews(),
		// storage.k8s.io/v1
		storageClasses(), volumeAttachments(), csiNodes(), csiDrivers(), csiStorageCapacities(), volumeAttributesClasses(),
		// apiextensions.k8s.io/v1
		customResourceDefinitions(),
		// apiregistration.k8s.io/v1
		apiServices(),
		// admissionregistration.k8s.io/v1
		mutatingWebhookConfigurations(), validatingWebhookConfigurations(),
		validatingAdmissionPolicies(), validatingAdmissionPolicyBindings(), mutatingAdmissionPolicies(), mutatingAdmissionPolicyBindings(),
		// certificates.k8s.io/v1
		certificateSigningRequests(), clusterTrustBundles(), podCertificateRequests(),
		// resource.k8s.io/v1
		deviceClasses(), resourceClaims(), resourceClaimTemplates(), resourceSlices(), deviceTaintRules(),
		// storagemigration.k8s.io/v1
		storageVersionMigrations(),
	}
}

func gvr(group, version, resource string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: group, Version: version, Resource: resource}
}

// gvk names a subresource's kind in the parent's group and version.
func gvk(kind string) schema.GroupVersionKind { return schema.GroupVersionKind{Kind: kind} }
