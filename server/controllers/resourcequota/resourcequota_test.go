package resourcequota

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	quota "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

func list(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func pod(name string, phase corev1.PodPhase, cpu string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Status: corev1.PodStatus{Phase: phase},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: list("cpu", cpu)}}}}}
}

// syncQuota fills in status.hard from spec.hard and status.used from what
// the namespace holds: ended pods count only as objects.
func TestSyncQuota(t *testing.T) {
	rq := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "q"},
		Spec: corev1.ResourceQuotaSpec{Hard: list("pods", "5", "count/pods", "5", "requests.cpu", "4", "configmaps", "3", "services.nodeports", "2")}}
	objs := []runtime.Object{rq, pod("running", corev1.PodRunning, "1"), pod("done", corev1.PodSucceeded, "2"),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "cm"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "np"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort,
			Ports: []corev1.ServicePort{{Port: 1}, {Port: 2}}}}}
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := New(client, nil, factory)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		t.Fatal("caches did not sync")
	}
	if err := c.sync(ctx, "ns/q"); err != nil {
		t.Fatal(err)
	}
	var got *corev1.ResourceQuota
	for _, a := range client.Actions() {
		if u, ok := a.(clienttesting.UpdateAction); ok && u.GetSubresource() == "status" {
			got = u.GetObject().(*corev1.ResourceQuota)
		}
	}
	if got == nil {
		t.Fatal("no status update")
	}
	if !quota.Equals(got.Status.Hard, rq.Spec.Hard) {
		t.Errorf("status.hard %v, want %v", got.Status.Hard, rq.Spec.Hard)
	}
	want := list("pods", "1", "count/pods", "2", "requests.cpu", "1", "configmaps", "1", "services.nodeports", "2")
	if !quota.Equals(got.Status.Used, want) {
		t.Errorf("status.used %v, want %v", got.Status.Used, want)
	}
	// Once current, a sync writes nothing.
	client.ClearActions()
	if err := c.syncQuota(ctx, got); err != nil {
		t.Fatal(err)
	}
	if n := len(client.Actions()); n != 0 {
		t.Errorf("%d writes for a current quota", n)
	}
}

func TestReplenishOnUpdate(t *testing.T) {
	pods := schema.GroupResource{Resource: "pods"}
	running, ended := pod("p", corev1.PodRunning, "1"), pod("p", corev1.PodFailed, "1")
	if !replenishOnUpdate(pods, running, ended) || replenishOnUpdate(pods, running, running) {
		t.Error("pods: only one that ends gives back its usage")
	}
	svc := func(t corev1.ServiceType) *corev1.Service { return &corev1.Service{Spec: corev1.ServiceSpec{Type: t}} }
	services := schema.GroupResource{Resource: "services"}
	if !replenishOnUpdate(services, svc(corev1.ServiceTypeNodePort), svc(corev1.ServiceTypeClusterIP)) ||
		replenishOnUpdate(services, svc(corev1.ServiceTypeClusterIP), svc(corev1.ServiceTypeExternalName)) {
		t.Error("services: only a change of quota type counts")
	}
	claim := func(class string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{VolumeAttributesClassName: ptr.To(class)}}
	}
	claims := schema.GroupResource{Resource: "persistentvolumeclaims"}
	if !replenishOnUpdate(claims, claim("a"), claim("b")) || replenishOnUpdate(claims, claim("a"), claim("a")) {
		t.Error("claims: a change of attributes class counts")
	}
}
