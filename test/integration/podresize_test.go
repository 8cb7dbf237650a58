package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"
)

// TestPodResize: pods/resize is served (get, patch, update), changes only
// the containers' resources, bumps the generation, refuses a QoS change,
// a resize beyond the node's allocatable (NodeCapacity), one a LimitRange
// or a ResourceQuota does not allow, and is authorized as pods/resize; a
// plain update of resources stays forbidden. No kubelet runs: the pod is
// bound to a Node object made here, as the API sees it before its kubelet
// reports.
func TestPodResize(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	node, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-r"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The node controllers write to a new Node too (its taints), so the
	// status update retries on a conflict.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if node, err = cs.CoreV1().Nodes().Get(ctx, "node-r", metav1.GetOptions{}); err != nil {
			return err
		}
		node.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("110")}
		node.Status.Allocatable = node.Status.Capacity
		_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	res := func(cpu, mem string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
	}
	pod, err := cs.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "resized", Labels: map[string]string{"app": "r"}},
		Spec: corev1.PodSpec{NodeName: "node-r", Containers: []corev1.Container{{Name: "c1", Image: "busybox",
			Resources: corev1.ResourceRequirements{Requests: res("100m", "64Mi"), Limits: res("200m", "128Mi")}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Generation != 1 || pod.Status.QOSClass != corev1.PodQOSBurstable {
		t.Fatalf("new pod: generation %d, QoS %s", pod.Generation, pod.Status.QOSClass)
	}

	// A binding is no new generation (upstream's pods/binding): a bound
	// pod starts at generation 1, which a resize then bumps.
	bound, err := cs.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bound"},
		Spec: corev1.PodSpec{SchedulerName: "none", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Pods("default").Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "bound"},
		Target: corev1.ObjectReference{Kind: "Node", Name: "node-r"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if bound, err = cs.CoreV1().Pods("default").Get(ctx, "bound", metav1.GetOptions{}); err != nil || bound.Spec.NodeName != "node-r" || bound.Generation != 1 {
		t.Fatalf("bound pod: %v, node %q, generation %d; want node-r at generation 1", err, bound.Spec.NodeName, bound.Generation)
	}

	// GET through the subresource is the pod.
	dyn, err := dynamic.NewForConfig(s.config)
	if err != nil {
		t.Fatal(err)
	}
	u, err := dyn.Resource(corev1.SchemeGroupVersion.WithResource("pods")).Namespace("default").Get(ctx, "resized", metav1.GetOptions{}, "resize")
	if err != nil {
		t.Fatalf("GET pods/resize: %v", err)
	}
	var fromResize corev1.Pod
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &fromResize); err != nil {
		t.Fatal(err)
	}
	if !apiequality.Semantic.DeepEqual(fromResize.Spec, pod.Spec) || fromResize.ResourceVersion != pod.ResourceVersion {
		t.Fatalf("pods/resize GET differs from the pod")
	}

	// A strategic merge patch of resources (and of a label and an image,
	// which the subresource ignores).
	patch := `{"metadata":{"labels":{"app":"changed"}},"spec":{"containers":[{"name":"c1","image":"nginx","resources":{"requests":{"cpu":"150m"},"limits":{"cpu":"300m","memory":"256Mi"}}}]}}`
	got, err := cs.CoreV1().Pods("default").Patch(ctx, "resized", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "resize")
	if err != nil {
		t.Fatalf("patch pods/resize: %v", err)
	}
	c := got.Spec.Containers[0]
	if q := c.Resources.Requests[corev1.ResourceCPU]; q.Cmp(resource.MustParse("150m")) != 0 || got.Generation != 2 {
		t.Fatalf("after resize: cpu request %s, generation %d; want 150m, 2", q.String(), got.Generation)
	}
	if c.Image != "busybox" || got.Labels["app"] != "r" {
		t.Fatalf("resize changed more than resources: image %q, labels %v", c.Image, got.Labels)
	}

	// Update (replace) through the subresource.
	got.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse("96Mi")
	got, err = cs.CoreV1().Pods("default").UpdateResize(ctx, "resized", got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update pods/resize: %v", err)
	}
	if q := got.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory]; q.Cmp(resource.MustParse("96Mi")) != 0 || got.Generation != 3 {
		t.Fatalf("after replace: memory request %s, generation %d", q.String(), got.Generation)
	}

	// A QoS change is 422.
	qos := `{"spec":{"containers":[{"name":"c1","resources":{"requests":{"cpu":"300m","memory":"256Mi"}}}]}}`
	_, err = cs.CoreV1().Pods("default").Patch(ctx, "resized", types.StrategicMergePatchType, []byte(qos), metav1.PatchOptions{}, "resize")
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "Pod QOS Class may not change as a result of resizing") {
		t.Fatalf("QoS-changing resize: %v, want 422", err)
	}
	// Removing a limit is 422.
	_, err = cs.CoreV1().Pods("default").Patch(ctx, "resized", types.JSONPatchType,
		[]byte(`[{"op":"remove","path":"/spec/containers/0/resources/limits/cpu"}]`), metav1.PatchOptions{}, "resize")
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "resource limits cannot be removed") {
		t.Fatalf("limit-removing resize: %v, want 422", err)
	}
	// Beyond the node's allocatable: 403 NodeCapacity.
	big := `{"spec":{"containers":[{"name":"c1","resources":{"requests":{"cpu":"3"},"limits":{"cpu":"3"}}}]}}`
	_, err = cs.CoreV1().Pods("default").Patch(ctx, "resized", types.StrategicMergePatchType, []byte(big), metav1.PatchOptions{}, "resize")
	var st *apierrors.StatusError
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "node didn't have enough allocatable resources: cpu") {
		t.Fatalf("resize beyond allocatable: %v, want 403", err)
	}
	if st, _ = err.(*apierrors.StatusError); st.ErrStatus.Details == nil || len(st.ErrStatus.Details.Causes) == 0 || st.ErrStatus.Details.Causes[0].Type != "NodeCapacity" {
		t.Fatalf("resize beyond allocatable: details %+v, want cause NodeCapacity", st.ErrStatus.Details)
	}
	// A plain update that changes resources stays forbidden.
	cur, err := cs.CoreV1().Pods("default").Get(ctx, "resized", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU] = resource.MustParse("400m")
	if _, err := cs.CoreV1().Pods("default").Update(ctx, cur, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) ||
		!strings.Contains(err.Error(), "pod updates may not change fields other than") {
		t.Fatalf("plain update of resources: %v, want 422", err)
	}

	// Authorized as pods/resize: patch on pods alone is not enough.
	s.grantRole(ctx, "default", "pod-patcher", "resizer", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "patch", "update"}})
	resizer := s.impersonating("resizer")
	small := `{"spec":{"containers":[{"name":"c1","resources":{"requests":{"cpu":"120m"}}}]}}`
	if _, err := resizer.CoreV1().Pods("default").Patch(ctx, "resized", types.StrategicMergePatchType, []byte(small), metav1.PatchOptions{}, "resize"); !apierrors.IsForbidden(err) ||
		!strings.Contains(err.Error(), `cannot patch resource "pods/resize"`) {
		t.Fatalf("resize without pods/resize: %v, want RBAC's 403", err)
	}
	role, err := cs.RbacV1().Roles("default").Get(ctx, "pod-patcher", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	role.Rules[0].Resources = append(role.Rules[0].Resources, "pods/resize")
	if _, err := cs.RbacV1().Roles("default").Update(ctx, role, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := resizer.CoreV1().Pods("default").Patch(ctx, "resized", types.StrategicMergePatchType, []byte(small), metav1.PatchOptions{}, "resize")
		return err == nil, nil
	}); err != nil {
		t.Fatal("resize with pods/resize granted still refused")
	}

	// A ResourceQuota sees the resize: growing past requests.cpu is 403.
	if _, err := cs.CoreV1().ResourceQuotas("default").Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "cpu"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceRequestsCPU: resource.MustParse("500m")}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		q, err := cs.CoreV1().ResourceQuotas("default").Get(ctx, "cpu", metav1.GetOptions{})
		return err == nil && q.Status.Used != nil, nil
	}); err != nil {
		t.Fatal("the quota's usage was never computed")
	}
	over := `{"spec":{"containers":[{"name":"c1","resources":{"requests":{"cpu":"600m"},"limits":{"cpu":"600m"}}}]}}`
	if _, err := cs.CoreV1().Pods("default").Patch(ctx, "resized", types.StrategicMergePatchType, []byte(over), metav1.PatchOptions{}, "resize"); !apierrors.IsForbidden(err) ||
		!strings.Contains(err.Error(), "exceeded quota: cpu") {
		t.Fatalf("resize over the quota: %v, want the quota's 403", err)
	}
}
