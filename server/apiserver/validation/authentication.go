package validation

import (
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TokenRequest is upstream's ValidateTokenRequest: only the lifetime is
// checked here; the bound object is the handler's to look up.
func TokenRequest(tr *authenticationv1.TokenRequest) field.ErrorList {
	var secs int64
	if tr.Spec.ExpirationSeconds != nil {
		secs = *tr.Spec.ExpirationSeconds
	}
	return tokenExpiration(secs, field.NewPath("spec", "expirationSeconds"))
}

// MinTokenExpirationSeconds is the shortest token upstream mints (and a
// projected volume may ask for): ten minutes.
const MinTokenExpirationSeconds = 600

// tokenExpiration: tokens live at least ten minutes and at most 2^32
// seconds, for TokenRequests and projected serviceAccountToken volumes.
func tokenExpiration(secs int64, p *field.Path) field.ErrorList {
	switch {
	case secs < MinTokenExpirationSeconds:
		return field.ErrorList{field.Invalid(p, secs, "may not specify a duration less than 10 minutes")}
	case secs > 1<<32:
		return field.ErrorList{field.Invalid(p, secs, "may not specify a duration larger than 2^32 seconds")}
	}
	return nil
}
