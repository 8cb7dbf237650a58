package registry

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kelp-project/kelp/server/apiserver/validation"
)

// The rule packages take typed objects; these adapt them to the Strategy's
// runtime.Object hooks. The generic path only hands a kind its own type.

func defaulter[T runtime.Object](f func(T)) func(runtime.Object) {
	return func(o runtime.Object) { f(o.(T)) }
}

func validator[T runtime.Object](f func(T) field.ErrorList) func(runtime.Object) field.ErrorList {
	return func(o runtime.Object) field.ErrorList { return f(o.(T)) }
}

// updateValidator checks that both objects are of the kind first: an
// update never compares two kinds, and a mismatch is an internal error
// rather than a panic.
func updateValidator[T runtime.Object](f func(obj, old T) field.ErrorList) func(obj, old runtime.Object) field.ErrorList {
	return func(obj, old runtime.Object) field.ErrorList {
		if errs := validation.SameType(obj, old); errs != nil {
			return errs
		}
		return f(obj.(T), old.(T))
	}
}

// genericUpdate is the update rule of kinds whose spec is freely mutable:
// metadata update rules plus the kind's create rule.
func genericUpdate(validate func(runtime.Object) field.ErrorList) func(obj, old runtime.Object) field.ErrorList {
	return func(obj, old runtime.Object) field.ErrorList {
		if errs := validation.SameType(obj, old); errs != nil {
			return errs
		}
		return validation.GenericUpdate(obj, old, validate)
	}
}

// metaUpdate is the status rule of kinds without status rules of their own.
func metaUpdate(obj, old runtime.Object) field.ErrorList {
	if errs := validation.SameType(obj, old); errs != nil {
		return errs
	}
	return validation.MetaUpdate(obj, old)
}

// plainStrategy is the strategy of kinds with a create rule and nothing
// else of their own: generic update and status rules.
func plainStrategy(def func(runtime.Object), validate func(runtime.Object) field.ErrorList) Strategy {
	return Strategy{Default: def, Validate: validate, ValidateUpdate: genericUpdate(validate), ValidateStatusUpdate: metaUpdate}
}

// withGenericTable marks a kind upstream prints with the generic table.
func withGenericTable(s Strategy) Strategy {
	s.GenericTable = true
	return s
}
