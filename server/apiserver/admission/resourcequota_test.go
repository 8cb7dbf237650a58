package admission

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

func testQuota(name string, hard, used corev1.ResourceList) *corev1.ResourceQuota {
	return &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: "1"},
		Spec: corev1.ResourceQuotaSpec{Hard: hard}, Status: corev1.ResourceQuotaStatus{Hard: hard, Used: used}}
}

func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

// quotaPlugin is the plugin over the given quotas, charging through a
// fake client.
func quotaPlugin(t *testing.T, quotas ...*corev1.ResourceQuota) (*resourceQuota, *fake.Clientset) {
	items := map[string]runtime.Object{}
	var objs []runtime.Object
	for _, q := range quotas {
		items[q.Namespace+"/"+q.Name] = q
		objs = append(objs, q.DeepCopy())
	}
	client := fake.NewClientset(objs...)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	return newResourceQuota(&fakeObjects{items: items}, func() kubernetes.Interface { return client }, stop), client
}

func containerPod(name string, containers ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: corev1.PodSpec{Containers: containers}}
}

func podCreate(p *corev1.Pod) *Attributes {
	return &Attributes{Operation: "CREATE", Resource: podsResource, Namespace: "ns", Name: p.Name, Object: p}
}

// updatedUsed is the status.used of the last UpdateStatus the plugin sent.
func updatedUsed(client *fake.Clientset) corev1.ResourceList {
	var used corev1.ResourceList
	for _, a := range client.Actions() {
		if u, ok := a.(clienttesting.UpdateAction); ok && u.GetSubresource() == "status" {
			used = u.GetObject().(*corev1.ResourceQuota).Status.Used
		}
	}
	return used
}

func TestResourceQuotaChargesAndRefuses(t *testing.T) {
	ctx := context.Background()
	q, client := quotaPlugin(t, testQuota("compute", rl("pods", "3", "requests.cpu", "1"), rl("pods", "1", "requests.cpu", "600m")))
	ok := containerPod("ok", corev1.Container{Name: "c", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "400m")}})
	if err := q.Validate(ctx, podCreate(ok)); err != nil {
		t.Fatalf("a pod within the quota: %v", err)
	}
	if used := updatedUsed(client); used.Pods().String() != "2" || used.Name("requests.cpu", resource.DecimalSI).String() != "1" {
		t.Errorf("charged %v, want pods=2 requests.cpu=1", used)
	}

	q, _ = quotaPlugin(t, testQuota("compute", rl("pods", "3", "requests.cpu", "1"), rl("pods", "1", "requests.cpu", "600m")))
	big := containerPod("big", corev1.Container{Name: "c", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "500m")}})
	err := q.Validate(ctx, podCreate(big))
	if want := `pods "big" is forbidden: exceeded quota: compute, requested: requests.cpu=500m, used: requests.cpu=600m, limited: requests.cpu=1`; err == nil || err.Error() != want {
		t.Errorf("a pod beyond the quota:\n got %v\nwant %s", err, want)
	}
}

func TestResourceQuotaConstraints(t *testing.T) {
	q, client := quotaPlugin(t, testQuota("limits", rl("limits.cpu", "2", "limits.memory", "1Gi"), rl("limits.cpu", "0", "limits.memory", "0")))
	p := containerPod("p", corev1.Container{Name: "a"},
		corev1.Container{Name: "b", Resources: corev1.ResourceRequirements{Limits: rl("memory", "10Mi")}})
	err := q.Validate(context.Background(), podCreate(p))
	if want := `pods "p" is forbidden: failed quota: limits: must specify limits.cpu for: a,b; limits.memory for: a`; err == nil || err.Error() != want {
		t.Errorf("\n got %v\nwant %s", err, want)
	}
	if len(client.Actions()) != 0 {
		t.Errorf("a refused pod was charged: %v", client.Actions())
	}
}

func TestResourceQuotaStatusUnknown(t *testing.T) {
	q, _ := quotaPlugin(t, testQuota("fresh", rl("pods", "1"), nil))
	err := q.Validate(context.Background(), podCreate(containerPod("p", corev1.Container{Name: "c"})))
	if want := `pods "p" is forbidden: status unknown for quota: fresh, resources: pods`; err == nil || err.Error() != want {
		t.Errorf("\n got %v\nwant %s", err, want)
	}
}

func TestResourceQuotaServicesAndClaims(t *testing.T) {
	ctx := context.Background()
	q, _ := quotaPlugin(t, testQuota("svc", rl("services.nodeports", "1"), rl("services.nodeports", "0")))
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "np"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort,
		Ports: []corev1.ServicePort{{Port: 80}, {Port: 443}}}}
	err := q.Validate(ctx, &Attributes{Operation: "CREATE", Resource: corev1.SchemeGroupVersion.WithResource("services"), Namespace: "ns", Name: "np", Object: svc})
	if want := `services "np" is forbidden: exceeded quota: svc, requested: services.nodeports=2, used: services.nodeports=0, limited: services.nodeports=1`; err == nil || err.Error() != want {
		t.Errorf("\n got %v\nwant %s", err, want)
	}

	// A claim that grows is charged the difference; by class too.
	claim := func(size string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "data", ResourceVersion: "5"},
			Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptrString("fast"),
				Resources: corev1.VolumeResourceRequirements{Requests: rl("storage", size)}}}
	}
	q, client := quotaPlugin(t, testQuota("storage", rl("requests.storage", "10Gi", "fast.storageclass.storage.k8s.io/requests.storage", "6Gi"),
		rl("requests.storage", "5Gi", "fast.storageclass.storage.k8s.io/requests.storage", "5Gi")))
	grow := func(to string) error {
		return q.Validate(ctx, &Attributes{Operation: "UPDATE", Resource: pvcsResource.WithVersion("v1"), Namespace: "ns", Name: "data",
			Object: claim(to), OldObject: claim("5Gi")})
	}
	err = grow("8Gi")
	if want := `persistentvolumeclaims "data" is forbidden: exceeded quota: storage, requested: fast.storageclass.storage.k8s.io/requests.storage=3Gi, used: fast.storageclass.storage.k8s.io/requests.storage=5Gi, limited: fast.storageclass.storage.k8s.io/requests.storage=6Gi`; err == nil || err.Error() != want {
		t.Errorf("\n got %v\nwant %s", err, want)
	}
	if err := grow("6Gi"); err != nil {
		t.Fatal(err)
	}
	if used := updatedUsed(client); used.Name("requests.storage", resource.BinarySI).String() != "6Gi" {
		t.Errorf("charged %v, want requests.storage=6Gi", used)
	}
}

func ptrString(s string) *string { return &s }

func TestResourceQuotaOtherNamespace(t *testing.T) {
	// A full quota in ns binds nothing in a namespace without quotas.
	q, client := quotaPlugin(t, testQuota("full", rl("pods", "1"), rl("pods", "1")))
	p := containerPod("p", corev1.Container{Name: "c"})
	p.Namespace = "other"
	a := podCreate(p)
	a.Namespace = "other"
	if err := q.Validate(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if len(client.Actions()) != 0 {
		t.Errorf("a namespace without quotas was charged: %v", client.Actions())
	}
}
