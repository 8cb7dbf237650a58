package registry

import (
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kelp-project/kelp/server/apiserver/conversion"
	"github.com/kelp-project/kelp/server/apiserver/defaults"
	"github.com/kelp-project/kelp/server/apiserver/validation"
)

// HorizontalPodAutoscalers are one stored resource served at two versions,
// as upstream: autoscaling/v2 is the storage version, autoscaling/v1 is
// converted on every read and write (server/apiserver/conversion), what v1
// cannot hold kept in its annotations. The v1 resource validates the v2
// form, so both report upstream's (v2-shaped) field paths. What acts on
// them is server/controllers/podautoscaler, which reads no metrics: kelp
// serves no metrics API.

var horizontalPodAutoscalersV2 = gvr("autoscaling", "v2", "horizontalpodautoscalers")

func horizontalPodAutoscalers() *Resource {
	return &Resource{
		GVR: horizontalPodAutoscalersV2, Kind: "HorizontalPodAutoscaler", Singular: "horizontalpodautoscaler",
		ShortNames: []string{"hpa"}, Categories: []string{"all"}, Namespaced: true,
		New:     func() runtime.Object { return &autoscalingv2.HorizontalPodAutoscaler{} },
		NewList: func() runtime.Object { return &autoscalingv2.HorizontalPodAutoscalerList{} },
		Status:  true,
		Strategy: Strategy{
			Default:              defaulter(defaults.HorizontalPodAutoscalerV2),
			PrepareForCreate:     dropRoundTripAnnotations,
			PrepareForUpdate:     func(obj, _ runtime.Object) { dropRoundTripAnnotations(obj) },
			Validate:             validator(validation.HorizontalPodAutoscaler),
			ValidateUpdate:       updateValidator(validation.HorizontalPodAutoscalerUpdate),
			ValidateStatusUpdate: updateValidator(validation.HorizontalPodAutoscalerStatusUpdate),
		},
	}
}

// dropRoundTripAnnotations: a v2 object never carries v1's round-trip
// annotations (upstream's v2 conversion drops them), so a v1 object read
// later cannot mistake a client's copy for the stored state.
func dropRoundTripAnnotations(obj runtime.Object) {
	if h, ok := obj.(*autoscalingv2.HorizontalPodAutoscaler); ok {
		h.Annotations = conversion.DropRoundTripAnnotations(h.Annotations)
	}
}

func horizontalPodAutoscalersV1() *Resource {
	return &Resource{
		GVR: gvr("autoscaling", "v1", "horizontalpodautoscalers"), Kind: "HorizontalPodAutoscaler", Singular: "horizontalpodautoscaler",
		ShortNames: []string{"hpa"}, Categories: []string{"all"}, Namespaced: true,
		New:      func() runtime.Object { return &autoscalingv1.HorizontalPodAutoscaler{} },
		NewList:  func() runtime.Object { return &autoscalingv1.HorizontalPodAutoscalerList{} },
		Status:   true,
		StoredAs: &horizontalPodAutoscalersV2, ToStorage: HPAToV2, FromStorage: HPAFromV2,
		Strategy: Strategy{
			Default:                defaulter(defaults.HorizontalPodAutoscalerV1),
			PrepareForCreate:       hpaV1PrepareForCreate,
			PrepareForUpdate:       hpaV1PrepareForUpdate,
			PrepareForStatusUpdate: hpaV1PrepareForStatusUpdate,
			Validate:               asV2(validation.HorizontalPodAutoscaler),
			ValidateUpdate:         asV2Update(validation.HorizontalPodAutoscalerUpdate),
			ValidateStatusUpdate:   asV2Update(validation.HorizontalPodAutoscalerStatusUpdate),
		},
	}
}

// HPAToV2 converts an autoscaling/v1 HPA to the stored autoscaling/v2
// form, defaulted as upstream defaults a stored object when it is read.
func HPAToV2(obj runtime.Object) runtime.Object {
	out := conversion.HorizontalPodAutoscalerV1ToV2(obj.(*autoscalingv1.HorizontalPodAutoscaler))
	defaults.HorizontalPodAutoscalerV2(out)
	return out
}

// HPAFromV2 converts a stored autoscaling/v2 HPA to autoscaling/v1.
func HPAFromV2(obj runtime.Object) runtime.Object {
	return conversion.HorizontalPodAutoscalerV2ToV1(obj.(*autoscalingv2.HorizontalPodAutoscaler))
}

// asV2 validates a v1 object in its v2 form, as upstream validates the
// internal object (which has v2's shape).
func asV2(f func(*autoscalingv2.HorizontalPodAutoscaler) field.ErrorList) func(runtime.Object) field.ErrorList {
	return validator(func(h *autoscalingv1.HorizontalPodAutoscaler) field.ErrorList {
		return f(HPAToV2(h).(*autoscalingv2.HorizontalPodAutoscaler))
	})
}

func asV2Update(f func(obj, old *autoscalingv2.HorizontalPodAutoscaler) field.ErrorList) func(obj, old runtime.Object) field.ErrorList {
	return updateValidator(func(h, old *autoscalingv1.HorizontalPodAutoscaler) field.ErrorList {
		return f(HPAToV2(h).(*autoscalingv2.HorizontalPodAutoscaler), HPAToV2(old).(*autoscalingv2.HorizontalPodAutoscaler))
	})
}

// The annotations that carry v2 status in a v1 object, and those that
// carry v2 spec. The generic write path keeps status from the main
// endpoint and spec from /status by the v1 fields; these keep the
// annotated parts alike, as upstream's strategies do on the internal form.
var (
	hpaStatusAnnotations = []string{conversion.MetricStatusesAnnotation, conversion.HorizontalPodAutoscalerConditionsAnnotation}
	hpaSpecAnnotations   = []string{conversion.MetricSpecsAnnotation, conversion.BehaviorSpecsAnnotation}
)

// hpaV1PrepareForCreate: a new HPA has no status, annotated or not.
func hpaV1PrepareForCreate(obj runtime.Object) {
	h := obj.(*autoscalingv1.HorizontalPodAutoscaler)
	h.Annotations = withAnnotationsOf(h.Annotations, nil, hpaStatusAnnotations)
}

// hpaV1PrepareForUpdate: the main endpoint does not change status.
func hpaV1PrepareForUpdate(obj, old runtime.Object) {
	h, o := obj.(*autoscalingv1.HorizontalPodAutoscaler), old.(*autoscalingv1.HorizontalPodAutoscaler)
	h.Annotations = withAnnotationsOf(h.Annotations, o.Annotations, hpaStatusAnnotations)
}

// hpaV1PrepareForStatusUpdate: /status does not change the spec.
func hpaV1PrepareForStatusUpdate(obj, old runtime.Object) {
	h, o := obj.(*autoscalingv1.HorizontalPodAutoscaler), old.(*autoscalingv1.HorizontalPodAutoscaler)
	h.Annotations = withAnnotationsOf(h.Annotations, o.Annotations, hpaSpecAnnotations)
}

// withAnnotationsOf returns ann with the keys set as in from (removed where
// from lacks them), a copy when anything changes.
func withAnnotationsOf(ann, from map[string]string, keys []string) map[string]string {
	out := ann
	copied := false
	for _, k := range keys {
		v, ok := from[k]
		if cur, has := out[k]; has == ok && cur == v {
			continue
		}
		if !copied {
			out = make(map[string]string, len(ann)+len(keys))
			for key, val := range ann {
				out[key] = val
			}
			copied = true
		}
		if ok {
			out[k] = v
		} else {
			delete(out, k)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
