package registry

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kelp-project/kelp/server/apiserver/allocator"
	"github.com/kelp-project/kelp/server/apiserver/defaults"
	"github.com/kelp-project/kelp/server/apiserver/validation"
)

// services get their ClusterIP and NodePorts on the write path, after
// validation and before storage, as upstream's service registry does;
// allocated values a client omits on update are carried over.
func services(alloc *allocator.Services) *Resource {
	return &Resource{
		GVR: gvr("", "v1", "services"), Kind: "Service", Singular: "service", ShortNames: []string{"svc"}, Categories: []string{"all"}, Namespaced: true,
		New: func() runtime.Object { return &corev1.Service{} }, NewList: func() runtime.Object { return &corev1.ServiceList{} },
		Subresources: []Subresource{{Name: "proxy", Verbs: []string{"create", "delete", "get", "patch", "update"},
			GVK: gvk("ServiceProxyOptions"), Kind: ServiceProxySubresource}},
		Status: true, Fields: func(o runtime.Object) fields.Set {
			s := o.(*corev1.Service)
			return fields.Set{"spec.clusterIP": s.Spec.ClusterIP, "spec.type": string(s.Spec.Type)}
		},
		Strategy: Strategy{
			Default:              defaulter(defaults.Service),
			Validate:             validator(validation.Service),
			ValidateUpdate:       updateValidator(validation.ServiceUpdate),
			ValidateStatusUpdate: updateValidator(validation.ServiceStatusUpdate),
			PrepareForUpdate: func(obj, old runtime.Object) {
				defaults.CarryAllocatedServiceValues(obj.(*corev1.Service), old.(*corev1.Service))
				defaults.DropTypeDependentServiceFields(obj.(*corev1.Service), old.(*corev1.Service))
			},
			Allocator: serviceAllocator{alloc},
		},
	}
}

// serviceAllocator claims a Service's cluster IP and node ports, one etcd
// key per value (server/apiserver/allocator).
type serviceAllocator struct{ services *allocator.Services }

func serviceOwner(svc *corev1.Service) string { return svc.Namespace + "/" + svc.Name }

func needsNodePorts(t corev1.ServiceType) bool {
	return t == corev1.ServiceTypeNodePort || t == corev1.ServiceTypeLoadBalancer
}

func (s serviceAllocator) Allocate(ctx context.Context, obj, old runtime.Object, dry bool) (func(), error) {
	if dry {
		return func() {}, nil
	}
	svc := obj.(*corev1.Service)
	owner := serviceOwner(svc)
	// What this call claimed anew, which a failed write gives back; a value
	// the Service already held (a create repeated after it succeeded) is
	// not its to free.
	var ips []string
	var ports []int
	release := func() {
		for _, ip := range ips {
			s.services.ReleaseIP(context.WithoutCancel(ctx), ip, owner)
		}
		for _, p := range ports {
			s.services.ReleasePort(context.WithoutCancel(ctx), p, owner)
		}
	}
	fail := func(path *field.Path, value any, err error) (func(), error) {
		release()
		var allocated allocator.ErrAllocated
		var outOfRange allocator.ErrOutOfRange
		if errors.As(err, &allocated) || errors.As(err, &outOfRange) {
			return func() {}, apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Service").GroupKind(), svc.Name, field.ErrorList{field.Invalid(path, value, err.Error())})
		}
		return func() {}, apierrors.NewInternalError(fmt.Errorf("failed to allocate %s: %w", path, err))
	}
	var prev *corev1.Service
	if old != nil {
		prev = old.(*corev1.Service)
	}
	if svc.Spec.Type != corev1.ServiceTypeExternalName && svc.Spec.ClusterIP != corev1.ClusterIPNone &&
		(prev == nil || prev.Spec.ClusterIP != svc.Spec.ClusterIP || svc.Spec.ClusterIP == "") {
		ip, fresh, err := s.services.AllocateIP(ctx, svc.Spec.ClusterIP, owner)
		if err != nil {
			return fail(field.NewPath("spec", "clusterIPs").Index(0), svc.Spec.ClusterIP, err)
		}
		if fresh {
			ips = append(ips, ip)
		}
		svc.Spec.ClusterIP = ip
		svc.Spec.ClusterIPs = []string{ip}
	}
	if svc.Spec.Type != corev1.ServiceTypeExternalName && svc.Spec.ClusterIP != "" {
		if len(svc.Spec.IPFamilies) == 0 {
			svc.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
		}
		if svc.Spec.IPFamilyPolicy == nil {
			single := corev1.IPFamilyPolicySingleStack
			svc.Spec.IPFamilyPolicy = &single
		}
	}
	if needsNodePorts(svc.Spec.Type) {
		for i := range svc.Spec.Ports {
			p := &svc.Spec.Ports[i]
			if prev != nil && p.NodePort != 0 && hadNodePort(prev, p.NodePort) {
				continue
			}
			port, fresh, err := s.services.AllocatePort(ctx, int(p.NodePort), owner)
			if err != nil {
				return fail(field.NewPath("spec", "ports").Index(i).Child("nodePort"), p.NodePort, err)
			}
			if fresh {
				ports = append(ports, port)
			}
			p.NodePort = int32(port)
		}
		if svc.Spec.Type == corev1.ServiceTypeLoadBalancer && svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal &&
			(prev == nil || prev.Spec.HealthCheckNodePort != svc.Spec.HealthCheckNodePort || svc.Spec.HealthCheckNodePort == 0) {
			port, fresh, err := s.services.AllocatePort(ctx, int(svc.Spec.HealthCheckNodePort), owner)
			if err != nil {
				return fail(field.NewPath("spec", "healthCheckNodePort"), svc.Spec.HealthCheckNodePort, err)
			}
			if fresh {
				ports = append(ports, port)
			}
			svc.Spec.HealthCheckNodePort = int32(port)
		}
	}
	return release, nil
}

func hadNodePort(svc *corev1.Service, port int32) bool {
	for _, p := range svc.Spec.Ports {
		if p.NodePort == port {
			return true
		}
	}
	return svc.Spec.HealthCheckNodePort == port
}

// Release frees what a deleted Service held.
func (s serviceAllocator) Release(ctx context.Context, obj runtime.Object, dry bool) {
	s.ReleaseReplaced(ctx, &corev1.Service{ObjectMeta: obj.(*corev1.Service).ObjectMeta}, obj, dry)
}

// ReleaseReplaced frees the cluster IPs and node ports old held that svc,
// stored in its place, does not: a type changed to ExternalName or away
// from NodePort, a node port changed.
func (s serviceAllocator) ReleaseReplaced(ctx context.Context, obj, old runtime.Object, dry bool) {
	if dry {
		return
	}
	svc, prev := obj.(*corev1.Service), old.(*corev1.Service)
	ctx = context.WithoutCancel(ctx)
	owner := serviceOwner(prev)
	kept := serviceIPs(svc)
	for _, ip := range serviceIPs(prev) {
		if !slices.Contains(kept, ip) {
			s.services.ReleaseIP(ctx, ip, owner)
		}
	}
	keptPorts := serviceNodePorts(svc)
	for _, p := range serviceNodePorts(prev) {
		if !slices.Contains(keptPorts, p) {
			s.services.ReleasePort(ctx, p, owner)
		}
	}
}

// serviceIPs are the cluster IPs a Service holds (none when headless).
func serviceIPs(svc *corev1.Service) []string {
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 && svc.Spec.ClusterIP != "" {
		ips = []string{svc.Spec.ClusterIP}
	}
	return slices.DeleteFunc(slices.Clone(ips), func(ip string) bool { return ip == corev1.ClusterIPNone })
}

// serviceNodePorts are the node ports a Service holds, its health check
// port among them.
func serviceNodePorts(svc *corev1.Service) []int {
	var ports []int
	for _, p := range svc.Spec.Ports {
		if p.NodePort != 0 {
			ports = append(ports, int(p.NodePort))
		}
	}
	if svc.Spec.HealthCheckNodePort != 0 {
		ports = append(ports, int(svc.Spec.HealthCheckNodePort))
	}
	return ports
}

// ServiceAllocations lists, by owner, the cluster IPs and node ports the
// given Services hold: the in-use set the allocators are repaired to at
// start, freeing anything a crash left behind.
func ServiceAllocations(items []runtime.Object) map[string][]string {
	inUse := map[string][]string{}
	for _, item := range items {
		svc := item.(*corev1.Service)
		owner := serviceOwner(svc)
		if svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != corev1.ClusterIPNone {
			inUse[owner] = append(inUse[owner], svc.Spec.ClusterIP)
		}
		for _, p := range svc.Spec.Ports {
			if p.NodePort != 0 {
				inUse[owner] = append(inUse[owner], fmt.Sprint(p.NodePort))
			}
		}
		if svc.Spec.HealthCheckNodePort != 0 {
			inUse[owner] = append(inUse[owner], fmt.Sprint(svc.Spec.HealthCheckNodePort))
		}
	}
	return inUse
}
