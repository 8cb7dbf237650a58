package apiserver

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/kelp-project/kelp/embedded/etcd"
	"github.com/kelp-project/kelp/server/apiserver/registry"
	"github.com/kelp-project/kelp/server/apiserver/storage"
)

// hostPortWebhook converts as agnhost's crd-conversion-webhook does: v1's
// hostPort "h:p" is v2's host and port. fail makes it answer Failed.
type hostPortWebhook struct {
	reviews atomic.Int32
	objects atomic.Int32
	fail    atomic.Bool
}

func (h *hostPortWebhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var review apiextensionsv1.ConversionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, "bad review", http.StatusBadRequest)
		return
	}
	h.reviews.Add(1)
	resp := &apiextensionsv1.ConversionResponse{UID: review.Request.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
	if h.fail.Load() {
		resp.Result = metav1.Status{Status: metav1.StatusFailure, Message: "the webhook refuses"}
	}
	for _, raw := range review.Request.Objects {
		h.objects.Add(1)
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw.Raw); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		switch review.Request.DesiredAPIVersion {
		case "example.com/v2":
			if hp, ok := u.Object["hostPort"].(string); ok {
				host, port, _ := strings.Cut(hp, ":")
				delete(u.Object, "hostPort")
				u.Object["host"], u.Object["port"] = host, port
			}
		case "example.com/v1":
			host, _ := u.Object["host"].(string)
			port, _ := u.Object["port"].(string)
			delete(u.Object, "host")
			delete(u.Object, "port")
			u.Object["hostPort"] = host + ":" + port
		}
		u.SetAPIVersion(review.Request.DesiredAPIVersion)
		out, _ := u.MarshalJSON()
		resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: out})
	}
	review.Response, review.Request = resp, nil
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&review)
}

// conversionCRD is the conformance spec's CRD: v1 with hostPort, v2 with
// host and port, stored as storage.
func conversionCRD(url string, caBundle []byte, storage string) *apiextensionsv1.CustomResourceDefinition {
	version := func(name string, props ...string) apiextensionsv1.CustomResourceDefinitionVersion {
		p := map[string]apiextensionsv1.JSONSchemaProps{}
		for _, n := range props {
			p[n] = apiextensionsv1.JSONSchemaProps{Type: "string"}
		}
		return apiextensionsv1.CustomResourceDefinitionVersion{Name: name, Served: true, Storage: name == storage,
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: p}}}
	}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "endpoints.example.com", UID: "u1", Generation: 1},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names:    apiextensionsv1.CustomResourceDefinitionNames{Plural: "endpoints", Singular: "endpoint", Kind: "Endpoint", ListKind: "EndpointList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{version("v1", "hostPort"), version("v2", "host", "port")},
			Conversion: &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter,
				Webhook: &apiextensionsv1.WebhookConversion{ConversionReviewVersions: []string{"v1", "v1beta1"},
					ClientConfig: &apiextensionsv1.WebhookClientConfig{URL: ptr.To(url + "/convert"), CABundle: caBundle}}},
		},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{AcceptedNames: apiextensionsv1.CustomResourceDefinitionNames{Plural: "endpoints", Singular: "endpoint", Kind: "Endpoint", ListKind: "EndpointList"}},
	}
}

// conversionFixture is a webhook CRD's store (storage version v2) and its
// served versions, over a real etcd and a real HTTPS webhook.
type conversionFixture struct {
	hook     *hostPortWebhook
	etcd     *etcd.Etcd
	store    *storage.Store
	versions map[string]objectStore
}

func newConversionFixture(t *testing.T) *conversionFixture {
	t.Helper()
	hook := &hostPortWebhook{}
	ts := httptest.NewTLSServer(hook)
	t.Cleanup(ts.Close)
	caBundle := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw})
	crd := conversionCRD(ts.URL, caBundle, "v2")

	ctx, cancel := context.WithCancel(context.Background())
	e, err := etcd.Start(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); e.Close() })
	resources, err := registry.CustomResources(crd)
	if err != nil {
		t.Fatal(err)
	}
	conv, err := newWebhookConverterFactory(&Server{}).converter(crd)
	if err != nil {
		t.Fatal(err)
	}
	def, err := registry.CustomStorageDefaulter(crd, resources)
	if err != nil {
		t.Fatal(err)
	}
	storageGVK := schema.GroupVersionKind{Group: "example.com", Version: "v2", Kind: "Endpoint"}
	st, err := storage.New(ctx, storage.Config{Client: e.Client, Resource: resources[0].GroupResource(), Prefix: resources[0].Prefix(),
		Kind: storageGVK, NewFunc: func() runtime.Object { return &unstructured.Unstructured{Object: map[string]interface{}{}} },
		Attrs: resources[0].Attrs, JSON: true, Decoded: storedDefaulter(storageGVK, def), MixedVersions: true})
	if err != nil {
		t.Fatal(err)
	}
	f := &conversionFixture{hook: hook, etcd: e, store: st, versions: map[string]objectStore{}}
	for _, r := range resources {
		f.versions[r.GVR.Version] = newWebhookVersionStore(st, conv, r.GVK(), storageGVK, r.Default)
	}
	return f
}

func endpointObject(version, name string, fields map[string]interface{}) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "example.com/" + version, "kind": "Endpoint",
		"metadata": map[string]interface{}{"name": name, "namespace": "ns", "uid": "uid-" + name}}}
	for k, v := range fields {
		u.Object[k] = v
	}
	return u
}

// storedAPIVersion is the apiVersion in etcd's bytes for the object.
func (f *conversionFixture) storedAPIVersion(t *testing.T, name string) string {
	t.Helper()
	resp, err := f.etcd.Client.Get(context.Background(), f.store.Key("ns", name))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("etcd get %s: %v", name, err)
	}
	var stored struct {
		APIVersion string `json:"apiVersion"`
	}
	if err := json.Unmarshal(resp.Kvs[0].Value, &stored); err != nil {
		t.Fatal(err)
	}
	return stored.APIVersion
}

// Objects written through v1 are stored converted to v2; objects stored in
// v1 before the storage version changed stay v1 in etcd and are converted
// by the webhook on every read, a mixed list in one review.
func TestWebhookVersionStoreConverts(t *testing.T) {
	f := newConversionFixture(t)
	ctx := context.Background()

	// An object written while v1 was the storage version.
	raw, _ := endpointObject("v1", "old", map[string]interface{}{"hostPort": "old.example:80"}).MarshalJSON()
	if _, err := f.etcd.Client.Put(ctx, f.store.Key("ns", "old"), string(raw)); err != nil {
		t.Fatal(err)
	}
	// One created through v1 now: converted to the storage version.
	created, err := f.versions["v1"].Create(ctx, f.store.Key("ns", "new"), endpointObject("v1", "new", map[string]interface{}{"hostPort": "new.example:8080"}), false)
	if err != nil {
		t.Fatalf("create through v1: %v", err)
	}
	if got := created.(*unstructured.Unstructured); got.GetAPIVersion() != "example.com/v1" || got.Object["hostPort"] != "new.example:8080" {
		t.Errorf("create answered %v", got.Object)
	}
	if v := f.storedAPIVersion(t, "new"); v != "example.com/v2" {
		t.Errorf("created object stored as %q, want the storage version example.com/v2", v)
	}
	if v := f.storedAPIVersion(t, "old"); v != "example.com/v1" {
		t.Fatalf("old object stored as %q", v)
	}

	got, err := f.versions["v2"].Get(ctx, f.store.Key("ns", "old"))
	if err != nil {
		t.Fatalf("get v1-stored object through v2: %v", err)
	}
	if u := got.(*unstructured.Unstructured); u.GetAPIVersion() != "example.com/v2" || u.Object["host"] != "old.example" || u.Object["port"] != "80" || u.Object["hostPort"] != nil {
		t.Errorf("v2 of the old object: %v", u.Object)
	}

	for version, want := range map[string]func(*unstructured.Unstructured) bool{
		"v1": func(u *unstructured.Unstructured) bool { return u.Object["hostPort"] != nil && u.Object["host"] == nil },
		"v2": func(u *unstructured.Unstructured) bool { return u.Object["host"] != nil && u.Object["hostPort"] == nil },
	} {
		before := f.hook.reviews.Load()
		res, err := f.versions[version].List(ctx, storage.ListOptions{Namespace: "ns"})
		if err != nil {
			t.Fatalf("list through %s: %v", version, err)
		}
		if len(res.Items) != 2 {
			t.Fatalf("list through %s: %d items", version, len(res.Items))
		}
		for _, item := range res.Items {
			u := item.(*unstructured.Unstructured)
			if u.GetAPIVersion() != "example.com/"+version || !want(u) || u.GetResourceVersion() == "" {
				t.Errorf("list through %s: %v", version, u.Object)
			}
		}
		// One item is of the other version: one review for it.
		if n := f.hook.reviews.Load() - before; n != 1 {
			t.Errorf("list through %s: %d reviews, want 1", version, n)
		}
	}
	// The watch cache still holds the old object in v1: reads never
	// changed what is cached.
	deadline := time.Now().Add(5 * time.Second)
	for {
		cached, ok := f.store.Cached(f.store.Key("ns", "old"))
		if ok {
			if v := cached.GetObjectKind().GroupVersionKind().Version; v != "v1" {
				t.Errorf("cached old object in %s, want v1", v)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the old object never reached the watch cache")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A webhook that answers Failed: reads fail with upstream's 500 and the
// webhook's message, writes change nothing, watches end with the Status.
func TestWebhookVersionStoreFailure(t *testing.T) {
	f := newConversionFixture(t)
	ctx := context.Background()
	if _, err := f.versions["v2"].Create(ctx, f.store.Key("ns", "a"), endpointObject("v2", "a", map[string]interface{}{"host": "a", "port": "1"}), false); err != nil {
		t.Fatalf("create through the storage version needs no webhook: %v", err)
	}
	if f.hook.reviews.Load() != 0 {
		t.Errorf("%d reviews for a storage-version write", f.hook.reviews.Load())
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, ok := f.store.Cached(f.store.Key("ns", "a")); ok {
			break
		} else if time.Now().After(deadline) {
			t.Fatal("object a never reached the watch cache")
		}
	}
	w, err := f.versions["v1"].Watch(ctx, storage.ListOptions{Namespace: "ns", ResourceVersion: "0", SendInitialEvents: ptr.To(true), AllowBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	select {
	case ev := <-w.ResultChan():
		if u, ok := ev.Object.(*unstructured.Unstructured); ev.Type != watch.Added || !ok || u.Object["hostPort"] != "a:1" {
			t.Errorf("first watch event through v1: %s %v", ev.Type, ev.Object)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event")
	}
	// The initial events' bookmark is of the served kind and asks the
	// webhook nothing.
	reviews := f.hook.reviews.Load()
	select {
	case ev := <-w.ResultChan():
		if ev.Type != watch.Bookmark || ev.Object.GetObjectKind().GroupVersionKind().Version != "v1" {
			t.Errorf("second watch event through v1: %s %v", ev.Type, ev.Object)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no bookmark")
	}
	if n := f.hook.reviews.Load() - reviews; n != 0 {
		t.Errorf("%d reviews for a bookmark", n)
	}

	f.hook.fail.Store(true)
	_, err = f.versions["v1"].Get(ctx, f.store.Key("ns", "a"))
	var se *apierrors.StatusError
	if !errors.As(err, &se) || se.ErrStatus.Code != http.StatusInternalServerError ||
		!strings.Contains(se.ErrStatus.Message, "conversion webhook for example.com/v2, Kind=Endpoint failed: the webhook refuses") {
		t.Errorf("get through v1 with a failing webhook: %v", err)
	}
	if _, err := f.versions["v1"].Create(ctx, f.store.Key("ns", "b"), endpointObject("v1", "b", map[string]interface{}{"hostPort": "b:2"}), false); err == nil {
		t.Error("create through v1 with a failing webhook succeeded")
	}
	if _, err := f.store.Get(ctx, f.store.Key("ns", "b")); !apierrors.IsNotFound(err) {
		t.Errorf("object b after a failed conversion: %v", err)
	}
	if _, err := f.versions["v1"].List(ctx, storage.ListOptions{Namespace: "ns"}); err == nil {
		t.Error("list through v1 with a failing webhook succeeded")
	}
	// A change seen by the v1 watch cannot be converted: an error event
	// with the Status, then the watch ends.
	if _, _, err := f.versions["v2"].Update(ctx, f.store.Key("ns", "a"), func(cur runtime.Object) (runtime.Object, error) {
		u := cur.DeepCopyObject().(*unstructured.Unstructured)
		u.Object["port"] = "2"
		return u, nil
	}, false); err != nil {
		t.Fatalf("update through v2: %v", err)
	}
	select {
	case ev := <-w.ResultChan():
		if st, ok := ev.Object.(*metav1.Status); ev.Type != watch.Error || !ok || !strings.Contains(st.Message, "the webhook refuses") {
			t.Errorf("watch event after the webhook failed: %s %v", ev.Type, ev.Object)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no error event")
	}
	select {
	case _, open := <-w.ResultChan():
		if open {
			t.Error("the watch went on after its error event")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not end")
	}
}
