package admission

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/kelp-project/kelp/server/apiserver/validation"
)

var priorityClassesResource = schedulingv1.SchemeGroupVersion.WithResource("priorityclasses")

// priority is upstream's Priority plugin. A new pod gets the priority and
// preemption policy of the class it names, or of the global default class
// when it names none (whose name it then carries), or 0 and
// PreemptLowerPriority when there is no default; a class that does not
// exist refuses the pod, and so does a priority or preemption policy the
// pod sets itself that is not the class's. An update keeps what the pod
// was given. A PriorityClass may be made the global default only while no
// other class is, and the system classes may not be deleted.
type priority struct{ classes ObjectGetter }

func (p priority) Admit(ctx context.Context, a *Attributes) error {
	if a.Subresource != "" || a.Resource.GroupResource() != podsResource.GroupResource() {
		return nil
	}
	pod, ok := a.Object.(*corev1.Pod)
	if !ok {
		return nil
	}
	switch a.Operation {
	case "UPDATE":
		// Validation refuses changes to the priority; a client that
		// omitted it keeps the one admission gave.
		if old, ok := a.OldObject.(*corev1.Pod); ok {
			if pod.Spec.Priority == nil && old.Spec.Priority != nil {
				v := *old.Spec.Priority
				pod.Spec.Priority = &v
			}
			if pod.Spec.PreemptionPolicy == nil && old.Spec.PreemptionPolicy != nil {
				v := *old.Spec.PreemptionPolicy
				pod.Spec.PreemptionPolicy = &v
			}
		}
		return nil
	case "CREATE":
	default:
		return nil
	}

	var value int32
	var policy *corev1.PreemptionPolicy
	if pod.Spec.PriorityClassName == "" {
		dpc, err := p.globalDefault(ctx, "")
		if err != nil {
			return apierrors.NewInternalError(fmt.Errorf("failed to get default priority class: %v", err))
		}
		if dpc != nil {
			pod.Spec.PriorityClassName = dpc.Name
			value, policy = dpc.Value, dpc.PreemptionPolicy
		} else {
			lower := corev1.PreemptLowerPriority
			policy = &lower
		}
	} else {
		obj, err := p.classes.Get(ctx, "", pod.Spec.PriorityClassName)
		if apierrors.IsNotFound(err) {
			return apierrors.NewForbidden(a.Resource.GroupResource(), a.Name,
				fmt.Errorf("no PriorityClass with name %v was found", pod.Spec.PriorityClassName))
		}
		if err != nil {
			return apierrors.NewInternalError(fmt.Errorf("failed to get PriorityClass with name %s: %v", pod.Spec.PriorityClassName, err))
		}
		pc, ok := obj.(*schedulingv1.PriorityClass)
		if !ok {
			return apierrors.NewInternalError(fmt.Errorf("priorityclasses %q is a %T", pod.Spec.PriorityClassName, obj))
		}
		value, policy = pc.Value, pc.PreemptionPolicy
	}
	if pod.Spec.Priority != nil && *pod.Spec.Priority != value {
		return apierrors.NewForbidden(a.Resource.GroupResource(), a.Name, fmt.Errorf(
			"the integer value of priority (%d) must not be provided in pod spec; priority admission controller computed %d from the given PriorityClass name",
			*pod.Spec.Priority, value))
	}
	pod.Spec.Priority = &value
	if policy != nil {
		if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy != *policy {
			return apierrors.NewForbidden(a.Resource.GroupResource(), a.Name, fmt.Errorf(
				"the string value of PreemptionPolicy (%s) must not be provided in pod spec; priority admission controller computed %s from the given PriorityClass name",
				*pod.Spec.PreemptionPolicy, *policy))
		}
		pp := *policy
		pod.Spec.PreemptionPolicy = &pp
	}
	return nil
}

func (p priority) Validate(ctx context.Context, a *Attributes) error {
	if a.Subresource != "" || a.Resource.GroupResource() != priorityClassesResource.GroupResource() {
		return nil
	}
	switch a.Operation {
	case "DELETE":
		for _, spc := range validation.SystemPriorityClasses() {
			if a.Name == spc.Name {
				return apierrors.NewForbidden(a.Resource.GroupResource(), a.Name,
					errors.New("this is a system priority class and cannot be deleted"))
			}
		}
		return nil
	case "CREATE", "UPDATE":
	default:
		return nil
	}
	pc, ok := a.Object.(*schedulingv1.PriorityClass)
	if !ok || !pc.GlobalDefault {
		return nil
	}
	// A second default is refused; a class that is the default already
	// may be updated.
	dpc, err := p.globalDefault(ctx, pc.Name)
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("failed to get default priority class: %v", err))
	}
	if dpc != nil {
		return apierrors.NewForbidden(a.Resource.GroupResource(), a.Name,
			fmt.Errorf("PriorityClass %v is already marked as default. Only one default can exist", dpc.Name))
	}
	return nil
}

// globalDefault is the class marked globalDefault other than the one named
// except, nil if there is none; of several (two creates racing), the one of
// the lowest value, as upstream.
func (p priority) globalDefault(ctx context.Context, except string) (*schedulingv1.PriorityClass, error) {
	objs, err := p.classes.List(ctx, "")
	if err != nil {
		return nil, err
	}
	var dpc *schedulingv1.PriorityClass
	for _, o := range objs {
		pc, ok := o.(*schedulingv1.PriorityClass)
		if !ok || !pc.GlobalDefault || pc.Name == except {
			continue
		}
		if dpc == nil || pc.Value < dpc.Value {
			dpc = pc
		}
	}
	return dpc, nil
}
