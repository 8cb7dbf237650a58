package storageversionmigrator

import (
	"context"
	"sync"
	"testing"
	"time"

	svmv1 "k8s.io/api/storagemigration/v1"
	apiextensionsfake "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery/cached/memory"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"
)

func migration(name, resource string, created time.Time) *svmv1.StorageVersionMigration {
	return &svmv1.StorageVersionMigration{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created)},
		Spec:       svmv1.StorageVersionMigrationSpec{Resource: metav1.GroupResource{Resource: resource}},
	}
}

// Two migrations of a resource discovery does not know: the older runs
// first while the newer waits, fails once the discovery grace is over
// (upstream's message), stops Running, and only then does the newer run
// (and fail) in turn.
func TestMigrationsRunOneAtATimeAndFailOnUnknownResource(t *testing.T) {
	old := time.Now().Add(-2 * discoveryGrace)
	client := fake.NewClientset(migration("first", "foos", old), migration("second", "foos", old.Add(time.Second)))
	disco := &fakediscovery.FakeDiscovery{Fake: &client.Fake}
	disco.Resources = []*metav1.APIResourceList{{GroupVersion: "v1", APIResources: []metav1.APIResource{
		{Name: "configmaps", Namespaced: true, Kind: "ConfigMap", Verbs: metav1.Verbs{"get", "list", "watch", "update", "patch"}},
	}}}
	scheme := runtime.NewScheme()
	factory := informers.NewSharedInformerFactory(client, 0)
	c := New(client, apiextensionsfake.NewClientset(), metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme()),
		dynamicfake.NewSimpleDynamicClient(scheme), memory.NewMemCacheClient(disco), factory)

	// Record, from every status write, the order in which the migrations
	// became Running and whether two were ever Running at once. Polling
	// would miss a Running that lasts less than one poll.
	var mu sync.Mutex
	var order []string
	runningNow := map[string]bool{}
	overlap := false
	client.PrependReactor("update", "storageversionmigrations", func(a k8stesting.Action) (bool, runtime.Object, error) {
		u, ok := a.(k8stesting.UpdateAction)
		if !ok || u.GetSubresource() != "status" {
			return false, nil, nil
		}
		s := u.GetObject().(*svmv1.StorageVersionMigration)
		mu.Lock()
		defer mu.Unlock()
		now := running(s) && !terminal(s)
		if now && !runningNow[s.Name] {
			order = append(order, s.Name)
		}
		runningNow[s.Name] = now
		if runningNow["first"] && runningNow["second"] {
			overlap = true
		}
		return false, nil, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.Run(ctx)

	get := func(name string) *svmv1.StorageVersionMigration {
		s, err := client.StoragemigrationV1().StorageVersionMigrations().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		first, second := get("first"), get("second")
		if terminal(first) && terminal(second) && !running(first) && !running(second) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("migrations not finished: first %+v, second %+v", first.Status, second.Status)
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if overlap {
		t.Fatal("two migrations of one resource Running at once")
	}
	if len(order) != 2 || order[0] != "first" {
		t.Fatalf("Running order %v, want [first second]", order)
	}
	for _, name := range []string{"first", "second"} {
		s := get(name)
		failed := meta.FindStatusCondition(s.Status.Conditions, string(svmv1.MigrationFailed))
		if failed == nil || failed.Status != metav1.ConditionTrue || failed.Reason != failedReason || failed.Message != "resource does not exist in discovery" {
			t.Errorf("%s: Failed condition %+v", name, failed)
		}
		if r := meta.FindStatusCondition(s.Status.Conditions, string(svmv1.MigrationRunning)); r == nil || r.Reason != "MigrationCompleted" {
			t.Errorf("%s: Running condition %+v, want False MigrationCompleted", name, r)
		}
	}
}
