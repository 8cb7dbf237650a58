package registry

import (
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

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
