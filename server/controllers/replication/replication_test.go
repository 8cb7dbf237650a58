package replication

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
)

func newRC(name string, replicas int32) *v1.ReplicationController {
	return &v1.ReplicationController{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("rc-uid-" + name), Generation: 2, ResourceVersion: "7"},
		Spec: v1.ReplicationControllerSpec{
			Replicas: ptr.To(replicas), MinReadySeconds: 3,
			Selector: map[string]string{"app": name},
			Template: &v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "nginx"}}},
			},
		},
	}
}

// TestConversion: what the ReplicaSet controller reads of a
// ReplicationController comes back unchanged, and the two share nothing
// (the controller changes its copy; the informer's must stay as it is).
func TestConversion(t *testing.T) {
	rc := newRC("web", 3)
	rc.Status = v1.ReplicationControllerStatus{Replicas: 3, FullyLabeledReplicas: 3, ReadyReplicas: 2, AvailableReplicas: 1, ObservedGeneration: 2,
		Conditions: []v1.ReplicationControllerCondition{{Type: v1.ReplicationControllerReplicaFailure, Status: v1.ConditionTrue, Reason: "FailedCreate", Message: "quota"}}}
	rs := toReplicaSet(rc)
	if want := (&metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}); !reflect.DeepEqual(rs.Spec.Selector, want) {
		t.Errorf("selector %v, want %v", rs.Spec.Selector, want)
	}
	if rs.Status.Conditions[0].Type != apps.ReplicaSetReplicaFailure {
		t.Errorf("condition %v", rs.Status.Conditions[0].Type)
	}
	if back := toReplicationController(rs); !reflect.DeepEqual(back, rc) {
		t.Errorf("round trip:\n got %+v\nwant %+v", back, rc)
	}
	rs.Spec.Selector.MatchLabels["app"] = "changed"
	rs.Spec.Template.Labels["app"] = "changed"
	*rs.Spec.Replicas = 9
	if rc.Spec.Selector["app"] != "web" || rc.Spec.Template.Labels["app"] != "web" || *rc.Spec.Replicas != 3 {
		t.Error("the ReplicaSet shares memory with the ReplicationController")
	}
	empty := newRC("empty", 1)
	empty.Spec.Selector = nil
	if toReplicaSet(empty).Spec.Selector != nil {
		t.Error("an empty map selector became a selector (which would select every pod)")
	}
}

// TestKeepsPods runs the controller on a fake API: the pods it creates
// are owned by the ReplicationController, its status is written through
// replicationcontrollers/status once, and events name the
// ReplicationController.
func TestKeepsPods(t *testing.T) {
	rc := newRC("web", 2)
	client := fake.NewClientset(rc)
	var n int64
	client.PrependReactor("create", "pods", func(a core.Action) (bool, runtime.Object, error) {
		pod := a.(core.CreateAction).GetObject().(*v1.Pod)
		i := atomic.AddInt64(&n, 1)
		pod.Name = fmt.Sprintf("%s%d", pod.GenerateName, i)
		pod.UID = types.UID(fmt.Sprintf("pod-%d", i))
		return false, nil, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	rec := record.NewFakeRecorder(100)
	ctx, cancel := context.WithCancel(context.Background())
	defer factory.Shutdown()
	defer cancel()
	go New(client, factory, rec).Run(ctx, 2)

	waitFor(t, "two pods and the status", func() bool {
		pods, _ := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		cur, _ := client.CoreV1().ReplicationControllers("default").Get(ctx, "web", metav1.GetOptions{})
		return len(pods.Items) == 2 && cur.Status.Replicas == 2 && cur.Status.ObservedGeneration == 2
	})
	pods, _ := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	for _, p := range pods.Items {
		ref := metav1.GetControllerOf(&p)
		if ref == nil || ref.Kind != "ReplicationController" || ref.APIVersion != "v1" || ref.UID != rc.UID {
			t.Errorf("pod %s: controller %+v", p.Name, ref)
		}
		if !strings.HasPrefix(p.Name, "web-") || p.Labels["app"] != "web" {
			t.Errorf("pod %s labels %v", p.Name, p.Labels)
		}
	}
	statusWrites := func() int {
		writes := 0
		for _, a := range client.Actions() {
			if a.GetVerb() == "update" && a.GetResource().Resource == "replicationcontrollers" {
				if a.GetSubresource() != "status" {
					t.Errorf("update of %q, want only status", a.GetSubresource())
				}
				writes++
			}
		}
		return writes
	}
	// Each write is an informer event and a sync: without
	// terminatingReplicas cleared, every sync would find the status
	// changed and write it again, forever.
	time.Sleep(100 * time.Millisecond)
	before := statusWrites()
	time.Sleep(300 * time.Millisecond)
	if after := statusWrites(); after != before || before > 3 {
		t.Errorf("status writes %d, then %d: want at most 3, then no more", before, after)
	}
	select {
	case ev := <-rec.Events:
		if !strings.Contains(ev, "SuccessfulCreate") {
			t.Errorf("event %q", ev)
		}
	default:
		t.Error("no event")
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}
