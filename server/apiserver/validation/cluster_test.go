package validation

import (
	"testing"
	"time"

	"k8s.io/utils/ptr"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestNamespace(t *testing.T) {
	ns := defaulted(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}})
	expectErrors(t, Validate(ns), nil)

	dotted := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team.a"}}
	expectErrors(t, Validate(dotted), []want{{field.ErrorTypeInvalid, "metadata.name", "must not contain dots"}})

	scoped := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "default"}}
	expectErrors(t, Validate(scoped), []want{{field.ErrorTypeForbidden, "metadata.namespace", "not allowed on this type"}})

	fin := ns.DeepCopy()
	fin.Spec.Finalizers = []corev1.FinalizerName{"custom"}
	expectErrors(t, Validate(fin), []want{{field.ErrorTypeInvalid, "spec.finalizers[0]", "neither a standard finalizer name nor is it fully qualified"}})

	old := stored(ns.DeepCopy())
	term := old.DeepCopy()
	term.Status.Phase = corev1.NamespaceTerminating
	expectErrors(t, ValidateStatusUpdate(term, old), []want{{field.ErrorTypeInvalid, "status.phase", "may only be 'Active'"}})
}

func TestNode(t *testing.T) {
	n := defaulted(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Spec: corev1.NodeSpec{
		PodCIDR: "10.244.1.0/24", PodCIDRs: []string{"10.244.1.0/24"},
		Taints: []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}},
	}})
	expectErrors(t, Validate(n), nil)

	bad := n.DeepCopy()
	bad.Spec.PodCIDR, bad.Spec.PodCIDRs = "10.244.1.0/33", nil
	bad.Spec.Taints = append(bad.Spec.Taints, corev1.Taint{Key: "dedicated", Value: "cpu", Effect: corev1.TaintEffectNoSchedule},
		corev1.Taint{Key: "x", Effect: "Sometimes"})
	expectErrors(t, Validate(bad), []want{
		{field.ErrorTypeInvalid, "spec.podCIDR", "must be valid CIDR"},
		{field.ErrorTypeDuplicate, "spec.taints[1]", "unique by key and effect"},
		{field.ErrorTypeNotSupported, "spec.taints[2].effect", ""},
	})

	old := stored(n.DeepCopy())
	moved := old.DeepCopy()
	moved.Spec.PodCIDR, moved.Spec.PodCIDRs = "10.244.2.0/24", []string{"10.244.2.0/24"}
	expectErrors(t, ValidateUpdate(moved, old), []want{{field.ErrorTypeForbidden, "spec.podCIDRs", "may not change podCIDR"}})

	unassigned := stored(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-2"}})
	assigned := unassigned.DeepCopy()
	assigned.Spec.PodCIDR, assigned.Spec.PodCIDRs = "10.244.3.0/24", []string{"10.244.3.0/24"}
	expectErrors(t, ValidateUpdate(assigned, unassigned), nil)
}

func TestLimitRangeAndQuota(t *testing.T) {
	lr := defaulted(&corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "limits"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
		Type: corev1.LimitTypeContainer,
		Max:  corev1.ResourceList{corev1.ResourceCPU: mustQ("2")},
		Min:  corev1.ResourceList{corev1.ResourceCPU: mustQ("100m")},
	}}}})
	expectErrors(t, Validate(lr), nil)
	inverted := lr.DeepCopy()
	inverted.Spec.Limits[0].Min[corev1.ResourceCPU] = mustQ("3")
	expectErrors(t, Validate(inverted), []want{{field.ErrorTypeInvalid, "spec.limits[0].min[cpu]", "min value 3 is greater than max value 2"}})
	podDefaults := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "l"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
		Type: corev1.LimitTypePod, Default: corev1.ResourceList{corev1.ResourceCPU: mustQ("1")}}}}}
	expectErrors(t, Validate(podDefaults), []want{{field.ErrorTypeForbidden, "spec.limits[0].default", "may not be specified when `type` is 'Pod'"}})

	q := defaulted(&corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "quota"}, Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
		"pods": mustQ("10"), "requests.cpu": mustQ("4"), "count/deployments.apps": mustQ("5"),
	}}})
	expectErrors(t, Validate(q), nil)
	badQ := q.DeepCopy()
	badQ.Spec.Hard["widgets"] = mustQ("1")
	badQ.Spec.Hard["pods"] = mustQ("-1")
	expectErrors(t, Validate(badQ), []want{
		{field.ErrorTypeInvalid, "spec.hard[widgets]", "must be a standard resource for quota"},
		{field.ErrorTypeInvalid, "spec.hard[pods]", ""},
	})
}

func TestLease(t *testing.T) {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "kube-scheduler"}, Spec: coordinationv1.LeaseSpec{
		HolderIdentity: ptr.To("node-1"), LeaseDurationSeconds: ptr.To(int32(15))}}
	expectErrors(t, Validate(l), nil)
	l.Spec.LeaseDurationSeconds = ptr.To(int32(0))
	expectErrors(t, Validate(l), []want{{field.ErrorTypeInvalid, "spec.leaseDurationSeconds", "must be greater than 0"}})
}

func TestEvents(t *testing.T) {
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "pod.17a", Namespace: "default"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "pod"},
		Reason:         "Started", Message: "Started container", Type: corev1.EventTypeNormal,
	}
	expectErrors(t, Validate(ev), nil)
	mismatch := ev.DeepCopy()
	mismatch.InvolvedObject.Namespace = "other"
	expectErrors(t, Validate(mismatch), []want{{field.ErrorTypeInvalid, "involvedObject.namespace", "does not match event.namespace"}})

	v1 := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: "pod.17b", Namespace: "default"},
		EventTime:  metav1.NewMicroTime(time.Now()), ReportingController: "kelp.io/kubelet", ReportingInstance: "node-1",
		Action: "Pulling", Reason: "Pulling", Type: corev1.EventTypeNormal,
		Regarding: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "pod"},
	}
	expectErrors(t, Validate(v1), nil)
	bad := v1.DeepCopy()
	bad.EventTime = metav1.MicroTime{}
	bad.Type = "Info"
	bad.Action = ""
	expectErrors(t, Validate(bad), []want{
		{field.ErrorTypeRequired, "eventTime", ""},
		{field.ErrorTypeInvalid, "type", "has invalid value: Info"},
		{field.ErrorTypeRequired, "action", ""},
	})
	old := stored(v1.DeepCopy())
	renote := old.DeepCopy()
	renote.Note = "changed"
	expectErrors(t, ValidateUpdate(renote, old), []want{{field.ErrorTypeInvalid, "note", "field is immutable"}})
}

func TestPriorityClass(t *testing.T) {
	pc := defaulted(&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000})
	expectErrors(t, Validate(pc), nil)
	reserved := pc.DeepCopy()
	reserved.Name = "system-special"
	expectErrors(t, Validate(reserved), []want{{field.ErrorTypeForbidden, "metadata.name", "reserved"}})
	old := stored(pc.DeepCopy())
	raised := old.DeepCopy()
	raised.Value = 2000
	expectErrors(t, ValidateUpdate(raised, old), []want{{field.ErrorTypeForbidden, "value", "may not be changed"}})

	never := old.DeepCopy()
	never.PreemptionPolicy = ptr.To(corev1.PreemptNever)
	expectErrors(t, ValidateUpdate(never, old), []want{{field.ErrorTypeInvalid, "preemptionPolicy", "field is immutable"}})
	described := old.DeepCopy()
	described.Description, described.GlobalDefault = "now the default", true
	expectErrors(t, ValidateUpdate(described, old), nil)

	tooHigh := pc.DeepCopy()
	tooHigh.Value = 1000000001
	expectErrors(t, Validate(tooHigh), []want{{field.ErrorTypeForbidden, "value", "maximum allowed value of a user defined priority is 1000000000"}})
	highest := pc.DeepCopy()
	highest.Value = 1000000000
	expectErrors(t, Validate(highest), nil)
	bogus := pc.DeepCopy()
	bogus.PreemptionPolicy = ptr.To(corev1.PreemptionPolicy("Sometimes"))
	expectErrors(t, Validate(bogus), []want{{field.ErrorTypeNotSupported, "preemptionPolicy", "supported values"}})

	// The system classes only with upstream's values, never the default.
	node := defaulted(&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "system-node-critical"}, Value: 2000001000})
	expectErrors(t, Validate(node), nil)
	cluster := defaulted(&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "system-cluster-critical"}, Value: 2000000000})
	expectErrors(t, Validate(cluster), nil)
	wrongValue := node.DeepCopy()
	wrongValue.Value = 5
	expectErrors(t, Validate(wrongValue), []want{{field.ErrorTypeForbidden, "metadata.name", "value of system-node-critical PriorityClass must be 2000001000"}})
	asDefault := cluster.DeepCopy()
	asDefault.GlobalDefault = true
	expectErrors(t, Validate(asDefault), []want{{field.ErrorTypeForbidden, "metadata.name", "globalDefault of system-cluster-critical PriorityClass must be false"}})
	expectErrors(t, Validate(reserved), []want{{field.ErrorTypeForbidden, "metadata.name", "system-special is not a known system priority class"}})
}
