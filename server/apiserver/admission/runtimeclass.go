package admission

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

var runtimeClassesResource = nodev1.SchemeGroupVersion.WithResource("runtimeclasses")

// runtimeClass is upstream's RuntimeClass plugin. A new pod naming a
// RuntimeClass gets the class's pod overhead (which the scheduler and the
// pod's cgroup count on top of its containers) and the class's
// nodeSelector and tolerations (which steer it to nodes that have the
// handler); a class that does not exist refuses the pod, since no node
// could run it. Validation then holds the overhead to the class's: it is
// the class's to set, not the user's.
type runtimeClass struct{ classes ObjectGetter }

// lookup returns the class the pod names, nil if it names none.
func (r runtimeClass) lookup(ctx context.Context, a *Attributes, pod *corev1.Pod) (*nodev1.RuntimeClass, error) {
	if pod.Spec.RuntimeClassName == nil {
		return nil, nil
	}
	name := *pod.Spec.RuntimeClassName
	obj, err := r.classes.Get(ctx, "", name)
	if apierrors.IsNotFound(err) {
		return nil, apierrors.NewForbidden(a.Resource.GroupResource(), a.Name, fmt.Errorf("pod rejected: RuntimeClass %q not found", name))
	}
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	rc, ok := obj.(*nodev1.RuntimeClass)
	if !ok {
		return nil, apierrors.NewInternalError(fmt.Errorf("runtimeclasses %q is a %T", name, obj))
	}
	return rc, nil
}

func (r runtimeClass) Admit(ctx context.Context, a *Attributes) error {
	pod, ok := creatingPod(a)
	if !ok {
		return nil
	}
	rc, err := r.lookup(ctx, a, pod)
	if err != nil || rc == nil {
		return err
	}
	if rc.Overhead != nil {
		if pod.Spec.Overhead != nil && !apiequality.Semantic.DeepEqual(pod.Spec.Overhead, rc.Overhead.PodFixed) {
			return overheadMismatch(a)
		}
		// The class is read from the watch cache: the pod gets copies.
		pod.Spec.Overhead = rc.Overhead.PodFixed.DeepCopy()
	}
	if s := rc.Scheduling; s != nil {
		for k, v := range s.NodeSelector {
			if podValue, ok := pod.Spec.NodeSelector[k]; ok && podValue != v {
				return apierrors.NewForbidden(a.Resource.GroupResource(), a.Name, fmt.Errorf(
					"conflict: runtimeClass.scheduling.nodeSelector[%s] = %s; pod.spec.nodeSelector[%s] = %s", k, v, k, podValue))
			}
		}
		for k, v := range s.NodeSelector {
			if pod.Spec.NodeSelector == nil {
				pod.Spec.NodeSelector = map[string]string{}
			}
			pod.Spec.NodeSelector[k] = v
		}
		pod.Spec.Tolerations = mergeTolerations(pod.Spec.Tolerations, s.Tolerations)
	}
	return nil
}

func (r runtimeClass) Validate(ctx context.Context, a *Attributes) error {
	pod, ok := creatingPod(a)
	if !ok {
		return nil
	}
	rc, err := r.lookup(ctx, a, pod)
	if err != nil {
		return err
	}
	if rc != nil && rc.Overhead != nil {
		if !apiequality.Semantic.DeepEqual(pod.Spec.Overhead, rc.Overhead.PodFixed) {
			return overheadMismatch(a)
		}
	} else if pod.Spec.Overhead != nil {
		return apierrors.NewForbidden(a.Resource.GroupResource(), a.Name,
			fmt.Errorf("pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead"))
	}
	return nil
}

func overheadMismatch(a *Attributes) error {
	return apierrors.NewForbidden(a.Resource.GroupResource(), a.Name,
		fmt.Errorf("pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead"))
}

// mergeTolerations is the pod's tolerations followed by the class's,
// less each one that another of them already covers (upstream's
// MergeTolerations): of two equal tolerations the first stays.
func mergeTolerations(pod, class []corev1.Toleration) []corev1.Toleration {
	all := append(append([]corev1.Toleration(nil), pod...), class...)
	var out []corev1.Toleration
	for i, t := range all {
		redundant := false
		for _, kept := range out {
			redundant = redundant || covers(kept, t)
		}
		for _, later := range all[i+1:] {
			redundant = redundant || (!apiequality.Semantic.DeepEqual(t, later) && covers(later, t))
		}
		if !redundant {
			out = append(out, t)
		}
	}
	return out
}

// covers reports whether every taint t tolerates, for at least as long,
// is also tolerated by c.
func covers(c, t corev1.Toleration) bool {
	if apiequality.Semantic.DeepEqual(c, t) {
		return true
	}
	// An empty key with Exists matches every key.
	if c.Key != t.Key && (c.Key != "" || c.Operator != corev1.TolerationOpExists) {
		return false
	}
	// An empty effect matches every effect.
	if c.Effect != "" && c.Effect != t.Effect {
		return false
	}
	if c.Effect == corev1.TaintEffectNoExecute && c.TolerationSeconds != nil &&
		(t.TolerationSeconds == nil || *t.TolerationSeconds > *c.TolerationSeconds) {
		return false
	}
	switch c.Operator {
	case corev1.TolerationOpExists:
		return true
	case corev1.TolerationOpEqual, "":
		return t.Operator == corev1.TolerationOpEqual && t.Value == c.Value
	}
	return false
}
