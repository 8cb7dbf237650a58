package storage

import (
	"bytes"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
)

// MaxObjectBytes caps one stored object, as etcd's request limit does
// upstream; the API server's 3 MiB body limit is checked before this.
const MaxObjectBytes = 1536 * 1024

// codec turns objects into the bytes kept in etcd: protobuf with the
// "k8s\x00" envelope, as kube-apiserver stores them, or JSON for custom
// objects, which have no protobuf form (upstream stores them as JSON too).
// The resourceVersion is never stored: it is the etcd mod revision, set on
// every read.
type codec struct {
	gvk   schema.GroupVersionKind
	proto runtime.Serializer
	// keepVersion: objects keep the version they carry (Config.MixedVersions).
	keepVersion bool
}

func newCodec(gvk schema.GroupVersionKind, jsonEncoded, keepVersion bool) *codec {
	if jsonEncoded {
		return &codec{gvk: gvk, proto: unstructuredJSON{}, keepVersion: keepVersion}
	}
	return &codec{gvk: gvk, proto: protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)}
}

// unstructuredJSON is apimachinery's JSON scheme for unstructured objects,
// which decodes into the object it is given rather than a new one.
type unstructuredJSON struct{}

func (unstructuredJSON) Encode(obj runtime.Object, w io.Writer) error {
	return unstructured.UnstructuredJSONScheme.Encode(obj, w)
}

func (unstructuredJSON) Decode(data []byte, gvk *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	return unstructured.UnstructuredJSONScheme.Decode(data, gvk, into)
}

func (unstructuredJSON) Identifier() runtime.Identifier { return "kelp-unstructured-json" }

func (c *codec) encode(obj runtime.Object) ([]byte, error) {
	acc, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	rv := acc.GetResourceVersion()
	acc.SetResourceVersion("")
	defer acc.SetResourceVersion(rv)
	c.setKind(obj)
	var buf bytes.Buffer
	if err := c.proto.Encode(obj, &buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func (c *codec) decode(data []byte, into runtime.Object, rev int64) (runtime.Object, error) {
	obj, _, err := c.proto.Decode(data, nil, into)
	if err != nil {
		return nil, fmt.Errorf("decoding stored %s: %w", c.gvk.Kind, err)
	}
	// Objects leave storage with their kind set: cached objects are shared
	// by every reader, and encoding them must not need to mutate them.
	c.setKind(obj)
	if err := setRV(obj, rev); err != nil {
		return nil, err
	}
	return obj, nil
}

// setKind labels obj with the stored kind, unless the codec keeps the
// version an object carries and it carries one.
func (c *codec) setKind(obj runtime.Object) {
	if c.keepVersion && !obj.GetObjectKind().GroupVersionKind().Empty() {
		return
	}
	obj.GetObjectKind().SetGroupVersionKind(c.gvk)
}

func setRV(obj runtime.Object, rev int64) error {
	acc, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	acc.SetResourceVersion(formatRV(rev))
	return nil
}
