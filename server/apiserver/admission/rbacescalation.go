package admission

import (
	"context"

	"github.com/kelp-project/kelp/server/apiserver/auth"
)

// rbacEscalation refuses writes of roles and bindings that would grant
// more than their writer holds (auth.Escalation). Upstream does this in
// the RBAC registry rather than in admission; here it runs first among
// the validating steps, which see the user, the new and the old object of
// every create and update, dry runs included.
type rbacEscalation struct{ check auth.Escalation }

func (e rbacEscalation) Validate(_ context.Context, a *Attributes) error {
	if a.Operation != "CREATE" && a.Operation != "UPDATE" {
		return nil
	}
	return e.check.Check(a.User, a.Object, a.OldObject)
}
