package registry

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/kelp-project/kelp/server/apiserver/defaults"
	"github.com/kelp-project/kelp/server/apiserver/validation"
)

// CRDCleanupFinalizer holds a deleted CRD until its custom objects are
// gone (upstream's customresourcecleanup.apiextensions.k8s.io).
const CRDCleanupFinalizer = "customresourcecleanup.apiextensions.k8s.io"

func init() {
	// The API server encodes, decodes and stores through client-go's
	// scheme, which lacks CRDs (and APIServices, apiregistration.go).
	utilruntime.Must(apiextensionsv1.AddToScheme(scheme.Scheme))
}

// customResourceDefinitions is apiextensions.k8s.io/v1's one kind, stored
// as protobuf like every built-in. What a CRD serves is the API server's
// business (crdserving.go); this is the CRD object itself.
func customResourceDefinitions() *Resource {
	return &Resource{
		GVR: gvr("apiextensions.k8s.io", "v1", "customresourcedefinitions"), Kind: "CustomResourceDefinition",
		Singular: "customresourcedefinition", ShortNames: []string{"crd", "crds"}, Categories: []string{"api-extensions"},
		New:     func() runtime.Object { return &apiextensionsv1.CustomResourceDefinition{} },
		NewList: func() runtime.Object { return &apiextensionsv1.CustomResourceDefinitionList{} },
		Status:  true,
		// A CRD is decoded only to be served: what serving keeps of it is
		// its own (crdserving.go), so the cache need not hold it decoded.
		CacheEncoded: true,
		Strategy: withGenericTable(Strategy{
			Default:              defaulter(defaults.CustomResourceDefinition),
			Validate:             validator(validation.CustomResourceDefinition),
			ValidateUpdate:       updateValidator(validation.CustomResourceDefinitionUpdate),
			ValidateStatusUpdate: updateValidator(validation.CustomResourceDefinitionStatusUpdate),
			PrepareForCreate:     recordStoredVersion,
			PrepareForUpdate: func(obj, old runtime.Object) {
				recordStoredVersion(obj)
			},
			MarkDeleted: markCRDDeleted,
		}),
	}
}

// recordStoredVersion adds the storage version to status.storedVersions,
// as upstream's strategy does on create and on every spec update: the
// list is what a storage migration must still rewrite.
func recordStoredVersion(obj runtime.Object) {
	crd := obj.(*apiextensionsv1.CustomResourceDefinition)
	for _, v := range crd.Spec.Versions {
		if !v.Storage {
			continue
		}
		for _, sv := range crd.Status.StoredVersions {
			if sv == v.Name {
				return
			}
		}
		crd.Status.StoredVersions = append(crd.Status.StoredVersions, v.Name)
		return
	}
}

// markCRDDeleted is upstream's CRD delete: the CRD turns Terminating and
// keeps the cleanup finalizer until the CRD finalizer has deleted every
// custom object (its other finalizers stay as they are).
func markCRDDeleted(obj runtime.Object) {
	crd := obj.(*apiextensionsv1.CustomResourceDefinition)
	if crd.DeletionTimestamp == nil {
		now := metav1.Now()
		crd.DeletionTimestamp = &now
		crd.Generation++
	}
	// No grace: the CRD goes as soon as its finalizers are gone.
	crd.DeletionGracePeriodSeconds = new(int64)
	has := false
	for _, f := range crd.Finalizers {
		has = has || f == CRDCleanupFinalizer
	}
	if !has {
		crd.Finalizers = append(crd.Finalizers, CRDCleanupFinalizer)
	}
	SetCRDCondition(crd, apiextensionsv1.CustomResourceDefinitionCondition{
		Type: apiextensionsv1.Terminating, Status: apiextensionsv1.ConditionTrue,
		Reason: "InstanceDeletionPending", Message: "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
	})
}

// SetCRDCondition sets a condition, keeping its transition time when the
// status does not change.
func SetCRDCondition(crd *apiextensionsv1.CustomResourceDefinition, c apiextensionsv1.CustomResourceDefinitionCondition) {
	c.LastTransitionTime = metav1.Now()
	for i, old := range crd.Status.Conditions {
		if old.Type == c.Type {
			if old.Status == c.Status {
				c.LastTransitionTime = old.LastTransitionTime
			}
			crd.Status.Conditions[i] = c
			return
		}
	}
	crd.Status.Conditions = append(crd.Status.Conditions, c)
}
