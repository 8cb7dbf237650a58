package registry

import (
	"maps"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestPodGracePeriod(t *testing.T) {
	s := served(t, "", "pods").Strategy
	for _, tc := range []struct {
		name    string
		node    string
		phase   corev1.PodPhase
		spec    *int64
		request *int64
		want    int64
	}{
		{name: "unbound", phase: corev1.PodPending, spec: i64(60), request: i64(10), want: 0},
		{name: "succeeded", node: "n1", phase: corev1.PodSucceeded, spec: i64(60), request: i64(10), want: 0},
		{name: "failed", node: "n1", phase: corev1.PodFailed, spec: i64(60), want: 0},
		{name: "request overrides spec", node: "n1", phase: corev1.PodRunning, spec: i64(60), request: i64(10), want: 10},
		{name: "request of 0", node: "n1", phase: corev1.PodRunning, spec: i64(60), request: i64(0), want: 0},
		{name: "request longer than spec", node: "n1", phase: corev1.PodRunning, spec: i64(5), request: i64(90), want: 90},
		{name: "spec's terminationGracePeriodSeconds", node: "n1", phase: corev1.PodRunning, spec: i64(60), want: 60},
		{name: "spec of 0", node: "n1", phase: corev1.PodRunning, spec: i64(0), want: 0},
		{name: "pending on a node", node: "n1", phase: corev1.PodPending, spec: i64(45), want: 45},
		{name: "default", node: "n1", phase: corev1.PodRunning, want: corev1.DefaultTerminationGracePeriodSeconds},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"},
				Spec:       corev1.PodSpec{NodeName: tc.node, TerminationGracePeriodSeconds: tc.spec},
				Status:     corev1.PodStatus{Phase: tc.phase},
			}
			if got := s.GracePeriod(pod, &metav1.DeleteOptions{GracePeriodSeconds: tc.request}); got != tc.want {
				t.Errorf("grace = %d, want %d", got, tc.want)
			}
		})
	}
	if corev1.DefaultTerminationGracePeriodSeconds != 30 {
		t.Errorf("upstream default is 30, got %d", corev1.DefaultTerminationGracePeriodSeconds)
	}
}

func TestPodBind(t *testing.T) {
	s := served(t, "", "pods").Strategy
	base := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-1", Annotations: map[string]string{"keep": "me", "over": "old"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable},
			{Type: corev1.PodReady, Status: corev1.ConditionFalse},
		}},
	}
	for _, tc := range []struct {
		name      string
		pod       func(*corev1.Pod)
		binding   corev1.Binding
		wantAnn   map[string]string
		wantConds int
	}{
		{
			name:      "replaces an Unschedulable PodScheduled and merges annotations",
			binding:   corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{"over": "new", "added": "x"}}, Target: corev1.ObjectReference{Kind: "Node", Name: "n1"}},
			wantAnn:   map[string]string{"keep": "me", "over": "new", "added": "x"},
			wantConds: 2,
		},
		{
			name:      "matching UID, no conditions, no annotations",
			pod:       func(p *corev1.Pod) { p.Annotations = nil; p.Status.Conditions = nil },
			binding:   corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "web", UID: "uid-1"}, Target: corev1.ObjectReference{Name: "n1"}},
			wantConds: 1,
		},
		{
			name:      "annotations onto a pod without any",
			pod:       func(p *corev1.Pod) { p.Annotations = nil },
			binding:   corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{"a": "b"}}, Target: corev1.ObjectReference{Name: "n1"}},
			wantAnn:   map[string]string{"a": "b"},
			wantConds: 2,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := base.DeepCopy()
			if tc.pod != nil {
				tc.pod(in)
			}
			orig := in.DeepCopy()
			b := tc.binding.DeepCopy()
			out, err := s.Bind(in, b)
			if err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(in, orig) {
				t.Errorf("Bind modified its input pod")
			}
			if !equality.Semantic.DeepEqual(b, &tc.binding) {
				t.Errorf("Bind modified its binding")
			}
			pod := out.(*corev1.Pod)
			if pod.Spec.NodeName != "n1" {
				t.Errorf("nodeName = %q, want n1", pod.Spec.NodeName)
			}
			if !maps.Equal(pod.Annotations, tc.wantAnn) {
				t.Errorf("annotations = %v, want %v", pod.Annotations, tc.wantAnn)
			}
			if len(pod.Status.Conditions) != tc.wantConds {
				t.Errorf("conditions = %+v, want %d", pod.Status.Conditions, tc.wantConds)
			}
			found := false
			for _, c := range pod.Status.Conditions {
				if c.Type == corev1.PodScheduled {
					found = true
					if c.Status != corev1.ConditionTrue || c.LastTransitionTime.IsZero() || c.Reason != "" {
						t.Errorf("PodScheduled = %+v, want True with a transition time", c)
					}
				}
			}
			if !found {
				t.Error("no PodScheduled condition")
			}
		})
	}
}

func TestPodBindConflicts(t *testing.T) {
	s := served(t, "", "pods").Strategy
	now := metav1.Now()
	for _, tc := range []struct {
		name    string
		pod     corev1.Pod
		uid     types.UID
		wantMsg string
	}{
		{name: "already bound", pod: corev1.Pod{Spec: corev1.PodSpec{NodeName: "n0"}},
			wantMsg: `Operation cannot be fulfilled on pods "web": pod web is already assigned to node "n0"`},
		{name: "being deleted", pod: corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}},
			wantMsg: `Operation cannot be fulfilled on pods "web": pod web is being deleted, cannot be assigned to a host`},
		{name: "UID mismatch", uid: "other",
			wantMsg: `Operation cannot be fulfilled on pods "web": Precondition failed: UID in precondition: other, UID in object meta: uid-1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := tc.pod.DeepCopy()
			pod.Name, pod.Namespace, pod.UID = "web", "default", "uid-1"
			orig := pod.DeepCopy()
			out, err := s.Bind(pod, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "web", UID: tc.uid}, Target: corev1.ObjectReference{Name: "n1"}})
			if !apierrors.IsConflict(err) {
				t.Fatalf("err = %v, want a Conflict", err)
			}
			if err.Error() != tc.wantMsg {
				t.Errorf("message\n got %s\nwant %s", err.Error(), tc.wantMsg)
			}
			if out != nil {
				t.Errorf("returned %v with the error", out)
			}
			if !equality.Semantic.DeepEqual(pod, orig) {
				t.Error("Bind modified its input on conflict")
			}
		})
	}
}

func TestPodPrepareForCreate(t *testing.T) {
	s := served(t, "", "pods").Strategy
	res := func(cpu, mem string) corev1.ResourceList {
		l := corev1.ResourceList{}
		if cpu != "" {
			l[corev1.ResourceCPU] = resource.MustParse(cpu)
		}
		if mem != "" {
			l[corev1.ResourceMemory] = resource.MustParse(mem)
		}
		return l
	}
	for _, tc := range []struct {
		name       string
		containers []corev1.ResourceRequirements
		init       []corev1.ResourceRequirements
		want       corev1.PodQOSClass
	}{
		{name: "no resources", containers: []corev1.ResourceRequirements{{}}, want: corev1.PodQOSBestEffort},
		{name: "requests only", containers: []corev1.ResourceRequirements{{Requests: res("100m", "")}}, want: corev1.PodQOSBurstable},
		{name: "limits equal requests", containers: []corev1.ResourceRequirements{{Requests: res("1", "1Gi"), Limits: res("1", "1Gi")}},
			want: corev1.PodQOSGuaranteed},
		{name: "limits above requests", containers: []corev1.ResourceRequirements{{Requests: res("500m", "1Gi"), Limits: res("1", "1Gi")}},
			want: corev1.PodQOSBurstable},
		{name: "cpu limit only", containers: []corev1.ResourceRequirements{{Requests: res("1", ""), Limits: res("1", "")}},
			want: corev1.PodQOSBurstable},
		{name: "one container without limits", containers: []corev1.ResourceRequirements{
			{Requests: res("1", "1Gi"), Limits: res("1", "1Gi")}, {}}, want: corev1.PodQOSBurstable},
		{name: "init container counts", containers: []corev1.ResourceRequirements{{}},
			init: []corev1.ResourceRequirements{{Requests: res("1", "")}}, want: corev1.PodQOSBurstable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"},
				// A client's status is not kept.
				Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1", QOSClass: corev1.PodQOSGuaranteed,
					Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
			}
			for i, r := range tc.containers {
				pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "c" + strings.Repeat("x", i), Image: "nginx", Resources: r})
			}
			for i, r := range tc.init {
				pod.Spec.InitContainers = append(pod.Spec.InitContainers, corev1.Container{Name: "i" + strings.Repeat("x", i), Image: "busybox", Resources: r})
			}
			s.PrepareForCreate(pod)
			want := corev1.PodStatus{Phase: corev1.PodPending, QOSClass: tc.want}
			if !equality.Semantic.DeepEqual(pod.Status, want) {
				t.Errorf("status = %+v, want %+v", pod.Status, want)
			}
		})
	}
}
