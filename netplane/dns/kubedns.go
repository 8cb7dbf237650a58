package dns

// How pods reach the in-process DNS servers: the kube-dns Service at the
// cluster DNS address (the server creates it) and one EndpointSlice per
// node pointing at that node's listener (each agent publishes its own).
// The Service has no selector, so the EndpointSlice controller leaves it to
// these slices, and internalTrafficPolicy Local makes the service proxy of
// each node send the node's queries to the node's own server.

import (
	"context"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	discoveryclient "k8s.io/client-go/kubernetes/typed/discovery/v1"
)

// ServiceName is the cluster DNS Service in kube-system, as k3s and
// kubeadm name it.
const ServiceName = "kube-dns"

// endpointManagedBy marks the EndpointSlices agents write for the
// kube-dns Service; the EndpointSlice controller leaves slices of other
// managers alone.
const endpointManagedBy = "kelp-agent"

// EnsureService creates kube-system/kube-dns at clusterDNS (--cluster-dns),
// as k3s's bundled CoreDNS manifest does, retrying every second until it
// exists or ctx ends. An existing Service is left as it is.
func EnsureService(ctx context.Context, client kubernetes.Interface, clusterDNS string) {
	local := corev1.ServiceInternalTrafficPolicyLocal
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: ServiceName, Namespace: metav1.NamespaceSystem,
			Labels: map[string]string{"k8s-app": "kube-dns", "kubernetes.io/name": "CoreDNS", "kubernetes.io/cluster-service": "true"}},
		Spec: corev1.ServiceSpec{
			ClusterIP:             clusterDNS,
			InternalTrafficPolicy: &local,
			Ports: []corev1.ServicePort{
				{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(53)},
				{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(53)},
			},
		},
	}
	_ = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().Services(metav1.NamespaceSystem).Create(ctx, svc, metav1.CreateOptions{})
		if err == nil || apierrors.IsAlreadyExists(err) {
			return true, nil
		}
		logrus.WithError(err).Debug("creating the kube-dns Service")
		return false, nil
	})
}

// PublishEndpoint keeps kube-system/kube-dns-<node> pointing at this
// node's DNS listener (ip:port, UDP and TCP) until ctx ends, so the
// service proxy sends the node's queries for the kube-dns ClusterIP there.
// It rewrites the slice every minute in case someone removed or changed
// it.
func PublishEndpoint(ctx context.Context, client kubernetes.Interface, node, ip string, port int32) {
	want := endpointSlice(node, ip, port)
	slices := client.DiscoveryV1().EndpointSlices(metav1.NamespaceSystem)
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		if err := syncEndpoint(ctx, slices, want); err != nil && ctx.Err() == nil {
			logrus.WithError(err).Debug("dns: publishing the node's kube-dns EndpointSlice")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func endpointSlice(node, ip string, port int32) *discoveryv1.EndpointSlice {
	ready := true
	udp, tcp := corev1.ProtocolUDP, corev1.ProtocolTCP
	dnsName, dnsTCP := "dns", "dns-tcp"
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: ServiceName + "-" + node, Namespace: metav1.NamespaceSystem, Labels: map[string]string{
			discoveryv1.LabelServiceName: ServiceName, discoveryv1.LabelManagedBy: endpointManagedBy}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{ip}, NodeName: &node,
			Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports: []discoveryv1.EndpointPort{{Name: &dnsName, Protocol: &udp, Port: &port}, {Name: &dnsTCP, Protocol: &tcp, Port: &port}},
	}
}

// syncEndpoint creates want, or updates the slice if its endpoints or
// ports differ (the labels are restored along with them).
func syncEndpoint(ctx context.Context, slices discoveryclient.EndpointSliceInterface, want *discoveryv1.EndpointSlice) error {
	cur, err := slices.Get(ctx, want.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = slices.Create(ctx, want, metav1.CreateOptions{})
	case err == nil && !(apiequality.Semantic.DeepEqual(cur.Endpoints, want.Endpoints) && apiequality.Semantic.DeepEqual(cur.Ports, want.Ports)):
		cur.Endpoints, cur.Ports, cur.Labels = want.Endpoints, want.Ports, want.Labels
		_, err = slices.Update(ctx, cur, metav1.UpdateOptions{})
	}
	return err
}
