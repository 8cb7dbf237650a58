package apiserver

import (
	"context"
	"fmt"
	"net"
	"slices"

	"github.com/sirupsen/logrus"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kelp-project/kelp/server/apiserver/registry"
	"github.com/kelp-project/kelp/server/apiserver/storage"
	"github.com/kelp-project/kelp/server/apiserver/validation"
)

// Bootstrap creates what every cluster starts with: the four system
// namespaces, the two system PriorityClasses, the default ServiceCIDR and the default/kubernetes Service, whose endpoints point at this API server. It goes through the normal write path, so defaults and
// validation apply. It also reconciles Service allocations with the
// Services that exist, freeing anything a crash left behind. /readyz
// reports ready only after it succeeds.
func (s *Server) Bootstrap(ctx context.Context) error {
	err := s.bootstrap(ctx)
	s.ready.Store("bootstrap", err)
	return err
}

func (s *Server) bootstrap(ctx context.Context) error {
	nsr := s.live().resources[schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}]
	for _, name := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
		if err := s.ensure(ctx, nsr, "", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			return err
		}
	}
	// The system PriorityClasses, as upstream's scheduling post-start hook:
	// created when missing, never changed (their values are fixed by
	// validation, and they cannot be deleted).
	pcr := s.live().resources[schema.GroupVersionResource{Group: "scheduling.k8s.io", Version: "v1", Resource: "priorityclasses"}]
	for _, pc := range validation.SystemPriorityClasses() {
		if err := s.ensure(ctx, pcr, "", pc); err != nil {
			return err
		}
	}
	if err := s.repairAllocations(ctx); err != nil {
		return err
	}
	if err := s.ensureDefaultServiceCIDR(ctx); err != nil {
		return err
	}
	svcr := s.live().resources[schema.GroupVersionResource{Version: "v1", Resource: "services"}]
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: "default",
			Labels: map[string]string{"component": "apiserver", "provider": "kubernetes"}},
		Spec: corev1.ServiceSpec{
			ClusterIP: s.services.FirstIP(),
			Ports: []corev1.ServicePort{{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP,
				TargetPort: intstr.FromInt32(int32(s.cfg.PublicPort))}},
		},
	}
	if err := s.ensure(ctx, svcr, "default", svc); err != nil {
		return err
	}
	port := int32(s.cfg.PublicPort)
	if ip := net.ParseIP(s.cfg.PublicAddress); ip == nil || ip.IsLoopback() {
		logrus.Warnf("advertise address %q is not routable: default/kubernetes gets no endpoints", s.cfg.PublicAddress)
		return nil
	}
	epr := s.live().resources[schema.GroupVersionResource{Version: "v1", Resource: "endpoints"}]
	ep := &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: "default",
			Labels: map[string]string{"endpointslice.kubernetes.io/skip-mirror": "true"}},
		Subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{{IP: s.cfg.PublicAddress}},
			Ports:     []corev1.EndpointPort{{Name: "https", Port: port, Protocol: corev1.ProtocolTCP}},
		}},
	}
	if err := s.ensureCurrent(ctx, epr, "default", ep); err != nil {
		return err
	}
	slr := s.live().resources[schema.GroupVersionResource{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"}]
	ready, name, proto := true, "https", corev1.ProtocolTCP
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: "default",
			Labels: map[string]string{discoveryv1.LabelServiceName: "kubernetes", discoveryv1.LabelManagedBy: "kelp-apiserver"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{s.cfg.PublicAddress}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port, Protocol: &proto}},
	}
	return s.ensureCurrent(ctx, slr, "default", slice)
}

// ensure creates obj unless an object of that name exists.
func (s *Server) ensure(ctx context.Context, sv *served, ns string, obj runtime.Object) error {
	_, err := s.createObject(ctx, sv, ns, obj, false)
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("bootstrap %s: %w", sv.GVR.Resource, err)
	}
	return nil
}

// ensureCurrent creates obj, or replaces an existing object's content with
// it (the advertised address may have changed since the last start).
func (s *Server) ensureCurrent(ctx context.Context, sv *served, ns string, obj runtime.Object) error {
	acc, _ := meta.Accessor(obj)
	_, err := s.createObject(ctx, sv, ns, obj.DeepCopyObject(), false)
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	_, err = s.updateObject(ctx, sv, requestInfo{Namespace: ns, Name: acc.GetName()}, "", func(cur runtime.Object) (runtime.Object, error) {
		next := obj.DeepCopyObject()
		na, _ := meta.Accessor(next)
		ca, _ := meta.Accessor(cur)
		na.SetResourceVersion(ca.GetResourceVersion())
		return next, nil
	}, false)
	return err
}

// defaultServiceCIDR is the name of the ServiceCIDR of --service-cidr,
// upstream's.
const defaultServiceCIDR = "kubernetes"

// serviceCIDRFinalizer is upstream's servicecidr controller's finalizer,
// which holds a ServiceCIDR while IPs in it are allocated.
const serviceCIDRFinalizer = "networking.k8s.io/service-cidr-finalizer"

// ensureDefaultServiceCIDR creates the ServiceCIDR of the range the
// allocator hands cluster IPs out of and marks it Ready, as upstream's
// default ServiceCIDR controller does. It carries upstream's finalizer,
// which nothing in kelp removes: the default/kubernetes Service's IP is
// always in the range, and upstream holds a range while any IP in it is
// allocated. A ServiceCIDR that exists with other CIDRs (the flag changed
// since it was made) is left as it is, and its status alone: the allocator
// follows the flag.
func (s *Server) ensureDefaultServiceCIDR(ctx context.Context) error {
	scr := s.live().resources[schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "servicecidrs"}]
	want := []string{s.services.CIDR()}
	if err := s.ensure(ctx, scr, "", &networkingv1.ServiceCIDR{
		ObjectMeta: metav1.ObjectMeta{Name: defaultServiceCIDR, Finalizers: []string{serviceCIDRFinalizer}},
		Spec:       networkingv1.ServiceCIDRSpec{CIDRs: want},
	}); err != nil {
		return err
	}
	_, err := s.updateObject(ctx, scr, requestInfo{Name: defaultServiceCIDR}, "status", func(cur runtime.Object) (runtime.Object, error) {
		sc := cur.(*networkingv1.ServiceCIDR)
		if !slices.Equal(sc.Spec.CIDRs, want) {
			logrus.Warnf("the default ServiceCIDR %q has CIDRs %v, not --service-cidr %v: Service cluster IPs come from %v", defaultServiceCIDR, sc.Spec.CIDRs, want, want)
			return sc, nil
		}
		if sc.DeletionTimestamp == nil && !meta.IsStatusConditionPresentAndEqual(sc.Status.Conditions, networkingv1.ServiceCIDRConditionReady, metav1.ConditionTrue) {
			meta.SetStatusCondition(&sc.Status.Conditions, metav1.Condition{Type: networkingv1.ServiceCIDRConditionReady,
				Status: metav1.ConditionTrue, Message: "Kubernetes default Service CIDR is ready"})
		}
		return sc, nil
	}, false)
	if err != nil {
		return fmt.Errorf("bootstrap servicecidrs: %w", err)
	}
	return nil
}

func (s *Server) repairAllocations(ctx context.Context) error {
	svcr := s.live().resources[schema.GroupVersionResource{Version: "v1", Resource: "services"}]
	res, err := svcr.store.List(ctx, storage.ListOptions{})
	if err != nil {
		return err
	}
	return s.services.Repair(ctx, registry.ServiceAllocations(res.Items))
}
