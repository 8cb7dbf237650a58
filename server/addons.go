package server

import (
	"context"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// DNSServiceName is the cluster DNS Service in kube-system, as k3s and
// kubeadm name it.
const DNSServiceName = "kube-dns"

// ensureDNSService creates kube-system/kube-dns at --cluster-dns, as k3s's
// bundled CoreDNS manifest does. It has no selector: every node's agent
// serves DNS in-process and publishes its own EndpointSlice, and
// internalTrafficPolicy Local keeps each node's queries on that node.
func ensureDNSService(ctx context.Context, client kubernetes.Interface, clusterDNS string) {
	local := corev1.ServiceInternalTrafficPolicyLocal
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: DNSServiceName, Namespace: metav1.NamespaceSystem,
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
