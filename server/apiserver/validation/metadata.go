package validation

import (
	"fmt"
	"math"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// nameFunc validates an object name; prefix is true for generateName.
type nameFunc = apimachineryvalidation.ValidateNameFunc

// Name rules, as upstream assigns them per resource.
var (
	// Most resources: a DNS-1123 subdomain (253 chars, dots allowed).
	nameIsDNSSubdomain nameFunc = apimachineryvalidation.NameIsDNSSubdomain
	// Namespaces: a DNS-1123 label (63 chars, no dots).
	nameIsDNSLabel nameFunc = apimachineryvalidation.NameIsDNSLabel
	// Services: a DNS-1035 label (must also start with a letter), because
	// the name becomes a DNS name and an environment variable prefix.
	nameIsDNS1035Label nameFunc = apimachineryvalidation.NameIsDNS1035Label
	// RBAC objects and unknown kinds: anything that is a safe URL path segment.
	nameIsPathSegment nameFunc = path.ValidatePathSegmentName
)

// Messages shared with upstream.
const (
	isNegativeErrorMsg    = apimachineryvalidation.IsNegativeErrorMsg // "must be greater than or equal to 0"
	fieldImmutableMsg     = apimachineryvalidation.FieldImmutableErrorMsg
	isNotPositiveErrorMsg = "must be greater than zero"
	isNotIntegerErrorMsg  = "must be an integer"
)

var (
	metadataPath = field.NewPath("metadata")
	specPath     = field.NewPath("spec")
	statusPath   = field.NewPath("status")
)

// validateObjectMeta checks metadata on create, like upstream's
// ValidateObjectMeta, with one deliberate difference: for namespaced kinds
// an empty metadata.namespace is accepted, because kelp's API server takes
// the namespace from the request URL and fills it in itself; a namespace
// that is set must be a valid namespace name. Cluster-scoped kinds must not
// carry a namespace.
func validateObjectMeta(meta *metav1.ObjectMeta, namespaced bool, nameFn nameFunc) field.ErrorList {
	fldPath := metadataPath
	var allErrs field.ErrorList
	if meta.GenerateName != "" {
		for _, msg := range nameFn(meta.GenerateName, true) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("generateName"), meta.GenerateName, msg))
		}
	}
	if meta.Name == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("name"), "name or generateName is required"))
	} else {
		for _, msg := range nameFn(meta.Name, false) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("name"), meta.Name, msg))
		}
	}
	if namespaced {
		if meta.Namespace != "" {
			for _, msg := range apimachineryvalidation.ValidateNamespaceName(meta.Namespace, false) {
				allErrs = append(allErrs, field.Invalid(fldPath.Child("namespace"), meta.Namespace, msg))
			}
		}
	} else if meta.Namespace != "" {
		allErrs = append(allErrs, field.Forbidden(fldPath.Child("namespace"), "not allowed on this type"))
	}
	allErrs = append(allErrs, validateNonnegative(meta.Generation, fldPath.Child("generation"))...)
	allErrs = append(allErrs, metav1validation.ValidateLabels(meta.Labels, fldPath.Child("labels"))...)
	allErrs = append(allErrs, apimachineryvalidation.ValidateAnnotations(meta.Annotations, fldPath.Child("annotations"))...)
	allErrs = append(allErrs, apimachineryvalidation.ValidateOwnerReferences(meta.OwnerReferences, fldPath.Child("ownerReferences"))...)
	allErrs = append(allErrs, apimachineryvalidation.ValidateFinalizers(meta.Finalizers, fldPath.Child("finalizers"))...)
	allErrs = append(allErrs, metav1validation.ValidateManagedFields(meta.ManagedFields, fldPath.Child("managedFields"))...)
	return allErrs
}

// validateObjectMetaUpdate checks metadata on update: name, namespace, uid,
// creationTimestamp, deletion fields are immutable, generation may not go
// down, no finalizers may be added once deletion started, and the new
// labels/annotations/ownerReferences/managedFields must be valid.
//
// Upstream also rejects an empty resourceVersion here, but its registries
// fill the stored resourceVersion in before validating an unconditional
// update (every kind kelp serves allows those), so that error can never
// reach a client upstream. It is dropped so that kelp behaves the same
// whether or not its handlers pre-fill the version.
func validateObjectMetaUpdate(newMeta, oldMeta *metav1.ObjectMeta) field.ErrorList {
	errs := apimachineryvalidation.ValidateObjectMetaUpdate(newMeta, oldMeta, metadataPath)
	out := errs[:0]
	rvPath := metadataPath.Child("resourceVersion").String()
	for _, e := range errs {
		if e.Field == rvPath && e.Type == field.ErrorTypeInvalid {
			continue
		}
		out = append(out, e)
	}
	return out
}

func validateNonnegative(v int64, fldPath *field.Path) field.ErrorList {
	if v < 0 {
		return field.ErrorList{field.Invalid(fldPath, v, isNegativeErrorMsg)}
	}
	return nil
}

func validateNonnegativePtr[T int32 | int64](v *T, fldPath *field.Path) field.ErrorList {
	if v == nil {
		return nil
	}
	return validateNonnegative(int64(*v), fldPath)
}

func validateNonnegativeQuantity(q resource.Quantity, fldPath *field.Path) field.ErrorList {
	if q.Sign() < 0 {
		return field.ErrorList{field.Invalid(fldPath, q.String(), isNegativeErrorMsg)}
	}
	return nil
}

func validatePositiveQuantity(q resource.Quantity, fldPath *field.Path) field.ErrorList {
	if q.Sign() <= 0 {
		return field.ErrorList{field.Invalid(fldPath, q.String(), isNotPositiveErrorMsg)}
	}
	return nil
}

// validateImmutable reports "field is immutable" when the values differ
// semantically (nil and empty collections are equal; quantities compare by
// value), matching upstream's ValidateImmutableField.
func validateImmutable(newVal, oldVal any, fldPath *field.Path) field.ErrorList {
	if !apiequality.Semantic.DeepEqual(newVal, oldVal) {
		return field.ErrorList{field.Invalid(fldPath, newVal, fieldImmutableMsg)}
	}
	return nil
}

// invalidFor reports each message of an apimachinery string check of v as
// an Invalid error at fldPath.
func invalidFor(v string, msgs []string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range msgs {
		errs = append(errs, field.Invalid(fldPath, v, msg))
	}
	return errs
}

func validateDNS1123Label(v string, fldPath *field.Path) field.ErrorList {
	return invalidFor(v, validation.IsDNS1123Label(v), fldPath)
}

func validateDNS1123Subdomain(v string, fldPath *field.Path) field.ErrorList {
	return invalidFor(v, validation.IsDNS1123Subdomain(v), fldPath)
}

func validateQualifiedName(v string, fldPath *field.Path) field.ErrorList {
	return invalidFor(v, validation.IsQualifiedName(v), fldPath)
}

// validateName applies a resource name rule to a reference field.
func validateName(v string, fn nameFunc, fldPath *field.Path) field.ErrorList {
	return invalidFor(v, fn(v, false), fldPath)
}

func validateLabelSelector(sel *metav1.LabelSelector, fldPath *field.Path) field.ErrorList {
	return metav1validation.ValidateLabelSelector(sel, metav1validation.LabelSelectorValidationOptions{}, fldPath)
}

// validateIP accepts any parseable IP, including the legacy forms (leading
// zeros) upstream still tolerates in old fields.
func validateIP(v string, fldPath *field.Path) field.ErrorList {
	return validation.IsValidIPForLegacyField(fldPath, v, false, nil)
}

func validateCIDR(v string, fldPath *field.Path) field.ErrorList {
	return validation.IsValidCIDRForLegacyField(fldPath, v, false, nil)
}

// validatePositiveIntOrPercent is upstream's ValidatePositiveIntOrPercent:
// a non-negative integer or a percent string like "25%".
func validatePositiveIntOrPercent(v *intstr.IntOrString, fldPath *field.Path) field.ErrorList {
	if v == nil {
		return nil
	}
	var errs field.ErrorList
	switch v.Type {
	case intstr.String:
		for _, msg := range validation.IsValidPercent(v.StrVal) {
			errs = append(errs, field.Invalid(fldPath, v, msg))
		}
	case intstr.Int:
		errs = append(errs, validateNonnegative(int64(v.IntValue()), fldPath)...)
	default:
		errs = append(errs, field.Invalid(fldPath, v, "must be an integer or percentage (e.g '5%')"))
	}
	return errs
}

// intOrPercentValue returns the number in an int-or-percent (25 for "25%"),
// or -1 when it cannot be parsed (already reported elsewhere).
func intOrPercentValue(v *intstr.IntOrString) int {
	if v == nil {
		return 0
	}
	if v.Type == intstr.Int {
		return v.IntValue()
	}
	var n int
	if _, err := fmt.Sscanf(strings.TrimSuffix(v.StrVal, "%"), "%d", &n); err != nil || !strings.HasSuffix(v.StrVal, "%") {
		return -1
	}
	return n
}

func isNotMoreThan100Percent(v *intstr.IntOrString, fldPath *field.Path) field.ErrorList {
	if v == nil || v.Type != intstr.String || len(validation.IsValidPercent(v.StrVal)) > 0 {
		return nil
	}
	if intOrPercentValue(v) > 100 {
		return field.ErrorList{field.Invalid(fldPath, v, "must not be greater than 100%")}
	}
	return nil
}

// inclusiveRangeError mirrors validation.InclusiveRangeError for int64 bounds.
func inclusiveRangeError(lo, hi int64) string {
	return fmt.Sprintf("must be between %d and %d, inclusive", lo, hi)
}

const maxInt32 = math.MaxInt32

// apiValidateAnnotations checks annotation keys and their 256 KiB total.
var apiValidateAnnotations = apimachineryvalidation.ValidateAnnotations

// validateLabelsMap checks a label map (or a map-shaped selector).
var validateLabelsMap = metav1validation.ValidateLabels
