package quota

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	quota "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/apiserver/pkg/quota/v1/generic"
)

var servicesGVR = corev1.SchemeGroupVersion.WithResource("services")

var serviceObjectCountName = generic.ObjectCountQuotaResourceNameFor(servicesGVR.GroupResource())

var serviceResources = []corev1.ResourceName{
	serviceObjectCountName,
	corev1.ResourceServices,
	corev1.ResourceServicesNodePorts,
	corev1.ResourceServicesLoadBalancers,
}

// NewServiceEvaluator returns upstream's service evaluator.
func NewServiceEvaluator(f quota.ListerForResourceFunc) quota.Evaluator {
	e := &serviceEvaluator{}
	// No scope applies to a service, so none matches and none is left
	// uncovered.
	e.evaluator = newEvaluator(f, servicesGVR, generic.MatchesNoScopeFunc, e.MatchingResources, e.Usage)
	return e
}

type serviceEvaluator struct{ evaluator }

// Handles creates and updates: a service's type can change.
func (p *serviceEvaluator) Handles(a admission.Attributes) bool {
	if a.GetSubresource() != "" {
		return false
	}
	return a.GetOperation() == admission.Create || a.GetOperation() == admission.Update
}

func (p *serviceEvaluator) MatchingResources(input []corev1.ResourceName) []corev1.ResourceName {
	return quota.Intersection(input, serviceResources)
}

func (p *serviceEvaluator) Usage(item runtime.Object) (corev1.ResourceList, error) {
	result := corev1.ResourceList{}
	svc, ok := item.(*corev1.Service)
	if !ok {
		return result, fmt.Errorf("expect *api.Service or *v1.Service, got %T", item)
	}
	ports := len(svc.Spec.Ports)
	result[serviceObjectCountName] = *resource.NewQuantity(1, resource.DecimalSI)
	result[corev1.ResourceServices] = *resource.NewQuantity(1, resource.DecimalSI)
	result[corev1.ResourceServicesLoadBalancers] = resource.Quantity{Format: resource.DecimalSI}
	result[corev1.ResourceServicesNodePorts] = resource.Quantity{Format: resource.DecimalSI}
	switch svc.Spec.Type {
	case corev1.ServiceTypeNodePort:
		result[corev1.ResourceServicesNodePorts] = *resource.NewQuantity(int64(ports), resource.DecimalSI)
	case corev1.ServiceTypeLoadBalancer:
		// Without node ports allocated, only the explicit ones count.
		if svc.Spec.AllocateLoadBalancerNodePorts != nil && !*svc.Spec.AllocateLoadBalancerNodePorts {
			n := 0
			for _, port := range svc.Spec.Ports {
				if port.NodePort != 0 {
					n++
				}
			}
			result[corev1.ResourceServicesNodePorts] = *resource.NewQuantity(int64(n), resource.DecimalSI)
		} else {
			result[corev1.ResourceServicesNodePorts] = *resource.NewQuantity(int64(ports), resource.DecimalSI)
		}
		result[corev1.ResourceServicesLoadBalancers] = *resource.NewQuantity(1, resource.DecimalSI)
	}
	return result, nil
}

// QuotaServiceType is the service type as quota sees it: NodePort,
// LoadBalancer, or "" for the rest.
func QuotaServiceType(svc *corev1.Service) corev1.ServiceType {
	switch svc.Spec.Type {
	case corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
		return svc.Spec.Type
	}
	return ""
}
