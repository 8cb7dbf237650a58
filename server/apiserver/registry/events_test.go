package registry

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
)

// An Event reported through events.k8s.io/v1 carries no source component;
// the core API's "source" field selector finds it by its reporting
// controller, as upstream's (the Events conformance spec lists
// source=test-controller).
func TestEventSourceFieldFallsBackToReportingController(t *testing.T) {
	stored := EventToCore(&eventsv1.Event{ReportingController: "test-controller", Reason: "Test"}).(*corev1.Event)
	if got := eventFields(stored)["source"]; got != "test-controller" {
		t.Errorf("source of an events.k8s.io/v1 Event = %q, want its reporting controller", got)
	}
	both := &corev1.Event{Source: corev1.EventSource{Component: "kubelet"}, ReportingController: "other"}
	if got := eventFields(both)["source"]; got != "kubelet" {
		t.Errorf("source = %q, want the source component when there is one", got)
	}
}
