package validation

import (
	"context"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kube-aggregator/pkg/apis/apiregistration"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	apiservicevalidation "k8s.io/kube-aggregator/pkg/apis/apiregistration/validation"
)

// APIService, APIServiceUpdate and APIServiceStatusUpdate are
// kube-aggregator's own rules (the name is <version>.<group>, the
// priorities' ranges, a local APIService has no CA bundle, a service
// reference's namespace, name and port), run on the internal type they are
// written for: the v1 and internal types are field for field the same, so
// converting is exact and nothing is copied.
func APIService(svc *apiregistrationv1.APIService) field.ErrorList {
	return apiservicevalidation.ValidateAPIService(context.Background(), internalAPIService(svc))
}

func APIServiceUpdate(svc, old *apiregistrationv1.APIService) field.ErrorList {
	return apiservicevalidation.ValidateAPIServiceUpdate(context.Background(), internalAPIService(svc), internalAPIService(old))
}

func APIServiceStatusUpdate(svc, old *apiregistrationv1.APIService) field.ErrorList {
	return apiservicevalidation.ValidateAPIServiceStatusUpdate(context.Background(), internalAPIService(svc), internalAPIService(old))
}

// internalAPIService converts to the internal version; the generated
// conversion copies fields one to one and cannot fail.
func internalAPIService(svc *apiregistrationv1.APIService) *apiregistration.APIService {
	out := &apiregistration.APIService{}
	_ = apiregistrationv1.Convert_v1_APIService_To_apiregistration_APIService(svc, out, nil)
	return out
}
