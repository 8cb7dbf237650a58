package validation

import (
	"strings"

	svmv1 "k8s.io/api/storagemigration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// storagemigration.k8s.io/v1, upstream's pkg/apis/storagemigration/validation.

// StorageVersionMigration: a DNS-subdomain name, the resource a DNS-1035
// label and the group, if any, a DNS-1123 subdomain.
func StorageVersionMigration(svm *svmv1.StorageVersionMigration) field.ErrorList {
	allErrs := validateObjectMeta(&svm.ObjectMeta, false, nameIsDNSSubdomain)
	resPath := field.NewPath("spec", "resource")
	if svm.Spec.Resource.Resource == "" {
		allErrs = append(allErrs, field.Required(resPath.Child("resource"), "resource is required to be set"))
	} else if errs := utilvalidation.IsDNS1035Label(svm.Spec.Resource.Resource); len(errs) > 0 {
		allErrs = append(allErrs, field.Invalid(resPath.Child("resource"), svm.Spec.Resource.Resource, strings.Join(errs, ",")))
	}
	if svm.Spec.Resource.Group != "" {
		if errs := utilvalidation.IsDNS1123Subdomain(svm.Spec.Resource.Group); len(errs) > 0 {
			allErrs = append(allErrs, field.Invalid(resPath.Child("group"), svm.Spec.Resource.Group, strings.Join(errs, ",")))
		}
	}
	return allErrs
}

// StorageVersionMigrationUpdate: the spec is immutable.
func StorageVersionMigrationUpdate(svm, old *svmv1.StorageVersionMigration) field.ErrorList {
	allErrs := StorageVersionMigration(svm)
	allErrs = append(allErrs, validateObjectMetaUpdate(&svm.ObjectMeta, &old.ObjectMeta)...)
	return append(allErrs, validateImmutable(svm.Spec, old.Spec, field.NewPath("spec"))...)
}

// StorageVersionMigrationStatusUpdate: a well-formed status.resourceVersion
// that never changes once set, valid conditions, never both Succeeded and
// Failed, and neither withdrawn once true.
func StorageVersionMigrationStatusUpdate(svm, old *svmv1.StorageVersionMigration) field.ErrorList {
	allErrs := validateObjectMetaUpdate(&svm.ObjectMeta, &old.ObjectMeta)
	statusPath := field.NewPath("status")
	if rv := svm.Status.ResourceVersion; rv != "" {
		if _, err := resourceversion.CompareResourceVersion(rv, rv); err != nil {
			allErrs = append(allErrs, field.Invalid(statusPath.Child("resourceVersion"), rv, err.Error()))
		}
	}
	allErrs = append(allErrs, metav1validation.ValidateConditions(svm.Status.Conditions, statusPath.Child("conditions"))...)
	if old.Status.ResourceVersion != "" && old.Status.ResourceVersion != svm.Status.ResourceVersion {
		allErrs = append(allErrs, field.Invalid(statusPath.Child("resourceVersion"), svm.Status.ResourceVersion, "field is immutable"))
	}
	succeeded, failed := migrationConditionTrue(svm, svmv1.MigrationSucceeded), migrationConditionTrue(svm, svmv1.MigrationFailed)
	if succeeded && failed {
		allErrs = append(allErrs, field.Invalid(statusPath.Child("conditions"), svm.Status.Conditions, "Both success and failed conditions cannot be true at the same time"))
	}
	if migrationConditionTrue(old, svmv1.MigrationSucceeded) && !succeeded {
		allErrs = append(allErrs, field.Invalid(statusPath.Child("conditions"), svm.Status.Conditions, "Success condition cannot be set to false once it is true"))
	}
	if migrationConditionTrue(old, svmv1.MigrationFailed) && !failed {
		allErrs = append(allErrs, field.Invalid(statusPath.Child("conditions"), svm.Status.Conditions, "Failed condition cannot be set to false once it is true"))
	}
	return allErrs
}

func migrationConditionTrue(svm *svmv1.StorageVersionMigration, t svmv1.MigrationConditionType) bool {
	return meta.IsStatusConditionTrue(svm.Status.Conditions, string(t))
}
