// Package validation checks typed k8s.io/api objects the way kube-apiserver
// does before storing them, returning a field.ErrorList that the API server
// turns into a 422 Invalid status with one cause per error.
//
// Rules, field paths and messages follow upstream (pkg/apis/*/validation)
// for the fields kelp serves; where kelp deviates it says so next to the
// rule. Objects are expected to be defaulted (each kind's function in server/apiserver/defaults) first:
// like upstream, several checks require fields that defaulting always sets
// (a Pod's restartPolicy, a Service's sessionAffinity, ...).
//
// Each kind has up to three entry points, mirroring the three write paths,
// and the API server's registry names them for the kind:
//   - <Kind> on create: metadata and spec.
//   - <Kind>Update on update of the main resource: metadata update rules
//     (immutable name, namespace, uid, creationTimestamp, ...), the new
//     object's validity, and the kind's immutable fields.
//   - <Kind>StatusUpdate on writes through the /status subresource:
//     metadata update rules and the status fields. The API server keeps
//     the stored spec on that path, as upstream does.
//
// Kinds without specific rules get Generic, GenericUpdate and MetaUpdate:
// metadata validation still applies (names must at least be URL path
// segments).
package validation

import (
	"fmt"
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// GenericUpdate is the update rule for kinds whose spec is freely mutable:
// metadata update rules plus full validity of the new object (validate is
// the kind's create rule). Errors the two checks both find (labels,
// annotations) are reported once.
func GenericUpdate(obj, old runtime.Object, validate func(runtime.Object) field.ErrorList) field.ErrorList {
	return dedupe(append(validateMetaUpdateOf(obj, old), validate(obj)...))
}

// MetaUpdate is the status-update rule for kinds without status rules of
// their own: the metadata update rules.
func MetaUpdate(obj, old runtime.Object) field.ErrorList { return validateMetaUpdateOf(obj, old) }

// Generic is the create rule for kinds without rules of their own.
func Generic(obj runtime.Object) field.ErrorList { return validateGenericMeta(obj) }

// validateMetaUpdateOf applies the metadata update rules to any pair of
// objects that embed ObjectMeta.
func validateMetaUpdateOf(obj, old runtime.Object) field.ErrorList {
	n, o := objectMetaOf(obj), objectMetaOf(old)
	if n == nil || o == nil {
		return nil
	}
	return validateObjectMetaUpdate(n, o)
}

// objectMetaOf returns the embedded ObjectMeta of a typed object, or nil
// (lists, unstructured content). meta.Accessor would hand back the object
// itself, while the apimachinery helpers want the struct.
func objectMetaOf(obj runtime.Object) *metav1.ObjectMeta {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return nil
	}
	f := v.Elem().FieldByName("ObjectMeta")
	if !f.IsValid() || f.Type() != reflect.TypeOf(metav1.ObjectMeta{}) {
		return nil
	}
	return f.Addr().Interface().(*metav1.ObjectMeta)
}

// validateGenericMeta covers kinds without specific rules: names must at
// least be usable as a URL path segment, and labels, annotations, owner
// references and finalizers must be well formed.
func validateGenericMeta(obj runtime.Object) field.ErrorList {
	m := objectMetaOf(obj)
	if m == nil {
		return nil
	}
	// Scope is unknown here; a set namespace is only checked for form.
	return validateObjectMeta(m, true, nameIsPathSegment)
}

// SameType refuses to compare objects of different kinds (an internal
// error: the server never does).
func SameType(obj, old runtime.Object) field.ErrorList {
	if obj == nil || old == nil || reflect.TypeOf(obj) != reflect.TypeOf(old) {
		return field.ErrorList{field.InternalError(field.NewPath("kind"), fmt.Errorf("cannot compare %T with %T", obj, old))}
	}
	return nil
}

func collisionCountNotDecremented(newC, oldC *int32) field.ErrorList {
	if oldC == nil {
		return nil
	}
	v := int32(0)
	if newC != nil {
		v = *newC
	}
	if v < *oldC {
		return field.ErrorList{field.Invalid(statusPath.Child("collisionCount"), v, "cannot be decremented")}
	}
	return nil
}

// dedupe drops repeated errors (same type, field, value and detail),
// keeping the first occurrence and the order.
func dedupe(errs field.ErrorList) field.ErrorList {
	seen := map[string]bool{}
	out := errs[:0]
	for _, e := range errs {
		key := fmt.Sprintf("%s\x00%s\x00%s\x00%v", e.Type, e.Field, e.Detail, e.BadValue)
		if seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, e)
	}
	return out
}
