package integration

import (
	"regexp"
	"strings"
	"testing"
	"time"

	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func v2Definitions(t *testing.T, s *testServer) map[string]*openapi_v2.Schema {
	t.Helper()
	doc, err := s.client().Discovery().OpenAPISchema()
	if err != nil {
		t.Fatalf("OpenAPISchema: %v", err)
	}
	defs := map[string]*openapi_v2.Schema{}
	for _, d := range doc.GetDefinitions().GetAdditionalProperties() {
		defs[d.GetName()] = d.GetValue()
	}
	return defs
}

// A CRD's served versions are in /openapi/v2 once it is Established, as
// kube-apiserver publishes them: client-go's OpenAPISchema (protobuf)
// finds their definitions, kubectl explain reads them with
// --output=plaintext-openapiv2, and kubectl validates the custom objects
// of a `kind: List` against them on the client (an unknown field fails
// before anything is sent; fields under x-kubernetes-preserve-unknown-fields
// and in an embedded resource pass). A deleted CRD leaves the document.
func TestCRDOpenAPIV2(t *testing.T) {
	s := startServer(t)
	crd := widgetCRD()
	for i := range crd.Spec.Versions {
		props := crd.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"]
		props.Properties["extra"] = apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}
		props.Properties["template"] = apiextensionsv1.JSONSchemaProps{Type: "object", XEmbeddedResource: true, XPreserveUnknownFields: ptr.To(true)}
		crd.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"] = props
	}
	createEstablished(t, s, crd)

	defs := v2Definitions(t, s)
	for _, name := range []string{"com.example.v1.Widget", "com.example.v1.WidgetList", "com.example.v1beta1.Widget", "io.k8s.api.core.v1.Pod"} {
		if defs[name] == nil {
			t.Errorf("/openapi/v2 has no definition %s", name)
		}
	}
	if w := defs["com.example.v1.Widget"]; w != nil {
		var spec *openapi_v2.Schema
		for _, p := range w.GetProperties().GetAdditionalProperties() {
			if p.GetName() == "spec" {
				spec = p.GetValue()
			}
		}
		var names []string
		for _, p := range spec.GetProperties().GetAdditionalProperties() {
			names = append(names, p.GetName())
		}
		if got := strings.Join(names, ","); !strings.Contains(got, "color") || !strings.Contains(got, "size") {
			t.Errorf("com.example.v1.Widget's spec has properties %s", got)
		}
	}

	out := s.mustKubectl("explain", "widgets.spec", "--output=plaintext-openapiv2")
	for _, re := range []string{`KIND:\s+Widget`, `VERSION:\s+example.com/v1`, `(?m)^\s+color\s+<string>`, `(?m)^\s+size\s+<integer>`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("explain --output=plaintext-openapiv2 does not match %s:\n%s", re, out)
		}
	}

	const item = `
- apiVersion: example.com/v1
  kind: Widget
  metadata:
    name: %s
    namespace: default
  spec:
    size: 2
    extra: {anything: [1, 2]}
    template: {apiVersion: v1, kind: ConfigMap, metadata: {name: x}, whatever: true}
`
	list := func(items ...string) string { return "apiVersion: v1\nkind: List\nitems:" + strings.Join(items, "") }
	bad := list(strings.Replace(strings.Replace(item, "%s", "bad", 1), "size: 2", "size: 2\n    bogus: 1", 1))
	out, err := s.kubectlIn(bad, nil, "apply", "-f", "-")
	if err == nil || !strings.Contains(out, `unknown field "bogus"`) || !strings.Contains(out, "com.example.v1.Widget") {
		t.Errorf("a List with an unknown field in a Widget: %v\n%s", err, out)
	}
	if _, err := s.dynamic().Resource(widgetsV1).Namespace("default").Get(ctxT(t), "bad", metav1.GetOptions{}); err == nil {
		t.Error("the invalid Widget was created: it was not validated on the client")
	}
	good := list(strings.Replace(item, "%s", "good", 1))
	if out, err := s.kubectlIn(good, nil, "apply", "-f", "-"); err != nil || !strings.Contains(out, "widget.example.com/good created") {
		t.Errorf("a valid List: %v\n%s", err, out)
	}

	if err := s.crdClient().ApiextensionsV1().CustomResourceDefinitions().Delete(ctxT(t), crd.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := ctxT(t)
	for {
		defs := v2Definitions(t, s)
		if defs["com.example.v1.Widget"] == nil && defs["com.example.v1beta1.Widget"] == nil && defs["io.k8s.api.core.v1.Pod"] != nil {
			break
		}
		select {
		case <-deadline.Done():
			t.Fatal("the deleted CRD's definitions stay in /openapi/v2")
		case <-time.After(100 * time.Millisecond):
		}
	}
}
