package garbagecollector

import (
	"context"
	"encoding/json"
	"reflect"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	fakediscovery "k8s.io/client-go/discovery/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"
)

var (
	deployments = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	replicasets = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}
	pods        = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	configmaps  = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	namespaces  = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
)

func fakeDiscovery() *fakediscovery.FakeDiscovery {
	all := []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
	return &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: []*metav1.APIResourceList{
		{
			GroupVersion: "v1",
			APIResources: []metav1.APIResource{
				{Name: "pods", Kind: "Pod", Namespaced: true, Verbs: all},
				{Name: "pods/status", Kind: "Pod", Namespaced: true, Verbs: []string{"get", "patch"}},
				{Name: "configmaps", Kind: "ConfigMap", Namespaced: true, Verbs: all},
				{Name: "namespaces", Kind: "Namespace", Verbs: all},
				{Name: "bindings", Kind: "Binding", Namespaced: true, Verbs: []string{"create"}},
			},
		},
		{
			GroupVersion: "apps/v1",
			APIResources: []metav1.APIResource{
				{Name: "deployments", Kind: "Deployment", Namespaced: true, Verbs: all},
				{Name: "replicasets", Kind: "ReplicaSet", Namespaced: true, Verbs: all},
			},
		},
	}}}
}

func object(apiVersion, kind, ns, name string, owners ...metav1.OwnerReference) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: apiVersion, Kind: kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), ResourceVersion: "1", OwnerReferences: owners},
	}
}

func deleting(o *metav1.PartialObjectMetadata, finalizers ...string) *metav1.PartialObjectMetadata {
	now := metav1.Now()
	o.DeletionTimestamp = &now
	o.Finalizers = finalizers
	return o
}

func ownerRef(owner *metav1.PartialObjectMetadata, block bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: owner.APIVersion, Kind: owner.Kind, Name: owner.Name, UID: owner.UID, BlockOwnerDeletion: &block}
}

// serverLike makes the fake metadata client delete and patch like the API
// server: a delete adds the orphan or foregroundDeletion finalizer for
// those policies, an object with finalizers only gets a deletionTimestamp,
// and a merge patch that leaves a deleting object without finalizers
// removes it.
func serverLike(t *testing.T, objs ...runtime.Object) *metadatafake.FakeMetadataClient {
	t.Helper()
	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	mc := metadatafake.NewSimpleMetadataClient(scheme, objs...)
	tracker := mc.Tracker()
	// The tracker keeps no resourceVersion in the objects; count writes
	// here so that the collector's preconditions are checked.
	var rv atomic.Int64
	rv.Store(100)
	store := func(gvr schema.GroupVersionResource, p *metav1.PartialObjectMetadata) error {
		p.ResourceVersion = strconv.FormatInt(rv.Add(1), 10)
		if p.DeletionTimestamp != nil && len(p.Finalizers) == 0 {
			return tracker.Delete(gvr, p.Namespace, p.Name)
		}
		return tracker.Update(gvr, p, p.Namespace)
	}
	mc.PrependReactor("delete", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		d := a.(clienttesting.DeleteActionImpl)
		obj, err := tracker.Get(d.GetResource(), d.GetNamespace(), d.GetName())
		if err != nil {
			return true, nil, err
		}
		p := obj.(*metav1.PartialObjectMetadata).DeepCopy()
		if pre := d.DeleteOptions.Preconditions; pre != nil && pre.UID != nil && *pre.UID != p.UID {
			return true, nil, apierrors.NewConflict(d.GetResource().GroupResource(), p.Name, nil)
		}
		if pol := d.DeleteOptions.PropagationPolicy; pol != nil {
			switch f := ""; *pol {
			case metav1.DeletePropagationOrphan:
				f = metav1.FinalizerOrphanDependents
				fallthrough
			case metav1.DeletePropagationForeground:
				if f == "" {
					f = metav1.FinalizerDeleteDependents
				}
				if !hasFinalizer(p.Finalizers, f) {
					p.Finalizers = append(p.Finalizers, f)
				}
			}
		}
		if len(p.Finalizers) == 0 {
			return true, nil, tracker.Delete(d.GetResource(), p.Namespace, p.Name)
		}
		if p.DeletionTimestamp == nil {
			now := metav1.Now()
			p.DeletionTimestamp = &now
		}
		return true, nil, store(d.GetResource(), p)
	})
	mc.PrependReactor("patch", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		pa := a.(clienttesting.PatchActionImpl)
		if pa.GetPatchType() != types.MergePatchType {
			t.Errorf("unexpected patch type %s", pa.GetPatchType())
		}
		obj, err := tracker.Get(pa.GetResource(), pa.GetNamespace(), pa.GetName())
		if err != nil {
			return true, nil, err
		}
		cur, err := json.Marshal(obj)
		if err != nil {
			return true, nil, err
		}
		var doc, patch interface{}
		if err := json.Unmarshal(cur, &doc); err != nil {
			return true, nil, err
		}
		if err := json.Unmarshal(pa.GetPatch(), &patch); err != nil {
			return true, nil, err
		}
		out, err := json.Marshal(mergePatch(doc, patch))
		if err != nil {
			return true, nil, err
		}
		p := &metav1.PartialObjectMetadata{}
		if err := json.Unmarshal(out, p); err != nil {
			return true, nil, err
		}
		old := obj.(*metav1.PartialObjectMetadata)
		if p.UID != old.UID {
			return true, nil, apierrors.NewInvalid(schema.GroupKind{Kind: p.Kind}, p.Name, nil)
		}
		if p.ResourceVersion != old.ResourceVersion {
			return true, nil, apierrors.NewConflict(pa.GetResource().GroupResource(), p.Name, nil)
		}
		return true, p, store(pa.GetResource(), p)
	})
	return mc
}

// mergePatch applies an RFC 7386 JSON merge patch.
func mergePatch(doc, patch interface{}) interface{} {
	pm, ok := patch.(map[string]interface{})
	if !ok {
		return patch
	}
	dm, ok := doc.(map[string]interface{})
	if !ok {
		dm = map[string]interface{}{}
	}
	for k, v := range pm {
		if v == nil {
			delete(dm, k)
			continue
		}
		dm[k] = mergePatch(dm[k], v)
	}
	return dm
}

func start(t *testing.T, mc *metadatafake.FakeMetadataClient) *GarbageCollector {
	t.Helper()
	gc := New(fakeDiscovery(), mc, 200*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { gc.Run(ctx, 2); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return gc
}

func get(t *testing.T, mc *metadatafake.FakeMetadataClient, gvr schema.GroupVersionResource, ns, name string) *metav1.PartialObjectMetadata {
	t.Helper()
	obj, err := mc.Tracker().Get(gvr, ns, name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("get %s %s/%s: %v", gvr, ns, name, err)
	}
	return obj.(*metav1.PartialObjectMetadata)
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("timed out waiting: %s", what)
	}
}

// settle waits until the collector has synced and both queues are idle for
// a while, so that "nothing happened" is meaningful.
func settle(t *testing.T, gc *GarbageCollector) {
	t.Helper()
	eventually(t, "collector synced", gc.synced)
	idle := 0
	eventually(t, "queues idle", func() bool {
		if gc.attemptToDelete.Len() == 0 && gc.attemptToOrphan.Len() == 0 {
			idle++
		} else {
			idle = 0
		}
		return idle >= 15
	})
}

func gone(t *testing.T, mc *metadatafake.FakeMetadataClient, gvr schema.GroupVersionResource, ns, name string) func() bool {
	return func() bool { return get(t, mc, gvr, ns, name) == nil }
}

func deleteActions(mc *metadatafake.FakeMetadataClient, name string) []clienttesting.DeleteActionImpl {
	var out []clienttesting.DeleteActionImpl
	for _, a := range mc.Actions() {
		if d, ok := a.(clienttesting.DeleteActionImpl); ok && d.GetName() == name {
			out = append(out, d)
		}
	}
	return out
}

func TestBackgroundDeletesDependentsOfGoneOwner(t *testing.T) {
	missing := object("apps/v1", "Deployment", "ns", "missing")
	web := object("apps/v1", "Deployment", "ns", "web")
	oldWeb := object("apps/v1", "Deployment", "ns", "web")
	oldWeb.UID = "uid-web-before-recreate"
	rs := object("apps/v1", "ReplicaSet", "ns", "rs", ownerRef(missing, true))
	pod := object("v1", "Pod", "ns", "pod", ownerRef(rs, true))
	stale := object("v1", "ConfigMap", "ns", "stale", ownerRef(oldWeb, false))
	mc := serverLike(t, web, rs, pod, stale)
	start(t, mc)

	eventually(t, "replicaset collected", gone(t, mc, replicasets, "ns", "rs"))
	eventually(t, "pod collected after its replicaset", gone(t, mc, pods, "ns", "pod"))
	eventually(t, "configmap of a recreated owner collected", gone(t, mc, configmaps, "ns", "stale"))
	if get(t, mc, deployments, "ns", "web") == nil {
		t.Fatal("live deployment web was deleted")
	}
	for _, d := range deleteActions(mc, "rs") {
		if p := d.DeleteOptions.PropagationPolicy; p == nil || *p != metav1.DeletePropagationBackground {
			t.Fatalf("replicaset deleted with policy %v, want Background", p)
		}
		if pre := d.DeleteOptions.Preconditions; pre == nil || pre.UID == nil || *pre.UID != rs.UID {
			t.Fatalf("replicaset deleted without UID precondition: %+v", pre)
		}
	}
}

func TestDependentWithLiveOwnerLosesOnlyDanglingReference(t *testing.T) {
	web := object("apps/v1", "Deployment", "ns", "web")
	missing := object("apps/v1", "Deployment", "ns", "missing")
	shared := object("v1", "ConfigMap", "ns", "shared", ownerRef(web, true), ownerRef(missing, true))
	mc := serverLike(t, web, shared)
	gc := start(t, mc)

	eventually(t, "dangling reference removed", func() bool {
		cm := get(t, mc, configmaps, "ns", "shared")
		return cm != nil && len(cm.OwnerReferences) == 1
	})
	settle(t, gc)
	cm := get(t, mc, configmaps, "ns", "shared")
	if cm == nil {
		t.Fatal("configmap with a live owner was deleted")
	}
	if want := []metav1.OwnerReference{ownerRef(web, true)}; !reflect.DeepEqual(cm.OwnerReferences, want) {
		t.Fatalf("ownerReferences = %+v, want %+v", cm.OwnerReferences, want)
	}
	if n := len(deleteActions(mc, "shared")); n != 0 {
		t.Fatalf("%d delete(s) of configmap with a live owner", n)
	}
}

func TestLiveOwnersKeepDependents(t *testing.T) {
	web := object("apps/v1", "Deployment", "ns", "web")
	rs := object("apps/v1", "ReplicaSet", "ns", "rs", ownerRef(web, true))
	pod := object("v1", "Pod", "ns", "pod", ownerRef(rs, true))
	ns := object("v1", "Namespace", "", "ns")
	byNamespace := object("v1", "ConfigMap", "ns", "by-namespace", ownerRef(ns, false))
	widget := object("example.com/v1", "Widget", "ns", "widget")
	byWidget := object("v1", "ConfigMap", "ns", "by-widget", ownerRef(widget, false))
	// A cluster-scoped dependent cannot have a namespaced owner; such a
	// reference is unresolvable and protects the object.
	badScope := object("v1", "Namespace", "", "bad-scope", ownerRef(object("apps/v1", "Deployment", "", "nowhere"), false))
	mc := serverLike(t, web, rs, pod, ns, byNamespace, byWidget, badScope)
	gc := start(t, mc)

	settle(t, gc)
	for _, a := range mc.Actions() {
		switch a.GetVerb() {
		case "delete", "patch", "update":
			t.Fatalf("unexpected %s of %s", a.GetVerb(), a.GetResource())
		}
	}
	for _, o := range []struct {
		gvr      schema.GroupVersionResource
		ns, name string
	}{{replicasets, "ns", "rs"}, {pods, "ns", "pod"}, {configmaps, "ns", "by-namespace"}, {configmaps, "ns", "by-widget"}, {namespaces, "", "bad-scope"}} {
		if get(t, mc, o.gvr, o.ns, o.name) == nil {
			t.Fatalf("%s %s/%s was deleted", o.gvr.Resource, o.ns, o.name)
		}
	}
}

func TestOrphanRemovesReferencesThenFinalizer(t *testing.T) {
	web := deleting(object("apps/v1", "Deployment", "ns", "web"), metav1.FinalizerOrphanDependents, "example.com/keep")
	rs := object("apps/v1", "ReplicaSet", "ns", "rs", ownerRef(web, true))
	pod := object("v1", "Pod", "ns", "pod", ownerRef(rs, true))
	solo := deleting(object("apps/v1", "Deployment", "ns", "solo"), metav1.FinalizerOrphanDependents)
	cm := object("v1", "ConfigMap", "ns", "cm", ownerRef(solo, false), ownerRef(web, false))
	mc := serverLike(t, web, rs, pod, solo, cm)
	gc := start(t, mc)

	eventually(t, "orphan finalizer removed from web", func() bool {
		d := get(t, mc, deployments, "ns", "web")
		return d != nil && reflect.DeepEqual(d.Finalizers, []string{"example.com/keep"})
	})
	eventually(t, "solo deleted once its finalizer is gone", gone(t, mc, deployments, "ns", "solo"))
	settle(t, gc)

	if got := get(t, mc, replicasets, "ns", "rs"); got == nil || len(got.OwnerReferences) != 0 {
		t.Fatalf("replicaset = %+v, want it kept without ownerReferences", got)
	}
	if got := get(t, mc, configmaps, "ns", "cm"); got == nil || len(got.OwnerReferences) != 0 {
		t.Fatalf("configmap = %+v, want it kept without ownerReferences", got)
	}
	if got := get(t, mc, pods, "ns", "pod"); got == nil || len(got.OwnerReferences) != 1 {
		t.Fatalf("pod = %+v, want it kept with its replicaset owner", got)
	}
}

func TestForegroundWaitsForBlockingDependents(t *testing.T) {
	web := deleting(object("apps/v1", "Deployment", "ns", "web"), metav1.FinalizerDeleteDependents)
	rs := object("apps/v1", "ReplicaSet", "ns", "rs", ownerRef(web, true))
	rs.Finalizers = []string{"example.com/hold"}
	pod := object("v1", "Pod", "ns", "pod", ownerRef(rs, true))
	loose := object("v1", "ConfigMap", "ns", "loose", ownerRef(web, false))
	mc := serverLike(t, web, rs, pod, loose)
	gc := start(t, mc)

	eventually(t, "non-blocking dependent deleted", gone(t, mc, configmaps, "ns", "loose"))
	eventually(t, "grandchild deleted", gone(t, mc, pods, "ns", "pod"))
	eventually(t, "replicaset finished its own foreground deletion", func() bool {
		r := get(t, mc, replicasets, "ns", "rs")
		return r != nil && r.DeletionTimestamp != nil && reflect.DeepEqual(r.Finalizers, []string{"example.com/hold"})
	})
	for _, d := range deleteActions(mc, "rs") {
		if p := d.DeleteOptions.PropagationPolicy; p == nil || *p != metav1.DeletePropagationForeground {
			t.Fatalf("blocking dependent deleted with policy %v, want Foreground", p)
		}
	}
	settle(t, gc)
	if d := get(t, mc, deployments, "ns", "web"); d == nil || !hasFinalizer(d.Finalizers, metav1.FinalizerDeleteDependents) {
		t.Fatalf("web = %+v: foregroundDeletion finalizer removed while a blocking dependent exists", d)
	}

	// Another controller releases its hold; the replicaset goes away and
	// with it the last blocking dependent.
	r := get(t, mc, replicasets, "ns", "rs").DeepCopy()
	r.Finalizers = nil
	if err := mc.Tracker().Delete(replicasets, "ns", r.Name); err != nil {
		t.Fatal(err)
	}
	eventually(t, "owner deleted after its blocking dependents", gone(t, mc, deployments, "ns", "web"))
}

// Three pods owning each other in a circle, each reference blocking:
// deleting one in the foreground must delete all three, as upstream's
// collector does by unblocking the references of the pod whose owner and
// dependent both wait.
func TestForegroundDependencyCircle(t *testing.T) {
	p1 := object("v1", "Pod", "ns", "pod1")
	p2 := object("v1", "Pod", "ns", "pod2")
	p3 := object("v1", "Pod", "ns", "pod3")
	p1.OwnerReferences = []metav1.OwnerReference{ownerRef(p3, true)}
	p2.OwnerReferences = []metav1.OwnerReference{ownerRef(p1, true)}
	p3.OwnerReferences = []metav1.OwnerReference{ownerRef(p2, true)}
	deleting(p1, metav1.FinalizerDeleteDependents)
	mc := serverLike(t, p1, p2, p3)
	start(t, mc)
	for _, name := range []string{"pod1", "pod2", "pod3"} {
		eventually(t, name+" deleted", gone(t, mc, pods, "ns", name))
	}
}
