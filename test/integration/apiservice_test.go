package integration

import (
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	v1helper "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1/helper"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
)

// apiregistration.k8s.io/v1 is served as kube-apiserver's aggregator
// serves it: discovery lists apiservices (with /status); every built-in
// group/version and every CRD-served one has a local APIService with
// upstream's priorities, Available reason Local; an APIService naming a
// service that does not exist is Available=False ServiceNotFound, as
// upstream's remote availability controller says (aggregator_test.go has
// a working extension API server); invalid objects are 422; kubectl
// prints upstream's columns.
func TestAPIServices(t *testing.T) {
	s := startServer(t)
	ctx := ctxT(t)
	ac, err := aggregatorclient.NewForConfig(s.config)
	if err != nil {
		t.Fatal(err)
	}
	apis := ac.ApiregistrationV1().APIServices()

	// Discovery, legacy and aggregated (client-go asks for the aggregated
	// form first).
	res, err := s.client().Discovery().ServerResourcesForGroupVersion("apiregistration.k8s.io/v1")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range res.APIResources {
		names = append(names, r.Name)
	}
	if !slices.Contains(names, "apiservices") || !slices.Contains(names, "apiservices/status") {
		t.Errorf("apiregistration.k8s.io/v1 resources: %v", names)
	}
	_, all, err := s.client().Discovery().ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, l := range all {
		if l.GroupVersion == "apiregistration.k8s.io/v1" {
			for _, r := range l.APIResources {
				found = found || (r.Name == "apiservices" && !r.Namespaced && r.Kind == "APIService")
			}
		}
	}
	if !found {
		t.Error("aggregated discovery lacks a cluster-scoped apiservices")
	}

	available := func(name string) *apiregistrationv1.APIServiceCondition {
		svc, err := apis.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil
		}
		return v1helper.GetAPIServiceConditionByType(svc, apiregistrationv1.Available)
	}
	// The built-in group/versions, with kube-apiserver's priorities.
	for name, want := range map[string][2]int32{"v1.": {18000, 1}, "v1.apps": {17800, 15}, "v1.flowcontrol.apiserver.k8s.io": {16100, 21}, "v1.apiextensions.k8s.io": {16700, 15}} {
		waitFor(t, name+" Available", func() bool {
			c := available(name)
			return c != nil && c.Status == apiregistrationv1.ConditionTrue && c.Reason == "Local"
		})
		svc, _ := apis.Get(ctx, name, metav1.GetOptions{})
		if svc.Spec.Service != nil || svc.Spec.GroupPriorityMinimum != want[0] || svc.Spec.VersionPriority != want[1] ||
			svc.Labels["kube-aggregator.kubernetes.io/automanaged"] != "onstart" {
			t.Errorf("%s: spec %+v labels %v", name, svc.Spec, svc.Labels)
		}
	}

	// A CRD's served versions get continuously kept APIServices, gone
	// with the CRD.
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "gadgets.apisvc.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "apisvc.example.com", Scope: apiextensionsv1.ClusterScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "gadgets", Singular: "gadget", Kind: "Gadget"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: true, Storage: true, Schema: &apiextensionsv1.CustomResourceValidation{
					OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: new(true)}}},
				{Name: "v1alpha1", Served: false, Schema: &apiextensionsv1.CustomResourceValidation{
					OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: new(true)}}},
			},
		},
	}
	if _, err := s.crdClient().ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the CRD's APIService", func() bool {
		c := available("v1.apisvc.example.com")
		return c != nil && c.Status == apiregistrationv1.ConditionTrue
	})
	svc, _ := apis.Get(ctx, "v1.apisvc.example.com", metav1.GetOptions{})
	if svc.Spec.GroupPriorityMinimum != 1000 || svc.Spec.VersionPriority != 100 || svc.Labels["kube-aggregator.kubernetes.io/automanaged"] != "true" {
		t.Errorf("CRD APIService: spec %+v labels %v", svc.Spec, svc.Labels)
	}
	if _, err := apis.Get(ctx, "v1alpha1.apisvc.example.com", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("an unserved CRD version has an APIService: %v", err)
	}
	if err := s.crdClient().ApiextensionsV1().CustomResourceDefinitions().Delete(ctx, crd.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the CRD's APIService gone", func() bool {
		_, err := apis.Get(ctx, "v1.apisvc.example.com", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})

	// An APIService naming a service that is not there: defaulted, and
	// plainly not working.
	remote, err := apis.Create(ctx, &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: "v1beta1.metrics.k8s.io"},
		Spec: apiregistrationv1.APIServiceSpec{Group: "metrics.k8s.io", Version: "v1beta1",
			Service:              &apiregistrationv1.ServiceReference{Namespace: "kube-system", Name: "metrics-server"},
			GroupPriorityMinimum: 100, VersionPriority: 100, InsecureSkipTLSVerify: true},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p := remote.Spec.Service.Port; p == nil || *p != 443 {
		t.Errorf("service port not defaulted to 443: %v", p)
	}
	if len(remote.Status.Conditions) != 0 {
		t.Errorf("a remote APIService was created with conditions %+v", remote.Status.Conditions)
	}
	waitFor(t, "the remote APIService Available=False", func() bool {
		c := available("v1beta1.metrics.k8s.io")
		return c != nil && c.Status == apiregistrationv1.ConditionFalse && c.Reason == "ServiceNotFound" &&
			strings.Contains(c.Message, `service/metrics-server in "kube-system" is not present`)
	})

	// kubectl get: upstream's columns.
	out := s.mustKubectl("get", "apiservices")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if h := strings.Fields(lines[0]); !slices.Equal(h, []string{"NAME", "SERVICE", "AVAILABLE", "AGE"}) {
		t.Errorf("kubectl get apiservices header: %q", lines[0])
	}
	var sawLocal, sawRemote bool
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		switch {
		case len(f) >= 3 && f[0] == "v1.apps":
			sawLocal = f[1] == "Local" && f[2] == "True"
		case len(f) >= 4 && f[0] == "v1beta1.metrics.k8s.io":
			sawRemote = f[1] == "kube-system/metrics-server" && f[2] == "False" && f[3] == "(ServiceNotFound)"
		}
	}
	if !sawLocal || !sawRemote {
		t.Errorf("kubectl get apiservices:\n%s", out)
	}

	// The kind is in /openapi (kubectl explain) and server-side apply
	// knows its schema.
	if out := s.mustKubectl("explain", "apiservice.spec.service"); !strings.Contains(out, "namespace") || !strings.Contains(out, "port") {
		t.Errorf("kubectl explain apiservice.spec.service:\n%s", out)
	}
	applied, err := s.kubectlIn(`apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1.applied.example.com, labels: {via: apply}}
spec: {group: applied.example.com, version: v1, groupPriorityMinimum: 10, versionPriority: 10}
`, nil, "apply", "--server-side", "-f", "-")
	if err != nil {
		t.Fatalf("server-side apply: %v\n%s", err, applied)
	}
	waitFor(t, "the applied local APIService Available", func() bool {
		c := available("v1.applied.example.com")
		return c != nil && c.Status == apiregistrationv1.ConditionTrue && c.Reason == "Local"
	})

	// Upstream's validation, as 422 with field errors.
	_, err = apis.Create(ctx, &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: "v1.wrong.example.com"},
		Spec: apiregistrationv1.APIServiceSpec{Group: "other.example.com", Version: "v1",
			Service:              &apiregistrationv1.ServiceReference{Namespace: "default", Name: "x"},
			GroupPriorityMinimum: 0, VersionPriority: 2000, CABundle: []byte("x"), InsecureSkipTLSVerify: true},
	}, metav1.CreateOptions{})
	for _, want := range []string{`metadata.name: Invalid value: "v1.wrong.example.com": must be`,
		"spec.groupPriorityMinimum: Invalid value: 0: must be positive and less than 20000",
		"spec.versionPriority: Invalid value: 2000: must be positive and less than 1000",
		"spec.insecureSkipTLSVerify: Invalid value: true: may not be true if caBundle is present"} {
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("invalid APIService: want %q in %v", want, err)
		}
	}
	_, err = apis.Create(ctx, &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: "v2.local.example.com"},
		Spec: apiregistrationv1.APIServiceSpec{Group: "local.example.com", Version: "v2",
			GroupPriorityMinimum: 10, VersionPriority: 10, CABundle: []byte("x")},
	}, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "local APIServices may not have a caBundle") {
		t.Errorf("local APIService with a CA bundle: %v", err)
	}
}
