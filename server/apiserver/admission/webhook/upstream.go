package webhook

import (
	"context"
	"sync/atomic"

	upstream "k8s.io/apiserver/pkg/admission"
	"k8s.io/client-go/tools/cache"

	"github.com/kelp-project/kelp/server/apiserver/admission"
)

// Upstream runs a pair of k8s.io/apiserver admission plugins, one
// mutating and one validating (the webhooks, the admission policies), on
// kelp's attributes. Until Arm (the plugins started on the API server's
// loopback client, in its first seconds, before any user can write) it
// admits everything; after, a plugin is asked only while its guard, the
// informer of the objects that make it act (configurations, bindings),
// holds one: with none it would match nothing, yet its dispatch still
// copies the object and builds versioned attributes on every write.
type Upstream struct {
	mutating   upstream.MutationInterface
	validating upstream.ValidationInterface
	objects    ObjectInterfaces
	// Set before ready.
	mutatingGuard, validatingGuard cache.SharedIndexInformer
	ready                          atomic.Bool
}

// NewUpstream pairs the plugins with the object interfaces they are
// called with.
func NewUpstream(m upstream.MutationInterface, v upstream.ValidationInterface, objects ObjectInterfaces) Upstream {
	return Upstream{mutating: m, validating: v, objects: objects}
}

// Arm starts asking the plugins, each guarded by its informer.
func (u *Upstream) Arm(mutatingGuard, validatingGuard cache.SharedIndexInformer) {
	u.mutatingGuard, u.validatingGuard = mutatingGuard, validatingGuard
	u.ready.Store(true)
}

// Admit runs the mutating plugin, reinvoking it once when a later
// mutation changed the object and something asked to be reinvoked
// (reinvocationPolicy IfNeeded).
func (u *Upstream) Admit(ctx context.Context, a *admission.Attributes) error {
	if !u.ready.Load() || none(u.mutatingGuard) {
		return nil
	}
	attr, err := u.objects.Attributes(a)
	if err != nil || !u.mutating.Handles(attr.GetOperation()) {
		return err
	}
	if err := u.mutating.Admit(ctx, attr, u.objects); err != nil {
		return err
	}
	if rc := attr.GetReinvocationContext(); rc.ShouldReinvoke() {
		rc.SetIsReinvoke()
		return u.mutating.Admit(ctx, attr, u.objects)
	}
	return nil
}

// Validate runs the validating plugin.
func (u *Upstream) Validate(ctx context.Context, a *admission.Attributes) error {
	if !u.ready.Load() || none(u.validatingGuard) {
		return nil
	}
	attr, err := u.objects.Attributes(a)
	if err != nil || !u.validating.Handles(attr.GetOperation()) {
		return err
	}
	return u.validating.Validate(ctx, attr, u.objects)
}

// none reports that the guard has listed and holds nothing.
func none(guard cache.SharedIndexInformer) bool {
	return guard.HasSynced() && len(guard.GetStore().ListKeys()) == 0
}

// Armed reports that Arm was called; Synced, that both guards have
// listed (tests wait for them).
func (u *Upstream) Armed() bool { return u.ready.Load() }

func (u *Upstream) Synced() bool {
	return u.ready.Load() && u.mutatingGuard.HasSynced() && u.validatingGuard.HasSynced()
}
