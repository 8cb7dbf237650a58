package webhook

import (
	"fmt"
	"reflect"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apiadmission "k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/kelp-project/kelp/server/apiserver/admission"
)

// ObjectInterfaces are upstream's admission.ObjectInterfaces for kelp's
// objects: built-in kinds are the versioned k8s.io/api types of the
// client-go scheme (kelp keeps no internal versions), custom resources are
// unstructured. "Converting" between two objects of one Go type copies;
// between custom resource versions it rewrites apiVersion, as a CRD's
// conversion strategy None does.
type ObjectInterfaces struct {
	defaulter defaulterFunc
	mapper    equivalents
}

// NewObjectInterfaces: def re-defaults an object a plugin changed, versions
// lists a resource's served versions.
func NewObjectInterfaces(def func(runtime.Object), versions func(schema.GroupResource) map[schema.GroupVersionResource]schema.GroupVersionKind) ObjectInterfaces {
	return ObjectInterfaces{defaulter: defaulterFunc(def), mapper: equivalents{versions: versions}}
}

func (o ObjectInterfaces) GetObjectCreater() runtime.ObjectCreater { return creater{} }
func (o ObjectInterfaces) GetObjectTyper() runtime.ObjectTyper     { return scheme.Scheme }
func (o ObjectInterfaces) GetObjectDefaulter() runtime.ObjectDefaulter {
	return o.defaulter
}
func (o ObjectInterfaces) GetObjectConvertor() runtime.ObjectConvertor { return convertor{} }
func (o ObjectInterfaces) GetEquivalentResourceMapper() runtime.EquivalentResourceMapper {
	return o.mapper
}

// kindOf is an object's kind: a custom resource's declared one, a built-in
// type's from the scheme (preferring the resource's group when a type is
// registered in several).
func (o ObjectInterfaces) kindOf(obj runtime.Object, group string) (schema.GroupVersionKind, error) {
	if u, ok := obj.(runtime.Unstructured); ok {
		return u.GetObjectKind().GroupVersionKind(), nil
	}
	kinds, _, err := scheme.Scheme.ObjectKinds(obj)
	if err != nil {
		return schema.GroupVersionKind{}, err
	}
	for _, k := range kinds {
		if k.Group == group {
			return k, nil
		}
	}
	return kinds[0], nil
}

type defaulterFunc func(runtime.Object)

func (d defaulterFunc) Default(obj runtime.Object) {
	if d != nil {
		d(obj)
	}
}

// creater makes the scheme's types and, for any kind the scheme does not
// know (custom resources), an unstructured object of that kind.
type creater struct{}

func (creater) New(gvk schema.GroupVersionKind) (runtime.Object, error) {
	if obj, err := scheme.Scheme.New(gvk); err == nil {
		return obj, nil
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

type convertor struct{}

// Convert copies in into out: the dispatcher converts an object to the
// webhook's version and a patched one back into the request's object,
// which the write path then goes on with (so out is written in place).
func (convertor) Convert(in, out, _ interface{}) error {
	if uin, ok := in.(*unstructured.Unstructured); ok {
		uout, ok := out.(*unstructured.Unstructured)
		if !ok {
			return fmt.Errorf("cannot convert %T to %T", in, out)
		}
		apiVersion, kind := uout.GetAPIVersion(), uout.GetKind()
		uout.Object = runtime.DeepCopyJSON(uin.Object)
		if apiVersion != "" {
			uout.SetAPIVersion(apiVersion)
			uout.SetKind(kind)
		}
		return nil
	}
	vin, vout := reflect.ValueOf(in), reflect.ValueOf(out)
	if vin.Type() != vout.Type() || vin.Kind() != reflect.Pointer || vin.IsNil() || vout.IsNil() {
		return fmt.Errorf("cannot convert %T to %T", in, out)
	}
	if ro, ok := in.(runtime.Object); ok {
		vin = reflect.ValueOf(ro.DeepCopyObject())
	}
	vout.Elem().Set(vin.Elem())
	return nil
}

func (convertor) ConvertToVersion(in runtime.Object, gv runtime.GroupVersioner) (runtime.Object, error) {
	return scheme.Scheme.ConvertToVersion(in, gv)
}

func (convertor) ConvertFieldLabel(gvk schema.GroupVersionKind, label, value string) (string, string, error) {
	return label, value, nil
}

// equivalents are the served versions of a resource (matchPolicy
// Equivalent): a rule naming one version of a custom resource matches
// requests to its others, the object converted to the named version.
type equivalents struct {
	versions func(schema.GroupResource) map[schema.GroupVersionResource]schema.GroupVersionKind
}

func (e equivalents) EquivalentResourcesFor(resource schema.GroupVersionResource, subresource string) []schema.GroupVersionResource {
	if e.versions == nil {
		return nil
	}
	var out []schema.GroupVersionResource
	for gvr := range e.versions(resource.GroupResource()) {
		out = append(out, gvr)
	}
	return out
}

func (e equivalents) KindFor(resource schema.GroupVersionResource, subresource string) schema.GroupVersionKind {
	if subresource == "scale" {
		return autoscalingv1.SchemeGroupVersion.WithKind("Scale")
	}
	if e.versions == nil {
		return schema.GroupVersionKind{}
	}
	return e.versions(resource.GroupResource())[resource]
}

// Attributes are upstream's for a kelp write, which upstream's admission
// plugins (the webhooks, the admission policies) take: the kind is the
// object's (the old object's for a delete), as the scheme or the custom
// resource declares it.
func (o ObjectInterfaces) Attributes(a *admission.Attributes) (apiadmission.Attributes, error) {
	obj := a.Object
	if obj == nil {
		obj = a.OldObject
	}
	var kind schema.GroupVersionKind
	if obj != nil {
		k, err := o.kindOf(obj, a.Resource.Group)
		if err != nil {
			return nil, apierrors.NewInternalError(fmt.Errorf("admission: %w", err))
		}
		kind = k
	}
	// upstream's requests always carry a user
	var u user.Info = &user.DefaultInfo{}
	if a.User != nil {
		u = &user.DefaultInfo{Name: a.User.Name, Groups: a.User.Groups, UID: a.User.UID, Extra: a.User.Extra}
	}
	op := apiadmission.Operation(a.Operation)
	return apiadmission.NewAttributesRecord(a.Object, a.OldObject, kind, a.Namespace, a.Name, a.Resource, a.Subresource,
		op, operationOptions(op, a.DryRun), a.DryRun, u), nil
}

// operationOptions are the options upstream hands webhooks with each
// operation (AdmissionRequest.options).
func operationOptions(op apiadmission.Operation, dryRun bool) runtime.Object {
	var dry []string
	if dryRun {
		dry = []string{metav1.DryRunAll}
	}
	meta := func(kind string) metav1.TypeMeta {
		return metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: kind}
	}
	switch op {
	case apiadmission.Create:
		return &metav1.CreateOptions{TypeMeta: meta("CreateOptions"), DryRun: dry}
	case apiadmission.Update:
		return &metav1.UpdateOptions{TypeMeta: meta("UpdateOptions"), DryRun: dry}
	case apiadmission.Delete:
		return &metav1.DeleteOptions{TypeMeta: meta("DeleteOptions"), DryRun: dry}
	}
	return nil
}
