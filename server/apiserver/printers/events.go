package printers

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// eventFields is the subset of an event the table shows. Upstream prints both
// core/v1 and events.k8s.io/v1 events from the same internal type, so both
// are first mapped onto this to keep their rows identical.
type eventFields struct {
	meta                metav1.ObjectMeta
	firstTimestamp      metav1.Time
	lastTimestamp       metav1.Time
	eventTime           metav1.MicroTime
	series              *corev1.EventSeries
	count               int32
	eventType, reason   string
	object              corev1.ObjectReference
	source              corev1.EventSource
	reportingController string
	reportingInstance   string
	message             string
}

func init() {
	eventDoc := corev1.Event{}.SwaggerDoc()
	columns := []metav1.TableColumnDefinition{
		column("Last Seen", "string", eventDoc["lastTimestamp"]),
		column("Type", "string", eventDoc["type"]),
		column("Reason", "string", eventDoc["reason"]),
		column("Object", "string", eventDoc["involvedObject"]),
		wide(column("Subobject", "string", corev1.ObjectReference{}.SwaggerDoc()["fieldPath"])),
		wide(column("Source", "string", eventDoc["source"])),
		column("Message", "string", eventDoc["message"]),
		wide(column("First Seen", "string", eventDoc["firstTimestamp"])),
		wide(column("Count", "string", eventDoc["count"])),
		wide(nameColumn()),
	}

	cells(columns, func(e *corev1.Event, now time.Time) []interface{} {
		return eventCells(eventFields{
			meta:                e.ObjectMeta,
			firstTimestamp:      e.FirstTimestamp,
			lastTimestamp:       e.LastTimestamp,
			eventTime:           e.EventTime,
			series:              e.Series,
			count:               e.Count,
			eventType:           e.Type,
			reason:              e.Reason,
			object:              e.InvolvedObject,
			source:              e.Source,
			reportingController: e.ReportingController,
			reportingInstance:   e.ReportingInstance,
			message:             e.Message,
		}, now)
	})

	cells(columns, func(e *eventsv1.Event, now time.Time) []interface{} {
		f := eventFields{
			meta:                e.ObjectMeta,
			firstTimestamp:      e.DeprecatedFirstTimestamp,
			lastTimestamp:       e.DeprecatedLastTimestamp,
			eventTime:           e.EventTime,
			count:               e.DeprecatedCount,
			eventType:           e.Type,
			reason:              e.Reason,
			object:              e.Regarding,
			source:              e.DeprecatedSource,
			reportingController: e.ReportingController,
			reportingInstance:   e.ReportingInstance,
			message:             e.Note,
		}
		if e.Series != nil {
			f.series = &corev1.EventSeries{Count: e.Series.Count, LastObservedTime: e.Series.LastObservedTime}
		}
		return eventCells(f, now)
	})
}

// eventCells falls back from the deprecated timestamps to the newer eventTime
// and series fields so that events written by either client API print alike.
func eventCells(e eventFields, now time.Time) []interface{} {
	first := since(e.firstTimestamp, now)
	if e.firstTimestamp.IsZero() {
		first = sinceMicro(e.eventTime, now)
	}
	last := since(e.lastTimestamp, now)
	if e.lastTimestamp.IsZero() {
		last = first
	}
	count := e.count
	if e.series != nil {
		last = sinceMicro(e.series.LastObservedTime, now)
		count = e.series.Count
	} else if count == 0 {
		// Singleton events from the events.k8s.io API carry no count.
		count = 1
	}

	object := strings.ToLower(e.object.Kind)
	if e.object.Name != "" {
		object += "/" + e.object.Name
	}

	return []interface{}{
		last,
		e.eventType,
		e.reason,
		object,
		e.object.FieldPath,
		eventSource(e),
		strings.TrimSpace(e.message),
		first,
		int64(count),
		e.meta.Name,
	}
}

// eventSource prints "component, host", taking the reporting controller and
// instance when the deprecated source is unset.
func eventSource(e eventFields) string {
	component := firstNonEmpty(e.source.Component, e.reportingController)
	host := firstNonEmpty(e.source.Host, e.reportingInstance)
	if host == "" {
		return component
	}
	return component + ", " + host
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
