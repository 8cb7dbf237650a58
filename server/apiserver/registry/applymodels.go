package registry

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// objectMetaRef is where a kind's models find ObjectMeta.
const objectMetaRef = "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"

// applySchema is a CRD's apply models, as upstream's CRD handler has
// them: each version's schema as a Kubernetes kind (its structural schema,
// unfolded, with apiVersion, kind and ObjectMeta, the same on every
// embedded resource, and its group-version-kind), beside the metadata
// definitions they refer to. Upstream's handler takes them from each
// version's whole OpenAPI document; building that generates every
// apiextensions definition and the kind's REST routes, some 1.5 MB and
// 6 ms a CRD, every time a kind's write path is built. nil when the
// models do not convert, and fields are then deduced.
func applySchema(crd *apiextensionsv1.CustomResourceDefinition) managedfields.TypeConverter {
	shared, err := metaModels()
	if err != nil {
		return nil
	}
	models := maps.Clone(shared)
	for _, v := range crd.Spec.Versions {
		s, err := kindModel(crd, v.Name)
		if err != nil {
			return nil
		}
		models[modelName(crd.Spec.Group, v.Name, crd.Spec.Names.Kind)] = s
	}
	tc, err := managedfields.NewTypeConverter(models, crd.Spec.PreserveUnknownFields)
	if err != nil {
		return nil
	}
	return tc
}

// metaModels are the definitions every kind's models refer to: ObjectMeta
// and what it refers to, as upstream's OpenAPI builder has them. They are
// kept as JSON (objectmeta_models.json, which
// TestObjectMetaModelsAreUpstreams checks against the builder and
// rewrites with -update): the builder keeps every apiextensions
// definition it ever generated, 1.2 MB for the life of the process, to
// give these five.
var metaModels = sync.OnceValues(func() (map[string]*spec.Schema, error) {
	var models map[string]*spec.Schema
	if err := json.Unmarshal(objectMetaModels, &models); err != nil {
		return nil, err
	}
	if models[strings.TrimPrefix(objectMetaRef, "#/components/schemas/")] == nil {
		return nil, fmt.Errorf("no ObjectMeta among the models")
	}
	return models, nil
})

//go:embed objectmeta_models.json
var objectMetaModels []byte

// modelName is upstream's name of a kind's model: the group reversed
// ("com.example"), the version, the kind.
func modelName(group, version, kind string) string {
	parts := strings.Split(group, ".")
	slices.Reverse(parts)
	return strings.Join(parts, ".") + "." + version + "." + kind
}

// kindModel is one version's schema as a Kubernetes kind. A version with
// no schema, or one that is not structural, is an object of any fields.
func kindModel(crd *apiextensionsv1.CustomResourceDefinition, version string) (*spec.Schema, error) {
	ret := &spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"object"}}}
	val, err := apihelpers.GetSchemaForVersion(crd, version)
	if err != nil {
		return nil, err
	}
	if val != nil && val.OpenAPIV3Schema != nil {
		internal := &apiextensions.CustomResourceValidation{}
		if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(val, internal, nil); err != nil {
			return nil, err
		}
		if !validation.SchemaHasInvalidTypes(internal.OpenAPIV3Schema) {
			if ss, err := structuralschema.NewStructural(internal.OpenAPIV3Schema); err == nil && len(structuralschema.ValidateStructural(nil, ss)) == 0 {
				ret = ss.Unfold().ToKubeOpenAPI()
				addKindFields(ret)
				addEmbeddedKindFields(ret)
			}
		}
	}
	ret.AddExtension("x-kubernetes-group-version-kind", []interface{}{
		map[string]interface{}{"group": crd.Spec.Group, "version": version, "kind": crd.Spec.Names.Kind},
	})
	return ret, nil
}

// addKindFields gives s a kind's apiVersion, kind and metadata.
func addKindFields(s *spec.Schema) {
	s.SetProperty("apiVersion", *spec.StringProperty())
	s.SetProperty("kind", *spec.StringProperty())
	s.SetProperty("metadata", *spec.RefSchema(objectMetaRef))
}

// addEmbeddedKindFields gives every x-kubernetes-embedded-resource under
// s (s included) a kind's fields.
func addEmbeddedKindFields(s *spec.Schema) {
	if s == nil {
		return
	}
	for k, v := range s.Properties {
		addEmbeddedKindFields(&v)
		s.Properties[k] = v
	}
	if s.Items != nil {
		addEmbeddedKindFields(s.Items.Schema)
	}
	if s.AdditionalProperties != nil {
		addEmbeddedKindFields(s.AdditionalProperties.Schema)
	}
	if embedded, ok := s.Extensions.GetBool("x-kubernetes-embedded-resource"); ok && embedded {
		addKindFields(s)
	}
}
