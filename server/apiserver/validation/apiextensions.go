package validation

import (
	"context"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// CustomResourceDefinition, CustomResourceDefinitionUpdate and
// CustomResourceDefinitionStatusUpdate are upstream's own rules
// (names, versions, the structural-schema checks, CEL rules compiled
// against their cost limits, printer columns, subresources, the
// conversion strategy and its webhook's client config), run on the
// internal type they are written for: a CRD's schema rules are too many
// and too subtle to copy.
func CustomResourceDefinition(crd *apiextensionsv1.CustomResourceDefinition) field.ErrorList {
	in, errs := internalCRD(crd)
	if errs != nil {
		return errs
	}
	return crdvalidation.ValidateCustomResourceDefinition(context.Background(), in)
}

func CustomResourceDefinitionUpdate(crd, old *apiextensionsv1.CustomResourceDefinition) field.ErrorList {
	in, errs := internalCRD(crd)
	if errs != nil {
		return errs
	}
	oldIn, errs := internalCRD(old)
	if errs != nil {
		return errs
	}
	return crdvalidation.ValidateCustomResourceDefinitionUpdate(context.Background(), in, oldIn)
}

func CustomResourceDefinitionStatusUpdate(crd, old *apiextensionsv1.CustomResourceDefinition) field.ErrorList {
	in, errs := internalCRD(crd)
	if errs != nil {
		return errs
	}
	oldIn, errs := internalCRD(old)
	if errs != nil {
		return errs
	}
	return crdvalidation.ValidateUpdateCustomResourceDefinitionStatus(context.Background(), in, oldIn)
}

// internalCRD converts to the internal version upstream validates; a
// schema that cannot convert (a default that is not JSON) is invalid.
func internalCRD(crd *apiextensionsv1.CustomResourceDefinition) (*apiextensions.CustomResourceDefinition, field.ErrorList) {
	out := &apiextensions.CustomResourceDefinition{}
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(crd, out, nil); err != nil {
		return nil, field.ErrorList{field.Invalid(field.NewPath("spec"), "", err.Error())}
	}
	return out, nil
}
