package manifests

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// Decode reads a manifest file: YAML documents separated by `---`, or a
// stream of JSON objects, each one object or a List of them (`kind: List`,
// or any `<Kind>List` with items). Empty documents are skipped. Any
// document that is not an object with apiVersion, kind and metadata.name
// fails the whole file: applying half a file would prune the objects of
// the other half, so a broken file leaves what it applied before as it is.
func Decode(data []byte) ([]*unstructured.Unstructured, error) {
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for doc := 1; ; doc++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("document %d: %w", doc, err)
		}
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
			continue
		}
		got, err := decodeObject(raw)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", doc, err)
		}
		objs = append(objs, got...)
	}
}

// decodeObject decodes one document; a list gives its items. It uses
// apimachinery's JSON (integers stay int64, as unstructured objects need)
// rather than UnstructuredJSONScheme, whose errors quote the whole
// document.
func decodeObject(raw []byte) ([]*unstructured.Unstructured, error) {
	var m map[string]interface{}
	if err := utiljson.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("not an object: %w", err)
	}
	o := &unstructured.Unstructured{Object: m}
	if !o.IsList() {
		if err := check(o); err != nil {
			return nil, err
		}
		return []*unstructured.Unstructured{o}, nil
	}
	if o.GetAPIVersion() == "" || o.GetKind() == "" {
		return nil, fmt.Errorf("a list without apiVersion or kind")
	}
	items, _ := m["items"].([]interface{})
	objs := make([]*unstructured.Unstructured, 0, len(items))
	for i, item := range items {
		im, ok := item.(map[string]interface{})
		if !ok {
			return nil, fmt.Errorf("%s item %d: not an object", o.GetKind(), i)
		}
		io := &unstructured.Unstructured{Object: im}
		if err := check(io); err != nil {
			return nil, fmt.Errorf("%s item %d: %w", o.GetKind(), i, err)
		}
		objs = append(objs, io)
	}
	return objs, nil
}

// check refuses what server-side apply cannot take: an object it cannot
// address. generateName makes a new object at each apply, so it is not
// enough.
func check(o *unstructured.Unstructured) error {
	// The accessors below return "" for fields of the wrong type, so the
	// types are checked first: a document with `metadata: 5` is an
	// error, not an object without a name.
	for _, f := range [][]string{{"apiVersion"}, {"kind"}, {"metadata", "name"}, {"metadata", "namespace"}} {
		if _, _, err := unstructured.NestedString(o.Object, f...); err != nil {
			return err
		}
	}
	what := o.GetKind()
	switch {
	case what == "":
		return fmt.Errorf("object %q: kind not set", o.GetName())
	case o.GetAPIVersion() == "":
		return fmt.Errorf("%s %q: apiVersion not set", what, o.GetName())
	case o.GetName() == "":
		return fmt.Errorf("%s: metadata.name not set (generateName cannot be applied)", what)
	case o.IsList():
		return fmt.Errorf("%s %q: a list inside a list", what, o.GetName())
	}
	if _, err := schema.ParseGroupVersion(o.GetAPIVersion()); err != nil {
		return fmt.Errorf("%s %q: %w", what, o.GetName(), err)
	}
	return nil
}
