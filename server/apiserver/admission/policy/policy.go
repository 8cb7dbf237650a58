// Package policy runs the admission policies of
// admissionregistration.k8s.io/v1 as kube-apiserver does, with upstream's
// MutatingAdmissionPolicy and ValidatingAdmissionPolicy plugins
// (k8s.io/apiserver/pkg/admission/plugin/policy): bindings matched by
// rules and selectors, CEL matchConditions, variables, parameters
// (paramKind and paramRef, read through a dynamic client and a discovery
// RESTMapper), validations with Deny, Warn and Audit, messageExpression,
// audit annotations, ApplyConfiguration and JSONPatch mutations (typed
// from the API server's /openapi/v3), reinvocation, failurePolicy. kelp
// supplies what kube-apiserver's generic server would: informers over the
// API server's loopback client, started once it has one, the authorizer
// of the `authorizer` CEL variable (kelp's authorizer chain), and its
// request attributes and object interfaces, shared with the admission
// webhooks (admission/webhook).
package policy

import (
	"context"
	"sync"

	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"

	"github.com/kelp-project/kelp/server/apiserver/admission/webhook"
	"github.com/kelp-project/kelp/server/apiserver/auth"
)

// Config is what the policies need from the API server.
type Config struct {
	// Authorizer answers the policies' `authorizer` checks.
	Authorizer auth.Authorizer
	// Default applies kelp's defaulting to an object a mutation changed,
	// as upstream re-defaults a mutated object.
	Default func(runtime.Object)
	// Versions lists the served versions of a group and resource with
	// their kinds (matchPolicy Equivalent; custom resources).
	Versions func(schema.GroupResource) map[schema.GroupVersionResource]schema.GroupVersionKind
	// Stop ends the informers.
	Stop <-chan struct{}
}

// Policies are the two plugins, guarded by their bindings: a policy acts
// only through a binding.
type Policies struct {
	webhook.Upstream
	cfg              Config
	mutatingPolicy   *mutating.Plugin
	validatingPolicy *validating.Plugin
	once             sync.Once
}

// New builds the plugins; Start starts them.
func New(cfg Config) (*Policies, error) {
	m, err := mutating.NewPlugin(nil)
	if err != nil {
		return nil, err
	}
	// MutatingAdmissionPolicy is GA and on by default since 1.36; upstream
	// enables the plugin from its feature gate.
	m.SetEnabled(true)
	v, err := validating.NewPlugin(nil)
	if err != nil {
		return nil, err
	}
	return &Policies{Upstream: webhook.NewUpstream(m, v, webhook.NewObjectInterfaces(cfg.Default, cfg.Versions)),
		cfg: cfg, mutatingPolicy: m, validatingPolicy: v}, nil
}

// Start starts the plugins (their informers, the parameters' dynamic
// informers, the mutations' OpenAPI type converters) on the API server's
// loopback clients, once it has them.
func (p *Policies) Start(client kubernetes.Interface, dyn dynamic.Interface) {
	p.once.Do(func() {
		if err := p.startWith(client, dyn); err != nil {
			logrus.Errorf("admission policies not started: %v", err)
		}
	})
}

func (p *Policies) startWith(client kubernetes.Interface, dyn dynamic.Interface) error {
	factory := informers.NewSharedInformerFactory(client, 0)
	// paramKind names a kind; the plugins find its resource through
	// discovery (reset when a kind is not found, so a new CRD is seen).
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(client.Discovery()))
	authz := upstreamAuthorizer{p.cfg.Authorizer}
	for _, pl := range []interface {
		SetExternalKubeClientSet(kubernetes.Interface)
		SetExternalKubeInformerFactory(informers.SharedInformerFactory)
		SetRESTMapper(meta.RESTMapper)
		SetDynamicClient(dynamic.Interface)
		SetDrainedNotification(<-chan struct{})
		SetUnconditionalAuthorizer(authorizer.UnconditionalAuthorizer)
		ValidateInitialization() error
	}{p.mutatingPolicy, p.validatingPolicy} {
		pl.SetExternalKubeClientSet(client)
		pl.SetExternalKubeInformerFactory(factory)
		pl.SetRESTMapper(mapper)
		pl.SetDynamicClient(dyn)
		pl.SetDrainedNotification(p.cfg.Stop)
		pl.SetUnconditionalAuthorizer(authz)
		if err := pl.ValidateInitialization(); err != nil {
			return err
		}
	}
	// The plugins' own informers (one shared factory).
	p.Arm(factory.Admissionregistration().V1().MutatingAdmissionPolicyBindings().Informer(),
		factory.Admissionregistration().V1().ValidatingAdmissionPolicyBindings().Informer())
	factory.Start(p.cfg.Stop)
	return nil
}

// upstreamAuthorizer answers upstream's authorizer checks (the
// `authorizer` variable of CEL expressions) with kelp's authorizer chain.
type upstreamAuthorizer struct {
	authz auth.Authorizer
}

func (u upstreamAuthorizer) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if u.authz == nil {
		return authorizer.DecisionNoOpinion, "no authorizer", nil
	}
	var who *auth.User
	if usr := a.GetUser(); usr != nil {
		who = &auth.User{Name: usr.GetName(), Groups: usr.GetGroups(), UID: usr.GetUID(), Extra: usr.GetExtra()}
	}
	d, reason := u.authz.Authorize(who, auth.Attributes{
		IsResource: a.IsResourceRequest(), Verb: a.GetVerb(), Group: a.GetAPIGroup(), Version: a.GetAPIVersion(),
		Namespace: a.GetNamespace(), Resource: a.GetResource(), Name: a.GetName(), Subresource: a.GetSubresource(), Path: a.GetPath(),
	})
	switch d {
	case auth.DecisionAllow:
		return authorizer.DecisionAllow, reason, nil
	case auth.DecisionDeny:
		return authorizer.DecisionDeny, reason, nil
	}
	return authorizer.DecisionNoOpinion, reason, nil
}
