package registry

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	v1helper "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1/helper"

	"github.com/kelp-project/kelp/server/apiserver/defaults"
	"github.com/kelp-project/kelp/server/apiserver/validation"
)

func init() {
	// Like CRDs, APIServices are kube-aggregator's types, not client-go's:
	// the API server encodes, decodes and stores through client-go's scheme.
	utilruntime.Must(apiregistrationv1.AddToScheme(scheme.Scheme))
}

// apiServices is apiregistration.k8s.io/v1's one kind. kelp has no
// aggregation layer: the APIServices of its own groups are kept by the
// control plane's apiservice controller (server/controllers/apiservice),
// and one that names a service is never proxied to, which that controller
// states in its Available condition.
func apiServices() *Resource {
	return &Resource{
		GVR: gvr("apiregistration.k8s.io", "v1", "apiservices"), Kind: "APIService", Singular: "apiservice",
		Categories: []string{"api-extensions"},
		New:        func() runtime.Object { return &apiregistrationv1.APIService{} },
		NewList:    func() runtime.Object { return &apiregistrationv1.APIServiceList{} },
		Status:     true,
		Strategy: Strategy{
			Default:              defaulter(defaults.APIService),
			Validate:             validator(validation.APIService),
			ValidateUpdate:       updateValidator(validation.APIServiceUpdate),
			ValidateStatusUpdate: updateValidator(validation.APIServiceStatusUpdate),
			PrepareForCreate:     localAPIServiceAvailable,
			// A /status write keeps the stored spec (the generic split), labels,
			// annotations, finalizers and owners, as upstream's status strategy.
			PrepareForStatusUpdate: func(obj, old runtime.Object) {
				n, o := obj.(*apiregistrationv1.APIService), old.(*apiregistrationv1.APIService)
				n.Labels, n.Annotations, n.Finalizers, n.OwnerReferences = o.Labels, o.Annotations, o.Finalizers, o.OwnerReferences
			},
		},
	}
}

// localAPIServiceAvailable: a local APIService (no spec.service: served by
// this API server) is Available from its creation, as upstream's strategy
// marks it.
func localAPIServiceAvailable(obj runtime.Object) {
	svc := obj.(*apiregistrationv1.APIService)
	if svc.Spec.Service == nil {
		v1helper.SetAPIServiceCondition(svc, v1helper.NewLocalAvailableAPIServiceCondition())
	}
}

// GroupVersions are the group/versions of the built-in kinds, in
// discovery order: those that get an APIService of their own.
func GroupVersions() []schema.GroupVersion {
	var out []schema.GroupVersion
	seen := map[schema.GroupVersion]bool{}
	for _, r := range All(Options{}) {
		if gv := r.GVR.GroupVersion(); !seen[gv] {
			seen[gv] = true
			out = append(out, gv)
		}
	}
	return out
}
