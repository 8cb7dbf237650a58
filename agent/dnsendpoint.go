package agent

import (
	"context"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// dnsManagedBy marks the EndpointSlices agents write for the kube-dns
// Service; the EndpointSlice controller leaves slices of other managers
// alone.
const dnsManagedBy = "kelp-agent"

// publishDNSEndpoint keeps kube-system/kube-dns-<node> pointing at this
// node's DNS listener, so the service proxy sends the node's queries for
// the kube-dns ClusterIP there (the Service is internalTrafficPolicy
// Local). It rewrites the slice every minute in case someone removed it.
func publishDNSEndpoint(ctx context.Context, client kubernetes.Interface, node, ip string, port int32) {
	ready := true
	udp, tcp := corev1.ProtocolUDP, corev1.ProtocolTCP
	dnsName, dnsTCP := "dns", "dns-tcp"
	want := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-dns-" + node, Namespace: metav1.NamespaceSystem, Labels: map[string]string{
			discoveryv1.LabelServiceName: "kube-dns", discoveryv1.LabelManagedBy: dnsManagedBy}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{ip}, NodeName: &node,
			Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports: []discoveryv1.EndpointPort{{Name: &dnsName, Protocol: &udp, Port: &port}, {Name: &dnsTCP, Protocol: &tcp, Port: &port}},
	}
	slices := client.DiscoveryV1().EndpointSlices(metav1.NamespaceSystem)
	sync := func() {
		cur, err := slices.Get(ctx, want.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = slices.Create(ctx, want, metav1.CreateOptions{})
		case err == nil && !(apiequality.Semantic.DeepEqual(cur.Endpoints, want.Endpoints) && apiequality.Semantic.DeepEqual(cur.Ports, want.Ports)):
			cur.Endpoints, cur.Ports, cur.Labels = want.Endpoints, want.Ports, want.Labels
			_, err = slices.Update(ctx, cur, metav1.UpdateOptions{})
		}
		if err != nil && ctx.Err() == nil {
			logrus.WithError(err).Debug("agent: publishing the DNS endpoint")
		}
	}
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		sync()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
