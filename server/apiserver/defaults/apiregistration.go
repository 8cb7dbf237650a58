package defaults

import (
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
)

// APIService is kube-aggregator's v1 defaulting: a service reference's
// port is 443 when unset.
func APIService(svc *apiregistrationv1.APIService) {
	apiregistrationv1.SetObjectDefaults_APIService(svc)
}
