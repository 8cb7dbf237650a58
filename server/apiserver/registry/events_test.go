package registry

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/fields"
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

// events.k8s.io/v1 selects on its own field names (upstream's field label
// conversion): regarding.*, reportingController, reason, type; the core
// names are refused there.
func TestEventsV1FieldSelectors(t *testing.T) {
	r := eventsV1Resource()
	ev := &eventsv1.Event{ReportingController: "test-controller", Reason: "Test", Type: "Normal",
		Regarding: corev1.ObjectReference{Kind: "Pod", Name: "p", Namespace: "ns"}}
	_, fs, err := r.Attrs(ev)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"reportingController": "test-controller", "regarding.kind": "Pod", "regarding.name": "p", "reason": "Test", "type": "Normal"} {
		if fs[k] != want {
			t.Errorf("field %s = %q, want %q", k, fs[k], want)
		}
	}
	for _, sel := range []string{"reportingController=x", "regarding.uid=u,type=Warning"} {
		if err := r.CheckFieldSelector(fields.ParseSelectorOrDie(sel)); err != nil {
			t.Errorf("%s: %v", sel, err)
		}
	}
	for _, sel := range []string{"source=x", "involvedObject.name=p"} {
		if err := r.CheckFieldSelector(fields.ParseSelectorOrDie(sel)); err == nil {
			t.Errorf("%s accepted by events.k8s.io/v1", sel)
		}
	}
}
