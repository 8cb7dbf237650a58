package validation

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strings"

	"github.com/google/uuid"
	"gopkg.in/inf.v0"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	dracel "k8s.io/dynamic-resource-allocation/cel"
)

// The kinds of resource.k8s.io/v1 (dynamic resource allocation), as
// upstream's pkg/apis/resource/validation over the v1 types, with the
// feature gates at their 1.37 defaults: DRAPrioritizedList, DRAAdminAccess,
// DRADeviceTaints, DRAConsumableCapacity, DRAPartitionableDevices,
// DRADeviceBindingConditions, DRAResourceClaimDeviceStatus,
// DRAExtendedResource and DRAFractionalCapacityRange on; the alpha ones
// (derived attributes, list-typed attributes, partition types,
// compatibility groups, node-allocatable resources, skipNodeOperations)
// off, their fields dropped by the registry before validation, as
// upstream's strategies do. CEL selectors are compiled with the same
// library upstream uses (k8s.io/dynamic-resource-allocation/cel), so an
// expression is accepted exactly when kube-apiserver accepts it.

// draDeviceID names one allocated device (and its share, for devices
// allocated more than once) in a claim's status: upstream's
// structured.SharedDeviceID, as a string.
func draDeviceID(driver, pool, device string, shareID *string) string {
	id := driver + "/" + pool + "/" + device
	if shareID != nil {
		id += "/" + *shareID
	}
	return id
}

// draRequestNames are a claim's request names, each with its subrequest
// names (nil for a request with `exactly`).
type draRequestNames map[string]sets.Set[string]

func gatherDRARequestNames(claim *resourcev1.DeviceClaim) draRequestNames {
	names := draRequestNames{}
	for _, r := range claim.Requests {
		if len(r.FirstAvailable) == 0 {
			names[r.Name] = nil
			continue
		}
		subs := sets.New[string]()
		for _, s := range r.FirstAvailable {
			subs.Insert(s.Name)
		}
		names[r.Name] = subs
	}
	return names
}

// has reports whether ref is "<request>" or "<request>/<subrequest>" of
// the claim.
func (n draRequestNames) has(ref string) bool {
	req, sub, isSub := strings.Cut(ref, "/")
	subs, ok := n[req]
	if !ok {
		return false
	}
	return !isSub || subs.Has(sub)
}

// ResourceClaim is upstream's ValidateResourceClaim.
func ResourceClaim(c *resourcev1.ResourceClaim) field.ErrorList {
	allErrs := validateObjectMeta(&c.ObjectMeta, true, nameIsDNSSubdomain)
	return append(allErrs, validateDeviceClaim(&c.Spec.Devices, specPath.Child("devices"), false)...)
}

// ResourceClaimUpdate: the spec is immutable, so only that is checked
// beyond metadata.
func ResourceClaimUpdate(c, old *resourcev1.ResourceClaim) field.ErrorList {
	allErrs := validateObjectMeta(&c.ObjectMeta, true, nameIsDNSSubdomain)
	allErrs = append(allErrs, validateObjectMetaUpdate(&c.ObjectMeta, &old.ObjectMeta)...)
	return append(allErrs, validateImmutable(c.Spec, old.Spec, specPath)...)
}

// ResourceClaimStatusUpdate checks what a scheduler (the allocation), a
// kubelet (reservedFor) or a driver (devices) writes.
func ResourceClaimStatusUpdate(c, old *resourcev1.ResourceClaim) field.ErrorList {
	allErrs := validateObjectMetaUpdate(&c.ObjectMeta, &old.ObjectMeta)
	names := gatherDRARequestNames(&c.Spec.Devices)
	return append(allErrs, validateResourceClaimStatus(&c.Status, &old.Status, c.DeletionTimestamp != nil, names, statusPath)...)
}

// ResourceClaimTemplate is upstream's ValidateResourceClaimTemplate.
func ResourceClaimTemplate(t *resourcev1.ResourceClaimTemplate) field.ErrorList {
	allErrs := validateObjectMeta(&t.ObjectMeta, true, nameIsDNSSubdomain)
	return append(allErrs, validateResourceClaimTemplateSpec(&t.Spec, specPath)...)
}

// ResourceClaimTemplateUpdate: the create rules (upstream's strategy runs
// them on update too) and an immutable spec.
func ResourceClaimTemplateUpdate(t, old *resourcev1.ResourceClaimTemplate) field.ErrorList {
	allErrs := ResourceClaimTemplate(t)
	allErrs = append(allErrs, validateObjectMetaUpdate(&t.ObjectMeta, &old.ObjectMeta)...)
	return append(allErrs, validateImmutable(t.Spec, old.Spec, specPath)...)
}

// validateResourceClaimTemplateSpec: the claims' metadata may carry labels
// and annotations only (upstream's ValidateTemplateObjectMeta).
func validateResourceClaimTemplateSpec(spec *resourcev1.ResourceClaimTemplateSpec, fldPath *field.Path) field.ErrorList {
	mp := fldPath.Child("metadata")
	allErrs := apiValidateAnnotations(spec.Annotations, mp.Child("annotations"))
	allErrs = append(allErrs, validateLabelsMap(spec.Labels, mp.Child("labels"))...)
	allErrs = append(allErrs, onlyLabelsAndAnnotations(spec.ObjectMeta, mp)...)
	return append(allErrs, validateDeviceClaim(&spec.Spec.Devices, fldPath.Child("spec", "devices"), false)...)
}

// onlyLabelsAndAnnotations forbids every other field of a template's
// metadata, found by reflection so that a field added to ObjectMeta is
// forbidden too (upstream's validateFieldAllowList).
func onlyLabelsAndAnnotations(meta metav1.ObjectMeta, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	t, v := reflect.TypeOf(meta), reflect.ValueOf(meta)
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Name == "Labels" || f.Name == "Annotations" || v.Field(i).IsZero() {
			continue
		}
		allErrs = append(allErrs, field.Forbidden(fldPath.Child(strings.ToLower(f.Name[:1])+f.Name[1:]), "cannot be set"))
	}
	return allErrs
}

// DeviceClass is upstream's ValidateDeviceClass.
func DeviceClass(c *resourcev1.DeviceClass) field.ErrorList {
	allErrs := validateObjectMeta(&c.ObjectMeta, false, nameIsDNSSubdomain)
	return append(allErrs, validateDeviceClassSpec(&c.Spec, nil, specPath)...)
}

// DeviceClassUpdate: the spec may change; selectors and configs equal to
// the stored ones are not checked again.
func DeviceClassUpdate(c, old *resourcev1.DeviceClass) field.ErrorList {
	allErrs := validateObjectMeta(&c.ObjectMeta, false, nameIsDNSSubdomain)
	allErrs = append(allErrs, validateObjectMetaUpdate(&c.ObjectMeta, &old.ObjectMeta)...)
	return append(allErrs, validateDeviceClassSpec(&c.Spec, &old.Spec, specPath)...)
}

func validateDeviceClassSpec(spec, old *resourcev1.DeviceClassSpec, fldPath *field.Path) field.ErrorList {
	// Selectors exactly as stored were valid when stored: CEL is not
	// compiled again (any change, even reordering, is checked as new).
	storedSelectors := old != nil && apiequality.Semantic.DeepEqual(spec.Selectors, old.Selectors)
	allErrs := validateDeviceSelectors(spec.Selectors, fldPath.Child("selectors"), storedSelectors)
	storedConfig := old != nil && apiequality.Semantic.DeepEqual(spec.Config, old.Config)
	allErrs = append(allErrs, validateDRAList(spec.Config, resourcev1.DeviceConfigMaxSize, fldPath.Child("config"),
		func(c resourcev1.DeviceClassConfiguration, p *field.Path) field.ErrorList {
			return validateDeviceConfiguration(c.DeviceConfiguration, p, storedConfig)
		})...)
	if n := spec.ExtendedResourceName; n != nil && !isExtendedResourceName(corev1.ResourceName(*n)) {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("extendedResourceName"), *n, "must be a valid extended resource name"))
	}
	return allErrs
}

// isExtendedResourceName is upstream's helper: a resource outside
// kubernetes.io that makes a valid name once prefixed with "requests.".
func isExtendedResourceName(name corev1.ResourceName) bool {
	if isNativeResource(name) || strings.HasPrefix(string(name), corev1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(corev1.DefaultResourceRequestsPrefix+string(name))) == 0
}

// validateDeviceClaim checks a claim's (or a template's) requests,
// constraints and configuration.
func validateDeviceClaim(claim *resourcev1.DeviceClaim, fldPath *field.Path, stored bool) field.ErrorList {
	names := gatherDRARequestNames(claim)
	allErrs := validateDRASet(claim.Requests, resourcev1.DeviceRequestsMaxSize, fldPath.Child("requests"),
		func(r resourcev1.DeviceRequest) string { return r.Name },
		func(r resourcev1.DeviceRequest, p *field.Path) field.ErrorList {
			return validateDeviceRequest(r, p, stored)
		})
	allErrs = append(allErrs, validateDRAList(claim.Constraints, resourcev1.DeviceConstraintsMaxSize, fldPath.Child("constraints"),
		func(c resourcev1.DeviceConstraint, p *field.Path) field.ErrorList {
			return validateDeviceConstraint(c, p, names)
		})...)
	allErrs = append(allErrs, validateDRAList(claim.Config, resourcev1.DeviceConfigMaxSize, fldPath.Child("config"),
		func(c resourcev1.DeviceClaimConfiguration, p *field.Path) field.ErrorList {
			errs := validateRequestRefs(c.Requests, p.Child("requests"), names)
			return append(errs, validateDeviceConfiguration(c.DeviceConfiguration, p, stored)...)
		})...)
	return allErrs
}

// validateDeviceRequest: exactly one of `exactly` and `firstAvailable`.
func validateDeviceRequest(r resourcev1.DeviceRequest, fldPath *field.Path, stored bool) field.ErrorList {
	allErrs := validateDNS1123Label(r.Name, fldPath.Child("name"))
	switch {
	case r.Exactly == nil && len(r.FirstAvailable) == 0:
		allErrs = append(allErrs, field.Required(fldPath, "exactly one of `exactly` or `firstAvailable` is required"))
	case r.Exactly != nil && len(r.FirstAvailable) > 0:
		allErrs = append(allErrs, field.Invalid(fldPath, nil, "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set"))
	case r.Exactly != nil:
		e := r.Exactly
		allErrs = append(allErrs, validateDeviceRequestBody(e.DeviceClassName, e.Selectors, e.AllocationMode, e.Count, e.Tolerations, fldPath.Child("exactly"), stored)...)
	default:
		allErrs = append(allErrs, validateDRASet(r.FirstAvailable, resourcev1.FirstAvailableDeviceRequestMaxSize, fldPath.Child("firstAvailable"),
			func(s resourcev1.DeviceSubRequest) string { return s.Name },
			func(s resourcev1.DeviceSubRequest, p *field.Path) field.ErrorList {
				errs := validateDNS1123Label(s.Name, p.Child("name"))
				return append(errs, validateDeviceRequestBody(s.DeviceClassName, s.Selectors, s.AllocationMode, s.Count, s.Tolerations, p, stored)...)
			})...)
	}
	return allErrs
}

// validateDeviceRequestBody is what an exact request and a subrequest
// share: the class, selectors, allocation mode and count, tolerations.
func validateDeviceRequestBody(class string, selectors []resourcev1.DeviceSelector, mode resourcev1.DeviceAllocationMode, count int64,
	tolerations []resourcev1.DeviceToleration, fldPath *field.Path, stored bool) field.ErrorList {
	var allErrs field.ErrorList
	if class == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("deviceClassName"), ""))
	} else {
		allErrs = append(allErrs, validateDNS1123Subdomain(class, fldPath.Child("deviceClassName"))...)
	}
	allErrs = append(allErrs, validateDeviceSelectors(selectors, fldPath.Child("selectors"), stored)...)
	countPath := fldPath.Child("count")
	switch mode {
	case resourcev1.DeviceAllocationModeAll:
		if count != 0 {
			allErrs = append(allErrs, field.Invalid(countPath, count, fmt.Sprintf("must not be specified when allocationMode is '%s'", mode)))
		}
	case resourcev1.DeviceAllocationModeExactCount:
		if count <= 0 {
			allErrs = append(allErrs, field.Invalid(countPath, count, isNotPositiveErrorMsg))
		}
	default:
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("allocationMode"), mode,
			[]resourcev1.DeviceAllocationMode{resourcev1.DeviceAllocationModeAll, resourcev1.DeviceAllocationModeExactCount}))
	}
	for i, t := range tolerations {
		allErrs = append(allErrs, validateDeviceToleration(t, fldPath.Child("tolerations").Index(i))...)
	}
	return allErrs
}

func validateDeviceSelectors(selectors []resourcev1.DeviceSelector, fldPath *field.Path, stored bool) field.ErrorList {
	return validateDRAList(selectors, resourcev1.DeviceSelectorsMaxSize, fldPath,
		func(s resourcev1.DeviceSelector, p *field.Path) field.ErrorList {
			if s.CEL == nil {
				return field.ErrorList{field.Required(p.Child("cel"), "")}
			}
			return validateDeviceCEL(s.CEL.Expression, p.Child("cel", "expression"), stored)
		})
}

// validateDeviceCEL compiles a device selector and bounds its estimated
// cost. An expression already stored was valid then and is not compiled
// again (the environment only ever grows).
func validateDeviceCEL(expr string, fldPath *field.Path, stored bool) field.ErrorList {
	if stored {
		return nil
	}
	if len(expr) > resourcev1.CELSelectorExpressionMaxLength {
		return field.ErrorList{field.TooLong(fldPath, "", resourcev1.CELSelectorExpressionMaxLength)}
	}
	env := environment.NewExpressions
	result := dracel.GetCompiler(dracel.Features{EnableConsumableCapacity: true}).
		CompileCELExpression(expr, dracel.Options{EnvType: &env})
	if result.Error != nil {
		return field.ErrorList{celFieldError(fldPath, expr, result.Error)}
	}
	if result.MaxCost > resourcev1.CELSelectorExpressionMaxCost {
		return field.ErrorList{field.Forbidden(fldPath, "too complex, exceeds cost limit")}
	}
	return nil
}

// celFieldError turns the compiler's error into the field error upstream
// reports for it.
func celFieldError(fldPath *field.Path, expr string, err error) *field.Error {
	var ce *apiservercel.Error
	if errors.As(err, &ce) {
		switch ce.Type {
		case apiservercel.ErrorTypeRequired:
			return field.Required(fldPath, ce.Detail)
		case apiservercel.ErrorTypeInvalid:
			return field.Invalid(fldPath, expr, ce.Detail)
		}
		return field.InternalError(fldPath, ce)
	}
	return field.InternalError(fldPath, fmt.Errorf("unsupported error type: %w", err))
}

func validateDeviceConstraint(c resourcev1.DeviceConstraint, fldPath *field.Path, names draRequestNames) field.ErrorList {
	allErrs := validateRequestRefs(c.Requests, fldPath.Child("requests"), names)
	switch {
	case c.MatchAttribute != nil:
		allErrs = append(allErrs, validateFullyQualifiedName(*c.MatchAttribute, fldPath.Child("matchAttribute"))...)
	case c.DistinctAttribute != nil:
		allErrs = append(allErrs, validateFullyQualifiedName(*c.DistinctAttribute, fldPath.Child("distinctAttribute"))...)
	default:
		// Upstream's message with DRAConsumableCapacity on, as it is in 1.37.
		allErrs = append(allErrs, field.Required(fldPath, `exactly one of "matchAttribute" or "distinctAttribute" is required, but multiple fields are set`))
	}
	return allErrs
}

// validateRequestRefs checks a list of references to the claim's requests
// ("<request>" or "<request>/<subrequest>"), without duplicates.
func validateRequestRefs(refs []string, fldPath *field.Path, names draRequestNames) field.ErrorList {
	return validateDRASet(refs, resourcev1.DeviceRequestsMaxSize, fldPath, func(s string) string { return s },
		func(ref string, p *field.Path) field.ErrorList { return validateRequestRef(ref, p, names) })
}

func validateRequestRef(ref string, fldPath *field.Path, names draRequestNames) field.ErrorList {
	const msg = "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'"
	segments := strings.Split(ref, "/")
	if len(segments) > 2 {
		return field.ErrorList{field.Invalid(fldPath, ref, msg)}
	}
	var allErrs field.ErrorList
	for _, s := range segments {
		allErrs = append(allErrs, validateDNS1123Label(s, fldPath)...)
	}
	if !names.has(ref) {
		allErrs = append(allErrs, field.Invalid(fldPath, ref, msg))
	}
	return allErrs
}

func validateDeviceConfiguration(c resourcev1.DeviceConfiguration, fldPath *field.Path, stored bool) field.ErrorList {
	if c.Opaque == nil {
		return field.ErrorList{field.Required(fldPath.Child("opaque"), "")}
	}
	op := fldPath.Child("opaque")
	allErrs := validateCSIDriverName(c.Opaque.Driver, op.Child("driver"))
	return append(allErrs, validateDRARawObject(c.Opaque.Parameters, op.Child("parameters"), stored, resourcev1.OpaqueParametersMaxLength)...)
}

// validateDRARawObject: opaque driver data must be a JSON object, at most
// maxLen bytes when new (stored data predates the limit and stays).
func validateDRARawObject(raw runtime.RawExtension, fldPath *field.Path, stored bool, maxLen int) field.ErrorList {
	var v any
	switch {
	case len(raw.Raw) == 0:
		return field.ErrorList{field.Required(fldPath, "")}
	case !stored && len(raw.Raw) > maxLen:
		return field.ErrorList{field.TooLong(fldPath, "", maxLen)}
	}
	if err := json.Unmarshal(raw.Raw, &v); err != nil {
		return field.ErrorList{field.Invalid(fldPath, "<value omitted>", fmt.Sprintf("error parsing data as JSON: %v", err.Error()))}
	}
	switch v.(type) {
	case nil:
		return field.ErrorList{field.Required(fldPath, "")}
	case map[string]any:
		return nil
	}
	return field.ErrorList{field.Invalid(fldPath, "<value omitted>", "must be a valid JSON object")}
}

func validateResourceClaimStatus(status, old *resourcev1.ResourceClaimStatus, deleting bool, names draRequestNames, fldPath *field.Path) field.ErrorList {
	allErrs := validateDRASet(status.ReservedFor, resourcev1.ResourceClaimReservedForMaxSize, fldPath.Child("reservedFor"),
		func(r resourcev1.ResourceClaimConsumerReference) string { return string(r.UID) },
		func(r resourcev1.ResourceClaimConsumerReference, p *field.Path) field.ErrorList {
			var errs field.ErrorList
			if r.Resource == "" {
				errs = append(errs, field.Required(p.Child("resource"), ""))
			}
			if r.Name == "" {
				errs = append(errs, field.Required(p.Child("name"), ""))
			}
			if r.UID == "" {
				errs = append(errs, field.Required(p.Child("uid"), ""))
			}
			return errs
		})

	allocated := sets.New[string]()
	if status.Allocation != nil {
		for _, r := range status.Allocation.Devices.Results {
			allocated.Insert(draDeviceID(r.Driver, r.Pool, r.Device, (*string)(r.ShareID)))
		}
	}
	allErrs = append(allErrs, validateDRASet(status.Devices, -1, fldPath.Child("devices"),
		func(d resourcev1.AllocatedDeviceStatus) string {
			return draDeviceID(d.Driver, d.Pool, d.Device, d.ShareID)
		},
		func(d resourcev1.AllocatedDeviceStatus, p *field.Path) field.ErrorList {
			return validateAllocatedDeviceStatus(d, p, allocated)
		})...)

	if len(status.ReservedFor) > 0 {
		if status.Allocation == nil {
			allErrs = append(allErrs, field.Forbidden(fldPath.Child("reservedFor"), "may not be specified when `allocated` is not set"))
		} else if deleting {
			// A claim being deleted may lose consumers, never gain them.
			if sets.New(status.ReservedFor...).Difference(sets.New(old.ReservedFor...)).Len() > 0 {
				allErrs = append(allErrs, field.Forbidden(fldPath.Child("reservedFor"), "new entries may not be added while `deallocationRequested` or `deletionTimestamp` are set"))
			}
		}
	}

	// An allocation, once made, is not changed (only removed); a new one is
	// checked with today's rules, which may be stricter than when an
	// older one was stored.
	switch {
	case old.Allocation != nil && status.Allocation != nil:
		allErrs = append(allErrs, validateImmutable(status.Allocation, old.Allocation, fldPath.Child("allocation"))...)
	case status.Allocation != nil:
		allErrs = append(allErrs, validateAllocationResult(status.Allocation, fldPath.Child("allocation"), names)...)
	}
	return allErrs
}

func validateAllocationResult(a *resourcev1.AllocationResult, fldPath *field.Path, names draRequestNames) field.ErrorList {
	dp := fldPath.Child("devices")
	allErrs := validateDRAList(a.Devices.Results, resourcev1.AllocationResultsMaxSize, dp.Child("results"),
		func(r resourcev1.DeviceRequestAllocationResult, p *field.Path) field.ErrorList {
			errs := validateRequestRef(r.Request, p.Child("request"), names)
			errs = append(errs, validateCSIDriverName(r.Driver, p.Child("driver"))...)
			errs = append(errs, validatePoolName(r.Pool, p.Child("pool"))...)
			errs = append(errs, validateDNS1123Label(r.Device, p.Child("device"))...)
			errs = append(errs, validateBindingConditions(r.BindingConditions, r.BindingFailureConditions, p)...)
			for i, t := range r.Tolerations {
				errs = append(errs, validateDeviceToleration(t, p.Child("tolerations").Index(i))...)
			}
			if r.ShareID != nil {
				errs = append(errs, validateDRAUID(string(*r.ShareID), p.Child("shareID"))...)
			}
			return errs
		})
	// A class's and the claim's configurations: twice the per-claim limit.
	allErrs = append(allErrs, validateDRAList(a.Devices.Config, 2*resourcev1.DeviceConfigMaxSize, dp.Child("config"),
		func(c resourcev1.DeviceAllocationConfiguration, p *field.Path) field.ErrorList {
			var errs field.ErrorList
			switch c.Source {
			case "":
				errs = append(errs, field.Required(p.Child("source"), ""))
			case resourcev1.AllocationConfigSourceClaim, resourcev1.AllocationConfigSourceClass:
			default:
				errs = append(errs, field.NotSupported(p.Child("source"), c.Source,
					[]resourcev1.AllocationConfigSource{resourcev1.AllocationConfigSourceClaim, resourcev1.AllocationConfigSourceClass}))
			}
			errs = append(errs, validateRequestRefs(c.Requests, p.Child("requests"), names)...)
			return append(errs, validateDeviceConfiguration(c.DeviceConfiguration, p, false)...)
		})...)
	if a.NodeSelector != nil {
		allErrs = append(allErrs, validateNodeSelector(a.NodeSelector, fldPath.Child("nodeSelector"))...)
	}
	return allErrs
}

func validateAllocatedDeviceStatus(d resourcev1.AllocatedDeviceStatus, fldPath *field.Path, allocated sets.Set[string]) field.ErrorList {
	allErrs := validateCSIDriverName(d.Driver, fldPath.Child("driver"))
	allErrs = append(allErrs, validatePoolName(d.Pool, fldPath.Child("pool"))...)
	allErrs = append(allErrs, validateDNS1123Label(d.Device, fldPath.Child("device"))...)
	if d.ShareID != nil {
		allErrs = append(allErrs, validateDRAUID(*d.ShareID, fldPath.Child("shareID"))...)
	}
	if id := draDeviceID(d.Driver, d.Pool, d.Device, d.ShareID); !allocated.Has(id) {
		allErrs = append(allErrs, field.Invalid(fldPath, id, "must be an allocated device in the claim"))
	}
	if len(d.Conditions) > resourcev1.AllocatedDeviceStatusMaxConditions {
		allErrs = append(allErrs, field.TooMany(fldPath.Child("conditions"), len(d.Conditions), resourcev1.AllocatedDeviceStatusMaxConditions))
	}
	allErrs = append(allErrs, metav1validation.ValidateConditions(d.Conditions, fldPath.Child("conditions"))...)
	if d.Data != nil && len(d.Data.Raw) > 0 {
		allErrs = append(allErrs, validateDRARawObject(*d.Data, fldPath.Child("data"), false, resourcev1.AllocatedDeviceStatusDataMaxLength)...)
	}
	if n := d.NetworkData; n != nil {
		np := fldPath.Child("networkData")
		if len(n.InterfaceName) > resourcev1.NetworkDeviceDataInterfaceNameMaxLength {
			allErrs = append(allErrs, field.TooLong(np.Child("interfaceName"), "", resourcev1.NetworkDeviceDataInterfaceNameMaxLength))
		}
		if len(n.HardwareAddress) > resourcev1.NetworkDeviceDataHardwareAddressMaxLength {
			allErrs = append(allErrs, field.TooLong(np.Child("hardwareAddress"), "", resourcev1.NetworkDeviceDataHardwareAddressMaxLength))
		}
		allErrs = append(allErrs, validateDRASet(n.IPs, resourcev1.NetworkDeviceDataMaxIPs, np.Child("ips"), func(s string) string { return s },
			func(ip string, p *field.Path) field.ErrorList { return validation.IsValidInterfaceAddress(p, ip) })...)
	}
	return allErrs
}

// validatePoolName: one or more DNS subdomains separated by slashes.
func validatePoolName(name string, fldPath *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	var allErrs field.ErrorList
	if len(name) > resourcev1.PoolNameMaxLength {
		allErrs = append(allErrs, field.TooLong(fldPath, "", resourcev1.PoolNameMaxLength))
	}
	for _, part := range strings.Split(name, "/") {
		allErrs = append(allErrs, validateDNS1123Subdomain(part, fldPath)...)
	}
	return allErrs
}

// validateDRAUID: a share ID is a UUID in its lowercase normalized form.
func validateDRAUID(uid string, fldPath *field.Path) field.ErrorList {
	if err := uuid.Validate(uid); err != nil {
		return field.ErrorList{field.Invalid(fldPath, uid, fmt.Sprintf("error validating uid: %v", err))}
	}
	if len(uid) != 36 || uid != strings.ToLower(uid) {
		return field.ErrorList{field.Invalid(fldPath, uid, "uid must be in RFC 4122 normalized form, `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` with lowercase hexadecimal characters")}
	}
	return nil
}

// ResourceSlice is upstream's ValidateResourceSlice.
func ResourceSlice(s *resourcev1.ResourceSlice) field.ErrorList {
	allErrs := validateObjectMeta(&s.ObjectMeta, false, nameIsDNSSubdomain)
	return append(allErrs, validateResourceSliceSpec(&s.Spec, nil, specPath)...)
}

// ResourceSliceUpdate: the driver, pool name and node are fixed; the
// devices may change.
func ResourceSliceUpdate(s, old *resourcev1.ResourceSlice) field.ErrorList {
	allErrs := validateObjectMetaUpdate(&s.ObjectMeta, &old.ObjectMeta)
	return append(allErrs, validateResourceSliceSpec(&s.Spec, &old.Spec, specPath)...)
}

func validateResourceSliceSpec(spec, old *resourcev1.ResourceSliceSpec, fldPath *field.Path) field.ErrorList {
	allErrs := validateCSIDriverName(spec.Driver, fldPath.Child("driver"))
	pp := fldPath.Child("pool")
	allErrs = append(allErrs, validatePoolName(spec.Pool.Name, pp.Child("name"))...)
	if spec.Pool.ResourceSliceCount <= 0 {
		allErrs = append(allErrs, field.Invalid(pp.Child("resourceSliceCount"), spec.Pool.ResourceSliceCount, isNotPositiveErrorMsg))
	}
	if spec.Pool.Generation < 0 {
		allErrs = append(allErrs, field.Invalid(pp.Child("generation"), spec.Pool.Generation, isNegativeErrorMsg))
	}
	if old != nil {
		allErrs = append(allErrs, validateImmutable(spec.Pool.Name, old.Pool.Name, pp.Child("name"))...)
		allErrs = append(allErrs, validateImmutable(spec.Driver, old.Driver, fldPath.Child("driver"))...)
		allErrs = append(allErrs, validateImmutable(spec.NodeName, old.NodeName, fldPath.Child("nodeName"))...)
	}

	// Where the devices are: exactly one of four ways.
	var set []string
	if spec.NodeName != nil {
		if *spec.NodeName == "" {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("nodeName"), *spec.NodeName, "must be either unset or set to a non-empty string"))
		} else {
			set = append(set, "`nodeName`")
			allErrs = append(allErrs, invalidFor(*spec.NodeName, nameIsDNSSubdomain(*spec.NodeName, false), fldPath.Child("nodeName"))...)
		}
	}
	if spec.NodeSelector != nil {
		set = append(set, "`nodeSelector`")
		allErrs = append(allErrs, validateNodeSelector(spec.NodeSelector, fldPath.Child("nodeSelector"))...)
		if len(spec.NodeSelector.NodeSelectorTerms) != 1 {
			// One term keeps merging the selectors of devices allocated
			// from several slices simple.
			allErrs = append(allErrs, field.Invalid(fldPath.Child("nodeSelector", "nodeSelectorTerms"), spec.NodeSelector.NodeSelectorTerms, "must have exactly one node selector term"))
		}
	}
	for _, b := range []struct {
		v    *bool
		name string
	}{{spec.AllNodes, "allNodes"}, {spec.PerDeviceNodeSelection, "perDeviceNodeSelection"}} {
		switch {
		case b.v == nil:
		case *b.v:
			set = append(set, "`"+b.name+"`")
		default:
			allErrs = append(allErrs, field.Invalid(fldPath.Child(b.name), *b.v, "must be either unset or set to true"))
		}
	}
	switch len(set) {
	case 0:
		allErrs = append(allErrs, field.Required(fldPath, "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"))
	case 1:
	default:
		allErrs = append(allErrs, field.Invalid(fldPath, fmt.Sprintf("{%s}", strings.Join(set, ", ")),
			"exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required, but multiple fields are set"))
	}

	if spec.SharedCounters != nil && spec.Devices != nil {
		allErrs = append(allErrs, field.Invalid(fldPath, "", "only one of `sharedCounters` or `devices` is allowed"))
	}
	// Taints and counters make a device bigger: fewer fit in a slice.
	maxDevices := resourcev1.ResourceSliceMaxDevices
	for _, d := range spec.Devices {
		if len(d.Taints) > 0 || len(d.ConsumesCounters) > 0 {
			maxDevices = resourcev1.ResourceSliceMaxDevicesWithAdvancedFeatures
			break
		}
	}
	perDevice := spec.PerDeviceNodeSelection != nil && *spec.PerDeviceNodeSelection
	allErrs = append(allErrs, validateDRASet(spec.Devices, maxDevices, fldPath.Child("devices"),
		func(d resourcev1.Device) string { return d.Name },
		func(d resourcev1.Device, p *field.Path) field.ErrorList {
			return validateDevice(d, oldDevice(old, d.Name), p, perDevice)
		})...)
	allErrs = append(allErrs, validateDRASet(spec.SharedCounters, resourcev1.ResourceSliceMaxCounterSets, fldPath.Child("sharedCounters"),
		func(c resourcev1.CounterSet) string { return c.Name },
		func(c resourcev1.CounterSet, p *field.Path) field.ErrorList {
			return validateCounters(c.Name, c.Counters, resourcev1.ResourceSliceMaxCountersPerCounterSet, p.Child("name"), p.Child("counters"))
		})...)
	return allErrs
}

func oldDevice(old *resourcev1.ResourceSliceSpec, name string) *resourcev1.Device {
	if old == nil {
		return nil
	}
	for i := range old.Devices {
		if old.Devices[i].Name == name {
			return &old.Devices[i]
		}
	}
	return nil
}

// validateCounters checks a counter set (or a device's consumption of
// one): its name and its named counters.
func validateCounters(name string, counters map[string]resourcev1.Counter, maxCounters int, namePath, countersPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if name == "" {
		allErrs = append(allErrs, field.Required(namePath, ""))
	} else {
		allErrs = append(allErrs, validateDNS1123Label(name, namePath)...)
	}
	switch {
	case len(counters) == 0:
		allErrs = append(allErrs, field.Required(countersPath, ""))
	case len(counters) > maxCounters:
		allErrs = append(allErrs, field.TooMany(countersPath, len(counters), maxCounters))
	default:
		for k := range counters {
			allErrs = append(allErrs, validateDNS1123Label(k, countersPath)...)
		}
	}
	return allErrs
}

func validateDevice(d resourcev1.Device, old *resourcev1.Device, fldPath *field.Path, perDeviceNodeSelection bool) field.ErrorList {
	allErrs := validateDNS1123Label(d.Name, fldPath.Child("name"))
	if n := len(d.Attributes) + len(d.Capacity); n > resourcev1.ResourceSliceMaxAttributesAndCapacitiesPerDevice {
		allErrs = append(allErrs, field.Invalid(fldPath, n, fmt.Sprintf("the total number of attributes and capacities must not exceed %d", resourcev1.ResourceSliceMaxAttributesAndCapacitiesPerDevice)))
	}
	ap := fldPath.Child("attributes")
	for k, a := range d.Attributes {
		allErrs = append(allErrs, validateDRAQualifiedName(k, ap)...)
		allErrs = append(allErrs, validateDeviceAttribute(a, ap.Key(truncateKey(string(k))))...)
	}
	// Capacity and taints as stored are not checked again.
	if old == nil || !apiequality.Semantic.DeepEqual(old.Capacity, d.Capacity) {
		multiple := d.AllowMultipleAllocations != nil && *d.AllowMultipleAllocations
		cp := fldPath.Child("capacity")
		for k, c := range d.Capacity {
			allErrs = append(allErrs, validateDRAQualifiedName(k, cp)...)
			kp := cp.Key(truncateKey(string(k)))
			switch {
			case c.RequestPolicy == nil:
			case !multiple:
				allErrs = append(allErrs, field.Forbidden(kp.Child("requestPolicy"), "allowMultipleAllocations must be true"))
			default:
				allErrs = append(allErrs, validateRequestPolicy(c.Value, c.RequestPolicy, kp.Child("requestPolicy"))...)
			}
		}
	}
	if old == nil || !apiequality.Semantic.DeepEqual(old.Taints, d.Taints) {
		allErrs = append(allErrs, validateDRAList(d.Taints, resourcev1.DeviceTaintsMaxLength, fldPath.Child("taints"),
			func(t resourcev1.DeviceTaint, p *field.Path) field.ErrorList { return validateDeviceTaint(t, nil, p) })...)
	}
	allErrs = append(allErrs, validateDRASet(d.ConsumesCounters, resourcev1.ResourceSliceMaxDeviceCounterConsumptionsPerDevice, fldPath.Child("consumesCounters"),
		func(c resourcev1.DeviceCounterConsumption) string { return c.CounterSet },
		func(c resourcev1.DeviceCounterConsumption, p *field.Path) field.ErrorList {
			return validateCounters(c.CounterSet, c.Counters, resourcev1.ResourceSliceMaxCountersPerDeviceCounterConsumption, p.Child("counterSet"), p.Child("counters"))
		})...)

	const perDeviceMsg = "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when `perDeviceNodeSelection` is set to true in the ResourceSlice spec"
	if perDeviceNodeSelection {
		var set []string
		if d.NodeName != nil {
			if *d.NodeName == "" {
				allErrs = append(allErrs, field.Invalid(fldPath.Child("nodeName"), *d.NodeName, "must not be empty"))
			} else {
				set = append(set, "`nodeName`")
				allErrs = append(allErrs, invalidFor(*d.NodeName, nameIsDNSSubdomain(*d.NodeName, false), fldPath.Child("nodeName"))...)
			}
		}
		if d.NodeSelector != nil {
			set = append(set, "`nodeSelector`")
			allErrs = append(allErrs, validateNodeSelector(d.NodeSelector, fldPath.Child("nodeSelector"))...)
		}
		if d.AllNodes != nil {
			if *d.AllNodes {
				set = append(set, "`allNodes`")
			} else {
				allErrs = append(allErrs, field.Invalid(fldPath.Child("allNodes"), *d.AllNodes, "must be either unset or set to true"))
			}
		}
		switch len(set) {
		case 0:
			allErrs = append(allErrs, field.Required(fldPath, perDeviceMsg))
		case 1:
		default:
			allErrs = append(allErrs, field.Invalid(fldPath, fmt.Sprintf("{%s}", strings.Join(set, ", ")), perDeviceMsg))
		}
	} else if d.NodeName != nil || d.NodeSelector != nil || d.AllNodes != nil {
		allErrs = append(allErrs, field.Invalid(fldPath, nil, "`nodeName`, `nodeSelector` and `allNodes` can only be set if `perDeviceNodeSelection` is set to true in the ResourceSlice spec"))
	}
	return append(allErrs, validateBindingConditions(d.BindingConditions, d.BindingFailureConditions, fldPath)...)
}

// semverPattern is semver.org 2.0.0: three numbers, then optional
// pre-release and build identifiers.
var semverPattern = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)` +
	`(-(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(\.(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*)?` +
	`(\+[0-9a-zA-Z-]+(\.[0-9a-zA-Z-]+)*)?$`)

// validateDeviceAttribute: exactly one typed value (list-typed values are
// an alpha feature, dropped before this).
func validateDeviceAttribute(a resourcev1.DeviceAttribute, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	n := 0
	if a.BoolValue != nil {
		n++
	}
	if a.IntValue != nil {
		n++
	}
	if a.StringValue != nil {
		n++
		if len(*a.StringValue) > resourcev1.DeviceAttributeMaxValueLength {
			allErrs = append(allErrs, field.TooLong(fldPath.Child("string"), "", resourcev1.DeviceAttributeMaxValueLength))
		}
	}
	if a.VersionValue != nil {
		n++
		vp := fldPath.Child("version")
		if !semverPattern.MatchString(*a.VersionValue) {
			allErrs = append(allErrs, field.Invalid(vp, *a.VersionValue, "must be a string compatible with semver.org spec 2.0.0"))
		}
		if len(*a.VersionValue) > resourcev1.DeviceAttributeMaxValueLength {
			allErrs = append(allErrs, field.TooLong(vp, "", resourcev1.DeviceAttributeMaxValueLength))
		}
	}
	switch n {
	case 0:
		allErrs = append(allErrs, field.Invalid(fldPath, "", "exactly one value must be specified"))
	case 1:
	default:
		allErrs = append(allErrs, field.Invalid(fldPath, a, "exactly one value must be specified"))
	}
	return allErrs
}

// validateRequestPolicy checks how a shareable device's capacity may be
// requested: a list of valid values or a range, each with a default.
func validateRequestPolicy(capacity resource.Quantity, p *resourcev1.CapacityRequestPolicy, fldPath *field.Path) field.ErrorList {
	switch {
	case len(p.ValidValues) > 0 && p.ValidRange != nil:
		return field.ErrorList{field.Forbidden(fldPath, `exactly one policy can be specified, cannot specify "validValues" and "validRange" at the same time`)}
	case len(p.ValidValues) > 0:
		if p.Default == nil {
			return field.ErrorList{field.Required(fldPath.Child("default"), "required when validValues is defined")}
		}
		return validateRequestValidValues(*p.Default, capacity, p.ValidValues, fldPath.Child("validValues"))
	case p.ValidRange != nil:
		if p.Default == nil {
			return field.ErrorList{field.Required(fldPath.Child("default"), "required when validRange is defined")}
		}
		return validateRequestRange(*p.Default, capacity, *p.ValidRange, fldPath.Child("validRange"))
	}
	return nil
}

// capacityRequestPolicyMaxValidValues is upstream's
// CapacityRequestPolicyDiscreteMaxOptions (internal API only).
const capacityRequestPolicyMaxValidValues = 10

func validateRequestValidValues(def, capacity resource.Quantity, values []resource.Quantity, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i := 0; i+1 < len(values); i++ {
		if values[i].Cmp(values[i+1]) > 0 {
			allErrs = append(allErrs, field.Invalid(fldPath.Index(i+1), values[i+1].String(), "values must be sorted in ascending order"))
		}
	}
	foundDefault := false
	// DRAFractionalCapacityRange (on): values are compared as decimals.
	allErrs = append(allErrs, validateDRASet(values, capacityRequestPolicyMaxValidValues, fldPath,
		func(q resource.Quantity) string { return q.AsDec().String() },
		func(q resource.Quantity, p *field.Path) field.ErrorList {
			if q.Cmp(def) == 0 {
				foundDefault = true
			}
			if q.Cmp(capacity) > 0 {
				return field.ErrorList{field.Invalid(p, q.String(), fmt.Sprintf("option is larger than capacity value: %s", capacity.String()))}
			}
			return nil
		})...)
	if !foundDefault {
		allErrs = append(allErrs, field.Invalid(fldPath, def.String(), "default value is not valid according to the requestPolicy"))
	}
	return allErrs
}

func validateRequestRange(def, capacity resource.Quantity, r resourcev1.CapacityRequestPolicyRange, fldPath *field.Path) field.ErrorList {
	if r.Min == nil {
		return field.ErrorList{field.Required(fldPath.Child("min"), "required when validRange is defined")}
	}
	var allErrs field.ErrorList
	if r.Min.Cmp(capacity) > 0 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("min"), r.Min.String(), fmt.Sprintf("min is larger than capacity value: %s", capacity.String())))
	}
	if def.Cmp(*r.Min) < 0 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("default"), def.String(), fmt.Sprintf("default is less than min: %s", r.Min.String())))
	}
	if r.Max != nil {
		if r.Min.Cmp(*r.Max) > 0 {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("max"), r.Min.String(), fmt.Sprintf("min is larger than max: %s", r.Max.String())))
		}
		if r.Max.Cmp(capacity) > 0 {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("max"), r.Max.String(), fmt.Sprintf("max is larger than capacity value: %s", capacity.String())))
		}
		if def.Cmp(*r.Max) > 0 {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("default"), def.String(), fmt.Sprintf("default is more than max: %s", r.Max.String())))
		}
	}
	bounds := []struct {
		q    *resource.Quantity
		name string
	}{{&def, "default"}, {r.Min, "min"}, {r.Max, "max"}, {r.Step, "step"}}
	// With a fractional value anywhere, steps are counted in milli-units,
	// and every value must be exact in them.
	milli := isFractional(def)
	for _, b := range bounds[1:] {
		milli = milli || (b.q != nil && isFractional(*b.q))
	}
	if milli {
		bad := false
		for _, b := range bounds {
			if b.q != nil && b.q.Cmp(*resource.NewMilliQuantity(b.q.MilliValue(), b.q.Format)) != 0 {
				allErrs = append(allErrs, field.Invalid(fldPath.Child(b.name), b.q.String(), "value cannot be represented as a milli value"))
				bad = true
			}
		}
		if bad {
			return allErrs
		}
	}
	if r.Step == nil {
		return allErrs
	}
	if r.Step.Sign() <= 0 {
		return append(allErrs, field.Invalid(fldPath.Child("step"), r.Step.String(), isNotPositiveErrorMsg))
	}
	one := r.Min.DeepCopy()
	one.Add(*r.Step)
	if one.Cmp(capacity) > 0 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("step"), r.Step.String(), fmt.Sprintf("one step %s is larger than capacity value: %s", one.String(), capacity.String())))
	}
	if !milli {
		bad := false
		for _, b := range bounds {
			if b.q == nil {
				continue
			}
			switch {
			case b.q.Sign() < 0:
				allErrs = append(allErrs, field.Invalid(fldPath.Child(b.name), b.q.String(), isNegativeErrorMsg))
				bad = true
			case b.q.CmpInt64(math.MaxInt64) > 0:
				allErrs = append(allErrs, field.Invalid(fldPath.Child(b.name), b.q.String(), "must not be larger than 9223372036854775807"))
				bad = true
			}
		}
		if bad {
			return allErrs
		}
	}
	onStep := func(v resource.Quantity) field.ErrorList {
		val, lo, step := v.Value(), r.Min.Value(), r.Step.Value()
		if milli {
			val, lo, step = v.MilliValue(), r.Min.MilliValue(), r.Step.MilliValue()
		}
		if (val-lo)%step != 0 {
			return field.ErrorList{field.Invalid(fldPath.Child("step"), v.String(), fmt.Sprintf("value is not a multiple of a given step (%s) from (%s)", r.Step.String(), r.Min.String()))}
		}
		return nil
	}
	allErrs = append(allErrs, onStep(def)...)
	if r.Max != nil {
		allErrs = append(allErrs, onStep(*r.Max)...)
	}
	return allErrs
}

func isFractional(q resource.Quantity) bool {
	d := q.AsDec()
	return d.Cmp(new(inf.Dec).Round(d, 0, inf.RoundDown)) != 0
}

// validateDRAQualifiedName: an attribute or capacity name, a C identifier
// optionally prefixed by a domain ("<domain>/<id>").
func validateDRAQualifiedName(name resourcev1.QualifiedName, fldPath *field.Path) field.ErrorList {
	domain, id, qualified := strings.Cut(string(name), "/")
	if !qualified {
		return validateCIdentifier(domain, fldPath)
	}
	var allErrs field.ErrorList
	if domain == "" {
		allErrs = append(allErrs, field.Invalid(fldPath, "", "the domain must not be empty"))
	} else {
		allErrs = append(allErrs, validateCSIDriverName(domain, fldPath)...)
	}
	if id == "" {
		allErrs = append(allErrs, field.Invalid(fldPath, "", "the name must not be empty"))
	} else {
		allErrs = append(allErrs, validateCIdentifier(id, fldPath)...)
	}
	return allErrs
}

// validateFullyQualifiedName: a qualified name that has its domain.
func validateFullyQualifiedName(name resourcev1.FullyQualifiedName, fldPath *field.Path) field.ErrorList {
	allErrs := validateDRAQualifiedName(resourcev1.QualifiedName(name), fldPath)
	if !strings.Contains(string(name), "/") {
		allErrs = append(allErrs, field.Invalid(fldPath, name, "a fully qualified name must be a domain and a name separated by a slash"))
	}
	return allErrs
}

func validateCIdentifier(id string, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if len(id) > resourcev1.DeviceMaxIDLength {
		allErrs = append(allErrs, field.TooLong(fldPath, "", resourcev1.DeviceMaxIDLength))
	}
	return append(allErrs, invalidFor(id, content.IsCIdentifier(id), fldPath)...)
}

// truncateKey shortens a long map key in the middle for an error's path.
func truncateKey(key string) string {
	const maxLen = resourcev1.DeviceMaxDomainLength + 1 + resourcev1.DeviceMaxIDLength
	if len(key) <= maxLen {
		return key
	}
	const ellipsis = "..."
	keep := maxLen - len(ellipsis)
	return key[:(keep+1)/2] + ellipsis + key[len(key)-keep/2:]
}

// DeviceTaintRule is upstream's ValidateDeviceTaintRule.
func DeviceTaintRule(r *resourcev1.DeviceTaintRule) field.ErrorList {
	allErrs := validateObjectMeta(&r.ObjectMeta, false, nameIsDNSSubdomain)
	return append(allErrs, validateDeviceTaintRuleSpec(&r.Spec, nil, specPath)...)
}

// DeviceTaintRuleUpdate: the spec may change; an effect as stored is not
// checked again.
func DeviceTaintRuleUpdate(r, old *resourcev1.DeviceTaintRule) field.ErrorList {
	allErrs := validateObjectMetaUpdate(&r.ObjectMeta, &old.ObjectMeta)
	return append(allErrs, validateDeviceTaintRuleSpec(&r.Spec, &old.Spec, specPath)...)
}

// DeviceTaintRuleStatusUpdate: the conditions.
func DeviceTaintRuleStatusUpdate(r, old *resourcev1.DeviceTaintRule) field.ErrorList {
	allErrs := validateObjectMetaUpdate(&r.ObjectMeta, &old.ObjectMeta)
	cp := statusPath.Child("conditions")
	allErrs = append(allErrs, metav1validation.ValidateConditions(r.Status.Conditions, cp)...)
	if len(r.Status.Conditions) > resourcev1.DeviceTaintRuleStatusMaxConditions {
		allErrs = append(allErrs, field.TooMany(cp, len(r.Status.Conditions), resourcev1.DeviceTaintRuleStatusMaxConditions))
	}
	return allErrs
}

func validateDeviceTaintRuleSpec(spec, old *resourcev1.DeviceTaintRuleSpec, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if s := spec.DeviceSelector; s != nil {
		sp := fldPath.Child("deviceSelector")
		if s.Driver != nil {
			allErrs = append(allErrs, validateCSIDriverName(*s.Driver, sp.Child("driver"))...)
		}
		if s.Pool != nil {
			allErrs = append(allErrs, validatePoolName(*s.Pool, sp.Child("pool"))...)
		}
		if s.Device != nil {
			allErrs = append(allErrs, validateDNS1123Label(*s.Device, sp.Child("device"))...)
		}
	}
	var oldTaint *resourcev1.DeviceTaint
	if old != nil {
		oldTaint = &old.Taint
	}
	return append(allErrs, validateDeviceTaint(spec.Taint, oldTaint, fldPath.Child("taint"))...)
}

var (
	deviceTaintEffects  = sets.New(resourcev1.DeviceTaintEffectNoSchedule, resourcev1.DeviceTaintEffectNoExecute, resourcev1.DeviceTaintEffectNone)
	deviceTolerationOps = []resourcev1.DeviceTolerationOperator{resourcev1.DeviceTolerationOpEqual, resourcev1.DeviceTolerationOpExists}
)

func validateDeviceTaint(t resourcev1.DeviceTaint, old *resourcev1.DeviceTaint, fldPath *field.Path) field.ErrorList {
	allErrs := metav1validation.ValidateLabelName(t.Key, fldPath.Child("key"))
	if t.Value != "" {
		allErrs = append(allErrs, invalidFor(t.Value, validation.IsValidLabelValue(t.Value), fldPath.Child("value"))...)
	}
	if old == nil || old.Effect != t.Effect {
		switch {
		case t.Effect == "":
			allErrs = append(allErrs, field.Required(fldPath.Child("effect"), ""))
		case !deviceTaintEffects.Has(t.Effect):
			allErrs = append(allErrs, field.NotSupported(fldPath.Child("effect"), t.Effect, sets.List(deviceTaintEffects)))
		}
	}
	return allErrs
}

func validateDeviceToleration(t resourcev1.DeviceToleration, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if t.Key != "" {
		allErrs = append(allErrs, metav1validation.ValidateLabelName(t.Key, fldPath.Child("key"))...)
	}
	switch t.Operator {
	case resourcev1.DeviceTolerationOpExists:
		if t.Value != "" {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("value"), t.Value, "must be empty for operator `Exists`"))
		}
	case resourcev1.DeviceTolerationOpEqual:
		allErrs = append(allErrs, invalidFor(t.Value, validation.IsValidLabelValue(t.Value), fldPath.Child("value"))...)
	case "":
		allErrs = append(allErrs, field.Required(fldPath.Child("operator"), ""))
	default:
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("operator"), t.Operator, deviceTolerationOps))
	}
	if t.Effect != "" && !deviceTaintEffects.Has(t.Effect) {
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("effect"), t.Effect, sets.List(deviceTaintEffects)))
	}
	return allErrs
}

// validateBindingConditions: conditions a device waits for before its pod
// binds, and those that fail it; both or neither, distinct, disjoint.
func validateBindingConditions(conds, failures []string, fldPath *field.Path) field.ErrorList {
	cp, fp := fldPath.Child("bindingConditions"), fldPath.Child("bindingFailureConditions")
	allErrs := validateDRASet(conds, resourcev1.BindingConditionsMaxSize, cp, func(s string) string { return s }, metav1validation.ValidateLabelName)
	allErrs = append(allErrs, validateDRASet(failures, resourcev1.BindingFailureConditionsMaxSize, fp, func(s string) string { return s }, metav1validation.ValidateLabelName)...)
	inConds := sets.New(conds...)
	for i, c := range failures {
		if inConds.Has(c) {
			allErrs = append(allErrs, field.Invalid(fp.Index(i), c, "bindingFailureConditions must not overlap with bindingConditions"))
		}
	}
	if len(conds) == 0 && len(failures) > 0 {
		allErrs = append(allErrs, field.Invalid(cp, conds, "bindingConditions are required to use bindingFailureConditions"))
	}
	if len(failures) == 0 && len(conds) > 0 {
		allErrs = append(allErrs, field.Invalid(fp, failures, "bindingFailureConditions are required to use bindingConditions"))
	}
	return allErrs
}

// validateDRAList checks a list's length (a negative max: unbounded) and
// then each item. Too long a list is the only error: its items are not
// looked at (denial-of-service protection, as upstream).
func validateDRAList[T any](items []T, maxLen int, fldPath *field.Path, each func(T, *field.Path) field.ErrorList) field.ErrorList {
	if maxLen >= 0 && len(items) > maxLen {
		return field.ErrorList{field.TooMany(fldPath, len(items), maxLen)}
	}
	var allErrs field.ErrorList
	for i, item := range items {
		allErrs = append(allErrs, each(item, fldPath.Index(i))...)
	}
	return allErrs
}

// validateDRASet is validateDRAList for lists whose items are unique by key.
func validateDRASet[T any, K comparable](items []T, maxLen int, fldPath *field.Path, key func(T) K, each func(T, *field.Path) field.ErrorList) field.ErrorList {
	allErrs := validateDRAList(items, maxLen, fldPath, each)
	if maxLen >= 0 && len(items) > maxLen {
		return allErrs
	}
	seen := sets.New[K]()
	for i, item := range items {
		k := key(item)
		if seen.Has(k) {
			allErrs = append(allErrs, field.Duplicate(fldPath.Index(i), k))
		}
		seen.Insert(k)
	}
	return allErrs
}
