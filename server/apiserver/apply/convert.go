package apply

import (
	"fmt"
	"reflect"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/applyconfigurations"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/structured-merge-diff/v6/typed"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsac "k8s.io/apiextensions-apiserver/pkg/client/applyconfiguration"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	apiregistrationac "k8s.io/kube-aggregator/pkg/client/applyconfiguration"
)

// typeConverter is the structured-merge-diff schema of every k8s.io/api
// type, keyed through scheme.Scheme. Building it parses the ~430 KB schema
// YAML embedded in client-go's applyconfigurations: 140-320 ms and ~21 MB
// allocated on a 2-CPU machine (TestTypeConverterColdStart measures it in
// a fresh process). So it is built once, on first use rather than at init,
// so that processes that never write (kelp's CLI paths, other packages'
// tests) do not pay for it; the first write after start-up does. The
// converter is immutable and safe for concurrent use; sync.OnceValue makes
// concurrent first callers wait for the one build.
var typeConverter = sync.OnceValue(func() managedfields.TypeConverter {
	return groupTypeConverter{
		builtin: applyconfigurations.NewTypeConverter(scheme.Scheme),
		// CRDs are outside client-go (as APIServices, below): their schema is
		// in apiextensions-apiserver's apply configurations, built lazily
		// for the same reason.
		apiextensions: sync.OnceValue(func() managedfields.TypeConverter {
			return apiextensionsac.NewTypeConverter(scheme.Scheme)
		}),
		// So are APIServices, in kube-aggregator's.
		apiregistration: sync.OnceValue(func() managedfields.TypeConverter {
			return apiregistrationac.NewTypeConverter(scheme.Scheme)
		}),
	}
})

// groupTypeConverter asks the schema of the object's API group.
type groupTypeConverter struct {
	builtin         managedfields.TypeConverter
	apiextensions   func() managedfields.TypeConverter
	apiregistration func() managedfields.TypeConverter
}

func (c groupTypeConverter) ObjectToTyped(obj runtime.Object, opts ...typed.ValidationOptions) (*typed.TypedValue, error) {
	gvk := obj.GetObjectKind().GroupVersionKind()
	if gvk.Empty() {
		if kinds, _, err := scheme.Scheme.ObjectKinds(obj); err == nil && len(kinds) > 0 {
			gvk = kinds[0]
		}
	}
	if gvk.Group == apiextensionsv1.GroupName {
		return c.apiextensions().ObjectToTyped(obj, opts...)
	}
	if gvk.Group == apiregistrationv1.GroupName {
		return c.apiregistration().ObjectToTyped(obj, opts...)
	}
	return c.builtin.ObjectToTyped(obj, opts...)
}

func (c groupTypeConverter) TypedToObject(v *typed.TypedValue) (runtime.Object, error) {
	return c.builtin.TypedToObject(v)
}

// convertor is the runtime.ObjectConvertor handed to the field manager.
//
// The field manager converts every object it reads to the request's
// version (and the merged object back to the hub version) before looking
// at it. With kelp, object, request and hub versions are all the same, so
// scheme.Scheme.ConvertToVersion would only deep-copy the object and set
// its TypeMeta: two or three full copies per write. convertor skips that:
//
//   - a typed object whose TypeMeta already names the target kind is
//     returned as is. This is safe because the field manager only reads
//     the objects it converts, except the freshly merged object in Apply,
//     which is never a caller's object (and tests assert live is left
//     untouched).
//   - an Unstructured (the merged apply result, or a managedFields version
//     conversion) becomes a fresh typed object, so the scheme's no-copy
//     path is used for it.
//   - anything else (no or wrong TypeMeta, e.g. a live object decoded
//     without kind) goes through the scheme, which copies: the caller's object is
//     never written to, even just its TypeMeta, since it may be shared.
//
// A conversion between two versions of a kind is reported as "not
// registered": client-go's scheme registers every version but has no
// conversions between them (upstream converts through the internal
// version). The structured-merge updater drops managedFields entries of
// versions it cannot convert to instead of failing, which is what
// upstream does for versions no longer served. Such entries can only come
// from clients writing managedFields by hand, since kelp serves one
// version per kind.
type convertor struct {
	scheme *runtime.Scheme
}

var _ runtime.ObjectConvertor = convertor{}

func (c convertor) Convert(in, out, context interface{}) error {
	return c.scheme.Convert(in, out, context)
}

func (c convertor) ConvertFieldLabel(gvk schema.GroupVersionKind, label, value string) (string, string, error) {
	return c.scheme.ConvertFieldLabel(gvk, label, value)
}

func (c convertor) ConvertToVersion(in runtime.Object, target runtime.GroupVersioner) (runtime.Object, error) {
	if _, ok := in.(runtime.Unstructured); ok {
		out, err := c.scheme.UnsafeConvertToVersion(in, target)
		if err != nil && crossVersion(in, target) {
			return nil, runtime.NewNotRegisteredErrForTarget("kelp", reflect.TypeOf(in), target)
		}
		return out, err
	}
	kinds, _, err := c.scheme.ObjectKinds(in)
	if err != nil {
		return nil, err
	}
	want, ok := target.KindForGroupVersionKinds(kinds)
	if !ok || !slices.Contains(kinds, want) {
		// Another version of the kind: a real conversion (see above).
		return nil, runtime.NewNotRegisteredErrForTarget("kelp", reflect.TypeOf(in), target)
	}
	if in.GetObjectKind().GroupVersionKind() == want {
		return in, nil // same version and TypeMeta already right: no copy
	}
	return c.scheme.ConvertToVersion(in, target) // copy, set TypeMeta
}

// crossVersion reports whether converting the Unstructured in to target
// asks for a version other than in's own.
func crossVersion(in runtime.Object, target runtime.GroupVersioner) bool {
	gvk := in.GetObjectKind().GroupVersionKind()
	want, ok := target.KindForGroupVersionKinds([]schema.GroupVersionKind{gvk})
	return !ok || want != gvk
}

// unstructuredConvertor serves the field manager of a custom resource:
// its objects are all of one version when the field manager sees them
// (conversion None), so converting is setting the kind's apiVersion.
type unstructuredConvertor struct{}

var _ runtime.ObjectConvertor = unstructuredConvertor{}

func (unstructuredConvertor) Convert(in, out, context interface{}) error {
	return fmt.Errorf("converting %T to %T is not supported", in, out)
}

func (unstructuredConvertor) ConvertFieldLabel(gvk schema.GroupVersionKind, label, value string) (string, string, error) {
	return label, value, nil
}

func (unstructuredConvertor) ConvertToVersion(in runtime.Object, target runtime.GroupVersioner) (runtime.Object, error) {
	gvk := in.GetObjectKind().GroupVersionKind()
	want, ok := target.KindForGroupVersionKinds([]schema.GroupVersionKind{gvk})
	if !ok {
		return nil, runtime.NewNotRegisteredErrForTarget("kelp", reflect.TypeOf(in), target)
	}
	if want == gvk {
		return in, nil
	}
	out := in.DeepCopyObject()
	out.GetObjectKind().SetGroupVersionKind(want)
	return out, nil
}
