package storage

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// A store of mixed versions keeps the apiVersion each object carries, on
// the way into etcd and out of it; any other JSON store labels every
// object with its stored kind (strategy None's conversion).
func TestCodecMixedVersions(t *testing.T) {
	v2 := schema.GroupVersionKind{Group: "example.com", Version: "v2", Kind: "Endpoint"}
	obj := func() *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]interface{}{"hostPort": "h:1"}}
		u.SetAPIVersion("example.com/v1")
		u.SetKind("Endpoint")
		u.SetName("a")
		return u
	}
	for keep, want := range map[bool]string{true: "example.com/v1", false: "example.com/v2"} {
		c := newCodec(v2, true, keep)
		data, err := c.encode(obj())
		if err != nil {
			t.Fatal(err)
		}
		out, err := c.decode(data, &unstructured.Unstructured{}, 7)
		if err != nil {
			t.Fatal(err)
		}
		u := out.(*unstructured.Unstructured)
		if u.GetAPIVersion() != want || u.GetResourceVersion() != "7" || u.Object["hostPort"] != "h:1" {
			t.Errorf("mixed versions %v: decoded %v, want apiVersion %s", keep, u.Object, want)
		}
	}
	// An object without a kind still gets the stored one.
	c := newCodec(v2, true, true)
	u := &unstructured.Unstructured{Object: map[string]interface{}{}}
	u.SetName("b")
	data, err := c.encode(u)
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.decode(data, &unstructured.Unstructured{}, 1)
	if err != nil || out.GetObjectKind().GroupVersionKind() != v2 {
		t.Errorf("kindless object: %v %v", out, err)
	}
}
