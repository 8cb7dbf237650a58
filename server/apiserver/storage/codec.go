package storage

import (
	"bytes"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
)

// MaxObjectBytes caps one stored object, as etcd's request limit does
// upstream; the API server's 3 MiB body limit is checked before this.
const MaxObjectBytes = 1536 * 1024

// codec turns objects into the bytes kept in etcd: protobuf with the
// "k8s\x00" envelope, as kube-apiserver stores them. The resourceVersion is
// never stored: it is the etcd mod revision, set on every read.
type codec struct {
	gvk   schema.GroupVersionKind
	proto *protobuf.Serializer
}

func newCodec(gvk schema.GroupVersionKind) *codec {
	return &codec{gvk: gvk, proto: protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)}
}

func (c *codec) encode(obj runtime.Object) ([]byte, error) {
	acc, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	rv := acc.GetResourceVersion()
	acc.SetResourceVersion("")
	defer acc.SetResourceVersion(rv)
	obj.GetObjectKind().SetGroupVersionKind(c.gvk)
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
	obj.GetObjectKind().SetGroupVersionKind(c.gvk)
	if err := setRV(obj, rev); err != nil {
		return nil, err
	}
	return obj, nil
}

func setRV(obj runtime.Object, rev int64) error {
	acc, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	acc.SetResourceVersion(formatRV(rev))
	return nil
}
