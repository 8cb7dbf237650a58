package admission

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Upstream's NamespaceLifecycle marks the refusal with the
// NamespaceTerminating cause on metadata.namespace, and kelp's own
// controllers (serviceaccount, endpoints, replicaset) test for that cause
// to treat the create as "nothing to do". The plugin currently sends no
// cause.
func TestTerminatingNamespaceCause(t *testing.T) {
	now := metav1.Now()
	c := newChain(t, &fakeNamespaces{items: map[string]*corev1.Namespace{
		"doomed": {ObjectMeta: metav1.ObjectMeta{Name: "doomed", DeletionTimestamp: &now}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}},
	}})
	err := c.Validate(context.Background(), &Attributes{Operation: "CREATE", Resource: podsGVR, Namespace: "doomed", Name: "p",
		Object: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "doomed"}}})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("err = %v, want Forbidden", err)
	}
	if !apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		t.Fatalf("no %s cause in %+v", corev1.NamespaceTerminatingCause, err.(apierrors.APIStatus).Status().Details)
	}
	for _, cause := range err.(apierrors.APIStatus).Status().Details.Causes {
		if cause.Type == corev1.NamespaceTerminatingCause && (cause.Field != "metadata.namespace" ||
			cause.Message != "namespace doomed is being terminated") {
			t.Errorf("cause %+v, want upstream's field metadata.namespace and message", cause)
		}
	}
}
