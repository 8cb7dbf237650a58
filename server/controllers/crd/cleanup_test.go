package crd

import (
	"context"
	"errors"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdfake "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	crdinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/tools/cache"
)

var widgets = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}

func terminatingCRD() *apiextensionsv1.CustomResourceDefinition {
	now := metav1.Now()
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com", DeletionTimestamp: &now, Finalizers: []string{cleanupFinalizer}},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true}}},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{AcceptedNames: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Kind: "Widget"}},
	}
}

func widget(ns, name string, terminating bool) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("example.com/v1")
	u.SetKind("Widget")
	u.SetNamespace(ns)
	u.SetName(name)
	if terminating {
		now := metav1.Now()
		u.SetDeletionTimestamp(&now)
		u.SetFinalizers([]string{"example.com/hold"})
	}
	return u
}

// newTestCleanup is the controller over fake clients, its informer synced.
func newTestCleanup(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition, objs ...runtime.Object) (*cleanup, *crdfake.Clientset, *dynamicfake.FakeDynamicClient) {
	t.Helper()
	client := crdfake.NewSimpleClientset(crd)
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{widgets: "WidgetList"}, objs...)
	factory := crdinformers.NewSharedInformerFactory(client, 0)
	c := newCleanup(factory.Apiextensions().V1().CustomResourceDefinitions(), client.ApiextensionsV1(), dyn)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); factory.Shutdown(); c.queue.ShutDown() })
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), c.crds.Informer().HasSynced) {
		t.Fatal("CRD informer did not sync")
	}
	return c, client, dyn
}

// A terminating CRD loses its objects, in every namespace, and then its
// cleanup finalizer, so the API server can remove it.
func TestCleanupDeletesObjectsThenFinalizer(t *testing.T) {
	c, client, dyn := newTestCleanup(t, terminatingCRD(), widget("a", "w1", false), widget("b", "w2", false))
	ctx := context.Background()
	if err := c.sync(ctx, "widgets.example.com"); err != nil {
		t.Fatal(err)
	}
	left, err := dyn.Resource(widgets).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(left.Items) != 0 {
		t.Errorf("%d widgets left after cleanup", len(left.Items))
	}
	crd, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "widgets.example.com", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(crd.Finalizers) != 0 {
		t.Errorf("finalizers %v, want the cleanup finalizer removed", crd.Finalizers)
	}
}

// An object held by a finalizer of its own keeps the CRD's finalizer on
// until it is gone.
func TestCleanupWaitsForHeldObjects(t *testing.T) {
	c, client, _ := newTestCleanup(t, terminatingCRD(), widget("a", "held", true))
	ctx := context.Background()
	var h held
	if err := c.sync(ctx, "widgets.example.com"); !errors.As(err, &h) || h.n != 1 {
		t.Fatalf("sync: %v, want 1 object held (a delayed retry)", err)
	}
	crd, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "widgets.example.com", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(crd.Finalizers) != 1 || crd.Finalizers[0] != cleanupFinalizer {
		t.Errorf("finalizers %v while an object is still held, want %s kept", crd.Finalizers, cleanupFinalizer)
	}
}

// A CRD not being deleted is left alone, objects and all.
func TestCleanupLeavesLiveCRDs(t *testing.T) {
	crd := terminatingCRD()
	crd.DeletionTimestamp = nil
	c, _, dyn := newTestCleanup(t, crd, widget("a", "w1", false))
	ctx := context.Background()
	if err := c.sync(ctx, crd.Name); err != nil {
		t.Fatal(err)
	}
	left, err := dyn.Resource(widgets).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(left.Items) != 1 {
		t.Errorf("%d widgets left, want the live CRD's object kept", len(left.Items))
	}
}
