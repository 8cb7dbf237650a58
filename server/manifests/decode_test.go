package manifests

import (
	"strings"
	"testing"
)

func TestDecode(t *testing.T) {
	cases := []struct {
		name, in string
		want     []string // Kind/name of each object
		err      string   // a part of the error, if one is expected
	}{
		{name: "one document", in: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n", want: []string{"ConfigMap/a"}},
		{name: "several documents, empty and comment-only ones skipped",
			in:   "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n# nothing\n---\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: b}\n",
			want: []string{"ConfigMap/a", "Secret/b"}},
		{name: "a List", in: "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: a}\n- apiVersion: v1\n  kind: ServiceAccount\n  metadata: {name: b, namespace: x}\n",
			want: []string{"ConfigMap/a", "ServiceAccount/b"}},
		{name: "a typed list", in: `{"apiVersion":"v1","kind":"ConfigMapList","items":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}]}`,
			want: []string{"ConfigMap/a"}},
		{name: "JSON stream", in: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}} {"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"b"}}`,
			want: []string{"ConfigMap/a", "ConfigMap/b"}},
		{name: "empty file", in: "", want: nil},
		{name: "no kind", in: "apiVersion: v1\nmetadata: {name: a}\n", err: "document 1: object \"a\": kind not set"},
		{name: "no apiVersion", in: "kind: ConfigMap\nmetadata: {name: a}\n", err: "apiVersion not set"},
		{name: "generateName only", in: "apiVersion: v1\nkind: ConfigMap\nmetadata: {generateName: a-}\n", err: "metadata.name not set"},
		{name: "bad YAML in the second document", in: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\nkind: [\n", err: "document 2"},
		{name: "a scalar", in: "hello\n", err: "not an object"},
		{name: "metadata of the wrong type", in: "apiVersion: v1\nkind: ConfigMap\nmetadata: 5\n", err: "metadata"},
		{name: "a bad list item", in: "apiVersion: v1\nkind: List\nitems:\n- 5\n", err: "List item 0: not an object"},
		{name: "a bad group version", in: "apiVersion: a/b/c\nkind: X\nmetadata: {name: a}\n", err: "unexpected GroupVersion"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			objs, err := Decode([]byte(c.in))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one with %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range objs {
				got = append(got, o.GetKind()+"/"+o.GetName())
			}
			if strings.Join(got, " ") != strings.Join(c.want, " ") {
				t.Errorf("objects %v, want %v", got, c.want)
			}
		})
	}
}

// Integers stay int64, which unstructured objects need (a float64 port
// would fail their deep copy and the apply's encoding as an int).
func TestDecodeKeepsIntegers(t *testing.T) {
	objs, err := Decode([]byte("apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec:\n  ports: [{port: 53}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	ports := objs[0].Object["spec"].(map[string]interface{})["ports"].([]interface{})
	if p, ok := ports[0].(map[string]interface{})["port"].(int64); !ok || p != 53 {
		t.Errorf("port %#v, want int64 53", ports[0])
	}
	objs[0].DeepCopy() // panics on a value of a type JSON does not make
}

// FuzzDecode: no input makes the decoder panic, and what it returns is
// always an object server-side apply can address.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata: {k: v}\n",
		"---\napiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: a}\n---\n",
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}`,
		`[1, 2, 3]`,
		"kind: [\n",
		"apiVersion: v1\nkind: List\nitems: [5, {kind: List, items: []}]\n",
		"a: &x [*x]\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: 7}\n",
	} {
		f.Add([]byte(seed))
	}
	for _, name := range Packaged() {
		data, _ := packagedFS.ReadFile("packaged/" + name + ".yaml")
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, err := Decode(data)
		if err != nil {
			return
		}
		for _, o := range objs {
			if o.GetAPIVersion() == "" || o.GetKind() == "" || o.GetName() == "" {
				t.Fatalf("decoded an object apply cannot address: %v", o.Object)
			}
			o.DeepCopy()
		}
	})
}
