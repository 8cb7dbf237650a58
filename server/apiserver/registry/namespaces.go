package registry

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kelp-project/kelp/server/apiserver/defaults"
	"github.com/kelp-project/kelp/server/apiserver/validation"
)

// namespaces: a new namespace gets the "kubernetes" finalizer, which the
// namespace controller removes through /finalize once the namespace is
// empty; deletion waits for it.
func namespaces() *Resource {
	return &Resource{
		GVR: gvr("", "v1", "namespaces"), Kind: "Namespace", Singular: "namespace", ShortNames: []string{"ns"},
		New: func() runtime.Object { return &corev1.Namespace{} }, NewList: func() runtime.Object { return &corev1.NamespaceList{} },
		Status: true,
		Fields: func(o runtime.Object) fields.Set {
			return fields.Set{"status.phase": string(o.(*corev1.Namespace).Status.Phase)}
		},
		Subresources: []Subresource{{Name: "finalize", Verbs: []string{"update"}, GVK: gvk("Namespace"), Kind: SpecSubresource}},
		Strategy: Strategy{
			Default:              defaulter(defaults.Namespace),
			Validate:             validator(validation.Namespace),
			ValidateUpdate:       genericUpdate(validator(validation.Namespace)),
			ValidateStatusUpdate: updateValidator(validation.NamespaceStatusUpdate),
			PrepareForCreate:     prepareNamespace,
			// spec.finalizers change only through /finalize.
			PrepareForUpdate: CopySpec,
			BeforeStore:      finalizeNamespace,
			MarkDeleted:      markNamespaceDeleted,
		},
	}
}

func prepareNamespace(o runtime.Object) {
	ns := o.(*corev1.Namespace)
	ns.Status.Phase = corev1.NamespaceActive
	for _, f := range ns.Spec.Finalizers {
		if f == corev1.FinalizerKubernetes {
			return
		}
	}
	ns.Spec.Finalizers = append(ns.Spec.Finalizers, corev1.FinalizerKubernetes)
}

// markNamespaceDeleted: a namespace turns Terminating and waits for its
// spec.finalizers (the namespace controller empties them after deleting
// the contents) before it can go.
func markNamespaceDeleted(o runtime.Object) {
	ns := o.(*corev1.Namespace)
	ns.Status.Phase = corev1.NamespaceTerminating
	if ns.DeletionTimestamp == nil {
		now := metav1.Now()
		ns.DeletionTimestamp = &now
	}
	finalizeNamespace(ns)
}

// finalizeNamespace: a terminating namespace whose finalizers are all gone
// is deleted by this write (storage removes objects whose deletion is
// complete). It runs after validation: it is the server's doing, not a
// metadata change by the client.
func finalizeNamespace(o runtime.Object) {
	ns := o.(*corev1.Namespace)
	if ns.DeletionTimestamp != nil && len(ns.Spec.Finalizers) == 0 && len(ns.Finalizers) == 0 {
		zero := int64(0)
		ns.DeletionGracePeriodSeconds = &zero
	}
}
