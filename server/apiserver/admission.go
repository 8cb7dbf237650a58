package apiserver

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kelp-project/kelp/server/apiserver/storage"
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
	User        *User
	DryRun      bool
}

// MutatingAdmission may change the object before validation.
type MutatingAdmission interface {
	Admit(ctx context.Context, a *Attributes) error
}

// ValidatingAdmission may reject the object after validation.
type ValidatingAdmission interface {
	Validate(ctx context.Context, a *Attributes) error
}

func (s *Server) admit(ctx context.Context, a *Attributes) error {
	for _, m := range s.mutating {
		if err := m.Admit(ctx, a); err != nil {
			return err
		}
	}
	return nil
}

func (s *Server) validateAdmission(ctx context.Context, a *Attributes) error {
	for _, v := range s.validating {
		if err := v.Validate(ctx, a); err != nil {
			return err
		}
	}
	return nil
}

// serviceAccountDefault sets a pod's serviceAccountName to "default" when
// unset, as upstream's ServiceAccount admission plugin does.
type serviceAccountDefault struct{}

func (serviceAccountDefault) Admit(_ context.Context, a *Attributes) error {
	if a.Operation != "CREATE" || a.Resource.Resource != "pods" || a.Subresource != "" {
		return nil
	}
	if p, ok := a.Object.(*corev1.Pod); ok && p.Spec.ServiceAccountName == "" {
		p.Spec.ServiceAccountName = "default"
		p.Spec.DeprecatedServiceAccount = "default"
	}
	return nil
}

// namespaceLifecycle refuses to create objects in a namespace that does
// not exist or is being deleted, and protects the system namespaces.
type namespaceLifecycle struct{ s *Server }

var immortalNamespaces = map[string]bool{"default": true, "kube-system": true, "kube-public": true, "kube-node-lease": true}

func (n namespaceLifecycle) Validate(ctx context.Context, a *Attributes) error {
	if a.Resource.Resource == "namespaces" && a.Resource.Group == "" {
		if a.Operation == "DELETE" && immortalNamespaces[a.Name] {
			return apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, a.Name, fmt.Errorf("this namespace may not be deleted"))
		}
		return nil
	}
	if a.Operation != "CREATE" || a.Namespace == "" {
		return nil
	}
	// The watch cache answers almost every time; a namespace created a
	// moment ago may not be there yet, so a miss asks etcd, as upstream's
	// plugin does with its informer and a live lookup.
	nsr := n.s.resources[schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}].store.(*storage.Store)
	key := nsr.Key("", a.Namespace)
	obj, ok := nsr.Cached(key)
	if !ok {
		var err error
		obj, err = nsr.Get(ctx, key)
		if apierrors.IsNotFound(err) {
			return apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, a.Namespace)
		}
		if err != nil {
			return err
		}
	}
	if ns := obj.(*corev1.Namespace); ns.Status.Phase == corev1.NamespaceTerminating || ns.DeletionTimestamp != nil {
		// Events are still accepted so controllers can report the cleanup.
		if a.Resource.Resource == "events" {
			return nil
		}
		return apierrors.NewForbidden(a.Resource.GroupResource(), a.Name,
			fmt.Errorf("unable to create new content in namespace %s because it is being terminated", a.Namespace))
	}
	return nil
}

// defaultTolerationSeconds gives every new pod bounded tolerations for the
// not-ready and unreachable NoExecute taints, as upstream's
// DefaultTolerationSeconds plugin does: a pod on a dead node is evicted
// after this long (300 s by default) instead of never or at once.
type defaultTolerationSeconds struct {
	notReady, unreachable int64
}

func (d defaultTolerationSeconds) Admit(_ context.Context, a *Attributes) error {
	if a.Operation != "CREATE" || a.Resource.Resource != "pods" || a.Resource.Group != "" || a.Subresource != "" {
		return nil
	}
	p, ok := a.Object.(*corev1.Pod)
	if !ok {
		return nil
	}
	for _, t := range []struct {
		key     string
		seconds int64
	}{{corev1.TaintNodeNotReady, d.notReady}, {corev1.TaintNodeUnreachable, d.unreachable}} {
		tolerated := false
		for _, tol := range p.Spec.Tolerations {
			if (tol.Key == t.key || (tol.Key == "" && tol.Operator == corev1.TolerationOpExists)) &&
				(tol.Effect == "" || tol.Effect == corev1.TaintEffectNoExecute) {
				tolerated = true
			}
		}
		if !tolerated {
			secs := t.seconds
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: t.key, Operator: corev1.TolerationOpExists,
				Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &secs})
		}
	}
	return nil
}
