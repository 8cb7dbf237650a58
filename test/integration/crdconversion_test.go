package integration

import (
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
)

// conversionWebhook converts as agnhost's crd-conversion-webhook (the
// conformance specs' webhook): v1's hostPort "h:p" is v2's host and port.
// It answers ConversionReview v1 and records what it was asked.
type conversionWebhook struct {
	mu      sync.Mutex
	asked   []string // "<desired apiVersion> <name>" per object
	reviews int
	fail    bool
}

func (h *conversionWebhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var review apiextensionsv1.ConversionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, "bad review", http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	h.reviews++
	fail := h.fail
	h.mu.Unlock()
	resp := &apiextensionsv1.ConversionResponse{UID: review.Request.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
	if fail {
		resp.Result = metav1.Status{Status: metav1.StatusFailure, Message: "conversion refused by the test"}
	}
	for _, raw := range review.Request.Objects {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw.Raw); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		h.mu.Lock()
		h.asked = append(h.asked, review.Request.DesiredAPIVersion+" "+u.GetName())
		h.mu.Unlock()
		if review.Request.DesiredAPIVersion == "example.com/v2" {
			if hp, ok := u.Object["hostPort"].(string); ok {
				host, port, _ := strings.Cut(hp, ":")
				delete(u.Object, "hostPort")
				u.Object["host"], u.Object["port"] = host, port
			}
		} else if host, ok := u.Object["host"].(string); ok {
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

func (h *conversionWebhook) wasAsked(s string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, a := range h.asked {
		if a == s {
			return true
		}
	}
	return false
}

func hostPortVersions(storage string) []apiextensionsv1.CustomResourceDefinitionVersion {
	version := func(name string, props ...string) apiextensionsv1.CustomResourceDefinitionVersion {
		p := map[string]apiextensionsv1.JSONSchemaProps{}
		for _, n := range props {
			p[n] = apiextensionsv1.JSONSchemaProps{Type: "string"}
		}
		return apiextensionsv1.CustomResourceDefinitionVersion{Name: name, Served: true, Storage: name == storage,
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: p}}}
	}
	return []apiextensionsv1.CustomResourceDefinitionVersion{version("v1", "hostPort"), version("v2", "host", "port")}
}

func hostPortObject(version, name string, fields map[string]interface{}) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "example.com/" + version, "kind": "HostPort",
		"metadata": map[string]interface{}{"name": name}}}
	for k, v := range fields {
		u.Object[k] = v
	}
	return u
}

// checkHostPorts lists through version and checks every object has that
// version's shape, as the conformance spec's verifyV1Object/verifyV2Object.
func checkHostPorts(t *testing.T, client dynamic.ResourceInterface, version string, want int) {
	t.Helper()
	list, err := client.List(ctxT(t), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list through %s: %v", version, err)
	}
	if len(list.Items) != want {
		t.Fatalf("list through %s: %d items, want %d", version, len(list.Items), want)
	}
	for _, u := range list.Items {
		ok := u.GetAPIVersion() == "example.com/"+version
		if version == "v1" {
			ok = ok && u.Object["hostPort"] == "localhost:8080" && u.Object["host"] == nil
		} else {
			ok = ok && u.Object["host"] == "localhost" && u.Object["port"] == "8080" && u.Object["hostPort"] == nil
		}
		if !ok {
			t.Errorf("list through %s: %v", version, u.Object)
		}
	}
}

// TestCRDConversionWebhook: a CRD converting by webhook (ConversionReview
// over HTTPS, its caBundle trusted) is read, listed, watched and written
// through each version; after its storage version changes, a list of
// objects stored in both versions converts each; a failing webhook is
// upstream's 500 with the webhook's message; all of it again after a
// restart, from what etcd holds.
func TestCRDConversionWebhook(t *testing.T) {
	s := startServer(t)
	ctx := ctxT(t)
	hook := &conversionWebhook{}
	ts := httptest.NewTLSServer(hook)
	t.Cleanup(ts.Close)
	caBundle := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw})
	url := ts.URL + "/crdconvert"

	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "hostports.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names:    apiextensionsv1.CustomResourceDefinitionNames{Plural: "hostports", Singular: "hostport", Kind: "HostPort", ListKind: "HostPortList"},
			Versions: hostPortVersions("v1"),
			Conversion: &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter,
				Webhook: &apiextensionsv1.WebhookConversion{ConversionReviewVersions: []string{"v1", "v1beta1"},
					ClientConfig: &apiextensionsv1.WebhookClientConfig{URL: &url, CABundle: caBundle}}},
		},
	}
	createEstablished(t, s, crd)
	clients := map[string]dynamic.ResourceInterface{}
	for _, v := range []string{"v1", "v2"} {
		clients[v] = s.dynamic().Resource(schema.GroupVersionResource{Group: "example.com", Version: v, Resource: "hostports"}).Namespace("default")
	}

	// A watch through v2 sees objects written through v1 converted.
	w, err := clients["v2"].Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := clients["v1"].Create(ctx, hostPortObject("v1", "cr-1", map[string]interface{}{"hostPort": "localhost:8080"}), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create through v1: %v", err)
	}
	select {
	case ev := <-w.ResultChan():
		u, ok := ev.Object.(*unstructured.Unstructured)
		if ev.Type != watch.Added || !ok || u.GetAPIVersion() != "example.com/v2" || u.Object["host"] != "localhost" || u.Object["port"] != "8080" {
			t.Errorf("watch through v2: %s %v", ev.Type, ev.Object)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no watch event through v2")
	}
	got, err := clients["v2"].Get(ctx, "cr-1", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get through v2: %v", err)
	}
	if got.Object["host"] != "localhost" || got.Object["port"] != "8080" || got.Object["hostPort"] != nil {
		t.Errorf("v2 of cr-1: %v", got.Object)
	}
	if !hook.wasAsked("example.com/v2 cr-1") {
		t.Error("the webhook was not asked for v2 of cr-1")
	}

	// The storage version becomes v2: cr-1 stays stored as v1.
	cur, err := s.crdClient().ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.Versions = hostPortVersions("v2")
	if _, err := s.crdClient().ApiextensionsV1().CustomResourceDefinitions().Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("changing the storage version: %v", err)
	}
	// Once v2 is stored, a write through v1 is converted to v2 for
	// storage: dry runs until the webhook is asked so.
	cr2 := hostPortObject("v1", "cr-2", map[string]interface{}{"hostPort": "localhost:8080"})
	for deadline := time.Now().Add(10 * time.Second); !hook.wasAsked("example.com/v2 cr-2"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("writes through v1 never converted to the new storage version v2")
		}
		_, _ = clients["v1"].Create(ctx, cr2, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	}
	if _, err := clients["v1"].Create(ctx, cr2, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create cr-2 through v1: %v", err)
	}
	checkHostPorts(t, clients["v1"], "v1", 2)
	checkHostPorts(t, clients["v2"], "v2", 2)

	// An update through v1 of the v1-stored object stores it as v2; the
	// list still reads the same.
	if _, err := clients["v1"].Patch(ctx, "cr-1", "application/merge-patch+json", []byte(`{"metadata":{"labels":{"touched":"yes"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("patch through v1: %v", err)
	}
	checkHostPorts(t, clients["v2"], "v2", 2)

	hook.mu.Lock()
	hook.fail = true
	hook.mu.Unlock()
	_, err = clients["v1"].Get(ctx, "cr-1", metav1.GetOptions{})
	if se, ok := err.(*apierrors.StatusError); !ok || se.ErrStatus.Code != http.StatusInternalServerError ||
		!strings.Contains(se.ErrStatus.Message, "conversion webhook for example.com/v2, Kind=HostPort failed: conversion refused by the test") {
		t.Errorf("get through v1 with a failing webhook: %v", err)
	}
	if _, err := clients["v2"].Get(ctx, "cr-1", metav1.GetOptions{}); err != nil {
		t.Errorf("get through the storage version needs no webhook: %v", err)
	}
	hook.mu.Lock()
	hook.fail = false
	hook.mu.Unlock()

	s.restart()
	for _, v := range []string{"v1", "v2"} {
		clients[v] = s.dynamic().Resource(schema.GroupVersionResource{Group: "example.com", Version: v, Resource: "hostports"}).Namespace("default")
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := clients["v1"].Get(ctx, "cr-2", metav1.GetOptions{}); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("cr-2 through v1 after a restart: %v", err)
		}
	}
	checkHostPorts(t, clients["v1"], "v1", 2)
	checkHostPorts(t, clients["v2"], "v2", 2)
}
