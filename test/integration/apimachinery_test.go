package integration

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	svmv1 "k8s.io/api/storagemigration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// Upstream's API chunking conformance spec: a continue token whose
// revision is compacted away is a 410 carrying an inconsistent continue
// token, which lists the rest of the list (from where the first page
// stopped) at a newer revision, and the pages after it at that revision.
func TestListContinueAfterCompaction(t *testing.T) {
	s := startServer(t, "--etcd-compaction-interval=1s")
	cs := s.client()
	ctx := ctxT(t)
	const total, limit = 30, 10
	ns := "chunking"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < total; i++ {
		pt := &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("template-%04d", i)},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}}
		if _, err := cs.CoreV1().PodTemplates(ns).Create(ctx, pt, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	client := cs.CoreV1().PodTemplates(ns)
	first, err := client.List(ctx, metav1.ListOptions{Limit: limit})
	if err != nil || first.Continue == "" {
		t.Fatalf("first page: %v %+v", err, first.ListMeta)
	}
	var inconsistent string
	waitWithin(t, 30*time.Second, "the continue token to expire", func() bool {
		// Writes move the revision on, so that compaction passes the
		// first page's revision.
		_, _ = cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "tick-"}}, metav1.CreateOptions{})
		_, err := client.List(ctx, metav1.ListOptions{Limit: limit, Continue: first.Continue})
		if err == nil {
			time.Sleep(200 * time.Millisecond)
			return false
		}
		if !apierrors.IsResourceExpired(err) {
			t.Fatalf("expired continue: want 410, got %v", err)
		}
		inconsistent = err.(apierrors.APIStatus).Status().ListMeta.Continue
		if inconsistent == "" {
			t.Fatalf("410 without an inconsistent continue token: %v", err)
		}
		return true
	})
	found := limit
	opts := metav1.ListOptions{Limit: limit, Continue: inconsistent}
	var rv string
	for page := 0; ; page++ {
		list, err := client.List(ctx, opts)
		if err != nil {
			t.Fatalf("page %d after the inconsistent token: %v", page, err)
		}
		if page == 0 {
			if list.ResourceVersion == first.ResourceVersion {
				t.Fatalf("inconsistent continuation at the compacted revision %s", first.ResourceVersion)
			}
			rv = list.ResourceVersion
		} else if list.ResourceVersion != rv {
			t.Fatalf("page %d at %s, want %s", page, list.ResourceVersion, rv)
		}
		if list.Continue != "" && (list.RemainingItemCount == nil || int(*list.RemainingItemCount)+len(list.Items)+found != total) {
			t.Fatalf("page %d: remainingItemCount %v with %d items after %d", page, list.RemainingItemCount, len(list.Items), found)
		}
		for _, item := range list.Items {
			if want := fmt.Sprintf("template-%04d", found); item.Name != want {
				t.Fatalf("page %d: got %s, want %s", page, item.Name, want)
			}
			found++
		}
		if list.Continue == "" {
			break
		}
		opts.Continue = list.Continue
	}
	if found != total {
		t.Fatalf("listed up to %d of %d", found, total)
	}
}

// rawWithWarnings sends a request with the admin credentials and returns
// the status code, the body and the Warning headers.
func rawWithWarnings(t *testing.T, s *testServer, method, path, contentType string, body []byte) (int, string, []string) {
	t.Helper()
	hc, err := rest.HTTPClientFor(s.config)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(method, s.config.Host+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data), resp.Header.Values("Warning")
}

// Upstream's FieldValidation conformance spec: duplicate fields of a
// custom object are found under fieldValidation=Strict (and warned of
// under Warn) even where its schema preserves unknown fields, in an apply
// configuration (YAML, with upstream's "line N: key ... already set"), a
// created object and a merge patch.
func TestFieldValidationCRDuplicates(t *testing.T) {
	s := startServer(t)
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "noxus.dup.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "dup.example.com", Scope: apiextensionsv1.ClusterScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "noxus", Singular: "noxu", Kind: "Noxu", ListKind: "NoxuList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": {
						Type: "object", XPreserveUnknownFields: ptr.To(true),
						Properties: map[string]apiextensionsv1.JSONSchemaProps{"foo": {Type: "string"}},
					}},
				}}}},
		},
	}
	createEstablished(t, s, crd)
	base := "/apis/dup.example.com/v1/noxus"
	applyYAML := []byte(`
apiVersion: dup.example.com/v1
kind: Noxu
metadata:
  name: applied
spec:
  unknown: uk1
  foo: foo1
  foo: foo2
`)
	code, body, _ := rawWithWarnings(t, s, "PATCH", base+"/applied?fieldManager=mgr&fieldValidation=Strict", "application/apply-patch+yaml", applyYAML)
	if code != 400 || !strings.Contains(body, `line 9: key \"foo\" already set in map`) {
		t.Fatalf("strict apply with a duplicate: %d %s", code, body)
	}
	code, body, warnings := rawWithWarnings(t, s, "PATCH", base+"/applied?fieldManager=mgr&fieldValidation=Warn", "application/apply-patch+yaml", applyYAML)
	if code != 201 || !strings.Contains(strings.Join(warnings, "\n"), `line 9: key \"foo\" already set in map`) {
		t.Fatalf("apply with a duplicate under Warn: %d %s, warnings %q", code, body, warnings)
	}

	created := []byte(`{"apiVersion":"dup.example.com/v1","kind":"Noxu","metadata":{"name":"created"},"spec":{"unknown":"uk1","foo":"foo1","foo":"foo2"}}`)
	code, body, _ = rawWithWarnings(t, s, "POST", base+"?fieldValidation=Strict", "application/json", created)
	if code != 400 || !strings.Contains(body, `duplicate field \"spec.foo\"`) {
		t.Fatalf("strict create with a duplicate: %d %s", code, body)
	}

	patch := []byte(`{"spec":{"foo":"a","foo":"b"}}`)
	code, body, _ = rawWithWarnings(t, s, "PATCH", base+"/applied?fieldValidation=Strict", "application/merge-patch+json", patch)
	if code != 422 || !strings.Contains(body, `duplicate field \"spec.foo\"`) {
		t.Fatalf("strict merge patch with a duplicate: %d %s", code, body)
	}
	code, body, warnings = rawWithWarnings(t, s, "PATCH", base+"/applied?fieldValidation=Warn", "application/merge-patch+json", patch)
	if code != 200 || !strings.Contains(strings.Join(warnings, "\n"), `duplicate field`) {
		t.Fatalf("merge patch with a duplicate under Warn: %d %s, warnings %q", code, body, warnings)
	}
}

// Upstream's garbage collector conformance spec: three pods owning each
// other in a circle, every reference blocking; deleting one in the
// foreground deletes all three.
func TestGarbageCollectorDependencyCircle(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	pods := cs.CoreV1().Pods("default")
	var made []*corev1.Pod
	for _, name := range []string{"pod1", "pod2", "pod3"} {
		p, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		made = append(made, p)
	}
	// pod1 is owned by pod3, pod2 by pod1, pod3 by pod2.
	for i, p := range made {
		owner := made[(i+2)%3]
		patch := fmt.Sprintf(`{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"Pod","name":"%s","uid":"%s","controller":true,"blockOwnerDeletion":true}]}}`, owner.Name, owner.UID)
		if _, err := pods.Patch(ctx, p.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := pods.Delete(ctx, "pod1", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground),
		Preconditions: metav1.NewUIDPreconditions(string(made[0].UID))}); err != nil {
		t.Fatal(err)
	}
	waitWithin(t, 60*time.Second, "the circle of pods to be collected", func() bool {
		list, err := pods.List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 0
	})
}

// A StorageVersionMigration is served with its status subresource and
// carried out: after a CRD's storage version changes, every custom object
// is rewritten (stored again, so its resourceVersion moves), the
// migration ends Succeeded with Running False, and the CRD's
// storedVersions is left with the new storage version alone. Invalid
// migrations are refused and the spec is immutable.
func TestStorageVersionMigration(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	svms := cs.StoragemigrationV1().StorageVersionMigrations()
	if _, err := svms.Create(ctx, &svmv1.StorageVersionMigration{ObjectMeta: metav1.ObjectMeta{Name: "bad"},
		Spec: svmv1.StorageVersionMigrationSpec{Resource: metav1.GroupResource{Resource: "Not_A_Label"}}}, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("invalid resource: want 422, got %v", err)
	}

	crd := widgetCRD()
	createEstablished(t, s, crd)
	dyn := s.dynamic()
	v1 := dyn.Resource(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}).Namespace("default")
	before := map[string]string{}
	for i := 0; i < 3; i++ {
		w, err := v1.Create(ctx, widget(fmt.Sprintf("w-%d", i), map[string]interface{}{"size": int64(2)}), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		before[w.GetName()] = w.GetResourceVersion()
	}
	crds := s.crdClient().ApiextensionsV1().CustomResourceDefinitions()
	cur, err := crds.Get(ctx, crd.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range cur.Spec.Versions {
		cur.Spec.Versions[i].Storage = cur.Spec.Versions[i].Name == "v1beta1"
	}
	if _, err := crds.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "both versions stored", func() bool {
		c, err := crds.Get(ctx, crd.Name, metav1.GetOptions{})
		return err == nil && len(c.Status.StoredVersions) == 2
	})

	if _, err := svms.Create(ctx, &svmv1.StorageVersionMigration{ObjectMeta: metav1.ObjectMeta{Name: "widgets"},
		Spec: svmv1.StorageVersionMigrationSpec{Resource: metav1.GroupResource{Group: "example.com", Resource: "widgets"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var done *svmv1.StorageVersionMigration
	waitWithin(t, 30*time.Second, "the migration to succeed", func() bool {
		got, err := svms.Get(ctx, "widgets", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if meta.IsStatusConditionTrue(got.Status.Conditions, string(svmv1.MigrationFailed)) {
			t.Fatalf("migration failed: %+v", got.Status)
		}
		done = got
		return meta.IsStatusConditionTrue(got.Status.Conditions, string(svmv1.MigrationSucceeded)) &&
			meta.IsStatusConditionFalse(got.Status.Conditions, string(svmv1.MigrationRunning))
	})
	if done.Status.ResourceVersion == "" {
		t.Fatalf("no checkpoint resourceVersion: %+v", done.Status)
	}
	for name, rv := range before {
		w, err := v1.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if w.GetResourceVersion() == rv {
			t.Errorf("%s not stored again (resourceVersion still %s)", name, rv)
		}
	}
	c, err := crds.Get(ctx, crd.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Status.StoredVersions; len(got) != 1 || got[0] != "v1beta1" {
		t.Errorf("storedVersions after the migration: %v, want [v1beta1]", got)
	}

	// The spec is immutable.
	done.Spec.Resource.Resource = "gadgets"
	if _, err := svms.Update(ctx, done, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("spec update: want 422, got %v", err)
	}
	// kubectl's columns.
	if out := s.mustKubectl("get", "storageversionmigrations", "widgets"); !strings.Contains(out, "RESOURCE") || !strings.Contains(out, "widgets.example.com") || !strings.Contains(out, "Succeeded") {
		t.Fatalf("kubectl get:\n%s", out)
	}
}
