package apiservice

import (
	"context"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsfake "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	apiextensionsinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	v1helper "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1/helper"
	aggregatorfake "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset/fake"
	aggregatorinformers "k8s.io/kube-aggregator/pkg/client/informers/externalversions"
)

func TestLocalAPIService(t *testing.T) {
	core := localAPIService(schema.GroupVersion{Version: "v1"}, builtinPriorities)
	if core.Name != "v1." || core.Spec.Group != "" || core.Spec.GroupPriorityMinimum != 18000 || core.Spec.VersionPriority != 1 || core.Spec.Service != nil {
		t.Errorf("core: %s %+v", core.Name, core.Spec)
	}
	apps := localAPIService(schema.GroupVersion{Group: "apps", Version: "v1"}, builtinPriorities)
	if apps.Name != "v1.apps" || apps.Spec.GroupPriorityMinimum != 17800 || apps.Spec.VersionPriority != 15 {
		t.Errorf("apps: %s %+v", apps.Name, apps.Spec)
	}
	// Not in kube-apiserver's table: no APIService, as upstream.
	if svc := localAPIService(schema.GroupVersion{Group: "apiregistration.k8s.io", Version: "v1"}, builtinPriorities); svc != nil {
		t.Errorf("apiregistration.k8s.io got %+v", svc)
	}
}

// recorder is an autoregister.AutoAPIServiceRegistration that records.
type recorder struct {
	kept map[string]*apiregistrationv1.APIService
}

func (r *recorder) AddAPIServiceToSyncOnStart(in *apiregistrationv1.APIService) { r.kept[in.Name] = in }
func (r *recorder) AddAPIServiceToSync(in *apiregistrationv1.APIService)        { r.kept[in.Name] = in }
func (r *recorder) RemoveAPIServiceToSync(name string)                          { delete(r.kept, name) }

func TestCRDRegistration(t *testing.T) {
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "example.com", Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
			{Name: "v1", Served: true}, {Name: "v1beta1", Served: false}}},
	}
	// A CRD in a built-in group/version (never served: built-ins win).
	shadow := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "things.apps"},
		Spec:       apiextensionsv1.CustomResourceDefinitionSpec{Group: "apps", Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true}}},
	}
	client := apiextensionsfake.NewSimpleClientset(crd, shadow)
	factory := apiextensionsinformers.NewSharedInformerFactory(client, 0)
	informer := factory.Apiextensions().V1().CustomResourceDefinitions()
	rec := &recorder{kept: map[string]*apiregistrationv1.APIService{"v1.apps": {}}}
	c := newCRDRegistration(informer, rec, map[schema.GroupVersion]bool{{Group: "apps", Version: "v1"}: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	if !c.InitialSync(ctx) {
		t.Fatal("initial sync failed")
	}
	got := rec.kept["v1.example.com"]
	if got == nil || got.Spec.Group != "example.com" || got.Spec.GroupPriorityMinimum != 1000 || got.Spec.VersionPriority != 100 {
		t.Fatalf("v1.example.com: %+v", got)
	}
	if _, ok := rec.kept["v1beta1.example.com"]; ok {
		t.Error("an unserved version is registered")
	}
	if got := rec.kept["v1.apps"]; got == nil || got.Spec.GroupPriorityMinimum != 0 {
		t.Errorf("the built-in v1.apps was replaced: %+v", got)
	}
	// The CRD gone: its group/version is no longer kept.
	if err := informer.Informer().GetIndexer().Delete(crd); err != nil {
		t.Fatal(err)
	}
	c.sync(schema.GroupVersion{Group: "example.com", Version: "v1"})
	if _, ok := rec.kept["v1.example.com"]; ok {
		t.Error("v1.example.com still kept without its CRD")
	}
}

func TestNotProxied(t *testing.T) {
	remote := &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: "v1beta1.metrics.k8s.io"},
		Spec: apiregistrationv1.APIServiceSpec{Group: "metrics.k8s.io", Version: "v1beta1",
			Service: &apiregistrationv1.ServiceReference{Namespace: "kube-system", Name: "metrics-server"}},
		Status: apiregistrationv1.APIServiceStatus{Conditions: []apiregistrationv1.APIServiceCondition{
			{Type: apiregistrationv1.Available, Status: apiregistrationv1.ConditionTrue, Reason: "Passed"}}},
	}
	local := &apiregistrationv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: "v1.apps"},
		Spec: apiregistrationv1.APIServiceSpec{Group: "apps", Version: "v1"}}
	client := aggregatorfake.NewSimpleClientset(remote, local)
	factory := aggregatorinformers.NewSharedInformerFactory(client, 0)
	informer := factory.Apiregistration().V1().APIServices()
	c := newNotProxied(informer, client.ApiregistrationV1())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	for _, name := range []string{remote.Name, local.Name} {
		if err := c.sync(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := client.ApiregistrationV1().APIServices().Get(ctx, remote.Name, metav1.GetOptions{})
	cond := v1helper.GetAPIServiceConditionByType(got, apiregistrationv1.Available)
	if cond == nil || cond.Status != apiregistrationv1.ConditionFalse || cond.Reason != NotProxiedReason ||
		!strings.Contains(cond.Message, "kelp does not proxy to extension API servers") || !strings.Contains(cond.Message, "kube-system/metrics-server") {
		t.Errorf("remote condition: %+v", cond)
	}
	// A local APIService is the local availability controller's: untouched.
	got, _ = client.ApiregistrationV1().APIServices().Get(ctx, local.Name, metav1.GetOptions{})
	if len(got.Status.Conditions) != 0 {
		t.Errorf("local APIService touched: %+v", got.Status.Conditions)
	}
	// Already stating it: no further write.
	before := len(client.Actions())
	if err := informer.Informer().GetIndexer().Update(mustGet(t, client, remote.Name)); err != nil {
		t.Fatal(err)
	}
	if err := c.sync(ctx, remote.Name); err != nil {
		t.Fatal(err)
	}
	if after := len(client.Actions()); after != before+1 { // the Get above
		t.Errorf("%d actions after a sync with nothing to do", after-before-1)
	}
}

func mustGet(t *testing.T, client *aggregatorfake.Clientset, name string) *apiregistrationv1.APIService {
	t.Helper()
	svc, err := client.ApiregistrationV1().APIServices().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}
