package apiserver

import (
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/kelp-project/kelp/config"
	"github.com/kelp-project/kelp/server/apiserver/auth"
)

// maxInFlight is kube-apiserver's max-in-flight filter, the one it runs
// without API Priority and Fairness (--max-requests-inflight,
// --max-mutating-requests-inflight): read-only and mutating requests each
// take a slot of their own pool while they are served, and a request that
// finds its pool full is 429 at once, without queueing. Long-running
// requests take no slot, so an open watch never holds one and ordinary
// requests can never keep a watch out.
type maxInFlight struct {
	// readOnly and mutating are the pools: a slot is a buffered element.
	// A nil pool (limit 0) limits nothing, as upstream's.
	readOnly, mutating chan struct{}
}

func newMaxInFlight(readOnly, mutating int) *maxInFlight {
	m := &maxInFlight{}
	if readOnly > 0 {
		m.readOnly = make(chan struct{}, readOnly)
	}
	if mutating > 0 {
		m.mutating = make(chan struct{}, mutating)
	}
	return m
}

// retryAfterSeconds is upstream's Retry-After for a full pool.
const retryAfterSeconds = 1

// admit takes a slot for the request. It returns the pool to give the slot
// back to (nil when the request took none), or ok false when the request
// must be refused with tooManyRequests.
func (m *maxInFlight) admit(info requestInfo, u *auth.User) (pool chan struct{}, ok bool) {
	if m == nil || isLongRunning(info) {
		return nil, true
	}
	pool = m.readOnly
	if isMutating(info.Verb) {
		pool = m.mutating
	}
	if pool == nil {
		return nil, true
	}
	select {
	case pool <- struct{}{}:
		return pool, true
	default:
	}
	// A full pool still serves system:masters, as upstream's filter does:
	// the administrator and the API server's own loopback clients must
	// always get an answer, or nobody could repair an overloaded server.
	// They are served without a slot, so they never crowd others out.
	if u != nil && slices.Contains(u.Groups, config.MastersGroup) {
		return nil, true
	}
	return nil, false
}

// release gives back a slot admit took.
func release(pool chan struct{}) {
	if pool != nil {
		<-pool
	}
}

func tooManyRequests() error {
	return apierrors.NewTooManyRequests("Too many requests, please try again later.", retryAfterSeconds)
}

// isMutating follows upstream: every verb but get, list and watch counts
// against the mutating pool (create, update, patch, delete, and the verbs
// of non-resource requests such as post).
func isMutating(verb string) bool {
	switch verb {
	case "get", "list", "watch":
		return false
	}
	return true
}

// isLongRunning is kube-apiserver's LongRunningFunc: the verbs watch and
// proxy, and, for resource requests, the subresources attach, exec,
// proxy, log and portforward. Upstream counts every pods/log as
// long-running, with follow or without, and so does this.
func isLongRunning(info requestInfo) bool {
	switch info.Verb {
	case "watch", "proxy":
		return true
	}
	if !info.IsResource {
		return false
	}
	// requestinfo.go keeps what follows the subresource in it
	// (services/s/proxy/<path>); upstream's subresource is the first part.
	sub, _, _ := strings.Cut(info.Subresource, "/")
	switch sub {
	case "attach", "exec", "proxy", "log", "portforward":
		return true
	}
	return false
}
