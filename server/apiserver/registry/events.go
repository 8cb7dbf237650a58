package registry

import (
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kelp-project/kelp/server/apiserver/validation"
)

var coreEvents = gvr("", "v1", "events")

// coreEventsResource is core/v1 Events, free-form on create and update.
func coreEventsResource() *Resource {
	return &Resource{
		GVR: coreEvents, Kind: "Event", Singular: "event", ShortNames: []string{"ev"}, Namespaced: true,
		New: func() runtime.Object { return &corev1.Event{} }, NewList: func() runtime.Object { return &corev1.EventList{} },
		Fields: eventFields,
		Strategy: Strategy{
			Default:              NoDefaults,
			Validate:             validator(validation.CoreEvent),
			ValidateUpdate:       updateValidator(validation.CoreEventUpdate),
			ValidateStatusUpdate: metaUpdate,
		},
	}
}

// eventsV1Resource is events.k8s.io/v1 Events, stored as core/v1 Events.
func eventsV1Resource() *Resource {
	return &Resource{
		GVR: gvr("events.k8s.io", "v1", "events"), Kind: "Event", Singular: "event", ShortNames: []string{"ev"}, Namespaced: true,
		StoredAs: &coreEvents, ToStorage: EventToCore, FromStorage: EventFromCore,
		New: func() runtime.Object { return &eventsv1.Event{} }, NewList: func() runtime.Object { return &eventsv1.EventList{} },
		Fields: eventV1Fields,
		Strategy: Strategy{
			Default:              NoDefaults,
			Validate:             validator(validation.EventV1),
			ValidateUpdate:       updateValidator(validation.EventV1Update),
			ValidateStatusUpdate: metaUpdate,
		},
	}
}

// eventV1Fields are the field labels events.k8s.io/v1 accepts, upstream's
// conversion of its names (regarding.*, reportingController) to the core
// Event's selectable fields; "source" is not among them.
func eventV1Fields(o runtime.Object) fields.Set {
	core := eventFields(EventToCore(o))
	return fields.Set{
		"regarding.kind":            core["involvedObject.kind"],
		"regarding.namespace":       core["involvedObject.namespace"],
		"regarding.name":            core["involvedObject.name"],
		"regarding.uid":             core["involvedObject.uid"],
		"regarding.apiVersion":      core["involvedObject.apiVersion"],
		"regarding.resourceVersion": core["involvedObject.resourceVersion"],
		"regarding.fieldPath":       core["involvedObject.fieldPath"],
		"reportingController":       core["reportingComponent"],
		"reason":                    core["reason"],
		"type":                      core["type"],
	}
}

func eventFields(o runtime.Object) fields.Set {
	e := o.(*corev1.Event)
	// An Event reported through events.k8s.io/v1 has no source component;
	// upstream's "source" is then its reporting controller.
	source := e.Source.Component
	if source == "" {
		source = e.ReportingController
	}
	return fields.Set{
		"involvedObject.kind":            e.InvolvedObject.Kind,
		"involvedObject.namespace":       e.InvolvedObject.Namespace,
		"involvedObject.name":            e.InvolvedObject.Name,
		"involvedObject.uid":             string(e.InvolvedObject.UID),
		"involvedObject.apiVersion":      e.InvolvedObject.APIVersion,
		"involvedObject.resourceVersion": e.InvolvedObject.ResourceVersion,
		"involvedObject.fieldPath":       e.InvolvedObject.FieldPath,
		"reason":                         e.Reason,
		"reportingComponent":             e.ReportingController,
		"source":                         source,
		"type":                           e.Type,
	}
}

// The two Event APIs are one stored resource, as upstream: events.k8s.io/v1
// Events are kept as core/v1 Events, so `kubectl describe` shows events
// whichever API a component reported them through. These convert between
// the served and the stored shapes; every field has a home in both.

// EventToCore converts an events.k8s.io/v1 Event to the stored core/v1 form.
func EventToCore(obj runtime.Object) runtime.Object {
	e := obj.(*eventsv1.Event)
	out := &corev1.Event{
		ObjectMeta:          e.ObjectMeta,
		InvolvedObject:      e.Regarding,
		Reason:              e.Reason,
		Message:             e.Note,
		Source:              e.DeprecatedSource,
		FirstTimestamp:      e.DeprecatedFirstTimestamp,
		LastTimestamp:       e.DeprecatedLastTimestamp,
		Count:               e.DeprecatedCount,
		Type:                e.Type,
		EventTime:           e.EventTime,
		Action:              e.Action,
		Related:             e.Related,
		ReportingController: e.ReportingController,
		ReportingInstance:   e.ReportingInstance,
	}
	if e.Series != nil {
		out.Series = &corev1.EventSeries{Count: e.Series.Count, LastObservedTime: e.Series.LastObservedTime}
	}
	out.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Event"))
	return out
}

// EventFromCore converts a stored core/v1 Event to events.k8s.io/v1.
func EventFromCore(obj runtime.Object) runtime.Object {
	e := obj.(*corev1.Event)
	out := &eventsv1.Event{
		ObjectMeta:               e.ObjectMeta,
		EventTime:                e.EventTime,
		ReportingController:      e.ReportingController,
		ReportingInstance:        e.ReportingInstance,
		Action:                   e.Action,
		Reason:                   e.Reason,
		Regarding:                e.InvolvedObject,
		Related:                  e.Related,
		Note:                     e.Message,
		Type:                     e.Type,
		DeprecatedSource:         e.Source,
		DeprecatedFirstTimestamp: e.FirstTimestamp,
		DeprecatedLastTimestamp:  e.LastTimestamp,
		DeprecatedCount:          e.Count,
	}
	if e.Series != nil {
		out.Series = &eventsv1.EventSeries{Count: e.Series.Count, LastObservedTime: e.Series.LastObservedTime}
	}
	out.SetGroupVersionKind(eventsv1.SchemeGroupVersion.WithKind("Event"))
	return out
}
