package quota

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	quota "k8s.io/apiserver/pkg/quota/v1"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

func list(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func TestPodUsage(t *testing.T) {
	now := time.Now()
	clk := testingclock.NewFakeClock(now)
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{Requests: list("cpu", "2")}}},
		Containers: []corev1.Container{
			{Name: "a", Resources: corev1.ResourceRequirements{Requests: list("cpu", "500m", "memory", "1Gi", "example.com/gpu", "1"), Limits: list("cpu", "1")}},
			{Name: "b", Resources: corev1.ResourceRequirements{Requests: list("cpu", "500m", "hugepages-2Mi", "4Mi")}},
		}}}
	got, err := PodUsage(pod, clk)
	if err != nil {
		t.Fatal(err)
	}
	// The init container's 2 CPUs outweigh the 1 the others sum to.
	want := list("count/pods", "1", "pods", "1", "cpu", "2", "requests.cpu", "2", "limits.cpu", "1", "memory", "1Gi", "requests.memory", "1Gi",
		"requests.example.com/gpu", "1", "hugepages-2Mi", "4Mi", "requests.hugepages-2Mi", "4Mi")
	if !quota.Equals(got, want) {
		t.Errorf("usage %v, want %v", got, want)
	}
	// Ended pods, and pods past their deletion grace, count only as objects.
	ended := pod.DeepCopy()
	ended.Status.Phase = corev1.PodSucceeded
	deleting := pod.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: now.Add(-time.Minute)}
	deleting.DeletionGracePeriodSeconds = ptr.To[int64](30)
	for _, p := range []*corev1.Pod{ended, deleting} {
		if got, _ := PodUsage(p, clk); !quota.Equals(got, list("count/pods", "1")) {
			t.Errorf("usage %v, want count/pods only", got)
		}
	}
	deleting.DeletionGracePeriodSeconds = ptr.To[int64](120)
	if got, _ := PodUsage(deleting, clk); got.Pods().String() != "1" {
		t.Errorf("a pod within its grace period is charged: %v", got)
	}
}

func TestPodScopes(t *testing.T) {
	bestEffort := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}
	burstable := &corev1.Pod{Spec: corev1.PodSpec{PriorityClassName: "high", ActiveDeadlineSeconds: ptr.To[int64](60),
		Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: list("memory", "1Mi")}}}}}
	cross := bestEffort.DeepCopy()
	cross.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
		{TopologyKey: "k", Namespaces: []string{"other"}}}}}
	scope := func(name corev1.ResourceQuotaScope, op corev1.ScopeSelectorOperator, values ...string) corev1.ScopedResourceSelectorRequirement {
		return corev1.ScopedResourceSelectorRequirement{ScopeName: name, Operator: op, Values: values}
	}
	for _, c := range []struct {
		pod   *corev1.Pod
		scope corev1.ScopedResourceSelectorRequirement
		want  bool
	}{
		{bestEffort, scope(corev1.ResourceQuotaScopeBestEffort, corev1.ScopeSelectorOpExists), true},
		{burstable, scope(corev1.ResourceQuotaScopeBestEffort, corev1.ScopeSelectorOpExists), false},
		{burstable, scope(corev1.ResourceQuotaScopeNotBestEffort, corev1.ScopeSelectorOpExists), true},
		{burstable, scope(corev1.ResourceQuotaScopeTerminating, corev1.ScopeSelectorOpExists), true},
		{bestEffort, scope(corev1.ResourceQuotaScopeNotTerminating, corev1.ScopeSelectorOpExists), true},
		{burstable, scope(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpIn, "high", "low"), true},
		{burstable, scope(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpNotIn, "high"), false},
		{bestEffort, scope(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpDoesNotExist), true},
		{cross, scope(corev1.ResourceQuotaScopeCrossNamespacePodAffinity, corev1.ScopeSelectorOpExists), true},
		{bestEffort, scope(corev1.ResourceQuotaScopeCrossNamespacePodAffinity, corev1.ScopeSelectorOpExists), false},
	} {
		if got, err := podMatchesScopeFunc(c.scope, c.pod); err != nil || got != c.want {
			t.Errorf("%s %s %v on %s: %v (%v), want %v", c.scope.ScopeName, c.scope.Operator, c.scope.Values, c.pod.Spec.PriorityClassName, got, err, c.want)
		}
	}
	if _, err := podMatchesScopeFunc(scope(corev1.ResourceQuotaScopePriorityClass, "Bogus"), burstable); err == nil {
		t.Error("a bad operator matched")
	}
}

func TestServiceAndClaimUsage(t *testing.T) {
	lb := &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, AllocateLoadBalancerNodePorts: ptr.To(false),
		Ports: []corev1.ServicePort{{Port: 80, NodePort: 30080}, {Port: 81}}}}
	got, err := NewServiceEvaluator(nil).Usage(lb)
	if err != nil {
		t.Fatal(err)
	}
	if want := list("count/services", "1", "services", "1", "services.loadbalancers", "1", "services.nodeports", "1"); !quota.Equals(got, want) {
		t.Errorf("service usage %v, want %v", got, want)
	}
	pvc := &corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To("gold"),
		Resources: corev1.VolumeResourceRequirements{Requests: list("storage", "1500m")}}}
	got, err = NewPersistentVolumeClaimEvaluator(nil).Usage(pvc)
	if err != nil {
		t.Fatal(err)
	}
	// Storage is counted in whole bytes.
	want := list("count/persistentvolumeclaims", "1", "persistentvolumeclaims", "1", "requests.storage", "2",
		"gold.storageclass.storage.k8s.io/persistentvolumeclaims", "1", "gold.storageclass.storage.k8s.io/requests.storage", "2")
	if !quota.Equals(got, want) {
		t.Errorf("claim usage %v, want %v", got, want)
	}
	e := NewPersistentVolumeClaimEvaluator(nil)
	names := e.MatchingResources([]corev1.ResourceName{"gold.storageclass.storage.k8s.io/requests.storage", "pods", "requests.storage"})
	if len(names) != 2 {
		t.Errorf("claim resources %v", names)
	}
}
