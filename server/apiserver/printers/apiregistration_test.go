package printers

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
)

func TestAPIServiceRows(t *testing.T) {
	local := &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: "v1.apps", CreationTimestamp: ago(time.Hour)},
		Spec:       apiregistrationv1.APIServiceSpec{Group: "apps", Version: "v1"},
		Status: apiregistrationv1.APIServiceStatus{Conditions: []apiregistrationv1.APIServiceCondition{
			{Type: apiregistrationv1.Available, Status: apiregistrationv1.ConditionTrue, Reason: "Local"}}},
	}
	assertCells(t, cellsOf(t, local), []interface{}{"v1.apps", "Local", "True", "60m"})

	remote := &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: "v1beta1.metrics.k8s.io", CreationTimestamp: ago(time.Hour)},
		Spec: apiregistrationv1.APIServiceSpec{Group: "metrics.k8s.io", Version: "v1beta1",
			Service: &apiregistrationv1.ServiceReference{Namespace: "kube-system", Name: "metrics-server"}},
	}
	// No condition yet: Unknown.
	assertCells(t, cellsOf(t, remote), []interface{}{"v1beta1.metrics.k8s.io", "kube-system/metrics-server", "Unknown", "60m"})
	remote.Status.Conditions = []apiregistrationv1.APIServiceCondition{
		{Type: apiregistrationv1.Available, Status: apiregistrationv1.ConditionFalse, Reason: "MissingEndpoints"}}
	assertCells(t, cellsOf(t, remote), []interface{}{"v1beta1.metrics.k8s.io", "kube-system/metrics-server", "False (MissingEndpoints)", "60m"})
}
