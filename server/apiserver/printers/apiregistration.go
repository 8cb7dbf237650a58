package printers

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	v1helper "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1/helper"
)

func init() {
	// kube-aggregator's columns: the service is "Local" for an API the
	// server itself serves; Available shows a false condition's reason.
	cells([]metav1.TableColumnDefinition{
		nameColumn(),
		column("Service", "string", "The reference to the service that hosts this API endpoint."),
		column("Available", "string", "Whether this service is available."),
		ageColumn(),
	}, func(svc *apiregistrationv1.APIService, now time.Time) []interface{} {
		service := "Local"
		if s := svc.Spec.Service; s != nil {
			service = s.Namespace + "/" + s.Name
		}
		available := string(apiregistrationv1.ConditionUnknown)
		if c := v1helper.GetAPIServiceConditionByType(svc, apiregistrationv1.Available); c != nil {
			available = string(c.Status)
			if c.Status != apiregistrationv1.ConditionTrue && c.Reason != "" {
				available = fmt.Sprintf("%s (%s)", c.Status, c.Reason)
			}
		}
		return []interface{}{svc.Name, service, available, age(svc.ObjectMeta, now)}
	})
}
