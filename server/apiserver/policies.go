package apiserver

import (
	"github.com/kelp-project/kelp/server/apiserver/admission/policy"
)

// newPolicies builds the admission policies on the API server's view the
// webhooks share (kinds, versions and defaulting, webhooks.go) and its
// authorizer chain; SetLoopback starts them.
func (s *Server) newPolicies(stop <-chan struct{}) (*policy.Policies, error) {
	return policy.New(policy.Config{
		Authorizer: s.authorizer,
		Default:    s.defaultServed,
		Versions:   s.servedVersions,
		Stop:       stop,
	})
}
