package openapi

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/applyconfigurations"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
)

// The // +listType, +listMapKey, +mapType and +structType markers that
// upstream turns into x-kubernetes-list-type & co. are Go comments, gone at
// run time. client-go carries them in another form: the structured-merge-
// diff schema of every built-in type that server-side apply uses
// (applyconfigurations/internal). That package is internal, but its parser
// is reachable through applyconfigurations.NewTypeConverter: converting any
// built-in object yields a TypedValue whose Schema() is the whole schema.
//
// Parsing it costs ~100 ms the first time in a process (sync.Once inside
// client-go, shared with server-side apply), which is why the Handler builds
// its documents in the background.

// loadListTypes returns the structured-merge-diff schema of the built-in
// types, or nil if it cannot be had (documents then carry the patch
// strategy tags only).
func loadListTypes() (s *smdschema.Schema) {
	defer func() {
		// internal.Parser panics on a malformed embedded schema; that must
		// not take the API server down for the sake of documentation.
		if recover() != nil {
			s = nil
		}
	}()
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		return nil
	}
	tc := applyconfigurations.NewTypeConverter(scheme)
	tv, err := tc.ObjectToTyped(&corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}})
	if err != nil {
		return nil
	}
	return tv.Schema()
}

// listTypesWithoutApply are the +listType markers of types that have no
// apply configuration, and so are not in client-go's schema, by component
// and property. Upstream's documents have them; without them the CRD
// builder's copy of such a type (apiextensions-apiserver's, generated)
// differs from the built-in document's, and merging the CRDs into
// /openapi/v2 would rename one of the two.
var listTypesWithoutApply = map[string]map[string]string{
	"io.k8s.apimachinery.pkg.apis.meta.v1.StatusDetails": {"causes": "atomic"},
}

// annotateListTypes copies list and map semantics from the structured-
// merge-diff schema onto the components of the same name.
//
// For lists without a +listType marker the schema says "atomic", which is
// also what the API server assumes for them; upstream leaves such lists
// unannotated. The two mean the same to every consumer.
func annotateListTypes(components map[string]*schema, smd *smdschema.Schema) {
	for name, props := range listTypesWithoutApply {
		for prop, listType := range props {
			if p := components[name].property(prop); p != nil && p.Type == "array" {
				p.ListType = listType
			}
		}
	}
	if smd == nil {
		return
	}
	for name, c := range components {
		td, ok := smd.FindNamedType(name)
		if !ok || td.Map == nil || c.Properties == nil {
			continue
		}
		if td.Map.ElementRelationship == smdschema.Atomic {
			c.MapType = "atomic"
		}
		for _, f := range td.Map.Fields {
			p := c.Properties[f.Name]
			if p == nil {
				continue
			}
			switch tr := f.Type; {
			case tr.Inlined.List != nil && p.Type == "array":
				l := tr.Inlined.List
				switch l.ElementRelationship {
				case smdschema.Atomic:
					p.ListType = "atomic"
				case smdschema.Associative:
					if len(l.Keys) > 0 {
						p.ListType = "map"
						p.ListMapKeys = append([]string(nil), l.Keys...)
					} else {
						p.ListType = "set"
					}
				}
			case tr.Inlined.Map != nil && p.Type == "object" && p.AdditionalProperties != nil:
				if tr.Inlined.Map.ElementRelationship == smdschema.Atomic {
					p.MapType = "atomic"
				}
			case tr.NamedType != nil && tr.ElementRelationship != nil:
				// A field-level +structType/+mapType override of a named type.
				if *tr.ElementRelationship == smdschema.Atomic {
					p = unwrapRefForExtensions(p)
					c.Properties[f.Name] = p
					p.MapType = "atomic"
				}
			}
		}
	}
}

// property returns the property name of s, or nil (also for a nil s).
func (s *schema) property(name string) *schema {
	if s == nil {
		return nil
	}
	return s.Properties[name]
}
