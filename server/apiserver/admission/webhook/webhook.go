// Package webhook runs the admission webhooks of
// admissionregistration.k8s.io/v1 as kube-apiserver does, with upstream's
// MutatingAdmissionWebhook and ValidatingAdmissionWebhook plugins
// (k8s.io/apiserver/pkg/admission/plugin/webhook): rules, namespace and
// object selectors, CEL matchConditions, matchPolicy Equivalent,
// AdmissionReview v1 and v1beta1, JSONPatch, reinvocation, failurePolicy,
// timeouts, sideEffects and dryRun, warnings. kelp supplies what
// kube-apiserver's generic server would: informers over the API server's
// loopback client (the configurations and namespaces, followed live), the
// service resolver (a Service's ClusterIP), the object interfaces (the
// client-go scheme for built-in kinds, unstructured objects for custom
// resources, kelp's defaulting after a patch) and its request attributes.
package webhook

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/mutating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/validating"
	webhookutil "k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

	"github.com/kelp-project/kelp/server/apiserver/admission"
)

// Config is what the webhooks need from the API server.
type Config struct {
	// Services reads Services, to resolve a webhook's service reference.
	Services admission.ObjectGetter
	// Default applies kelp's defaulting to an object a webhook patched, as
	// upstream re-defaults a mutated object.
	Default func(runtime.Object)
	// Versions lists the served versions of a group and resource with
	// their kinds (matchPolicy Equivalent; custom resources).
	Versions func(schema.GroupResource) map[schema.GroupVersionResource]schema.GroupVersionKind
	// Stop ends the informers.
	Stop <-chan struct{}
}

// Webhooks are the two plugins, guarded by their configurations.
type Webhooks struct {
	Upstream
	cfg               Config
	mutatingWebhook   *mutating.Plugin
	validatingWebhook *validating.Plugin
	once              sync.Once
}

// New builds the plugins; Start starts them.
func New(cfg Config) (*Webhooks, error) {
	m, err := mutating.NewMutatingWebhook(nil)
	if err != nil {
		return nil, err
	}
	v, err := validating.NewValidatingAdmissionWebhook(nil)
	if err != nil {
		return nil, err
	}
	return &Webhooks{Upstream: NewUpstream(m, v, NewObjectInterfaces(cfg.Default, cfg.Versions)),
		cfg: cfg, mutatingWebhook: m, validatingWebhook: v}, nil
}

// Start starts the plugins (their informers) on the API server's loopback
// client, once it has one.
func (w *Webhooks) Start(client kubernetes.Interface) {
	w.once.Do(func() {
		if err := w.startWith(client); err != nil {
			logrus.Errorf("admission webhooks not started: %v", err)
		}
	})
}

func (w *Webhooks) startWith(client kubernetes.Interface) error {
	factory := informers.NewSharedInformerFactory(client, 0)
	resolver := NewServiceResolver(w.cfg.Services)
	for _, p := range []interface {
		SetExternalKubeClientSet(kubernetes.Interface)
		SetExternalKubeInformerFactory(informers.SharedInformerFactory)
		SetServiceResolver(webhookutil.ServiceResolver)
		SetDrainedNotification(<-chan struct{})
		ValidateInitialization() error
	}{w.mutatingWebhook, w.validatingWebhook} {
		p.SetExternalKubeClientSet(client)
		p.SetExternalKubeInformerFactory(factory)
		p.SetServiceResolver(resolver)
		p.SetDrainedNotification(w.cfg.Stop)
		if err := p.ValidateInitialization(); err != nil {
			return err
		}
	}
	// The plugins' own informers (one shared factory).
	w.Arm(factory.Admissionregistration().V1().MutatingWebhookConfigurations().Informer(),
		factory.Admissionregistration().V1().ValidatingWebhookConfigurations().Informer())
	factory.Start(w.cfg.Stop)
	return nil
}

// serviceResolver sends a webhook's requests to its Service's ClusterIP
// (the API server runs on a node, whose service proxy forwards it to an
// endpoint), on the port the webhook names, which the Service must
// expose.
type serviceResolver struct {
	services admission.ObjectGetter
}

func (r serviceResolver) ResolveEndpoint(namespace, name string, port int32) (*url.URL, error) {
	if r.services == nil {
		return nil, fmt.Errorf("service %s/%s: services are not readable", namespace, name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	obj, err := r.services.Get(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return nil, fmt.Errorf("service %s/%s: unexpected %T", namespace, name, obj)
	}
	switch {
	case svc.Spec.Type == corev1.ServiceTypeExternalName:
		return &url.URL{Scheme: "https", Host: net.JoinHostPort(svc.Spec.ExternalName, strconv.Itoa(int(port)))}, nil
	case svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone:
		return nil, fmt.Errorf("service %s/%s has no cluster IP", namespace, name)
	}
	for _, p := range svc.Spec.Ports {
		if p.Port == port {
			return &url.URL{Scheme: "https", Host: net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(port)))}, nil
		}
	}
	return nil, fmt.Errorf("service %s/%s has no port %d", namespace, name, port)
}
