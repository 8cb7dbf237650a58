package admission

import (
	"context"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

func runtimeClasses(classes ...*nodev1.RuntimeClass) runtimeClass {
	objs := &fakeObjects{items: map[string]runtime.Object{}}
	for _, c := range classes {
		objs.items["/"+c.Name] = c
	}
	return runtimeClass{classes: objs}
}

func TestRuntimeClassAdmission(t *testing.T) {
	overhead := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("120Mi")}
	kata := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "kata"}, Handler: "kata",
		Overhead: &nodev1.Overhead{PodFixed: overhead},
		Scheduling: &nodev1.Scheduling{NodeSelector: map[string]string{"runtime": "kata"},
			Tolerations: []corev1.Toleration{{Key: "kata", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}}}
	plain := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "plain"}, Handler: "runc"}
	plugin := runtimeClasses(kata, plain)
	newPod := func(class *string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}, Spec: corev1.PodSpec{RuntimeClassName: class,
			NodeSelector: map[string]string{"disk": "ssd"},
			Tolerations:  []corev1.Toleration{{Key: "kata", Operator: corev1.TolerationOpExists}}}}
	}
	attrs := func(p *corev1.Pod) *Attributes {
		return &Attributes{Operation: "CREATE", Resource: podsResource, Namespace: "default", Name: p.Name, Object: p}
	}
	ctx := context.Background()

	t.Run("the class's overhead and scheduling are merged in", func(t *testing.T) {
		p := newPod(ptr.To("kata"))
		if err := plugin.Admit(ctx, attrs(p)); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(p.Spec.Overhead, overhead) {
			t.Errorf("overhead %v, want %v", p.Spec.Overhead, overhead)
		}
		if want := map[string]string{"disk": "ssd", "runtime": "kata"}; !reflect.DeepEqual(p.Spec.NodeSelector, want) {
			t.Errorf("nodeSelector %v, want %v", p.Spec.NodeSelector, want)
		}
		// The pod's key-wide toleration covers the class's NoSchedule one.
		if len(p.Spec.Tolerations) != 1 || p.Spec.Tolerations[0].Effect != "" {
			t.Errorf("tolerations %+v, want the pod's one alone", p.Spec.Tolerations)
		}
		if err := plugin.Validate(ctx, attrs(p)); err != nil {
			t.Errorf("validation of the admitted pod: %v", err)
		}
		if kata.Overhead.PodFixed.Cpu().String() != "250m" || len(kata.Scheduling.NodeSelector) != 1 {
			t.Error("the class itself was changed")
		}
	})
	t.Run("a class without overhead or scheduling changes nothing", func(t *testing.T) {
		p := newPod(ptr.To("plain"))
		want := p.DeepCopy()
		if err := plugin.Admit(ctx, attrs(p)); err != nil || !reflect.DeepEqual(p, want) {
			t.Errorf("err %v, pod %+v", err, p.Spec)
		}
	})
	for _, tc := range []struct {
		name, class, msg string
		mutate           func(*corev1.Pod)
		validateOnly     bool
	}{
		{name: "missing class", class: "gone", msg: `pod rejected: RuntimeClass "gone" not found`},
		{name: "conflicting nodeSelector", class: "kata", mutate: func(p *corev1.Pod) { p.Spec.NodeSelector["runtime"] = "gvisor" },
			msg: "conflict: runtimeClass.scheduling.nodeSelector[runtime] = kata; pod.spec.nodeSelector[runtime] = gvisor"},
		{name: "another overhead", class: "kata", mutate: func(p *corev1.Pod) {
			p.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
		}, msg: "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead"},
		{name: "overhead without a class", mutate: func(p *corev1.Pod) {
			p.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
		}, validateOnly: true, msg: "pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var class *string
			if tc.class != "" {
				class = ptr.To(tc.class)
			}
			p := newPod(class)
			if tc.mutate != nil {
				tc.mutate(p)
			}
			err := plugin.Admit(ctx, attrs(p))
			if tc.validateOnly {
				if err != nil {
					t.Fatalf("Admit: %v", err)
				}
				err = plugin.Validate(ctx, attrs(p))
			}
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("got %v, want a 403 saying %q", err, tc.msg)
			}
		})
	}
	t.Run("updates and other kinds are left alone", func(t *testing.T) {
		p := newPod(ptr.To("gone"))
		a := attrs(p)
		a.Operation = "UPDATE"
		if err := plugin.Admit(ctx, a); err != nil {
			t.Error(err)
		}
		a = attrs(p)
		a.Subresource = "status"
		if err := plugin.Validate(ctx, a); err != nil {
			t.Error(err)
		}
	})
}

func TestMergeTolerations(t *testing.T) {
	sec := func(s int64) *int64 { return &s }
	exists := func(key string, effect corev1.TaintEffect) corev1.Toleration {
		return corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: effect}
	}
	equal := corev1.Toleration{Key: "k", Operator: corev1.TolerationOpEqual, Value: "v", Effect: corev1.TaintEffectNoSchedule}
	for _, tc := range []struct {
		name            string
		pod, class, out []corev1.Toleration
	}{
		{name: "disjoint: both", pod: []corev1.Toleration{exists("a", "")}, class: []corev1.Toleration{exists("b", "")},
			out: []corev1.Toleration{exists("a", ""), exists("b", "")}},
		{name: "equal: once", pod: []corev1.Toleration{equal}, class: []corev1.Toleration{equal}, out: []corev1.Toleration{equal}},
		{name: "the class's wider one replaces the pod's", pod: []corev1.Toleration{equal}, class: []corev1.Toleration{exists("k", "")},
			out: []corev1.Toleration{exists("k", "")}},
		{name: "match-all covers everything", pod: []corev1.Toleration{equal, exists("x", corev1.TaintEffectNoExecute)},
			class: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}, out: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}},
		{name: "a shorter tolerationSeconds does not cover a longer one",
			pod:   []corev1.Toleration{{Key: "n", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: sec(300)}},
			class: []corev1.Toleration{{Key: "n", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: sec(60)}},
			out:   []corev1.Toleration{{Key: "n", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: sec(300)}}},
		{name: "nothing", out: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := mergeTolerations(tc.pod, tc.class); !reflect.DeepEqual(got, tc.out) {
				t.Errorf("got %+v, want %+v", got, tc.out)
			}
		})
	}
}
