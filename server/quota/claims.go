package quota

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/admission"
	quota "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/apiserver/pkg/quota/v1/generic"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/utils/ptr"
)

var pvcsGVR = corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")

var pvcObjectCountName = generic.ObjectCountQuotaResourceNameFor(pvcsGVR.GroupResource())

var pvcResources = []corev1.ResourceName{corev1.ResourcePersistentVolumeClaims, corev1.ResourceRequestsStorage}

// storageClassSuffix names a claim resource per class:
// <class>.storageclass.storage.k8s.io/<resource>.
const storageClassSuffix = ".storageclass.storage.k8s.io/"

// NewPersistentVolumeClaimEvaluator returns upstream's claim evaluator
// (VolumeAttributesClass and RecoverVolumeExpansionFailure on, as in
// v1.37).
func NewPersistentVolumeClaimEvaluator(f quota.ListerForResourceFunc) quota.Evaluator {
	e := &pvcEvaluator{}
	e.evaluator = newEvaluator(f, pvcsGVR, pvcMatchesScopeFunc, e.MatchingResources, e.Usage)
	return e
}

type pvcEvaluator struct{ evaluator }

func toClaim(obj runtime.Object) (*corev1.PersistentVolumeClaim, error) {
	pvc, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok {
		return nil, fmt.Errorf("expect *api.PersistentVolumeClaim or *v1.PersistentVolumeClaim, got %T", obj)
	}
	return pvc, nil
}

// Handles creates and updates (a claim can grow), and status updates that
// change what is allocated or the attributes class.
func (p *pvcEvaluator) Handles(a admission.Attributes) bool {
	op := a.GetOperation()
	switch a.GetSubresource() {
	case "":
		return op == admission.Create || op == admission.Update
	case "status":
		pvc, err1 := toClaim(a.GetObject())
		old, err2 := toClaim(a.GetOldObject())
		if err1 != nil || err2 != nil {
			return false
		}
		return RequiresQuotaReplenish(pvc, old)
	default:
		return false
	}
}

func (p *pvcEvaluator) MatchingResources(items []corev1.ResourceName) []corev1.ResourceName {
	result := []corev1.ResourceName{}
	for _, item := range items {
		if item == pvcObjectCountName || quota.Contains(pvcResources, item) {
			result = append(result, item)
			continue
		}
		for _, r := range pvcResources {
			if strings.HasSuffix(string(item), storageClassSuffix+string(r)) {
				result = append(result, item)
				break
			}
		}
	}
	return result
}

func (p *pvcEvaluator) Usage(item runtime.Object) (corev1.ResourceList, error) {
	result := corev1.ResourceList{}
	pvc, err := toClaim(item)
	if err != nil {
		return result, err
	}
	result[corev1.ResourcePersistentVolumeClaims] = *resource.NewQuantity(1, resource.DecimalSI)
	result[pvcObjectCountName] = *resource.NewQuantity(1, resource.DecimalSI)
	class := storagehelpers.GetPersistentVolumeClaimClass(pvc)
	if class != "" {
		result[corev1.ResourceName(class+storageClassSuffix+string(corev1.ResourcePersistentVolumeClaims))] = *resource.NewQuantity(1, resource.DecimalSI)
	}
	if storage := claimStorage(pvc); storage != nil {
		result[corev1.ResourceRequestsStorage] = *storage
		if class != "" {
			result[corev1.ResourceName(class+storageClassSuffix+string(corev1.ResourceRequestsStorage))] = *storage
		}
	}
	return result, nil
}

// claimStorage is the claim's storage request in whole bytes, or what is
// allocated to it if that is more.
func claimStorage(pvc *corev1.PersistentVolumeClaim) *resource.Quantity {
	roundUp := func(q resource.Quantity) *resource.Quantity {
		r := q.DeepCopy()
		r.RoundUp(0)
		return &r
	}
	req, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if !ok {
		return nil
	}
	result := roundUp(req)
	if allocated, ok := pvc.Status.AllocatedResources[corev1.ResourceStorage]; ok && allocated.Cmp(*result) > 0 {
		result = roundUp(allocated)
	}
	return result
}

// RequiresQuotaReplenish: a claim's allocated storage or its attributes
// classes changed.
func RequiresQuotaReplenish(pvc, old *corev1.PersistentVolumeClaim) bool {
	if old.Status.AllocatedResources.Storage().Cmp(*pvc.Status.AllocatedResources.Storage()) != 0 {
		return true
	}
	return !volumeAttributesClasses(old).Equal(volumeAttributesClasses(pvc))
}

func pvcMatchesScopeFunc(selector corev1.ScopedResourceSelectorRequirement, object runtime.Object) (bool, error) {
	pvc, err := toClaim(object)
	if err != nil {
		return false, err
	}
	if selector.ScopeName != corev1.ResourceQuotaScopeVolumeAttributesClass {
		return false, nil
	}
	names := volumeAttributesClasses(pvc)
	if selector.Operator == corev1.ScopeSelectorOpExists {
		return len(names) != 0, nil
	}
	sel, err := scopedSelector(selector)
	if err != nil {
		return false, fmt.Errorf("failed to parse and convert selector: %w", err)
	}
	if len(names) == 0 {
		return sel.Matches(labels.Set{}), nil
	}
	for name := range names {
		if sel.Matches(labels.Set{string(corev1.ResourceQuotaScopeVolumeAttributesClass): name}) {
			return true, nil
		}
	}
	return false, nil
}

func volumeAttributesClasses(pvc *corev1.PersistentVolumeClaim) sets.Set[string] {
	names := sets.New[string]()
	if n := ptr.Deref(pvc.Spec.VolumeAttributesClassName, ""); n != "" {
		names.Insert(n)
	}
	if n := ptr.Deref(pvc.Status.CurrentVolumeAttributesClassName, ""); n != "" {
		names.Insert(n)
	}
	if s := pvc.Status.ModifyVolumeStatus; s != nil && s.TargetVolumeAttributesClassName != "" {
		names.Insert(s.TargetVolumeAttributesClassName)
	}
	return names
}
