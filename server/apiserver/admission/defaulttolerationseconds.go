package admission

import (
	"context"

	corev1 "k8s.io/api/core/v1"
)

// defaultTolerationSeconds gives every new pod bounded tolerations for the
// not-ready and unreachable NoExecute taints, as upstream's
// DefaultTolerationSeconds plugin does: a pod on a dead node is evicted
// after this long (300 s by default) instead of never or at once. Like
// upstream's it also runs on a pod's update (not its subresources), so an
// update that replaces the tolerations keeps these two, and only adds
// tolerations, which is all pod validation allows.
type defaultTolerationSeconds struct {
	notReady, unreachable int64
}

func (d defaultTolerationSeconds) Admit(_ context.Context, a *Attributes) error {
	if a.Operation != "CREATE" && a.Operation != "UPDATE" || a.Resource.GroupResource() != podsResource.GroupResource() || a.Subresource != "" {
		return nil
	}
	p, ok := a.Object.(*corev1.Pod)
	if !ok {
		return nil
	}
	for _, t := range []struct {
		key     string
		seconds int64
	}{{corev1.TaintNodeNotReady, d.notReady}, {corev1.TaintNodeUnreachable, d.unreachable}} {
		tolerated := false
		for _, tol := range p.Spec.Tolerations {
			if (tol.Key == t.key || (tol.Key == "" && tol.Operator == corev1.TolerationOpExists)) &&
				(tol.Effect == "" || tol.Effect == corev1.TaintEffectNoExecute) {
				tolerated = true
			}
		}
		if !tolerated {
			secs := t.seconds
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: t.key, Operator: corev1.TolerationOpExists,
				Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &secs})
		}
	}
	return nil
}
