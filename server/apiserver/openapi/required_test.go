package openapi

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// upstreamRequiredOverrides reads the Go source of the API types (the
// module versions this package is built with) and returns, by Go type
// ("<package path>.<Name>") and JSON field name, the fields whose
// required-ness by upstream's rule (kube-openapi's openapi-gen isOptional:
// a +required or +optional comment decides, else omitempty) differs from
// what the json tag alone says (the rule addFields can apply at run time).
func upstreamRequiredOverrides(t *testing.T) map[string]map[string]bool {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-json", "k8s.io/api", "k8s.io/apimachinery").Output()
	if err != nil {
		t.Fatalf("cannot locate the k8s.io/api module sources (go mod download k8s.io/api): %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	mods := map[string]string{}
	for dec.More() {
		var m struct{ Path, Dir string }
		if err := dec.Decode(&m); err != nil {
			t.Fatal(err)
		}
		mods[m.Path] = m.Dir
	}
	// All of k8s.io/api, and the apimachinery packages its types use.
	roots := []struct{ mod, dir string }{
		{"k8s.io/api", ""},
		{"k8s.io/apimachinery", "pkg/apis/meta/v1"},
		{"k8s.io/apimachinery", "pkg/runtime"},
		{"k8s.io/apimachinery", "pkg/util/intstr"},
		{"k8s.io/apimachinery", "pkg/api/resource"},
	}
	res := map[string]map[string]bool{}
	for _, r := range roots {
		base := mods[r.mod]
		if base == "" {
			t.Fatalf("no source for %s (go mod download %s)", r.mod, r.mod)
		}
		recursive := r.dir == ""
		err := filepath.WalkDir(filepath.Join(base, r.dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if p != filepath.Join(base, r.dir) && (!recursive || d.Name() == "testdata") {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return nil
			}
			rel, _ := filepath.Rel(base, filepath.Dir(p))
			pkg := r.mod + "/" + filepath.ToSlash(rel)
			f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ParseComments)
			if err != nil {
				return err
			}
			for _, decl := range f.Decls {
				gd, ok := decl.(*ast.GenDecl)
				if !ok {
					continue
				}
				for _, spec := range gd.Specs {
					ts, ok := spec.(*ast.TypeSpec)
					if !ok {
						continue
					}
					st, ok := ts.Type.(*ast.StructType)
					if !ok {
						continue
					}
					for _, fld := range st.Fields.List {
						name, required, differs := fieldRule(fld)
						if !differs {
							continue
						}
						key := pkg + "." + ts.Name.Name
						if res[key] == nil {
							res[key] = map[string]bool{}
						}
						res[key][name] = required
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return res
}

// fieldRule applies upstream's rule to one struct field and reports
// whether it differs from the json-tag-only rule.
func fieldRule(fld *ast.Field) (name string, required, differs bool) {
	tag := ""
	if fld.Tag != nil {
		tag = reflect.StructTag(strings.Trim(fld.Tag.Value, "`")).Get("json")
	}
	name, opts, _ := strings.Cut(tag, ",")
	if name == "-" && opts == "" {
		return "", false, false
	}
	if len(fld.Names) == 0 {
		if name == "" {
			return "", false, false // inlined: its own type's fields count
		}
	} else {
		if len(fld.Names) != 1 || !fld.Names[0].IsExported() {
			return "", false, false
		}
		if name == "" {
			name = fld.Names[0].Name
		}
	}
	var optionalTag, requiredTag bool
	if fld.Doc != nil {
		for _, c := range fld.Doc.List {
			line := strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(c.Text, "//"), "/*"))
			key, ok := strings.CutPrefix(line, "+")
			if !ok {
				continue
			}
			key, _, _ = strings.Cut(key, "=")
			optionalTag = optionalTag || key == "optional"
			requiredTag = requiredTag || key == "required"
		}
	}
	upstream := !hasOpt(opts, "omitempty") // kube-openapi's hasOmitemptyTag
	switch {
	case requiredTag:
		upstream = true
	case optionalTag:
		upstream = false
	}
	ours := !(hasOpt(opts, "omitempty") || hasOpt(opts, "omitzero"))
	return name, upstream, upstream != ours
}

// TestRequiredOverridesMatchSource keeps requiredOverrides in step with the
// API types: on a k8s.io/api upgrade it fails and prints the new table.
func TestRequiredOverridesMatchSource(t *testing.T) {
	want := upstreamRequiredOverrides(t)
	if reflect.DeepEqual(want, requiredOverrides) {
		return
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if !reflect.DeepEqual(want[k], requiredOverrides[k]) {
			t.Errorf("%s: source says %v, table %v", k, want[k], requiredOverrides[k])
		}
	}
	for k := range requiredOverrides {
		if want[k] == nil {
			t.Errorf("%s: in the table, not in the source", k)
		}
	}
	var b strings.Builder
	b.WriteString("var requiredOverrides = map[string]map[string]bool{\n")
	for _, k := range slices.Sorted(maps.Keys(want)) {
		fmt.Fprintf(&b, "\t%q: {", k)
		for i, f := range slices.Sorted(maps.Keys(want[k])) {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%q: %v", f, want[k][f])
		}
		b.WriteString("},\n")
	}
	b.WriteString("}\n")
	if path := os.Getenv("WRITE_REQUIRED_OVERRIDES"); path != "" {
		os.WriteFile(path, []byte(b.String()), 0o644)
	}
	t.Logf("the table for required.go:\n%s", b.String())
}

// TestRequiredFollowsComments: fields that are +optional without omitempty
// are not required, in both document forms; kubectl's client-side
// validation (v2) would otherwise reject objects the API server accepts,
// e.g. a Role without rules.
func TestRequiredFollowsComments(t *testing.T) {
	rs := append(testResources(),
		Resource{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role", Plural: "roles", Namespaced: true, Verbs: allVerbs,
			Type: reflect.TypeOf(rbacv1.Role{}), ListType: reflect.TypeOf(rbacv1.RoleList{})},
		Resource{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBinding", Plural: "rolebindings", Namespaced: true, Verbs: allVerbs,
			Type: reflect.TypeOf(rbacv1.RoleBinding{}), ListType: reflect.TypeOf(rbacv1.RoleBindingList{})},
		Resource{Version: "v1", Kind: "Event", Plural: "events", Namespaced: true, Verbs: allVerbs,
			Type: reflect.TypeOf(corev1.Event{}), ListType: reflect.TypeOf(corev1.EventList{})})
	h := newTestHandlerV2(t, rs)
	h.Wait()
	v2 := dig(t, decode(t, h.v2.json.data), "definitions")
	v3 := dig(t, decode(t, h.docs["apis/rbac.authorization.k8s.io/v1"].data), "components", "schemas")
	for _, defs := range []any{v2, v3} {
		if r, ok := dig(t, defs, "io.k8s.api.rbac.v1.Role").(map[string]any)["required"]; ok {
			t.Errorf("Role required: %v", r)
		}
		if got := dig(t, defs, "io.k8s.api.rbac.v1.RoleRef", "required"); !reflect.DeepEqual(got, []any{"kind", "name"}) {
			t.Errorf("RoleRef required: %v", got)
		}
	}
	if got := dig(t, v2, "io.k8s.api.core.v1.Event", "required"); !reflect.DeepEqual(got, []any{"metadata", "involvedObject"}) {
		t.Errorf("Event required: %v", got)
	}
	if got := dig(t, v2, "io.k8s.api.core.v1.PodSpec", "required"); !reflect.DeepEqual(got, []any{"containers"}) {
		t.Errorf("PodSpec required: %v", got)
	}
	// +required with omitempty: required, as upstream.
	if got := dig(t, v2, "io.k8s.api.apps.v1.Deployment", "required"); !reflect.DeepEqual(got, []any{"spec"}) {
		t.Errorf("Deployment required: %v", got)
	}
}
