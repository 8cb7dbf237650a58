package dns

// How pods reach the in-process DNS servers: the kube-dns Service at the
// cluster DNS address (the server's packaged manifest coredns.yaml, see
// server/manifests) and one EndpointSlice per node pointing at that node's
// listener (each agent publishes its own).
// The Service has no selector, so the EndpointSlice controller leaves it to
// these slices, and internalTrafficPolicy Local makes the service proxy of
// each node send the node's queries to the node's own server.

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	discoveryclient "k8s.io/client-go/kubernetes/typed/discovery/v1"
	"k8s.io/client-go/tools/cache"
)

// ServiceName is the cluster DNS Service in kube-system, as k3s and
// kubeadm name it.
const ServiceName = "kube-dns"

// endpointManagedBy marks the EndpointSlices agents write for the
// kube-dns Service; the EndpointSlice controller leaves slices of other
// managers alone.
const endpointManagedBy = "kelp-agent"

// WatchService says in the log when pods' DNS cannot work for want of
// the kube-dns Service: missing once services has synced (the server's
// coredns manifest disabled or skipped), deleted, or at an address other
// than clusterDNS, the one pods are given; and when it comes back. The
// agent needs nothing else from the Service (pods get clusterDNS from the
// configuration), so it runs on without it rather than wait or fail. It
// reads the Services informer the DNS server shares, so it costs no
// request.
func WatchService(ctx context.Context, services cache.SharedIndexInformer, clusterDNS string) {
	w := &serviceWatch{clusterDNS: clusterDNS}
	reg, err := services.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { w.seen(o) },
		UpdateFunc: func(_, o any) { w.seen(o) },
		DeleteFunc: func(o any) {
			if isKubeDNS(o) {
				w.missing("was deleted")
			}
		},
	})
	if err != nil {
		logrus.WithError(err).Warn("dns: watching the kube-dns Service")
		return
	}
	go func() {
		if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
			return
		}
		if _, ok, _ := services.GetStore().GetByKey(metav1.NamespaceSystem + "/" + ServiceName); !ok {
			w.missing("does not exist (the server's coredns manifest is disabled with --disable coredns, or skipped)")
		}
	}()
}

// serviceWatch remembers what it last said, so each change is said once.
type serviceWatch struct {
	clusterDNS string
	mu         sync.Mutex
	said       string
}

func isKubeDNS(o any) bool {
	if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	svc, ok := o.(*corev1.Service)
	return ok && svc.Namespace == metav1.NamespaceSystem && svc.Name == ServiceName
}

func (w *serviceWatch) seen(o any) {
	if !isKubeDNS(o) {
		return
	}
	svc := o.(*corev1.Service)
	if svc.Spec.ClusterIP != w.clusterDNS {
		w.say(logrus.WarnLevel, fmt.Sprintf("dns: Service kube-system/%s has address %s, not the cluster DNS address %s that pods are given: their queries go unanswered", ServiceName, svc.Spec.ClusterIP, w.clusterDNS))
		return
	}
	w.say(logrus.InfoLevel, fmt.Sprintf("dns: Service kube-system/%s at %s", ServiceName, svc.Spec.ClusterIP))
}

func (w *serviceWatch) missing(why string) {
	w.say(logrus.WarnLevel, fmt.Sprintf("dns: Service kube-system/%s %s: pods' queries to %s go unanswered until it exists", ServiceName, why, w.clusterDNS))
}

func (w *serviceWatch) say(level logrus.Level, msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if msg == w.said {
		return
	}
	// The first sighting of a Service as it should be is no news.
	if w.said != "" || level != logrus.InfoLevel {
		logrus.StandardLogger().Log(level, msg)
	}
	w.said = msg
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
