package admission

import "context"

// serviceAccount sets a pod's serviceAccountName to "default" when unset,
// as upstream's ServiceAccount admission plugin does.
type serviceAccount struct{}

func (serviceAccount) Admit(_ context.Context, a *Attributes) error {
	if p, ok := creatingPod(a); ok && p.Spec.ServiceAccountName == "" {
		p.Spec.ServiceAccountName = "default"
		p.Spec.DeprecatedServiceAccount = "default"
	}
	return nil
}
