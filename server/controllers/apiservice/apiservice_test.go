package apiservice

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsfake "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	apiextensionsinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	endpointproxy "k8s.io/apiserver/pkg/util/proxy"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
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

// The availability controller's resolver routes to a ready endpoint of
// the service port the APIService names (its targetPort), as the proxy
// does, and says why when it cannot.
func TestEndpointResolver(t *testing.T) {
	port := int32(443)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "api"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.43.0.20",
			Ports: []corev1.ServicePort{{Name: "https", Port: port, TargetPort: intstr.FromInt32(8443)}}}}
	ready, notReady := true, false
	portName := "https"
	target := int32(8443)
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: "api-1", Labels: map[string]string{discoveryv1.LabelServiceName: "api"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.0.0.9"}, Conditions: discoveryv1.EndpointConditions{Ready: &notReady}},
			{Addresses: []string{"10.0.0.7"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}},
		},
		Ports: []discoveryv1.EndpointPort{{Name: &portName, Port: &target}},
	}
	client := kubefake.NewSimpleClientset(svc, slice)
	factory := kubeinformers.NewSharedInformerFactory(client, 0)
	slices := factory.Discovery().V1().EndpointSlices()
	getter, err := endpointproxy.NewEndpointSliceIndexerGetter(slices)
	if err != nil {
		t.Fatal(err)
	}
	r := &endpointResolver{services: factory.Core().V1().Services().Lister(), slices: getter}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	u, err := r.ResolveEndpoint("ns", "api", port)
	if err != nil || u.String() != "https://10.0.0.7:8443" {
		t.Errorf("resolved %v, %v; want https://10.0.0.7:8443 (the ready endpoint, the target port)", u, err)
	}
	if _, err := r.ResolveEndpoint("ns", "api", 444); err == nil {
		t.Error("a port the service lacks resolved")
	}
	if _, err := r.ResolveEndpoint("ns", "missing", port); err == nil {
		t.Error("a missing service resolved")
	}
	// No ready endpoint left: unresolvable.
	slice.Endpoints = slice.Endpoints[:1]
	if err := slices.Informer().GetIndexer().Update(slice); err != nil {
		t.Fatal(err)
	}
	if u, err := r.ResolveEndpoint("ns", "api", port); err == nil {
		t.Errorf("resolved %v without a ready endpoint", u)
	}
}
