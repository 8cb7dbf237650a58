package apply

import (
	"reflect"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// Reset fields are upstream's rest.ResetFieldsStrategy: the fields a
// registry strategy resets to the stored value on a write through a given
// endpoint (PrepareForUpdate). The field manager must not give ownership of
// them to the writer, even when the request sets them, so that e.g. an
// apply of a Deployment that carries a status does not make the applier a
// status owner, and a controller writing /status does not own spec.
// (Resetting the values themselves is the registry's job, not this
// package's.)
//
// Upstream declares them per strategy. The built-in kinds follow one
// pattern, applied here generically to every kind whose Go type has a
// top-level Status field (the kinds with a /status subresource):
//
//	main resource:        status
//	status subresource:   spec, plus the per-kind extras below
//	namespaces/finalize:  status
//
// Other subresources (scale, binding, ...) reset nothing here.
var statusResetExtras = map[schema.GroupKind][]fieldpath.Path{
	// podStatusStrategy: kubelets must not own deletion or owner refs.
	{Group: "", Kind: "Pod"}: {
		fieldpath.MakePathOrDie("metadata", "deletionTimestamp"),
		fieldpath.MakePathOrDie("metadata", "ownerReferences"),
	},
	// deploymentStatusStrategy also resets labels.
	{Group: "apps", Kind: "Deployment"}: {
		fieldpath.MakePathOrDie("metadata", "labels"),
	},
}

// resetFields returns the ignore filters for the field manager of gvk and
// subresource, keyed by the managedFields apiVersion ("apps/v1", "v1"), or
// nil when nothing is reset.
func resetFields(gvk schema.GroupVersionKind, subresource string) map[fieldpath.APIVersion]fieldpath.Filter {
	hasSpec, hasStatus := specAndStatus(gvk)
	var set *fieldpath.Set
	switch {
	case subresource == "" && hasStatus,
		subresource == "finalize" && gvk.GroupKind() == schema.GroupKind{Kind: "Namespace"}:
		set = fieldpath.NewSet(fieldpath.MakePathOrDie("status"))
	case subresource == "status" && hasStatus:
		set = fieldpath.NewSet(statusResetExtras[gvk.GroupKind()]...)
		if hasSpec {
			set.Insert(fieldpath.MakePathOrDie("spec"))
		}
	}
	if set == nil || set.Empty() {
		return nil
	}
	return fieldpath.NewExcludeFilterSetMap(map[fieldpath.APIVersion]*fieldpath.Set{
		fieldpath.APIVersion(gvk.GroupVersion().String()): set,
	})
}

// specAndStatus reports whether gvk's Go type has top-level "spec" and
// "status" fields.
func specAndStatus(gvk schema.GroupVersionKind) (hasSpec, hasStatus bool) {
	t, ok := scheme.Scheme.AllKnownTypes()[gvk]
	if !ok || t.Kind() != reflect.Struct {
		return false, false
	}
	_, hasSpec = t.FieldByName("Spec")
	_, hasStatus = t.FieldByName("Status")
	return hasSpec, hasStatus
}
