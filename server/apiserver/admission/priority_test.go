package admission

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/kelp-project/kelp/server/apiserver/validation"
)

func priorityClasses(pcs ...*schedulingv1.PriorityClass) *fakeObjects {
	f := &fakeObjects{items: map[string]runtime.Object{}}
	for _, pc := range pcs {
		f.items["/"+pc.Name] = pc
	}
	return f
}

func testPC(name string, value int32, globalDefault bool, policy corev1.PreemptionPolicy) *schedulingv1.PriorityClass {
	return &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value, GlobalDefault: globalDefault, PreemptionPolicy: &policy}
}

func admitPodPriority(t *testing.T, p priority, pod *corev1.Pod) error {
	t.Helper()
	return p.Admit(context.Background(), &Attributes{Operation: "CREATE", Resource: podsResource, Namespace: "default", Name: pod.Name, Object: pod})
}

func wantForbidden(t *testing.T, err error, msg string) {
	t.Helper()
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), msg) {
		t.Errorf("error %v, want 403 with %q", err, msg)
	}
}

func TestPriorityResolvesPods(t *testing.T) {
	classes := append(validation.SystemPriorityClasses(), testPC("high", 1000, false, corev1.PreemptLowerPriority), testPC("polite", 500, false, corev1.PreemptNever))
	for _, c := range classes {
		if c.PreemptionPolicy == nil {
			c.PreemptionPolicy = ptr.To(corev1.PreemptLowerPriority)
		}
	}
	p := priority{classes: priorityClasses(classes...)}
	for _, tc := range []struct {
		class  string
		value  int32
		policy corev1.PreemptionPolicy
	}{
		{"", 0, corev1.PreemptLowerPriority},
		{"high", 1000, corev1.PreemptLowerPriority},
		{"polite", 500, corev1.PreemptNever},
		{"system-node-critical", 2000001000, corev1.PreemptLowerPriority},
		{"system-cluster-critical", 2000000000, corev1.PreemptLowerPriority},
	} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{PriorityClassName: tc.class}}
		if err := admitPodPriority(t, p, pod); err != nil {
			t.Fatalf("%q: %v", tc.class, err)
		}
		if pod.Spec.Priority == nil || *pod.Spec.Priority != tc.value || pod.Spec.PreemptionPolicy == nil || *pod.Spec.PreemptionPolicy != tc.policy {
			t.Errorf("%q: priority %v policy %v, want %d %s", tc.class, pod.Spec.Priority, pod.Spec.PreemptionPolicy, tc.value, tc.policy)
		}
		if pod.Spec.PriorityClassName != tc.class {
			t.Errorf("%q: class became %q", tc.class, pod.Spec.PriorityClassName)
		}
	}

	// An unknown class, and a priority or policy that is not the class's.
	wantForbidden(t, admitPodPriority(t, p, &corev1.Pod{Spec: corev1.PodSpec{PriorityClassName: "nope"}}), "no PriorityClass with name nope was found")
	wantForbidden(t, admitPodPriority(t, p, &corev1.Pod{Spec: corev1.PodSpec{PriorityClassName: "high", Priority: ptr.To[int32](7)}}),
		"the integer value of priority (7) must not be provided in pod spec; priority admission controller computed 1000 from the given PriorityClass name")
	wantForbidden(t, admitPodPriority(t, p, &corev1.Pod{Spec: corev1.PodSpec{Priority: ptr.To[int32](7)}}),
		"the integer value of priority (7) must not be provided in pod spec; priority admission controller computed 0")
	wantForbidden(t, admitPodPriority(t, p, &corev1.Pod{Spec: corev1.PodSpec{PriorityClassName: "polite", PreemptionPolicy: ptr.To(corev1.PreemptLowerPriority)}}),
		"the string value of PreemptionPolicy (PreemptLowerPriority) must not be provided in pod spec; priority admission controller computed Never from the given PriorityClass name")
	// The class's own values may be repeated.
	same := &corev1.Pod{Spec: corev1.PodSpec{PriorityClassName: "high", Priority: ptr.To[int32](1000), PreemptionPolicy: ptr.To(corev1.PreemptLowerPriority)}}
	if err := admitPodPriority(t, p, same); err != nil {
		t.Errorf("pod with the class's values: %v", err)
	}
}

func TestPriorityGlobalDefault(t *testing.T) {
	p := priority{classes: priorityClasses(testPC("high", 1000, false, corev1.PreemptLowerPriority),
		testPC("batch", 10, true, corev1.PreemptNever), testPC("racing", 20, true, corev1.PreemptLowerPriority))}
	pod := &corev1.Pod{}
	if err := admitPodPriority(t, p, pod); err != nil {
		t.Fatal(err)
	}
	// Of two defaults (a race), the lowest value, and the pod names it.
	if pod.Spec.PriorityClassName != "batch" || *pod.Spec.Priority != 10 || *pod.Spec.PreemptionPolicy != corev1.PreemptNever {
		t.Errorf("pod got %q %d %s, want batch 10 Never", pod.Spec.PriorityClassName, *pod.Spec.Priority, *pod.Spec.PreemptionPolicy)
	}
	named := &corev1.Pod{Spec: corev1.PodSpec{PriorityClassName: "high"}}
	if err := admitPodPriority(t, p, named); err != nil || *named.Spec.Priority != 1000 {
		t.Errorf("named class under a default: %v %v", err, named.Spec.Priority)
	}
}

func TestPriorityKeepsPriorityOnUpdate(t *testing.T) {
	p := priority{classes: priorityClasses()}
	old := &corev1.Pod{Spec: corev1.PodSpec{Priority: ptr.To[int32](5), PreemptionPolicy: ptr.To(corev1.PreemptNever)}}
	pod := &corev1.Pod{}
	if err := p.Admit(context.Background(), &Attributes{Operation: "UPDATE", Resource: podsResource, Object: pod, OldObject: old}); err != nil {
		t.Fatal(err)
	}
	if pod.Spec.Priority == nil || *pod.Spec.Priority != 5 || pod.Spec.PreemptionPolicy == nil || *pod.Spec.PreemptionPolicy != corev1.PreemptNever {
		t.Errorf("update lost the priority: %v %v", pod.Spec.Priority, pod.Spec.PreemptionPolicy)
	}
	// Status writes and other subresources are not the plugin's.
	status := &corev1.Pod{}
	if err := p.Admit(context.Background(), &Attributes{Operation: "UPDATE", Resource: podsResource, Subresource: "status", Object: status, OldObject: old}); err != nil || status.Spec.Priority != nil {
		t.Errorf("status update: %v %v", err, status.Spec.Priority)
	}
}

func TestPriorityClassWrites(t *testing.T) {
	validate := func(p priority, op string, obj *schedulingv1.PriorityClass, name string) error {
		a := &Attributes{Operation: op, Resource: priorityClassesResource, Name: name}
		if obj != nil {
			a.Object = obj
		}
		return p.Validate(context.Background(), a)
	}
	none := priority{classes: priorityClasses(testPC("high", 1000, false, corev1.PreemptLowerPriority))}
	if err := validate(none, "CREATE", testPC("first", 1, true, corev1.PreemptLowerPriority), "first"); err != nil {
		t.Errorf("first default: %v", err)
	}
	withDefault := priority{classes: priorityClasses(testPC("high", 1000, false, corev1.PreemptLowerPriority), testPC("first", 1, true, corev1.PreemptLowerPriority))}
	wantForbidden(t, validate(withDefault, "CREATE", testPC("second", 2, true, corev1.PreemptLowerPriority), "second"),
		"PriorityClass first is already marked as default. Only one default can exist")
	wantForbidden(t, validate(withDefault, "UPDATE", testPC("high", 1000, true, corev1.PreemptLowerPriority), "high"),
		"PriorityClass first is already marked as default")
	// The default itself may be updated; non-defaults are not checked.
	if err := validate(withDefault, "UPDATE", testPC("first", 1, true, corev1.PreemptLowerPriority), "first"); err != nil {
		t.Errorf("update of the default: %v", err)
	}
	if err := validate(withDefault, "CREATE", testPC("other", 3, false, corev1.PreemptLowerPriority), "other"); err != nil {
		t.Errorf("non-default create: %v", err)
	}

	// System classes may not be deleted; others may.
	for _, spc := range validation.SystemPriorityClasses() {
		wantForbidden(t, validate(withDefault, "DELETE", nil, spc.Name), "this is a system priority class and cannot be deleted")
	}
	if err := validate(withDefault, "DELETE", nil, "high"); err != nil {
		t.Errorf("delete of a user class: %v", err)
	}
}
