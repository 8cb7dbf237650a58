package admission

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// namespaceLifecycle refuses to create objects in a namespace that does
// not exist or is being deleted, and protects the system namespaces, as
// upstream's NamespaceLifecycle plugin does.
type namespaceLifecycle struct{ namespaces ObjectGetter }

var immortalNamespaces = map[string]bool{"default": true, "kube-system": true, "kube-public": true, "kube-node-lease": true}

func (n namespaceLifecycle) Validate(ctx context.Context, a *Attributes) error {
	if a.Resource.GroupResource() == namespacesResource.GroupResource() {
		if a.Operation == "DELETE" && immortalNamespaces[a.Name] {
			return apierrors.NewForbidden(namespacesResource.GroupResource(), a.Name, fmt.Errorf("this namespace may not be deleted"))
		}
		return nil
	}
	if a.Operation != "CREATE" || a.Namespace == "" {
		return nil
	}
	obj, err := n.namespaces.Get(ctx, "", a.Namespace)
	if apierrors.IsNotFound(err) {
		return apierrors.NewNotFound(namespacesResource.GroupResource(), a.Namespace)
	}
	if err != nil {
		return err
	}
	if ns := obj.(*corev1.Namespace); ns.Status.Phase == corev1.NamespaceTerminating || ns.DeletionTimestamp != nil {
		// Events are still accepted so controllers can report the cleanup.
		if a.Resource.GroupResource() == (schema.GroupResource{Resource: "events"}) || a.Resource.GroupResource() == (schema.GroupResource{Group: "events.k8s.io", Resource: "events"}) {
			return nil
		}
		// The cause tells controllers the create was refused because the
		// namespace is going, not for a fault of theirs.
		err := apierrors.NewForbidden(a.Resource.GroupResource(), a.Name,
			fmt.Errorf("unable to create new content in namespace %s because it is being terminated", a.Namespace))
		err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
			Type: corev1.NamespaceTerminatingCause, Message: fmt.Sprintf("namespace %s is being terminated", a.Namespace), Field: "metadata.namespace"})
		return err
	}
	return nil
}
