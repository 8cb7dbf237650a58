package namespace

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"
)

var (
	configmaps  = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	pods        = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	deployments = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	metaListGVK = schema.GroupVersionKind{Group: "fake-metadata-client-group", Version: "v1"}
)

func partial(apiVersion, kind, ns, name string, finalizers ...string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: apiVersion, Kind: kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + ns + "-" + name), Finalizers: finalizers},
	}
}

// fakeDiscovery serves v1 configmaps (deletecollection), v1 pods (no
// deletecollection, so list+delete is used) with a subresource,
// cluster-scoped namespaces, and apps/v1 deployments.
func fakeDiscovery() *fakediscovery.FakeDiscovery {
	all := []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
	return &fakediscovery.FakeDiscovery{
		Fake: &clienttesting.Fake{
			Resources: []*metav1.APIResourceList{
				{
					GroupVersion: "v1",
					APIResources: []metav1.APIResource{
						{Name: "configmaps", Kind: "ConfigMap", Namespaced: true, Verbs: all},
						{Name: "pods", Kind: "Pod", Namespaced: true, Verbs: []string{"create", "delete", "get", "list", "watch"}},
						{Name: "pods/log", Kind: "Pod", Namespaced: true, Verbs: []string{"get"}},
						{Name: "namespaces", Kind: "Namespace", Namespaced: false, Verbs: all},
						{Name: "bindings", Kind: "Binding", Namespaced: true, Verbs: []string{"create"}},
					},
				},
				{
					GroupVersion: "apps/v1",
					APIResources: []metav1.APIResource{
						{Name: "deployments", Kind: "Deployment", Namespaced: true, Verbs: all},
					},
				},
			},
		},
	}
}

// serverLikeMetadata makes the fake metadata client behave like the API
// server for deletes: objects with finalizers get a deletionTimestamp
// instead of disappearing, and deletecollection deletes every object of the
// resource in the namespace.
func serverLikeMetadata(t *testing.T, objs ...runtime.Object) *metadatafake.FakeMetadataClient {
	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	mc := metadatafake.NewSimpleMetadataClient(scheme, objs...)
	tracker := mc.Tracker()
	deleteOne := func(gvr schema.GroupVersionResource, ns, name string) error {
		obj, err := tracker.Get(gvr, ns, name)
		if err != nil {
			return err
		}
		p := obj.(*metav1.PartialObjectMetadata)
		if len(p.Finalizers) == 0 {
			return tracker.Delete(gvr, ns, name)
		}
		if p.DeletionTimestamp == nil {
			p = p.DeepCopy()
			now := metav1.Now()
			p.DeletionTimestamp = &now
			zero := int64(0)
			p.DeletionGracePeriodSeconds = &zero
			return tracker.Update(gvr, p, ns)
		}
		return nil
	}
	mc.PrependReactor("delete", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		d := a.(clienttesting.DeleteActionImpl)
		return true, nil, deleteOne(d.GetResource(), d.GetNamespace(), d.GetName())
	})
	mc.PrependReactor("delete-collection", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		gvr, ns := a.GetResource(), a.GetNamespace()
		obj, err := tracker.List(gvr, metaListGVK, ns)
		if err != nil {
			return true, nil, err
		}
		for _, item := range obj.(*metav1.List).Items {
			p := item.Object.(*metav1.PartialObjectMetadata)
			if err := deleteOne(gvr, ns, p.Name); err != nil && !apierrors.IsNotFound(err) {
				return true, nil, err
			}
		}
		return true, nil, nil
	})
	return mc
}

// serverLikeFinalize implements PUT namespaces/{name}/finalize on the fake
// clientset: spec.finalizers is replaced and the namespace is removed once
// no finalizers remain.
func serverLikeFinalize(cs *fake.Clientset) {
	nsGVR := corev1.SchemeGroupVersion.WithResource("namespaces")
	cs.PrependReactor("create", "namespaces", func(a clienttesting.Action) (bool, runtime.Object, error) {
		c := a.(clienttesting.CreateActionImpl)
		if c.GetSubresource() != "finalize" {
			return false, nil, nil
		}
		in := c.GetObject().(*corev1.Namespace)
		obj, err := cs.Tracker().Get(nsGVR, "", in.Name)
		if err != nil {
			return true, nil, err
		}
		cur := obj.(*corev1.Namespace).DeepCopy()
		cur.Spec.Finalizers = in.Spec.Finalizers
		if len(cur.Spec.Finalizers) == 0 && len(cur.Finalizers) == 0 && cur.DeletionTimestamp != nil {
			return true, cur, cs.Tracker().Delete(nsGVR, "", cur.Name)
		}
		return true, cur, cs.Tracker().Update(nsGVR, cur, "")
	})
}

func terminating(name string) *corev1.Namespace {
	now := metav1.Now()
	return &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: name, DeletionTimestamp: &now},
		Spec:       corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{corev1.FinalizerKubernetes}},
		Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating},
	}
}

func active(name string) *corev1.Namespace {
	return &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{corev1.FinalizerKubernetes}},
		Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceActive},
	}
}

func names(t *testing.T, mc *metadatafake.FakeMetadataClient, gvr schema.GroupVersionResource, ns string) []string {
	t.Helper()
	l, err := mc.Resource(gvr).Namespace(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list %s in %s: %v", gvr, ns, err)
	}
	var out []string
	for _, i := range l.Items {
		out = append(out, i.Name)
	}
	return out
}

func condition(ns *corev1.Namespace, t corev1.NamespaceConditionType) *corev1.NamespaceCondition {
	for i := range ns.Status.Conditions {
		if ns.Status.Conditions[i].Type == t {
			return &ns.Status.Conditions[i]
		}
	}
	return nil
}

func start(t *testing.T, c *Controller, f informers.SharedInformerFactory) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	f.Start(ctx.Done())
	go func() { c.Run(ctx, 2); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
		f.Shutdown()
	})
}

func TestTerminatingNamespaceIsEmptiedAndFinalized(t *testing.T) {
	cs := fake.NewSimpleClientset(terminating("doomed"), active("alive"))
	serverLikeFinalize(cs)
	mc := serverLikeMetadata(t,
		partial("v1", "ConfigMap", "doomed", "cm-a"),
		partial("v1", "ConfigMap", "doomed", "cm-b"),
		partial("v1", "Pod", "doomed", "pod-a"),
		partial("v1", "Pod", "doomed", "pod-held", "example.com/hold"),
		partial("apps/v1", "Deployment", "doomed", "web"),
		partial("v1", "ConfigMap", "alive", "keep-me"),
		partial("v1", "Pod", "alive", "keep-pod"),
	)
	f := informers.NewSharedInformerFactory(cs, 0)
	c := New(cs, fakeDiscovery(), mc, f)
	start(t, c, f)
	ctx := context.Background()

	// Pods go first (OrderedNamespaceDeletion): the held pod is marked
	// deleted, and while it remains nothing else is deleted; the
	// namespace reports what remains.
	var ns *corev1.Namespace
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 5*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		ns, err = cs.CoreV1().Namespaces().Get(ctx, "doomed", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cond := condition(ns, corev1.NamespaceFinalizersRemaining)
		return cond != nil && cond.Status == corev1.ConditionTrue, nil
	})
	if err != nil {
		t.Fatalf("waiting for NamespaceFinalizersRemaining=True: %v (status %+v)", err, ns.Status)
	}
	if got := names(t, mc, configmaps, "doomed"); len(got) != 2 {
		t.Errorf("configmaps in doomed while a pod remains: %v, want both kept", got)
	}
	if got := names(t, mc, deployments, "doomed"); len(got) != 1 {
		t.Errorf("deployments in doomed while a pod remains: %v, want kept", got)
	}
	if got := names(t, mc, pods, "doomed"); len(got) != 1 || got[0] != "pod-held" {
		t.Errorf("pods in doomed = %v, want [pod-held]", got)
	}
	held, err := mc.Resource(pods).Namespace("doomed").Get(ctx, "pod-held", metav1.GetOptions{})
	if err != nil || held.DeletionTimestamp == nil {
		t.Errorf("pod-held should be marked for deletion: %v %+v", err, held)
	}
	if !hasFinalizer(ns, corev1.FinalizerKubernetes) {
		t.Fatalf("finalizer removed while content remains: %v", ns.Spec.Finalizers)
	}
	for typ, want := range map[corev1.NamespaceConditionType]corev1.ConditionStatus{
		corev1.NamespaceDeletionDiscoveryFailure: corev1.ConditionFalse,
		corev1.NamespaceDeletionGVParsingFailure: corev1.ConditionFalse,
		corev1.NamespaceDeletionContentFailure:   corev1.ConditionFalse,
		corev1.NamespaceContentRemaining:         corev1.ConditionTrue,
		corev1.NamespaceFinalizersRemaining:      corev1.ConditionTrue,
	} {
		cond := condition(ns, typ)
		if cond == nil || cond.Status != want {
			t.Errorf("condition %s = %+v, want status %s", typ, cond, want)
		}
	}
	if cond := condition(ns, corev1.NamespaceContentRemaining); cond != nil && cond.Message != "Some resources are remaining: pods has 1 instances" {
		t.Errorf("ContentRemaining message = %q", cond.Message)
	}

	// Whoever owns the finalizer finishes; the controller notices on its
	// own requeue (no namespace event happens) and finalizes.
	if err := mc.Tracker().Delete(pods, "doomed", "pod-held"); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Namespaces().Get(ctx, "doomed", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	if err != nil {
		t.Fatalf("namespace doomed was not finalized: %v", err)
	}
	if got := names(t, mc, configmaps, "doomed"); len(got) != 0 {
		t.Errorf("configmaps left in doomed: %v", got)
	}
	if got := names(t, mc, deployments, "doomed"); len(got) != 0 {
		t.Errorf("deployments left in doomed: %v", got)
	}

	// The other namespace is untouched.
	if got := names(t, mc, configmaps, "alive"); len(got) != 1 || got[0] != "keep-me" {
		t.Errorf("configmaps in alive = %v", got)
	}
	if got := names(t, mc, pods, "alive"); len(got) != 1 || got[0] != "keep-pod" {
		t.Errorf("pods in alive = %v", got)
	}
	alive, err := cs.CoreV1().Namespaces().Get(ctx, "alive", metav1.GetOptions{})
	if err != nil || !hasFinalizer(alive, corev1.FinalizerKubernetes) || len(alive.Status.Conditions) != 0 {
		t.Errorf("alive namespace changed: %v %+v", err, alive)
	}

	// Pods have no deletecollection verb: deleted one by one with a UID
	// precondition. Configmaps use deletecollection.
	var podDeletes, cmCollections int
	for _, a := range mc.Actions() {
		switch {
		case a.Matches("delete", "pods") && a.GetNamespace() == "doomed":
			podDeletes++
			d := a.(clienttesting.DeleteActionImpl)
			if p := d.DeleteOptions.Preconditions; p == nil || p.UID == nil || *p.UID != types.UID("uid-doomed-"+d.Name) {
				t.Errorf("delete of pod %s without UID precondition: %+v", d.Name, d.DeleteOptions)
			}
		case a.Matches("delete-collection", "pods"):
			t.Errorf("deletecollection used for pods, which do not support it")
		case a.Matches("delete-collection", "configmaps"):
			if a.GetNamespace() != "doomed" {
				t.Errorf("deletecollection of configmaps in namespace %q", a.GetNamespace())
			}
			cmCollections++
		case a.Matches("delete-collection", "namespaces"), a.Matches("delete", "namespaces"):
			t.Errorf("namespaces must not be deleted: %v", a)
		}
	}
	if podDeletes < 2 || cmCollections < 1 {
		t.Errorf("pod deletes = %d, configmap deletecollections = %d", podDeletes, cmCollections)
	}
}

func TestNamespaceWithoutKubernetesFinalizerIsLeftAlone(t *testing.T) {
	ns := terminating("other")
	ns.Spec.Finalizers = []corev1.FinalizerName{"example.com/custom"}
	cs := fake.NewSimpleClientset(ns)
	mc := serverLikeMetadata(t, partial("v1", "ConfigMap", "other", "cm"))
	f := informers.NewSharedInformerFactory(cs, 0)
	c := New(cs, fakeDiscovery(), mc, f)
	ctx, cancel := context.WithCancel(context.Background())
	f.Start(ctx.Done())
	defer func() { cancel(); f.Shutdown() }()
	f.WaitForCacheSync(ctx.Done())

	if err := c.sync(ctx, "other"); err != nil {
		t.Fatal(err)
	}
	if got := names(t, mc, configmaps, "other"); len(got) != 1 {
		t.Errorf("configmaps = %v, want untouched", got)
	}
	got, err := cs.CoreV1().Namespaces().Get(ctx, "other", metav1.GetOptions{})
	if err != nil || len(got.Spec.Finalizers) != 1 || got.Spec.Finalizers[0] != "example.com/custom" {
		t.Errorf("namespace changed: %v %+v", err, got)
	}
}

func TestDiscoveryFailureKeepsFinalizer(t *testing.T) {
	cs := fake.NewSimpleClientset(terminating("doomed"))
	serverLikeFinalize(cs)
	mc := serverLikeMetadata(t, partial("v1", "ConfigMap", "doomed", "cm"))
	disco := fakeDiscovery()
	disco.PrependReactor("get", "resource", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, fmt.Errorf("discovery is down")
	})
	f := informers.NewSharedInformerFactory(cs, 0)
	c := New(cs, disco, mc, f)
	ctx, cancel := context.WithCancel(context.Background())
	f.Start(ctx.Done())
	defer func() { cancel(); f.Shutdown() }()
	f.WaitForCacheSync(ctx.Done())

	err := c.sync(ctx, "doomed")
	if err == nil {
		t.Fatal("sync succeeded although discovery failed")
	}
	ns, gerr := cs.CoreV1().Namespaces().Get(ctx, "doomed", metav1.GetOptions{})
	if gerr != nil {
		t.Fatalf("namespace gone after failed discovery: %v", gerr)
	}
	if !hasFinalizer(ns, corev1.FinalizerKubernetes) {
		t.Errorf("finalizer removed after failed discovery")
	}
	cond := condition(ns, corev1.NamespaceDeletionDiscoveryFailure)
	if cond == nil || cond.Status != corev1.ConditionTrue || cond.Reason != "DiscoveryFailed" {
		t.Errorf("NamespaceDeletionDiscoveryFailure = %+v, want True/DiscoveryFailed", cond)
	}
	if got := names(t, mc, configmaps, "doomed"); len(got) != 1 {
		t.Errorf("configmaps = %v, want untouched", got)
	}
}
