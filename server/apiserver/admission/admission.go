// Package admission holds the API server's admission plugins and the two
// chains they form: mutating plugins run after defaulting and before
// validation, validating plugins after validation and before storage, as
// in kube-apiserver. A plugin reads other objects through an ObjectGetter
// (a lister over the API server's watch caches), never through storage.
package admission

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/kelp-project/kelp/server/apiserver/auth"
)

// Attributes describe a write for admission.
type Attributes struct {
	Operation   string // CREATE, UPDATE, DELETE
	Resource    schema.GroupVersionResource
	Subresource string
	Namespace   string
	Name        string
	Object      runtime.Object
	OldObject   runtime.Object
	User        *auth.User
	DryRun      bool
}

// Mutating may change the object before validation.
type Mutating interface {
	Admit(ctx context.Context, a *Attributes) error
}

// Validating may reject the object after validation.
type Validating interface {
	Validate(ctx context.Context, a *Attributes) error
}

// ObjectGetter reads one object of a resource, from the watch cache when
// it has it and from storage otherwise (an object created a moment ago may
// not have reached the cache), or lists a namespace's objects ("" for all)
// from the watch cache.
type ObjectGetter interface {
	Get(ctx context.Context, namespace, name string) (runtime.Object, error)
	List(ctx context.Context, namespace string) ([]runtime.Object, error)
}

// Config is what the built-in plugins need.
type Config struct {
	// Getter returns the ObjectGetter of a served resource.
	Getter func(schema.GroupVersionResource) ObjectGetter
	// Default*TolerationSeconds bound how long new pods tolerate the
	// not-ready and unreachable taints (upstream: 300 each).
	DefaultNotReadyTolerationSeconds    int64
	DefaultUnreachableTolerationSeconds int64
	// Escalation checks writes of RBAC roles and bindings.
	Escalation auth.Escalation
	// Loopback is the API server's own client (nil until it has one):
	// ResourceQuota writes the quotas' usage through it, as upstream.
	Loopback func() kubernetes.Interface
	// Stop ends the plugins' workers.
	Stop <-chan struct{}
	// Webhooks are the admission webhooks (package admission/webhook), or
	// nil: the mutating ones run after the built-in mutating plugins, the
	// validating ones before ResourceQuota, as kube-apiserver orders them.
	Webhooks MutatingValidating
	// Policies are the admission policies (package admission/policy), or
	// nil: each kind runs just before the webhooks of its phase
	// (MutatingAdmissionPolicy before MutatingAdmissionWebhook,
	// ValidatingAdmissionPolicy before ValidatingAdmissionWebhook), as
	// kube-apiserver orders them.
	Policies MutatingValidating
}

// MutatingValidating is a plugin of both phases.
type MutatingValidating interface {
	Mutating
	Validating
}

// Chain is the admission plugins in the order kube-apiserver runs them.
type Chain struct {
	mutating   []Mutating
	validating []Validating
	// connect are the plugins that take a CONNECT, in order.
	connect []MutatingValidating
}

// New builds the chain of built-in plugins.
func New(cfg Config) *Chain {
	c := &Chain{
		mutating: []Mutating{limitRanger{ranges: cfg.Getter(limitRangesResource)}, newServiceAccount(cfg.Getter(serviceAccountsGVR)),
			priority{classes: cfg.Getter(priorityClassesResource)},
			defaultTolerationSeconds{notReady: cfg.DefaultNotReadyTolerationSeconds, unreachable: cfg.DefaultUnreachableTolerationSeconds},
			defaultStorageClass{classes: cfg.Getter(storageClassesResource)}, storageObjectInUseProtection{},
			runtimeClass{classes: cfg.Getter(runtimeClassesResource)}, defaultIngressClass{classes: cfg.Getter(ingressClassesResource)}},
		// NodeRestriction first: a node's write to what is not its own is
		// refused before anything is looked up for it.
		validating: []Validating{nodeRestriction{pods: cfg.Getter(podsResource), nodes: cfg.Getter(corev1.SchemeGroupVersion.WithResource("nodes")),
			serviceAccounts: cfg.Getter(serviceAccountsGVR), authz: cfg.Escalation.Authorizer}, rbacEscalation{check: cfg.Escalation},
			namespaceLifecycle{namespaces: cfg.Getter(namespacesResource)}, limitRanger{ranges: cfg.Getter(limitRangesResource)},
			podResizeValidator{nodes: cfg.Getter(corev1.SchemeGroupVersion.WithResource("nodes"))},
			runtimeClass{classes: cfg.Getter(runtimeClassesResource)}, priority{classes: cfg.Getter(priorityClassesResource)},
			certificateSigners{authz: cfg.Escalation.Authorizer}, clusterTrustBundleAttest{authz: cfg.Escalation.Authorizer},
			podCertificateRequestSigning{authz: cfg.Escalation.Authorizer},
			newResourceQuota(cfg.Getter(resourceQuotasResource), cfg.Loopback, cfg.Stop)},
	}
	for _, p := range []MutatingValidating{cfg.Policies, cfg.Webhooks} {
		if p == nil {
			continue
		}
		c.connect = append(c.connect, p)
		c.mutating = append(c.mutating, p)
		last := len(c.validating) - 1 // ResourceQuota
		c.validating = append(c.validating[:last:last], p, c.validating[last])
	}
	return c
}

// Admit runs the mutating plugins.
func (c *Chain) Admit(ctx context.Context, a *Attributes) error {
	for _, m := range c.mutating {
		if err := m.Admit(ctx, a); err != nil {
			return err
		}
	}
	return nil
}

// Validate runs the validating plugins.
func (c *Chain) Validate(ctx context.Context, a *Attributes) error {
	for _, v := range c.validating {
		if err := v.Validate(ctx, a); err != nil {
			return err
		}
	}
	return nil
}

// Connect admits a CONNECT (exec, attach, port-forward): of the plugins
// kube-apiserver enables by default only the policies and the webhooks
// take one, the mutating phase first.
func (c *Chain) Connect(ctx context.Context, a *Attributes) error {
	for _, p := range c.connect {
		if err := p.Admit(ctx, a); err != nil {
			return err
		}
	}
	for _, p := range c.connect {
		if err := p.Validate(ctx, a); err != nil {
			return err
		}
	}
	return nil
}

// creatingPod returns the pod a top-level pod create carries.
func creatingPod(a *Attributes) (*corev1.Pod, bool) {
	if a.Operation != "CREATE" || a.Resource.GroupResource() != podsResource.GroupResource() || a.Subresource != "" {
		return nil, false
	}
	p, ok := a.Object.(*corev1.Pod)
	return p, ok
}

var (
	podsResource       = corev1.SchemeGroupVersion.WithResource("pods")
	namespacesResource = corev1.SchemeGroupVersion.WithResource("namespaces")
	serviceAccountsGVR = corev1.SchemeGroupVersion.WithResource("serviceaccounts")
)
