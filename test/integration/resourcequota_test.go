package integration

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// usedIs reports whether the quota's status has hard as its spec and used
// exactly want (quantities compared by value).
func usedIs(ctx context.Context, cs kubernetes.Interface, ns, name string, want map[corev1.ResourceName]string) func() bool {
	return func() bool {
		rq, err := cs.CoreV1().ResourceQuotas(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || len(rq.Status.Hard) != len(rq.Spec.Hard) || len(rq.Status.Used) != len(want) {
			return false
		}
		for n, q := range rq.Spec.Hard {
			if h, ok := rq.Status.Hard[n]; !ok || h.Cmp(q) != 0 {
				return false
			}
		}
		for n, v := range want {
			if u, ok := rq.Status.Used[n]; !ok || u.Cmp(resource.MustParse(v)) != 0 {
				return false
			}
		}
		return true
	}
}

func quotaPod(name string, requests corev1.ResourceList) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox",
			Resources: corev1.ResourceRequirements{Requests: requests}}}}}
}

// A ResourceQuota gets its status from the controller, admission charges
// and refuses with upstream's messages, deletions give usage back (a core
// kind through the shared informers, count/<resource>.<group> through
// the controller's metadata watch), and scopes pick the pods a quota
// counts.
func TestResourceQuota(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	const ns = "quota"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rq := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "compute"}, Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
		corev1.ResourcePods:                     resource.MustParse("2"),
		corev1.ResourceRequestsCPU:              resource.MustParse("500m"),
		corev1.ResourceServices:                 resource.MustParse("5"),
		"count/roles.rbac.authorization.k8s.io": resource.MustParse("1"),
	}}}
	if _, err := cs.CoreV1().ResourceQuotas(ns).Create(ctx, rq, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the quota's status", usedIs(ctx, cs, ns, "compute", map[corev1.ResourceName]string{
		"pods": "0", "requests.cpu": "0", "services": "0", "count/roles.rbac.authorization.k8s.io": "0"}))

	// Admission charges a pod as it is created.
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, quotaPod("p1", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("300m")}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "p1 charged", usedIs(ctx, cs, ns, "compute", map[corev1.ResourceName]string{
		"pods": "1", "requests.cpu": "300m", "services": "0", "count/roles.rbac.authorization.k8s.io": "0"}))
	// Beyond the quota: upstream's 403.
	_, err := cs.CoreV1().Pods(ns).Create(ctx, quotaPod("p2", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("300m")}), metav1.CreateOptions{})
	if want := `pods "p2" is forbidden: exceeded quota: compute, requested: requests.cpu=300m, used: requests.cpu=300m, limited: requests.cpu=500m`; !apierrors.IsForbidden(err) || err.Error() != want {
		t.Errorf("a pod beyond the quota:\n got %v\nwant %s", err, want)
	}
	// A quota on requests.cpu makes every container state it.
	_, err = cs.CoreV1().Pods(ns).Create(ctx, quotaPod("p3", nil), metav1.CreateOptions{})
	if want := `pods "p3" is forbidden: failed quota: compute: must specify requests.cpu for: c`; !apierrors.IsForbidden(err) || err.Error() != want {
		t.Errorf("a pod without requests:\n got %v\nwant %s", err, want)
	}
	// A dry run is checked but not charged.
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, quotaPod("dry", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}),
		metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatal(err)
	}
	// Any resource by count: the second Role is refused.
	role := func(name string) *rbacv1.Role { return &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}} }
	if _, err := cs.RbacV1().Roles(ns).Create(ctx, role("r1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = cs.RbacV1().Roles(ns).Create(ctx, role("r2"), metav1.CreateOptions{})
	if want := `roles.rbac.authorization.k8s.io "r2" is forbidden: exceeded quota: compute, requested: count/roles.rbac.authorization.k8s.io=1, used: count/roles.rbac.authorization.k8s.io=1, limited: count/roles.rbac.authorization.k8s.io=1`; !apierrors.IsForbidden(err) || err.Error() != want {
		t.Errorf("a second role:\n got %v\nwant %s", err, want)
	}
	waitFor(t, "p1 and r1 charged", usedIs(ctx, cs, ns, "compute", map[corev1.ResourceName]string{
		"pods": "1", "requests.cpu": "300m", "services": "0", "count/roles.rbac.authorization.k8s.io": "1"}))

	// Deletions give usage back (the controller recomputes).
	if err := cs.CoreV1().Pods(ns).Delete(ctx, "p1", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	if err := cs.RbacV1().Roles(ns).Delete(ctx, "r1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "usage given back", usedIs(ctx, cs, ns, "compute", map[corev1.ResourceName]string{
		"pods": "0", "requests.cpu": "0", "services": "0", "count/roles.rbac.authorization.k8s.io": "0"}))
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, quotaPod("p4", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}), metav1.CreateOptions{}); err != nil {
		t.Errorf("a pod within the quota again: %v", err)
	}
	// A raised limit is in the status at once.
	cur, err := cs.CoreV1().ResourceQuotas(ns).Get(ctx, "compute", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.Hard[corev1.ResourceRequestsCPU] = resource.MustParse("1")
	if _, err := cs.CoreV1().ResourceQuotas(ns).Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the raised limit", func() bool {
		rq, err := cs.CoreV1().ResourceQuotas(ns).Get(ctx, "compute", metav1.GetOptions{})
		return err == nil && rq.Status.Hard.Name(corev1.ResourceRequestsCPU, resource.DecimalSI).String() == "1"
	})

	// Scopes: BestEffort and NotBestEffort quotas each count their pods.
	const scoped = "quota-scopes"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: scoped}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for name, scope := range map[string]corev1.ResourceQuotaScope{"besteffort": corev1.ResourceQuotaScopeBestEffort, "notbesteffort": corev1.ResourceQuotaScopeNotBestEffort} {
		q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.ResourceQuotaSpec{
			Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")}, Scopes: []corev1.ResourceQuotaScope{scope}}}
		if _, err := cs.CoreV1().ResourceQuotas(scoped).Create(ctx, q, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, name+" status", usedIs(ctx, cs, scoped, name, map[corev1.ResourceName]string{"pods": "0"}))
	}
	if _, err := cs.CoreV1().Pods(scoped).Create(ctx, quotaPod("be1", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "be1 counted as best effort only", func() bool {
		return usedIs(ctx, cs, scoped, "besteffort", map[corev1.ResourceName]string{"pods": "1"})() &&
			usedIs(ctx, cs, scoped, "notbesteffort", map[corev1.ResourceName]string{"pods": "0"})()
	})
	_, err = cs.CoreV1().Pods(scoped).Create(ctx, quotaPod("be2", nil), metav1.CreateOptions{})
	if want := `pods "be2" is forbidden: exceeded quota: besteffort, requested: pods=1, used: pods=1, limited: pods=1`; !apierrors.IsForbidden(err) || err.Error() != want {
		t.Errorf("a second best-effort pod:\n got %v\nwant %s", err, want)
	}
	if _, err := cs.CoreV1().Pods(scoped).Create(ctx, quotaPod("burstable", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}), metav1.CreateOptions{}); err != nil {
		t.Errorf("a burstable pod beside a full best-effort quota: %v", err)
	}
	waitFor(t, "the burstable pod counted", usedIs(ctx, cs, scoped, "notbesteffort", map[corev1.ResourceName]string{"pods": "1"}))
}
