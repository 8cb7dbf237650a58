package registry

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// An update never compares two kinds; if the generic path ever hands a
// rule two, it answers with an internal error instead of panicking.
func TestUpdateRulesRejectMismatchedKinds(t *testing.T) {
	for _, r := range All(Options{}) {
		if r.Review {
			continue
		}
		t.Run(r.GVR.String(), func(t *testing.T) {
			var other runtime.Object = &corev1.ConfigMap{}
			if _, ok := r.New().(*corev1.ConfigMap); ok {
				other = &corev1.Secret{}
			}
			for _, rule := range []struct {
				name string
				f    func(obj, old runtime.Object) field.ErrorList
			}{{"ValidateUpdate", r.ValidateUpdate}, {"ValidateStatusUpdate", r.ValidateStatusUpdate}} {
				for _, pair := range []struct {
					name     string
					obj, old runtime.Object
				}{{"old of another kind", r.New(), other}, {"new of another kind", other, r.New()}, {"nil old", r.New(), nil}} {
					var errs field.ErrorList
					func() {
						defer func() {
							if p := recover(); p != nil {
								t.Fatalf("%s, %s: panic: %v", rule.name, pair.name, p)
							}
						}()
						errs = rule.f(pair.obj, pair.old)
					}()
					if len(errs) != 1 || errs[0].Type != field.ErrorTypeInternal || !strings.Contains(errs[0].Error(), "cannot compare") {
						t.Errorf("%s, %s: %v, want one internal error", rule.name, pair.name, errs)
					}
				}
			}
		})
	}
}

// Both adapters, called directly on two different kinds.
func TestAdaptersOnTwoKinds(t *testing.T) {
	called := false
	upd := updateValidator(func(obj, old *corev1.Pod) field.ErrorList { called = true; return nil })
	gen := genericUpdate(validator(func(*corev1.ConfigMap) field.ErrorList { called = true; return nil }))
	for name, f := range map[string]func(obj, old runtime.Object) field.ErrorList{"updateValidator": upd, "genericUpdate": gen, "metaUpdate": metaUpdate} {
		for _, pair := range [][2]runtime.Object{{&corev1.Pod{}, &corev1.ConfigMap{}}, {&corev1.ConfigMap{}, &corev1.Pod{}}} {
			errs := f(pair[0], pair[1])
			if len(errs) == 0 {
				t.Errorf("%s(%T, %T): no error", name, pair[0], pair[1])
			} else if !strings.Contains(errs.ToAggregate().Error(), "cannot compare") {
				t.Errorf("%s(%T, %T): %v", name, pair[0], pair[1], errs)
			}
		}
	}
	if called {
		t.Error("the typed rule ran on a mismatched pair")
	}
	// The same kind reaches the rule.
	if errs := upd(&corev1.Pod{}, &corev1.Pod{}); errs != nil || !called {
		t.Errorf("matching kinds: %v, rule called %v", errs, called)
	}
}

func TestSelectableFields(t *testing.T) {
	meta := []string{"metadata.name", "metadata.namespace"}
	for _, tc := range []struct {
		group, resource string
		// want is upstream's set: pkg/registry/<group>/<kind>/strategy.go
		// ToSelectableFields, plus the metadata fields.
		want []string
	}{
		{"", "pods", []string{"spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
			"spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName"}},
		{"", "events", []string{"involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
			"involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath",
			"reason", "reportingComponent", "source", "type"}},
		{"events.k8s.io", "events", []string{"regarding.kind", "regarding.namespace", "regarding.name", "regarding.uid",
			"regarding.apiVersion", "regarding.resourceVersion", "regarding.fieldPath",
			"reason", "reportingController", "type"}},
		{"", "secrets", []string{"type"}},
		{"", "configmaps", nil},
		{"", "namespaces", []string{"status.phase"}},
		{"", "nodes", []string{"spec.unschedulable"}},
	} {
		t.Run(tc.group+"/"+tc.resource, func(t *testing.T) {
			r := served(t, tc.group, tc.resource)
			_, fs, err := r.Attrs(r.New())
			if err != nil {
				t.Fatal(err)
			}
			want := append(slices.Clone(tc.want), "metadata.name")
			if r.Namespaced {
				want = append(want, meta[1])
			}
			got := keys(fs)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("fields\n got %v\nwant %v", got, want)
			}
		})
	}
}

func TestAttrs(t *testing.T) {
	pods := served(t, "", "pods")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team-a", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{NodeName: "n1", RestartPolicy: corev1.RestartPolicyAlways, SchedulerName: "default-scheduler",
			ServiceAccountName: "builder", HostNetwork: true},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.42.0.5", NominatedNodeName: "n2"},
	}
	ls, fs, err := pods.Attrs(pod)
	if err != nil {
		t.Fatal(err)
	}
	if ls.Get("app") != "web" || len(ls) != 1 {
		t.Errorf("labels = %v", ls)
	}
	want := fields.Set{
		"metadata.name": "web", "metadata.namespace": "team-a",
		"spec.nodeName": "n1", "spec.restartPolicy": "Always", "spec.schedulerName": "default-scheduler",
		"spec.serviceAccountName": "builder", "spec.hostNetwork": "true",
		"status.phase": "Running", "status.podIP": "10.42.0.5", "status.nominatedNodeName": "n2",
	}
	if !equalSets(fs, want) {
		t.Errorf("pod fields\n got %v\nwant %v", fs, want)
	}

	// events.k8s.io Events select on their own names (upstream's field
	// label conversion), read from the stored core/v1 Event.
	ev := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "team-a"},
		Regarding: corev1.ObjectReference{Kind: "Pod", Name: "web", Namespace: "team-a", UID: "u1"},
		Reason:    "Pulled", ReportingController: "kubelet", Type: corev1.EventTypeNormal,
		DeprecatedSource: corev1.EventSource{Component: "kubelet"}}
	_, fs, err = served(t, "events.k8s.io", "events").Attrs(ev)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"regarding.kind": "Pod", "regarding.name": "web", "regarding.uid": "u1",
		"reason": "Pulled", "reportingController": "kubelet", "type": "Normal", "metadata.namespace": "team-a"} {
		if fs[k] != v {
			t.Errorf("events.k8s.io field %s = %q, want %q", k, fs[k], v)
		}
	}

	// Cluster-scoped kinds have no metadata.namespace.
	_, fs, err = served(t, "", "nodes").Attrs(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{Unschedulable: true}})
	if err != nil {
		t.Fatal(err)
	}
	if !equalSets(fs, fields.Set{"metadata.name": "n1", "spec.unschedulable": "true"}) {
		t.Errorf("node fields = %v", fs)
	}

	// Not an object: an error, not a panic.
	if _, _, err := served(t, "", "configmaps").Attrs(&metav1.Status{}); err == nil {
		t.Error("Attrs of a non-object: no error")
	}
}

func TestCheckFieldSelector(t *testing.T) {
	for _, tc := range []struct {
		group, resource, selector string
		wantErr                   string
	}{
		{"", "pods", "", ""},
		{"", "pods", "spec.nodeName=n1", ""},
		{"", "pods", "spec.nodeName!=n1,status.phase=Running,metadata.namespace=default", ""},
		{"", "pods", "spec.nodeName=n1,spec.containers=x", "field label not supported: spec.containers"},
		{"", "pods", "status.hostIP=1.2.3.4", "field label not supported: status.hostIP"},
		{"", "configmaps", "metadata.name=x", ""},
		{"", "configmaps", "data.key=x", "field label not supported: data.key"},
		{"", "secrets", "type=kubernetes.io/tls", ""},
		{"", "nodes", "metadata.namespace=default", "field label not supported: metadata.namespace"},
		{"", "nodes", "spec.unschedulable=false", ""},
		{"", "events", "involvedObject.name=web,reason=Pulled", ""},
		{"events.k8s.io", "events", "regarding.name=web", ""},
		{"events.k8s.io", "events", "involvedObject.name=web", "field label not supported: involvedObject.name"},
		{"apps", "replicasets", "status.replicas=0", ""},
		{"batch", "jobs", "status.successful=1", ""},
	} {
		t.Run(tc.resource+"?"+tc.selector, func(t *testing.T) {
			sel, err := fields.ParseSelector(tc.selector)
			if err != nil {
				t.Fatal(err)
			}
			err = served(t, tc.group, tc.resource).CheckFieldSelector(sel)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("err = %v, want none", err)
			case tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr):
				t.Errorf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
	if err := served(t, "", "pods").CheckFieldSelector(nil); err != nil {
		t.Errorf("nil selector: %v", err)
	}
	if err := served(t, "", "pods").CheckFieldSelector(fields.Everything()); err != nil {
		t.Errorf("Everything: %v", err)
	}
}

func keys(fs fields.Set) []string {
	var out []string
	for k := range fs {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func equalSets(a, b fields.Set) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range b {
		if got, ok := a[k]; !ok || got != v {
			return false
		}
	}
	return true
}
