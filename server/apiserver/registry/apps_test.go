package registry

import (
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestScaleAccessors(t *testing.T) {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	for _, tc := range []struct {
		resource string
		obj      func(replicas *int32, status int32) runtime.Object
		replicas func(runtime.Object) *int32
	}{
		{
			resource: "deployments",
			obj: func(r *int32, st int32) runtime.Object {
				return &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: r, Selector: sel}, Status: appsv1.DeploymentStatus{Replicas: st}}
			},
			replicas: func(o runtime.Object) *int32 { return o.(*appsv1.Deployment).Spec.Replicas },
		},
		{
			resource: "replicasets",
			obj: func(r *int32, st int32) runtime.Object {
				return &appsv1.ReplicaSet{Spec: appsv1.ReplicaSetSpec{Replicas: r, Selector: sel}, Status: appsv1.ReplicaSetStatus{Replicas: st}}
			},
			replicas: func(o runtime.Object) *int32 { return o.(*appsv1.ReplicaSet).Spec.Replicas },
		},
		{
			resource: "statefulsets",
			obj: func(r *int32, st int32) runtime.Object {
				return &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Replicas: r, Selector: sel}, Status: appsv1.StatefulSetStatus{Replicas: st}}
			},
			replicas: func(o runtime.Object) *int32 { return o.(*appsv1.StatefulSet).Spec.Replicas },
		},
	} {
		t.Run(tc.resource, func(t *testing.T) {
			sc := served(t, "apps", tc.resource).Scale
			if sc == nil {
				t.Fatal("no /scale")
			}
			for _, c := range []struct {
				name     string
				replicas *int32
				want     int32
			}{{"unset reads as 1", nil, 1}, {"zero", i32(0), 0}, {"five", i32(5), 5}} {
				spec, status, gotSel := sc.Replicas(tc.obj(c.replicas, 3))
				if spec != c.want || status != 3 || gotSel != sel {
					t.Errorf("%s: Replicas = %d, %d, %v; want %d, 3, the spec's selector", c.name, spec, status, gotSel, c.want)
				}
			}
			a, b := tc.obj(nil, 0), tc.obj(i32(2), 0)
			sc.SetReplicas(a, 7)
			sc.SetReplicas(b, 0)
			if r := tc.replicas(a); r == nil || *r != 7 {
				t.Errorf("SetReplicas(7) wrote %v", r)
			}
			if r := tc.replicas(b); r == nil || *r != 0 {
				t.Errorf("SetReplicas(0) wrote %v", r)
			}
			if tc.replicas(a) == tc.replicas(b) {
				t.Error("two objects share one replicas pointer")
			}
			if spec, _, _ := sc.Replicas(a); spec != 7 {
				t.Errorf("read back %d after SetReplicas(7)", spec)
			}
		})
	}
	// A ReplicationController's map selector reads as matchLabels (what
	// kubectl scale and the HPA are given as status.selector).
	rcScale := served(t, "", "replicationcontrollers").Scale
	rc := &corev1.ReplicationController{Spec: corev1.ReplicationControllerSpec{Selector: map[string]string{"app": "web"}},
		Status: corev1.ReplicationControllerStatus{Replicas: 2}}
	if spec, status, gotSel := rcScale.Replicas(rc); spec != 1 || status != 2 || !reflect.DeepEqual(gotSel, sel) {
		t.Errorf("ReplicationController: Replicas = %d, %d, %v; want 1, 2, %v", spec, status, gotSel, sel)
	}
	rcScale.SetReplicas(rc, 4)
	if r := rc.Spec.Replicas; r == nil || *r != 4 {
		t.Errorf("ReplicationController: SetReplicas(4) wrote %v", r)
	}
	// Only these four kinds have /scale.
	for _, r := range All(Options{}) {
		want := r.GVR.Group == "apps" && (r.GVR.Resource == "deployments" || r.GVR.Resource == "replicasets" || r.GVR.Resource == "statefulsets") ||
			r.GVR.Group == "" && r.GVR.Resource == "replicationcontrollers"
		if (r.Scale != nil) != want {
			t.Errorf("%s: has /scale = %v, want %v", r.GVR, r.Scale != nil, want)
		}
	}
}

// TestDaemonSetTemplateGeneration: the server owns
// deprecated.daemonset.template.generation: 1 on create, +1 only when the
// template changes (compared defaulted, so resending the same manifest is
// no change), and a client's own value is ignored.
func TestDaemonSetTemplateGeneration(t *testing.T) {
	st := served(t, "apps", "daemonsets").Strategy
	newDS := func(image string) *appsv1.DaemonSet {
		return &appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "b"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: image}}}}}}
	}
	gen := func(ds *appsv1.DaemonSet) string { return ds.Annotations[appsv1.DeprecatedTemplateGeneration] }
	old := newDS("img:1")
	st.Default(old)
	st.PrepareForCreate(old)
	if gen(old) != "1" {
		t.Fatalf("on create: %q, want 1", gen(old))
	}
	same := newDS("img:1")
	same.Annotations = map[string]string{appsv1.DeprecatedTemplateGeneration: "9"}
	st.PrepareForUpdate(same, old)
	if gen(same) != "1" {
		t.Errorf("unchanged (undefaulted) template, client sent 9: %q, want 1", gen(same))
	}
	changed := newDS("img:2")
	st.PrepareForUpdate(changed, old)
	if gen(changed) != "2" {
		t.Errorf("changed template: %q, want 2", gen(changed))
	}
}
