package validation

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"k8s.io/utils/ptr"
)

func TestAPIService(t *testing.T) {
	good := &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: "v1beta1.metrics.k8s.io"},
		Spec: apiregistrationv1.APIServiceSpec{Group: "metrics.k8s.io", Version: "v1beta1",
			Service:              &apiregistrationv1.ServiceReference{Namespace: "kube-system", Name: "metrics-server", Port: ptr.To[int32](443)},
			GroupPriorityMinimum: 100, VersionPriority: 100},
	}
	if errs := APIService(good); len(errs) != 0 {
		t.Fatalf("valid: %v", errs)
	}
	core := &apiregistrationv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: "v1."},
		Spec: apiregistrationv1.APIServiceSpec{Version: "v1", GroupPriorityMinimum: 18000, VersionPriority: 1}}
	if errs := APIService(core); len(errs) != 0 {
		t.Fatalf("the core group's: %v", errs)
	}

	for name, tc := range map[string]struct {
		mutate func(*apiregistrationv1.APIService)
		want   string
	}{
		"name not version.group": {func(s *apiregistrationv1.APIService) { s.Name = "v1.metrics.k8s.io" }, "metadata.name"},
		"empty group not v1":     {func(s *apiregistrationv1.APIService) { s.Name, s.Spec.Group = "v1beta1.", "" }, "spec.group"},
		"group priority":         {func(s *apiregistrationv1.APIService) { s.Spec.GroupPriorityMinimum = 20001 }, "spec.groupPriorityMinimum"},
		"version priority":       {func(s *apiregistrationv1.APIService) { s.Spec.VersionPriority = 0 }, "spec.versionPriority"},
		"service name":           {func(s *apiregistrationv1.APIService) { s.Spec.Service.Name = "" }, "spec.service.name"},
		"service port":           {func(s *apiregistrationv1.APIService) { s.Spec.Service.Port = ptr.To[int32](70000) }, "spec.service.port"},
		"local with CA":          {func(s *apiregistrationv1.APIService) { s.Spec.Service, s.Spec.CABundle = nil, []byte("x") }, "spec.caBundle"},
		"skip TLS with a CA": {func(s *apiregistrationv1.APIService) {
			s.Spec.InsecureSkipTLSVerify, s.Spec.CABundle = true, []byte("x")
		}, "spec.insecureSkipTLSVerify"},
	} {
		t.Run(name, func(t *testing.T) {
			bad := good.DeepCopy()
			tc.mutate(bad)
			errs := APIService(bad)
			if len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), tc.want) {
				t.Errorf("want an error on %s, got %v", tc.want, errs)
			}
		})
	}

	// Status: condition statuses are True, False or Unknown.
	updated := good.DeepCopy()
	updated.ResourceVersion, good.ResourceVersion = "1", "1"
	updated.Status.Conditions = []apiregistrationv1.APIServiceCondition{{Type: apiregistrationv1.Available, Status: "Maybe"}}
	if errs := APIServiceStatusUpdate(updated, good); len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), "status.conditions[0].status") {
		t.Errorf("status update: %v", errs)
	}
	updated.Status.Conditions[0].Status = apiregistrationv1.ConditionFalse
	if errs := APIServiceStatusUpdate(updated, good); len(errs) != 0 {
		t.Errorf("valid status update: %v", errs)
	}
	if errs := APIServiceUpdate(updated, good); len(errs) != 0 {
		t.Errorf("valid update: %v", errs)
	}
}
