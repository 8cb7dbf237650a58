package apiserver

import (
	"net/http"
	"net/http/httptest"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/kelp-project/kelp/server/apiserver/auth"
)

func infoFor(t testing.TB, method, url string) requestInfo {
	t.Helper()
	return parseRequest(httptest.NewRequest(method, url, nil))
}

func TestLongRunningFollowsKubeAPIServer(t *testing.T) {
	for url, want := range map[string]bool{
		"/api/v1/pods?watch=true":                        true,
		"/api/v1/namespaces/d/configmaps?watch=1":        true,
		"/api/v1/namespaces/d/pods/p/exec?command=sh":    true,
		"/api/v1/namespaces/d/pods/p/attach":             true,
		"/api/v1/namespaces/d/pods/p/log?follow=true":    true,
		"/api/v1/namespaces/d/pods/p/log":                true, // upstream: every log, followed or not
		"/api/v1/namespaces/d/pods/p/portforward":        true,
		"/api/v1/namespaces/d/services/s/proxy/x":        true,
		"/api/v1/namespaces/d/pods/p/status":             false,
		"/api/v1/namespaces/d/configmaps":                false,
		"/api/v1/namespaces/d/configmaps?watch=false":    false,
		"/apis/apps/v1/namespaces/d/deployments/x/scale": false,
		"/version": false,
		// A non-resource path is never long-running by its last segment.
		"/log": false,
	} {
		if got := isLongRunning(infoFor(t, http.MethodGet, url)); got != want {
			t.Errorf("isLongRunning(GET %s) = %v, want %v", url, got, want)
		}
	}
	// pods/exec is a POST (mutating verb create) but long-running all the same.
	if !isLongRunning(infoFor(t, http.MethodPost, "/api/v1/namespaces/d/pods/p/exec")) {
		t.Errorf("POST pods/exec is not long-running")
	}
}

func TestMaxInFlightCountsReadOnlyAndMutatingApart(t *testing.T) {
	m := newMaxInFlight(2, 1)
	bob := &auth.User{Name: "bob", Groups: []string{"system:authenticated"}}
	list := infoFor(t, http.MethodGet, "/api/v1/namespaces/d/configmaps")
	get := infoFor(t, http.MethodGet, "/api/v1/namespaces/d/configmaps/c")
	create := infoFor(t, http.MethodPost, "/api/v1/namespaces/d/configmaps")
	patch := infoFor(t, http.MethodPatch, "/api/v1/namespaces/d/configmaps/c")

	r1, ok1 := m.admit(list, bob)
	r2, ok2 := m.admit(get, bob)
	if !ok1 || !ok2 || r1 == nil || r2 == nil {
		t.Fatalf("two read-only requests under a limit of 2 were not both admitted with a slot")
	}
	if _, ok := m.admit(list, bob); ok {
		t.Fatalf("a third read-only request was admitted over a limit of 2")
	}
	// The mutating pool is its own: full reads do not refuse a write.
	w1, ok := m.admit(create, bob)
	if !ok || w1 == nil {
		t.Fatalf("a write was refused while only the read-only pool was full")
	}
	if _, ok := m.admit(patch, bob); ok {
		t.Fatalf("a second write was admitted over a mutating limit of 1")
	}
	// A watch takes no slot at all, however full the pools are.
	if pool, ok := m.admit(infoFor(t, http.MethodGet, "/api/v1/pods?watch=true"), bob); !ok || pool != nil {
		t.Fatalf("a watch was refused or counted: pool %v ok %v", pool, ok)
	}
	release(r1)
	if r, ok := m.admit(list, bob); !ok {
		t.Fatalf("a released slot was not reusable")
	} else {
		release(r)
	}
	release(r2)
	release(w1)
	if len(m.readOnly) != 0 || len(m.mutating) != 0 {
		t.Fatalf("slots leaked: %d read-only, %d mutating", len(m.readOnly), len(m.mutating))
	}
}

func TestMaxInFlightExemptsSystemMasters(t *testing.T) {
	m := newMaxInFlight(1, 1)
	bob := &auth.User{Name: "bob"}
	admin := &auth.User{Name: "kelp-admin", Groups: []string{"system:masters", "system:authenticated"}}
	list := infoFor(t, http.MethodGet, "/api/v1/configmaps")
	if _, ok := m.admit(list, bob); !ok {
		t.Fatal("first request refused")
	}
	if _, ok := m.admit(list, bob); ok {
		t.Fatal("bob admitted over the limit")
	}
	if pool, ok := m.admit(list, admin); !ok || pool != nil {
		t.Fatalf("system:masters over a full pool: pool %v ok %v, want served without a slot", pool, ok)
	}
	if _, ok := m.admit(list, nil); ok {
		t.Fatal("a request without a user was admitted over the limit")
	}
}

func TestMaxInFlightZeroLimitsNothing(t *testing.T) {
	m := newMaxInFlight(0, 0)
	for range 1000 {
		if pool, ok := m.admit(infoFor(t, http.MethodPost, "/api/v1/namespaces/d/configmaps"), nil); !ok || pool != nil {
			t.Fatalf("limit 0 refused or counted a request")
		}
	}
}

func TestTooManyRequestsIsUpstreamStatus(t *testing.T) {
	st := toStatus(tooManyRequests())
	if st.Code != http.StatusTooManyRequests || st.Reason != "TooManyRequests" || st.Details == nil || st.Details.RetryAfterSeconds != 1 {
		t.Fatalf("status = %+v", st)
	}
	if !apierrors.IsTooManyRequests(tooManyRequests()) {
		t.Fatal("not recognised by apierrors.IsTooManyRequests")
	}
}

// BenchmarkMaxInFlight is the filter's own cost per request: the
// classification and one slot taken and given back.
func BenchmarkMaxInFlight(b *testing.B) {
	m := newMaxInFlight(400, 200)
	u := &auth.User{Name: "bob", Groups: []string{"system:authenticated"}}
	info := infoFor(b, http.MethodGet, "/api/v1/namespaces/d/configmaps")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			pool, ok := m.admit(info, u)
			if !ok {
				b.Fatal("refused under the limit")
			}
			release(pool)
		}
	})
}
