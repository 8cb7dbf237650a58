package registry

import (
	coordinationv1 "k8s.io/api/coordination/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kelp-project/kelp/server/apiserver/defaults"
	"github.com/kelp-project/kelp/server/apiserver/validation"
)

// The one- and two-kind groups: coordination, discovery, policy,
// networking and storage.

func leases() *Resource {
	return &Resource{
		GVR: gvr("coordination.k8s.io", "v1", "leases"), Kind: "Lease", Singular: "lease", Namespaced: true,
		New: func() runtime.Object { return &coordinationv1.Lease{} }, NewList: func() runtime.Object { return &coordinationv1.LeaseList{} },
		Strategy: plainStrategy(NoDefaults, validator(validation.Lease)),
	}
}

func endpointSlices() *Resource {
	return &Resource{
		GVR: gvr("discovery.k8s.io", "v1", "endpointslices"), Kind: "EndpointSlice", Singular: "endpointslice", Namespaced: true,
		New: func() runtime.Object { return &discoveryv1.EndpointSlice{} }, NewList: func() runtime.Object { return &discoveryv1.EndpointSliceList{} },
		Strategy: Strategy{
			Default:              defaulter(defaults.EndpointSlice),
			Validate:             validator(validation.EndpointSlice),
			ValidateUpdate:       updateValidator(validation.EndpointSliceUpdate),
			ValidateStatusUpdate: metaUpdate,
		},
	}
}

func podDisruptionBudgets() *Resource {
	return &Resource{
		GVR: gvr("policy", "v1", "poddisruptionbudgets"), Kind: "PodDisruptionBudget", Singular: "poddisruptionbudget", ShortNames: []string{"pdb"}, Namespaced: true,
		New: func() runtime.Object { return &policyv1.PodDisruptionBudget{} }, NewList: func() runtime.Object { return &policyv1.PodDisruptionBudgetList{} },
		Status: true,
		Strategy: Strategy{
			Default:              NoDefaults,
			Validate:             validator(validation.PodDisruptionBudget),
			ValidateUpdate:       genericUpdate(validator(validation.PodDisruptionBudget)),
			ValidateStatusUpdate: updateValidator(validation.PodDisruptionBudgetStatusUpdate),
		},
	}
}

func ingresses() *Resource {
	return &Resource{
		GVR: gvr("networking.k8s.io", "v1", "ingresses"), Kind: "Ingress", Singular: "ingress", ShortNames: []string{"ing"}, Namespaced: true,
		New: func() runtime.Object { return &networkingv1.Ingress{} }, NewList: func() runtime.Object { return &networkingv1.IngressList{} },
		Status:   true,
		Strategy: plainStrategy(NoDefaults, validator(validation.Ingress)),
	}
}

// ingressClasses: the class an Ingress names; the default one (annotated
// ingressclass.kubernetes.io/is-default-class) is given at admission to
// an Ingress that names none.
func ingressClasses() *Resource {
	return &Resource{
		GVR: gvr("networking.k8s.io", "v1", "ingressclasses"), Kind: "IngressClass", Singular: "ingressclass",
		New: func() runtime.Object { return &networkingv1.IngressClass{} }, NewList: func() runtime.Object { return &networkingv1.IngressClassList{} },
		Strategy: Strategy{
			Default:              defaulter(defaults.IngressClass),
			Validate:             validator(validation.IngressClass),
			ValidateUpdate:       updateValidator(validation.IngressClassUpdate),
			ValidateStatusUpdate: metaUpdate,
		},
	}
}

// runtimeClasses: pods naming one get its overhead and scheduling at
// admission; the kubelet runs only the default handler.
func runtimeClasses() *Resource {
	return &Resource{
		GVR: gvr("node.k8s.io", "v1", "runtimeclasses"), Kind: "RuntimeClass", Singular: "runtimeclass",
		New: func() runtime.Object { return &nodev1.RuntimeClass{} }, NewList: func() runtime.Object { return &nodev1.RuntimeClassList{} },
		Strategy: Strategy{
			Default:              NoDefaults,
			Validate:             validator(validation.RuntimeClass),
			ValidateUpdate:       updateValidator(validation.RuntimeClassUpdate),
			ValidateStatusUpdate: metaUpdate,
		},
	}
}

// priorityClasses: the priority a pod naming one gets at admission (the
// Priority plugin), which orders the scheduling queue. The two system
// classes are created at start (the API server's bootstrap) and may not
// be deleted.
func priorityClasses() *Resource {
	return &Resource{
		GVR: gvr("scheduling.k8s.io", "v1", "priorityclasses"), Kind: "PriorityClass", Singular: "priorityclass", ShortNames: []string{"pc"},
		New: func() runtime.Object { return &schedulingv1.PriorityClass{} }, NewList: func() runtime.Object { return &schedulingv1.PriorityClassList{} },
		Strategy: Strategy{
			Default:              defaulter(defaults.PriorityClass),
			Validate:             validator(validation.PriorityClass),
			ValidateUpdate:       updateValidator(validation.PriorityClassUpdate),
			ValidateStatusUpdate: metaUpdate,
		},
	}
}

// serviceCIDRs: the ranges Service cluster IPs come from. The default one,
// "kubernetes", is --service-cidr, made Ready at start (the API server's
// bootstrap); kelp allocates only from it, so any other is stored and
// validated but not used, which its create's warning says.
func serviceCIDRs() *Resource {
	return &Resource{
		GVR: gvr("networking.k8s.io", "v1", "servicecidrs"), Kind: "ServiceCIDR", Singular: "servicecidr",
		New: func() runtime.Object { return &networkingv1.ServiceCIDR{} }, NewList: func() runtime.Object { return &networkingv1.ServiceCIDRList{} },
		Status:       true,
		NoController: "kelp allocates Service cluster IPs only from the default ServiceCIDR \"kubernetes\" (--service-cidr): this range is stored but no IP is handed out from it",
		Strategy: Strategy{
			Default:              NoDefaults,
			Validate:             validator(validation.ServiceCIDR),
			ValidateUpdate:       updateValidator(validation.ServiceCIDRUpdate),
			ValidateStatusUpdate: metaUpdate,
		},
	}
}

// ipAddresses: one object per allocated IP, named by it. A Service's
// cluster IP is the IPAddress the allocator creates (its parentRef the
// Service, server/apiserver/allocator); one a user creates reserves its IP
// from Services too.
func ipAddresses() *Resource {
	return &Resource{
		GVR: gvr("networking.k8s.io", "v1", "ipaddresses"), Kind: "IPAddress", Singular: "ipaddress", ShortNames: []string{"ip"},
		New: func() runtime.Object { return &networkingv1.IPAddress{} }, NewList: func() runtime.Object { return &networkingv1.IPAddressList{} },
		Strategy: Strategy{
			Default:              NoDefaults,
			Validate:             validator(validation.IPAddress),
			ValidateUpdate:       updateValidator(validation.IPAddressUpdate),
			ValidateStatusUpdate: metaUpdate,
		},
	}
}

func networkPolicies() *Resource {
	return &Resource{
		GVR: gvr("networking.k8s.io", "v1", "networkpolicies"), Kind: "NetworkPolicy", Singular: "networkpolicy", ShortNames: []string{"netpol"}, Namespaced: true,
		New: func() runtime.Object { return &networkingv1.NetworkPolicy{} }, NewList: func() runtime.Object { return &networkingv1.NetworkPolicyList{} },
		Strategy: plainStrategy(defaulter(defaults.NetworkPolicy), validator(validation.NetworkPolicy)),
	}
}

func storageClasses() *Resource {
	return &Resource{
		GVR: gvr("storage.k8s.io", "v1", "storageclasses"), Kind: "StorageClass", Singular: "storageclass", ShortNames: []string{"sc"},
		New: func() runtime.Object { return &storagev1.StorageClass{} }, NewList: func() runtime.Object { return &storagev1.StorageClassList{} },
		Strategy: Strategy{
			Default:              defaulter(defaults.StorageClass),
			Validate:             validator(validation.StorageClass),
			ValidateUpdate:       updateValidator(validation.StorageClassUpdate),
			ValidateStatusUpdate: metaUpdate,
		},
	}
}
