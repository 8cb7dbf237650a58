// Package admissionpolicystatus is upstream's
// validatingadmissionpolicy-status controller (kube-controller-manager's
// pkg/controller/validatingadmissionpolicystatus): each
// ValidatingAdmissionPolicy whose generation is newer than its
// status.observedGeneration has its expressions type-checked against the
// schemas of the kinds it matches (k8s.io/apiserver's TypeChecker, the
// schemas read from the API server's /openapi/v3, CRDs included), and the
// warnings are applied to status.typeChecking with that generation.
package admissionpolicystatus

import (
	"context"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	admissionregistrationv1apply "k8s.io/client-go/applyconfigurations/admissionregistration/v1"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listers "k8s.io/client-go/listers/admissionregistration/v1"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"

	"github.com/kelp-project/kelp/server/controllers"
)

// Name is upstream's controller name, its field manager and the name of
// its RBAC role (system:controller:validatingadmissionpolicy-status-controller).
const Name = "validatingadmissionpolicy-status"

// Checker type-checks a policy's expressions.
type Checker interface {
	Check(*admissionregistrationv1.ValidatingAdmissionPolicy) []admissionregistrationv1.ExpressionWarning
}

// Controller writes the type checking of each policy's generation.
type Controller struct {
	client   kubernetes.Interface
	policies listers.ValidatingAdmissionPolicyLister
	checker  Checker
	loop     controllers.Loop
}

// New builds the controller on the component's informers, type-checking
// with the schemas the API server publishes.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory) *Controller {
	return NewWithChecker(client, factory, &validating.TypeChecker{
		SchemaResolver: &resolver.ClientDiscoveryResolver{Discovery: client.Discovery()},
		// a kind not found resets the mapper, so a new CRD is found
		RestMapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(client.Discovery())),
	})
}

// NewWithChecker builds the controller with the given type checker.
func NewWithChecker(client kubernetes.Interface, factory informers.SharedInformerFactory, checker Checker) *Controller {
	inf := factory.Admissionregistration().V1().ValidatingAdmissionPolicies()
	c := &Controller{client: client, policies: inf.Lister(), checker: checker}
	c.loop = controllers.Loop{Name: Name, Queue: controllers.NewQueue(Name), Synced: []cache.InformerSynced{inf.Informer().HasSynced}, Sync: c.sync}
	enqueue := func(obj interface{}) { controllers.Enqueue(c.loop.Queue, obj) }
	_, _ = inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj interface{}) { enqueue(obj) },
	})
	return c
}

// Run runs the workers until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) { c.loop.Run(ctx, workers) }

// sync type-checks a policy whose generation has not been observed and
// applies the warnings (an empty list: none) with that generation.
func (c *Controller) sync(ctx context.Context, name string) error {
	p, err := c.policies.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if p.Generation <= p.Status.ObservedGeneration {
		return nil
	}
	warnings := c.checker.Check(p)
	applied := make([]*admissionregistrationv1apply.ExpressionWarningApplyConfiguration, 0, len(warnings))
	for _, w := range warnings {
		applied = append(applied, admissionregistrationv1apply.ExpressionWarning().WithFieldRef(w.FieldRef).WithWarning(w.Warning))
	}
	status := admissionregistrationv1apply.ValidatingAdmissionPolicy(p.Name).WithStatus(
		admissionregistrationv1apply.ValidatingAdmissionPolicyStatus().WithObservedGeneration(p.Generation).
			WithTypeChecking(admissionregistrationv1apply.TypeChecking().WithExpressionWarnings(applied...)))
	_, err = c.client.AdmissionregistrationV1().ValidatingAdmissionPolicies().ApplyStatus(ctx, status, metav1.ApplyOptions{FieldManager: Name, Force: true})
	return err
}
