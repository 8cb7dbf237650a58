package registry

import (
	"context"
	"fmt"
	"strings"

	"github.com/sirupsen/logrus"
	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource/tableconvertor"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured/unstructuredscheme"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Custom is what a resource served from a CRD carries beyond a built-in's.
type Custom struct {
	// CRD is the CRD's name, UID the CRD's (a CRD deleted and created
	// again under the same name is another CRD).
	CRD string
	UID types.UID
	// StorageVersion is the version objects are stored in; the other
	// versions differ from it only in apiVersion (conversion None).
	StorageVersion string
	// Terminating: the CRD is being deleted, and new objects are refused.
	Terminating bool
	// TypeConverter is the kind's schema for server-side apply and
	// managedFields, built on first use (nil: fields are deduced).
	TypeConverter managedfields.TypeConverter
	// Prune drops the fields the schema does not declare from a decoded
	// object and names them ("spec.bogus"), for the request's
	// fieldValidation: custom objects decode without a Go type that
	// would reject them.
	Prune func(obj runtime.Object) []string
	// Encoded is the CRD these resources were built from, as protobuf:
	// what their write path and OpenAPI documents are built from when
	// first asked for. Nothing serving needs keeps the CRD decoded (some
	// 22 KB of small allocations a CRD, against 5 KB of bytes).
	Encoded []byte
}

// CustomResources returns the resources a CRD serves, one per served
// version, with upstream's schema machinery: structural pruning,
// defaulting and metadata coercion (Default), and upstream's custom
// resource strategy for validation (openAPIV3Schema with ratcheting,
// embedded metadata, list types, CEL x-kubernetes-validations rules).
// The CRD itself was validated when it was written.
func CustomResources(crd *apiextensionsv1.CustomResourceDefinition) ([]*Resource, error) {
	storageVersion, err := apihelpers.GetCRDStorageVersion(crd)
	if err != nil {
		return nil, err
	}
	names := crd.Status.AcceptedNames
	namespaced := crd.Spec.Scope == apiextensionsv1.NamespaceScoped
	encoded, err := crd.Marshal()
	if err != nil {
		return nil, err
	}
	var out []*Resource
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		r, err := customResource(crd, encoded, v, storageVersion, names, namespaced)
		if err != nil {
			return nil, fmt.Errorf("%s version %s: %w", crd.Name, v.Name, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// CustomStorageDefaulter is what a CRD's objects get when read from etcd:
// the pruning and defaulting of its storage version's schema (Default),
// so that defaults added to a CRD show on objects stored before. served
// are the CRD's resources (CustomResources): the storage version's, if
// served, is used rather than built a second time.
func CustomStorageDefaulter(crd *apiextensionsv1.CustomResourceDefinition, served []*Resource) (func(runtime.Object), error) {
	storageVersion, err := apihelpers.GetCRDStorageVersion(crd)
	if err != nil {
		return nil, err
	}
	for _, r := range served {
		if r.GVR.Version == storageVersion {
			return r.Default, nil
		}
	}
	encoded, err := crd.Marshal()
	if err != nil {
		return nil, err
	}
	for _, v := range crd.Spec.Versions {
		if v.Name == storageVersion {
			r, err := customResource(crd, encoded, v, storageVersion, crd.Status.AcceptedNames, crd.Spec.Scope == apiextensionsv1.NamespaceScoped)
			if err != nil {
				return nil, err
			}
			return r.Default, nil
		}
	}
	return nil, fmt.Errorf("%s: no storage version", crd.Name)
}

// customResource builds one served version's resource. Its closures keep
// nothing of crd and v but what they name (the write path is built from
// encoded, crd's bytes): the served table lives as long as the CRD does.
func customResource(crd *apiextensionsv1.CustomResourceDefinition, encoded []byte, v apiextensionsv1.CustomResourceDefinitionVersion,
	storageVersion string, names apiextensionsv1.CustomResourceDefinitionNames, namespaced bool) (*Resource, error) {
	gvr := gvr(crd.Spec.Group, v.Name, names.Plural)
	gvk := gvr.GroupVersion().WithKind(names.Kind)
	listGVK := gvr.GroupVersion().WithKind(names.ListKind)

	val, err := apihelpers.GetSchemaForVersion(crd, v.Name)
	if err != nil {
		return nil, err
	}
	crdName, version, selectable := crd.Name, v.Name, v.SelectableFields
	// The structural schema prunes and defaults what is decoded and
	// written. It is held while used, as the write path is (kinds are
	// decoded in bursts: a relist, a controller's writes), and built from
	// the CRD's bytes again when needed: a CRD's schema is thousands of
	// small objects, most of the time unused.
	var schema *whileUsed[*structuralschema.Structural] // nil: no schema
	if val != nil {
		structural, err := structuralOf(val)
		if err != nil {
			return nil, err
		}
		schema = &whileUsed[*structuralschema.Structural]{idle: customWriteIdle, build: func() *structuralschema.Structural {
			s, err := encodedStructural(encoded, version)
			if err != nil {
				// It was built from the same bytes when the CRD was served.
				logrus.WithError(err).Errorf("CRD %s version %s: structural schema", crdName, version)
			}
			return s
		}}
		schema.hold(structural)
	}
	structuralNow := func() *structuralschema.Structural {
		if schema == nil {
			return nil
		}
		return schema.get()
	}
	subs, err := apihelpers.GetSubresourcesForVersion(crd, v.Name)
	if err != nil {
		return nil, err
	}
	var status *apiextensions.CustomResourceSubresourceStatus
	var scale *apiextensions.CustomResourceSubresourceScale
	if subs != nil && subs.Status != nil {
		status = &apiextensions.CustomResourceSubresourceStatus{}
	}
	if subs != nil && subs.Scale != nil {
		scale = &apiextensions.CustomResourceSubresourceScale{}
		if err := apiextensionsv1.Convert_v1_CustomResourceSubresourceScale_To_apiextensions_CustomResourceSubresourceScale(subs.Scale, scale, nil); err != nil {
			return nil, err
		}
	}
	typer := unstructuredscheme.NewUnstructuredObjectTyper()
	// Selectable fields need no schema: this strategy, without validators
	// (and so without CEL), answers for them on every read.
	attrs := customresource.NewStrategy(typer, namespaced, gvk, nil, nil, nil, status, scale, v.SelectableFields)
	// The write path is built from the CRD's bytes rather than kept: most
	// CRDs' kinds see writes rarely, and it is some 250 KB a kind.
	writer := newCustomWriter(func() *customWrite {
		crd, val, err := decodeVersionSchema(encoded, version)
		if err != nil {
			return invalidWrite(crdName, err)
		}
		var props *apiextensions.JSONSchemaProps
		if val != nil {
			internal := &apiextensions.CustomResourceValidation{}
			// It converted when the resource was built.
			_ = apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(val, internal, nil)
			props = internal.OpenAPIV3Schema
		}
		return buildCustomWrite(crd, typer, namespaced, gvk, props, structuralNow(), status, scale, selectable)
	})

	columns := v.AdditionalPrinterColumns
	table, err := tableconvertor.New(columns)
	if err != nil {
		// Upstream falls back to the default columns too.
		table, _ = tableconvertor.New(nil)
	}

	preserve := crd.Spec.PreserveUnknownFields
	r := &Resource{
		GVR: gvr, Kind: names.Kind, Singular: names.Singular, ShortNames: names.ShortNames, Categories: names.Categories,
		Namespaced: namespaced,
		New: func() runtime.Object {
			u := &unstructured.Unstructured{Object: map[string]interface{}{}}
			u.SetGroupVersionKind(gvk)
			return u
		},
		NewList: func() runtime.Object {
			l := &unstructured.UnstructuredList{Object: map[string]interface{}{}}
			l.SetGroupVersionKind(listGVK)
			return l
		},
		Fields: func(obj runtime.Object) fields.Set {
			_, fs, err := attrs.GetAttrs(obj)
			if err != nil {
				return nil
			}
			return fs
		},
		Status:        status != nil,
		StoragePrefix: "/registry/" + crd.Spec.Group + "/" + names.Plural + "/",
		Table: func(obj runtime.Object) (*metav1.Table, error) {
			return table.ConvertToTable(context.Background(), obj, nil)
		},
		Custom: &Custom{CRD: crd.Name, UID: crd.UID, StorageVersion: storageVersion,
			Terminating:   apihelpers.IsCRDConditionTrue(crd, apiextensionsv1.Terminating),
			TypeConverter: writerTypeConverter{writer},
			Encoded:       encoded,
			Prune: func(obj runtime.Object) []string {
				u, ok := obj.(*unstructured.Unstructured)
				if !ok || schema == nil || preserve {
					return nil
				}
				structural := structuralNow()
				if structural == nil {
					return nil
				}
				return structuralpruning.PruneWithOptions(u.Object, structural, true,
					structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
			},
		},
		Strategy: Strategy{
			Default: func(obj runtime.Object) {
				u, ok := obj.(*unstructured.Unstructured)
				if !ok || schema == nil {
					return
				}
				structural := structuralNow()
				if structural == nil {
					return
				}
				// What upstream does while decoding a custom object: drop
				// fields the schema does not know, nulls it does not
				// allow, then fill in defaults.
				if !preserve {
					structuralpruning.PruneWithOptions(u.Object, structural, true, structuralschema.UnknownFieldPathOptions{})
					structuraldefaulting.PruneNonNullableNullsWithoutDefaults(u.Object, structural)
				}
				_ = schemaobjectmeta.Coerce(nil, u.Object, structural, false, false)
				structuraldefaulting.Default(u.Object, structural)
			},
			Validate: func(obj runtime.Object) field.ErrorList {
				if _, ok := obj.(*unstructured.Unstructured); !ok {
					return field.ErrorList{field.InternalError(nil, fmt.Errorf("%T is not a custom object", obj))}
				}
				return writer.get().validate(obj)
			},
			ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
				if errs := sameUnstructured(obj, old); errs != nil {
					return errs
				}
				return writer.get().validateUpdate(obj, old)
			},
			ValidateStatusUpdate: func(obj, old runtime.Object) field.ErrorList {
				if errs := sameUnstructured(obj, old); errs != nil {
					return errs
				}
				return writer.get().validateStatus(obj, old)
			},
		},
	}
	if scale != nil {
		r.Scale = customScale(scale)
	}
	return r, nil
}

// buildCustomWrite builds a kind's write path: upstream's strategy with
// the schema validators and CEL rules, and the apply schema.
func buildCustomWrite(crd *apiextensionsv1.CustomResourceDefinition, typer runtime.ObjectTyper, namespaced bool, gvk schema.GroupVersionKind,
	props *apiextensions.JSONSchemaProps, structural *structuralschema.Structural, status *apiextensions.CustomResourceSubresourceStatus,
	scale *apiextensions.CustomResourceSubresourceScale, selectable []apiextensionsv1.SelectableField) *customWrite {
	validator, _, err := apiservervalidation.NewSchemaValidator(props)
	var statusValidator apiservervalidation.SchemaValidator
	if err == nil && status != nil && props != nil {
		// /status validates against the status schema only.
		if st, ok := props.Properties["status"]; ok {
			statusValidator, _, err = apiservervalidation.NewSchemaValidator(&st)
		}
	}
	if err != nil {
		return invalidWrite(crd.Name, fmt.Errorf("schema validator: %w", err))
	}
	strategy := customresource.NewStrategy(typer, namespaced, gvk, validator, statusValidator, structural, status, scale, selectable)
	statusStrategy := customresource.NewStatusStrategy(strategy)
	tc := applySchema(crd)
	if tc == nil {
		tc = managedfields.NewDeducedTypeConverter()
	}
	return &customWrite{
		validate: func(obj runtime.Object) field.ErrorList { return strategy.Validate(context.Background(), obj) },
		validateUpdate: func(obj, old runtime.Object) field.ErrorList {
			return strategy.ValidateUpdate(context.Background(), obj, old)
		},
		validateStatus: func(obj, old runtime.Object) field.ErrorList {
			return statusStrategy.ValidateUpdate(context.Background(), obj, old)
		},
		typeConverter: tc,
	}
}

// structuralOf is a version's structural schema as upstream's handler
// makes it: its defaults pruned, on a copy (the structural schema shares
// the internal schema's default values).
func structuralOf(val *apiextensionsv1.CustomResourceValidation) (*structuralschema.Structural, error) {
	internal := &apiextensions.CustomResourceValidation{}
	if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(val, internal, nil); err != nil {
		return nil, err
	}
	structural, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
	if err != nil {
		return nil, err
	}
	structural = structural.DeepCopy()
	if err := structuraldefaulting.PruneDefaults(structural); err != nil {
		return nil, err
	}
	return structural, nil
}

// decodeVersionSchema decodes a CRD's bytes (Custom.Encoded) and finds a
// version's schema in it (nil: the version has none).
func decodeVersionSchema(encoded []byte, version string) (*apiextensionsv1.CustomResourceDefinition, *apiextensionsv1.CustomResourceValidation, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := crd.Unmarshal(encoded); err != nil {
		return nil, nil, err
	}
	val, err := apihelpers.GetSchemaForVersion(crd, version)
	return crd, val, err
}

// encodedStructural is structuralOf the version of the CRD whose bytes
// are encoded.
func encodedStructural(encoded []byte, version string) (*structuralschema.Structural, error) {
	_, val, err := decodeVersionSchema(encoded, version)
	if err != nil || val == nil {
		return nil, err
	}
	return structuralOf(val)
}

// invalidWrite is the write path of a kind whose CRD cannot be built
// into one. The CRD was checked when it was written: this is a bug, and
// its objects cannot be validated.
func invalidWrite(crdName string, err error) *customWrite {
	invalid := func() field.ErrorList {
		return field.ErrorList{field.InternalError(nil, fmt.Errorf("CRD %s: %w", crdName, err))}
	}
	return &customWrite{
		validate:       func(runtime.Object) field.ErrorList { return invalid() },
		validateUpdate: func(_, _ runtime.Object) field.ErrorList { return invalid() },
		validateStatus: func(_, _ runtime.Object) field.ErrorList { return invalid() },
		typeConverter:  managedfields.NewDeducedTypeConverter(),
	}
}

func sameUnstructured(obj, old runtime.Object) field.ErrorList {
	_, ok := obj.(*unstructured.Unstructured)
	_, ok2 := old.(*unstructured.Unstructured)
	if !ok || !ok2 {
		return field.ErrorList{field.InternalError(nil, fmt.Errorf("%T and %T are not both custom objects", obj, old))}
	}
	return nil
}

// customScale reads and writes the replicas at the CRD's JSON paths
// (".spec.replicas"), and its label selector as the string it is stored as.
func customScale(sc *apiextensions.CustomResourceSubresourceScale) *Scale {
	path := func(p string) []string { return strings.Split(strings.TrimPrefix(p, "."), ".") }
	return &Scale{
		Replicas: func(obj runtime.Object) (spec, status int32, selector *metav1.LabelSelector) {
			u := obj.(*unstructured.Unstructured)
			if n, ok, _ := unstructured.NestedInt64(u.Object, path(sc.SpecReplicasPath)...); ok {
				spec = int32(n)
			}
			if n, ok, _ := unstructured.NestedInt64(u.Object, path(sc.StatusReplicasPath)...); ok {
				status = int32(n)
			}
			if sc.LabelSelectorPath != nil {
				if s, ok, _ := unstructured.NestedString(u.Object, path(*sc.LabelSelectorPath)...); ok {
					selector, _ = metav1.ParseToLabelSelector(s)
				}
			}
			return spec, status, selector
		},
		SetReplicas: func(obj runtime.Object, n int32) {
			u := obj.(*unstructured.Unstructured)
			_ = unstructured.SetNestedField(u.Object, int64(n), path(sc.SpecReplicasPath)...)
		},
	}
}
