package apiserver

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func budget(allowed, current, desired int32) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Generation: 2},
		Status: policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 2, DisruptionsAllowed: allowed,
			CurrentHealthy: current, DesiredHealthy: desired, ExpectedPods: current},
	}
}

// The eviction decision is upstream's checkAndDecrement: one disruption
// taken and recorded, or a refusal with its code and cause.
func TestCheckAndDecrement(t *testing.T) {
	now := time.Unix(1000, 0)
	pdb := budget(1, 3, 2)
	if err := checkAndDecrement(pdb, "a", now, false); err != nil {
		t.Fatal(err)
	}
	if pdb.Status.DisruptionsAllowed != 0 || !pdb.Status.DisruptedPods["a"].Time.Equal(now) {
		t.Fatalf("after one eviction: %+v", pdb.Status)
	}
	if c := meta.FindStatusCondition(pdb.Status.Conditions, policyv1.DisruptionAllowedCondition); c == nil ||
		c.Status != metav1.ConditionFalse || c.Reason != policyv1.InsufficientPodsReason {
		t.Fatalf("condition after the last disruption: %+v", c)
	}
	err := checkAndDecrement(pdb, "b", now, false)
	if !apierrors.IsTooManyRequests(err) || !strings.Contains(err.Error(), "Cannot evict pod as it would violate the pod's disruption budget.") {
		t.Fatalf("no disruption left: %v", err)
	}
	st := err.(*apierrors.StatusError).ErrStatus
	if st.Details == nil || len(st.Details.Causes) != 1 || st.Details.Causes[0].Type != policyv1.DisruptionBudgetCause ||
		st.Details.Causes[0].Message != "The disruption budget web does not allow evicting pods currently" {
		t.Fatalf("cause: %+v", st.Details)
	}
	// Once the controller has seen the eviction, the cause says why.
	err = checkAndDecrement(budget(0, 2, 2), "b", now, false)
	if c := err.(*apierrors.StatusError).ErrStatus.Details.Causes; c[0].Message != "The disruption budget web needs 2 healthy pods and has 2 currently" {
		t.Fatalf("cause: %+v", c)
	}

	dry := budget(1, 3, 2)
	if err := checkAndDecrement(dry, "a", now, true); err != nil || len(dry.Status.DisruptedPods) != 0 {
		t.Fatalf("dry run recorded the pod: %v %+v", err, dry.Status)
	}

	stale := budget(1, 3, 2)
	stale.Generation = 3
	if err := checkAndDecrement(stale, "a", now, false); !apierrors.IsTooManyRequests(err) ||
		!strings.Contains(err.(*apierrors.StatusError).ErrStatus.Details.Causes[0].Message, "still being processed") {
		t.Fatalf("budget not yet observed: %v", err)
	}
	if err := checkAndDecrement(budget(-1, 3, 2), "a", now, false); !apierrors.IsForbidden(err) {
		t.Fatalf("negative budget: want 403, got %v", err)
	}
	full := budget(1, 3, 2)
	full.Status.DisruptedPods = map[string]metav1.Time{}
	for i := range maxDisruptedPods + 1 {
		full.Status.DisruptedPods[strings.Repeat("x", i+1)] = metav1.Time{Time: now}
	}
	if err := checkAndDecrement(full, "a", now, false); !apierrors.IsForbidden(err) {
		t.Fatalf("too many unconfirmed evictions: want 403, got %v", err)
	}
}

func TestCanIgnorePDB(t *testing.T) {
	now := metav1.Now()
	for _, tc := range []struct {
		pod           corev1.Pod
		ignore, fixRV bool
	}{
		{corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning}}, false, true},
		{corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}, true, true},
		{corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}, true, false},
		{corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed}}, true, false},
		{corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}, true, false},
	} {
		if got := canIgnorePDB(&tc.pod); got != tc.ignore {
			t.Errorf("%s deleting=%v: canIgnorePDB %v", tc.pod.Status.Phase, tc.pod.DeletionTimestamp != nil, got)
		}
		if got := shouldEnforceResourceVersion(&tc.pod); got != tc.fixRV {
			t.Errorf("%s deleting=%v: shouldEnforceResourceVersion %v", tc.pod.Status.Phase, tc.pod.DeletionTimestamp != nil, got)
		}
	}
}

// unhealthyPodEvictionPolicy: an unready pod goes freely under
// AlwaysAllow, and under IfHealthyBudget (or none) only while the budget
// is healthy; a Ready pod always takes a disruption.
func TestUnhealthyMayGo(t *testing.T) {
	ready := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	unready := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	always, ifHealthy := policyv1.AlwaysAllow, policyv1.IfHealthyBudget
	with := func(p *policyv1.UnhealthyPodEvictionPolicyType, current, desired int32) *policyv1.PodDisruptionBudget {
		b := budget(0, current, desired)
		b.Spec.UnhealthyPodEvictionPolicy = p
		return b
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		pdb  *policyv1.PodDisruptionBudget
		want bool
	}{
		{"ready pod", ready, with(&always, 1, 2), false},
		{"AlwaysAllow, unhealthy budget", unready, with(&always, 1, 2), true},
		{"IfHealthyBudget, healthy", unready, with(&ifHealthy, 2, 2), true},
		{"IfHealthyBudget, unhealthy", unready, with(&ifHealthy, 1, 2), false},
		{"no policy, healthy", unready, with(nil, 3, 2), true},
		{"no policy, nothing desired", unready, with(nil, 0, 0), false},
	} {
		if got := unhealthyMayGo(tc.pod, tc.pdb); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestEvictionDeleteOptions(t *testing.T) {
	grace := int64(-5)
	opts, err := evictionDeleteOptions(&policyv1.Eviction{DeleteOptions: &metav1.DeleteOptions{GracePeriodSeconds: &grace}}, true)
	if err != nil || len(opts.DryRun) != 1 || *opts.GracePeriodSeconds != 0 {
		t.Fatalf("query dryRun into the options, negative grace to 0: %+v %v", opts, err)
	}
	if _, err := evictionDeleteOptions(&policyv1.Eviction{DeleteOptions: &metav1.DeleteOptions{DryRun: []string{"Some"}}}, false); !apierrors.IsBadRequest(err) {
		t.Fatalf("bad dryRun value: %v", err)
	}
	if opts, err := evictionDeleteOptions(&policyv1.Eviction{}, false); err != nil || len(opts.DryRun) != 0 {
		t.Fatalf("no options: %+v %v", opts, err)
	}
}

// A policy/v1beta1 Eviction is taken as the v1 one, as upstream's
// AcceptsGroupVersion; another kind is still a 400.
func TestDecodeEvictionV1beta1(t *testing.T) {
	for body, ok := range map[string]bool{
		`{"apiVersion":"policy/v1beta1","kind":"Eviction","metadata":{"name":"p"},"deleteOptions":{"gracePeriodSeconds":3}}`: true,
		`{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"p"},"deleteOptions":{"gracePeriodSeconds":3}}`:      true,
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`:                                                           false,
	} {
		r := httptest.NewRequest(http.MethodPost, "/api/v1/namespaces/default/pods/p/eviction", strings.NewReader(body))
		r.Header.Set("Content-Type", mediaJSON)
		ev, err := decodeEviction(httptest.NewRecorder(), r)
		if !ok {
			requireStatus(t, err, http.StatusBadRequest)
			continue
		}
		if err != nil || ev.Name != "p" || *ev.DeleteOptions.GracePeriodSeconds != 3 {
			t.Fatalf("%s: %+v %v", body, ev, err)
		}
	}
}

// FuzzEviction: pods/eviction bodies through decoding and the checks made
// before any storage read; every refusal is a 400, 415 or 422 Status.
func FuzzEviction(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"p"}}`), mediaJSON)
	f.Add([]byte(`{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"q"}}`), mediaJSON)
	f.Add([]byte(`{"metadata":{"name":"p"},"deleteOptions":{"gracePeriodSeconds":-1,"dryRun":["All"]}}`), mediaJSON)
	f.Add([]byte(`{"metadata":{"name":"p"},"deleteOptions":{"dryRun":["Nope"]}}`), mediaJSON)
	f.Add([]byte(`{"metadata":{"name":"p"},"deleteOptions":{"ignoreStoreReadErrorWithClusterBreakingPotential":true}}`), mediaJSON)
	f.Add([]byte(`{"apiVersion":"v1","kind":"Pod"}`), mediaJSON)
	f.Add([]byte("metadata:\n  name: p\n"), mediaYAML)
	f.Add([]byte(`{`), mediaJSON)
	f.Add([]byte(`{"apiVersion":"policy/v1beta1","kind":"Eviction","metadata":{"name":"p"}}`), mediaJSON)
	f.Fuzz(func(t *testing.T, body []byte, ct string) {
		r := httptest.NewRequest(http.MethodPost, "/api/v1/namespaces/default/pods/p/eviction", bytes.NewReader(body))
		r.Header.Set("Content-Type", ct)
		ev, err := decodeEviction(httptest.NewRecorder(), r)
		if err != nil {
			requireStatus(t, err, http.StatusBadRequest, http.StatusUnsupportedMediaType)
			return
		}
		opts, err := checkEviction("p", ev, false)
		if err != nil {
			requireStatus(t, err, http.StatusBadRequest, http.StatusUnprocessableEntity)
			return
		}
		if ev.Name != "p" || (opts.GracePeriodSeconds != nil && *opts.GracePeriodSeconds < 0) {
			t.Fatalf("accepted name %q, options %+v", ev.Name, opts)
		}
	})
}
