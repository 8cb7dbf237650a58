package openapi

import (
	"encoding/json"
	"reflect"
	"strings"
)

// schema is the subset of an OpenAPI v3 Schema Object that the documents
// use. It is a struct rather than a map so that encoding is cheap and the
// key order is fixed (fields are declared in the alphabetical order upstream
// documents use, which also keeps the output, and so the hash, stable).
//
// Every *schema in the component table is owned by exactly one place in the
// tree: annotation passes mutate property schemas in place, so a schema must
// never be shared between two properties.
type schema struct {
	Ref                  string             `json:"$ref,omitempty"`
	AdditionalProperties *schema            `json:"additionalProperties,omitempty"`
	AllOf                []*schema          `json:"allOf,omitempty"`
	Default              any                `json:"default,omitempty"`
	Description          string             `json:"description,omitempty"`
	Format               string             `json:"format,omitempty"`
	Items                *schema            `json:"items,omitempty"`
	OneOf                []*schema          `json:"oneOf,omitempty"`
	Properties           map[string]*schema `json:"properties,omitempty"`
	Required             []string           `json:"required,omitempty"`
	Type                 string             `json:"type,omitempty"`
	UniqueItems          bool               `json:"uniqueItems,omitempty"`
	GVK                  []gvk              `json:"x-kubernetes-group-version-kind,omitempty"`
	IntOrString          bool               `json:"x-kubernetes-int-or-string,omitempty"`
	ListMapKeys          []string           `json:"x-kubernetes-list-map-keys,omitempty"`
	ListType             string             `json:"x-kubernetes-list-type,omitempty"`
	MapType              string             `json:"x-kubernetes-map-type,omitempty"`
	PatchMergeKey        string             `json:"x-kubernetes-patch-merge-key,omitempty"`
	PatchStrategy        string             `json:"x-kubernetes-patch-strategy,omitempty"`

	// v2Type is the type of a OneOf schema in the Swagger 2.0 document,
	// which has no oneOf (see toV2).
	v2Type string
}

// gvk is the value of x-kubernetes-group-version-kind. All three keys are
// always written, group included when empty: kubectl explain matches the
// operation's GVK object against the entries of the schema's GVK list with
// reflect.DeepEqual on the decoded maps, so both must have the same keys.
type gvk struct {
	Group   string `json:"group"`
	Kind    string `json:"kind"`
	Version string `json:"version"`
}

const refPrefix = "#/components/schemas/"

func refTo(name string) *schema { return &schema{Ref: refPrefix + name} }

// Interfaces implemented by apimachinery types whose wire form is not their
// Go structure (Time, MicroTime, Duration, Quantity, IntOrString). They are
// what upstream's generator keys on too, so mapping through them keeps this
// package right for any such type without a hand-kept list.
type (
	openAPITypeFormat interface {
		OpenAPISchemaType() []string
		OpenAPISchemaFormat() string
	}
	openAPIV3OneOf interface {
		OpenAPIV3OneOfTypes() []string
	}
	modelNamer interface{ OpenAPIModelName() string }
	swaggerDoc interface{ SwaggerDoc() map[string]string }
)

var (
	typeFormatType  = reflect.TypeFor[openAPITypeFormat]()
	oneOfType       = reflect.TypeFor[openAPIV3OneOf]()
	modelNamerType  = reflect.TypeFor[modelNamer]()
	swaggerDocType  = reflect.TypeFor[swaggerDoc]()
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	byteSliceType   = reflect.TypeFor[[]byte]()
)

// typeDocs are the type descriptions of apimachinery types that have no
// generated SwaggerDoc method (their doc comments, shortened).
var typeDocs = map[string]string{
	"io.k8s.apimachinery.pkg.apis.meta.v1.Time":       "Time is a wrapper around time.Time which supports correct marshaling to YAML and JSON.  Wrappers are provided for many of the factory methods that the time package offers.",
	"io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime":  "MicroTime is version of Time with microsecond level precision.",
	"io.k8s.apimachinery.pkg.apis.meta.v1.Duration":   "Duration is a wrapper around time.Duration which supports correct marshaling to YAML and JSON. In particular, it marshals into strings, which can be used as map keys in json.",
	"io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1":   "FieldsV1 stores a set of fields in a data structure like a Trie, in JSON format.\n\nThe exact format is defined in sigs.k8s.io/structured-merge-diff",
	"io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent": "Event represents a single event to a watched resource.",
	"io.k8s.apimachinery.pkg.runtime.RawExtension":    "RawExtension is used to hold extensions in external versions. On the wire it is the embedded object itself.",
	"io.k8s.apimachinery.pkg.util.intstr.IntOrString": "IntOrString is a type that can hold an int32 or a string.  When used in JSON or YAML marshalling and unmarshalling, it produces or consumes the inner type.  This allows you to have, for example, a JSON field that can accept a name or number.",
	"io.k8s.apimachinery.pkg.api.resource.Quantity":   "Quantity is a fixed-point representation of a number. It provides convenient marshaling/unmarshaling in JSON and YAML, in addition to String() and AsInt64() accessors. It is written as a number with an optional binary (Ki, Mi, Gi, Ti, Pi, Ei), decimal (m, k, M, G, T, P, E) or exponent (e3, E6) suffix, e.g. 100m, 1.5, 128Mi, 2e3.",
}

// fieldDocs fill in field descriptions the generated SwaggerDoc lacks.
var fieldDocs = map[string]map[string]string{
	"io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent": {
		"object": "Object is:\n * If Type is Added or Modified: the new state of the object.\n * If Type is Deleted: the state of the object immediately before deletion.\n * If Type is Error: *Status is recommended; other types may make sense\n   depending on context.",
	},
}

// builder turns Go types into component schemas by reflection. It is not
// safe for concurrent use; one builder makes all documents of a Handler so
// that each Go type is walked once however many documents refer to it.
type builder struct {
	// components maps a model name to its schema. A name is entered before
	// its fields are walked, which is what ends recursion on cyclic types.
	components map[string]*schema
	// names caches model names and, by being filled in order, also tells
	// which reflect.Type each component came from.
	names map[reflect.Type]string
	types map[string]reflect.Type
}

func newBuilder() *builder {
	return &builder{
		components: map[string]*schema{},
		names:      map[reflect.Type]string{},
		types:      map[string]reflect.Type{},
	}
}

// modelName is the component name of a named struct type: its
// OpenAPIModelName when it has one (every k8s.io/api and apimachinery type
// does), else the upstream REST-friendly form of the package path, e.g.
// k8s.io/api/apps/v1.Deployment -> io.k8s.api.apps.v1.Deployment.
func (b *builder) modelName(t reflect.Type) string {
	if n, ok := b.names[t]; ok {
		return n
	}
	var n string
	if t.Implements(modelNamerType) {
		n = reflect.Zero(t).Interface().(modelNamer).OpenAPIModelName()
	} else {
		n = restFriendlyName(t.PkgPath() + "." + t.Name())
	}
	b.names[t] = n
	return n
}

// restFriendlyName reverses the host part of a Go package path:
// "k8s.io/api/core/v1.Pod" -> "io.k8s.api.core.v1.Pod".
func restFriendlyName(name string) string {
	nameParts := strings.Split(name, "/")
	if len(nameParts) > 0 && strings.Contains(nameParts[0], ".") {
		parts := strings.Split(nameParts[0], ".")
		for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
			parts[i], parts[j] = parts[j], parts[i]
		}
		nameParts[0] = strings.Join(parts, ".")
	}
	return strings.Join(nameParts, ".")
}

// component makes sure the named struct type t has a component schema and
// returns its name.
func (b *builder) component(t reflect.Type) string {
	name := b.modelName(t)
	if _, ok := b.components[name]; ok {
		return name
	}
	s := &schema{}
	b.components[name] = s // before walking fields: ends cycles
	b.types[name] = t

	docs := docsOf(t)
	s.Description = docs[""]
	if s.Description == "" {
		s.Description = typeDocs[name]
	}

	switch {
	case t.Implements(oneOfType) && t.Implements(typeFormatType):
		// Upstream's v3 form for Quantity and IntOrString: a oneOf of the
		// JSON types accepted, plus the v2 format (int-or-string).
		for _, typ := range reflect.Zero(t).Interface().(openAPIV3OneOf).OpenAPIV3OneOfTypes() {
			s.OneOf = append(s.OneOf, &schema{Type: typ})
		}
		tf := reflect.Zero(t).Interface().(openAPITypeFormat)
		s.Format = tf.OpenAPISchemaFormat()
		// Swagger 2.0 has no oneOf: upstream's v2 form is the single
		// OpenAPISchemaType (string, for both) with the same format.
		if ts := tf.OpenAPISchemaType(); len(ts) > 0 {
			s.v2Type = ts[0]
		}
		// The CRD structural-schema marker for the same thing; consumers
		// that convert OpenAPI to structured-merge-diff schemas understand
		// it, and it costs nothing to those that don't.
		if s.Format == "int-or-string" {
			s.IntOrString = true
		}
	case t.Implements(typeFormatType):
		// Time, MicroTime, Duration: a plain string with a format.
		tf := reflect.Zero(t).Interface().(openAPITypeFormat)
		if ts := tf.OpenAPISchemaType(); len(ts) > 0 {
			s.Type = ts[0]
		}
		s.Format = tf.OpenAPISchemaFormat()
	default:
		s.Type = "object"
		var required []string
		b.addFields(s, t, docs, fieldDocs[name], &required)
		s.Required = required
	}
	return name
}

// docsOf returns the generated SwaggerDoc of t: "" is the type's
// description, other keys are JSON field names.
func docsOf(t reflect.Type) map[string]string {
	if t.Implements(swaggerDocType) {
		return reflect.Zero(t).Interface().(swaggerDoc).SwaggerDoc()
	}
	return nil
}

// addFields adds the JSON-visible fields of struct type t to s, following
// encoding/json's rules for names and embedding (inline structs are
// flattened into the parent, with their own SwaggerDoc).
func (b *builder) addFields(s *schema, t reflect.Type, docs, extraDocs map[string]string, required *[]string) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" && opts == "" {
			continue
		}
		if f.Anonymous && name == "" {
			et := f.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				b.addFields(s, et, docsOf(et), nil, required)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		omitEmpty := hasOpt(opts, "omitempty") || hasOpt(opts, "omitzero")
		desc := docs[name]
		if desc == "" {
			desc = extraDocs[name]
		}
		var p *schema
		if hasOpt(opts, "string") {
			// `json:",string"` puts a number or bool on the wire as a string.
			p = &schema{Type: "string", Description: desc}
		} else {
			p = b.fieldSchema(f.Type, desc, omitEmpty)
		}
		// Strategic merge patch metadata comes from the struct tags; it is
		// what client-side apply and kubectl edit need from the document.
		p.PatchStrategy = f.Tag.Get("patchStrategy")
		p.PatchMergeKey = f.Tag.Get("patchMergeKey")
		if p.PatchStrategy != "" || p.PatchMergeKey != "" {
			p = unwrapRefForExtensions(p)
		}
		if s.Properties == nil {
			s.Properties = map[string]*schema{}
		}
		s.Properties[name] = p
		// Upstream marks a field required unless it is omitempty, a
		// +required or +optional comment deciding over the tag; comments are
		// gone at run time, so requiredOverrides has the fields where they
		// change the outcome.
		req, ok := requiredOverrides[t.PkgPath()+"."+t.Name()][name]
		if !ok {
			req = !omitEmpty
		}
		if req {
			*required = append(*required, name)
		}
	}
}

// unwrapRefForExtensions makes sure a property that carries extensions is
// not a bare {$ref}: a $ref's siblings are ignored by OpenAPI 3.0 readers,
// so the ref goes into allOf as upstream does for refs with siblings.
func unwrapRefForExtensions(p *schema) *schema {
	if p.Ref == "" {
		return p
	}
	return &schema{AllOf: []*schema{{Ref: p.Ref}}}
}

func hasOpt(opts, want string) bool {
	for opts != "" {
		var o string
		o, opts, _ = strings.Cut(opts, ",")
		if o == want {
			return true
		}
	}
	return false
}

// fieldSchema is the schema of a struct field of type t.
func (b *builder) fieldSchema(t reflect.Type, desc string, omitEmpty bool) *schema {
	isPtr := false
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
		isPtr = true
	}
	var def any
	if !isPtr {
		def = zeroDefault(t, omitEmpty)
	}
	return withSiblings(b.typeSchema(t), desc, def)
}

// elemSchema is the schema of an array item or map value of type t.
// Upstream gives non-pointer struct items a default of {} and scalar items
// their zero value.
func (b *builder) elemSchema(t reflect.Type) *schema {
	isPtr := false
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
		isPtr = true
	}
	var def any
	if !isPtr {
		def = zeroDefault(t, false)
	}
	return withSiblings(b.typeSchema(t), "", def)
}

// withSiblings adds a description and default to s. A reference with
// siblings is wrapped in allOf, as upstream's v3 documents do; both kubectl
// explain and strategic merge patch (PatchMetaFromOpenAPIV3) resolve
// allOf[0].$ref as well as a bare $ref.
func withSiblings(s *schema, desc string, def any) *schema {
	if desc == "" && def == nil {
		return s
	}
	if s.Ref != "" {
		s = &schema{AllOf: []*schema{{Ref: s.Ref}}}
	}
	s.Description = desc
	s.Default = def
	return s
}

// zeroDefault is the default upstream records for a non-pointer field: what
// a decoder fills in when the field is absent, i.e. {} for structs and the
// zero value for scalars that are not omitempty. Types with their own
// UnmarshalJSON (Time, Quantity, IntOrString, RawExtension...) decode null
// and get none.
func zeroDefault(t reflect.Type, omitEmpty bool) any {
	if t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) {
		return nil
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Array, reflect.Interface:
		return nil
	case reflect.Struct:
		if t.NumField() == 1 && t.Field(0).Anonymous {
			return zeroDefault(t.Field(0).Type, omitEmpty)
		}
		return map[string]any{}
	case reflect.Bool:
		if !omitEmpty {
			return false
		}
	case reflect.String:
		if !omitEmpty {
			return ""
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		if !omitEmpty {
			return 0
		}
	}
	return nil
}

// typeSchema is the schema of a non-pointer type: a reference for structs,
// an inline schema for everything else. The result is always fresh.
func (b *builder) typeSchema(t reflect.Type) *schema {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == byteSliceType || (t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8) {
		return &schema{Type: "string", Format: "byte"}
	}
	switch t.Kind() {
	case reflect.Struct:
		if t.Name() == "" {
			// Anonymous struct: no name to refer to, so inline it.
			s := &schema{Type: "object"}
			var required []string
			b.addFields(s, t, nil, nil, &required)
			s.Required = required
			return s
		}
		return refTo(b.component(t))
	case reflect.Slice, reflect.Array:
		return &schema{Type: "array", Items: b.elemSchema(t.Elem())}
	case reflect.Map:
		return &schema{Type: "object", AdditionalProperties: b.elemSchema(t.Elem())}
	case reflect.Interface:
		return &schema{Type: "object"}
	}
	if tf, ok := scalarTypes[t.Kind()]; ok {
		return &schema{Type: tf[0], Format: tf[1]}
	}
	return &schema{}
}

// scalarTypes maps Go kinds to OpenAPI type and format as upstream does.
var scalarTypes = map[reflect.Kind][2]string{
	reflect.Bool:    {"boolean", ""},
	reflect.String:  {"string", ""},
	reflect.Int:     {"integer", "int32"},
	reflect.Int8:    {"integer", "byte"},
	reflect.Int16:   {"integer", "int32"},
	reflect.Int32:   {"integer", "int32"},
	reflect.Int64:   {"integer", "int64"},
	reflect.Uint:    {"integer", "int32"},
	reflect.Uint8:   {"integer", "byte"},
	reflect.Uint16:  {"integer", "int32"},
	reflect.Uint32:  {"integer", "int64"},
	reflect.Uint64:  {"integer", "int64"},
	reflect.Float32: {"number", "float"},
	reflect.Float64: {"number", "double"},
}

// refs appends the component names s refers to, directly.
func (s *schema) refs(out []string) []string {
	if s == nil {
		return out
	}
	if s.Ref != "" {
		out = append(out, strings.TrimPrefix(s.Ref, refPrefix))
	}
	out = s.AdditionalProperties.refs(out)
	out = s.Items.refs(out)
	for _, a := range s.AllOf {
		out = a.refs(out)
	}
	for _, a := range s.OneOf {
		out = a.refs(out)
	}
	for _, p := range s.Properties {
		out = p.refs(out)
	}
	return out
}
