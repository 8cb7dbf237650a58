package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

// TestEphemeralContainersSubresource: pods/ephemeralcontainers is served
// (get, update, strategic merge patch as kubectl debug sends), keeps only
// spec.ephemeralContainers of a write, refuses with upstream's 422s
// changes and removals, duplicate names, an unknown target and the fields
// an ephemeral container may not have; a plain pod update may not add
// one; and it is authorized as pods/ephemeralcontainers. No kubelet runs.
func TestEphemeralContainersSubresource(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	pods := cs.CoreV1().Pods("default")
	if _, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "debugged", Labels: map[string]string{"app": "d"}},
		Spec: corev1.PodSpec{SchedulerName: "none", Containers: []corev1.Container{{Name: "app", Image: "busybox"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Discovery lists it.
	rl, err := cs.Discovery().ServerResourcesForGroupVersion("v1")
	if err != nil {
		t.Fatal(err)
	}
	listed := false
	for _, r := range rl.APIResources {
		listed = listed || r.Name == "pods/ephemeralcontainers"
	}
	if !listed {
		t.Fatal("pods/ephemeralcontainers not in discovery")
	}

	// kubectl debug's strategic merge patch; the label in it is ignored.
	patch := `{"metadata":{"labels":{"app":"changed"}},"spec":{"ephemeralContainers":[{"name":"debugger","image":"busybox","command":["sh"],"targetContainerName":"app","stdin":true,"tty":true}]}}`
	got, err := pods.Patch(ctx, "debugged", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "ephemeralcontainers")
	if err != nil {
		t.Fatalf("patch pods/ephemeralcontainers: %v", err)
	}
	if len(got.Spec.EphemeralContainers) != 1 || got.Labels["app"] != "d" || got.Generation != 2 ||
		got.Spec.EphemeralContainers[0].TerminationMessagePath != corev1.TerminationMessagePathDefault {
		t.Fatalf("after patch: %+v, labels %v, generation %d; want one defaulted ephemeral container, the label unchanged, generation 2", got.Spec.EphemeralContainers, got.Labels, got.Generation)
	}

	// client-go's UpdateEphemeralContainers adds a second one.
	got.Spec.EphemeralContainers = append(got.Spec.EphemeralContainers, corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
		Name: "debugger2", Image: "busybox", ImagePullPolicy: corev1.PullIfNotPresent, TerminationMessagePolicy: corev1.TerminationMessageReadFile}})
	got, err = pods.UpdateEphemeralContainers(ctx, "debugged", got, metav1.UpdateOptions{})
	if err != nil || len(got.Spec.EphemeralContainers) != 2 {
		t.Fatalf("UpdateEphemeralContainers: %v", err)
	}

	invalid := func(name string, mutate func(p *corev1.Pod), field, detail string) {
		t.Helper()
		p, err := pods.Get(ctx, "debugged", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		mutate(p)
		_, err = pods.UpdateEphemeralContainers(ctx, "debugged", p, metav1.UpdateOptions{})
		if !apierrors.IsInvalid(err) {
			t.Fatalf("%s: %v, want 422", name, err)
		}
		for _, c := range err.(apierrors.APIStatus).Status().Details.Causes {
			if c.Field == field && strings.Contains(c.Message, detail) {
				return
			}
		}
		t.Fatalf("%s: %v, want a cause on %s saying %q", name, err, field, detail)
	}
	add := func(ec corev1.EphemeralContainer) func(p *corev1.Pod) {
		return func(p *corev1.Pod) { p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, ec) }
	}
	common := func(name string) corev1.EphemeralContainerCommon {
		return corev1.EphemeralContainerCommon{Name: name, Image: "busybox", ImagePullPolicy: corev1.PullIfNotPresent, TerminationMessagePolicy: corev1.TerminationMessageReadFile}
	}
	invalid("removal", func(p *corev1.Pod) { p.Spec.EphemeralContainers = p.Spec.EphemeralContainers[:1] },
		"spec.ephemeralContainers", `existing ephemeral containers "debugger2" may not be removed`)
	invalid("change", func(p *corev1.Pod) { p.Spec.EphemeralContainers[0].Image = "nginx" },
		"spec.ephemeralContainers", `existing ephemeral containers "debugger" may not be changed`)
	invalid("name of a container", add(corev1.EphemeralContainer{EphemeralContainerCommon: common("app")}),
		"spec.ephemeralContainers[2].name", "Duplicate value")
	withPorts := common("ports")
	withPorts.Ports = []corev1.ContainerPort{{ContainerPort: 80, Protocol: corev1.ProtocolTCP}}
	invalid("ports", add(corev1.EphemeralContainer{EphemeralContainerCommon: withPorts}), "spec.ephemeralContainers[2].ports", "cannot be set for an Ephemeral Container")
	withResources := common("res")
	withResources.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	invalid("resources", add(corev1.EphemeralContainer{EphemeralContainerCommon: withResources}), "spec.ephemeralContainers[2].resources", "cannot be set for an Ephemeral Container")
	invalid("unknown target", add(corev1.EphemeralContainer{EphemeralContainerCommon: common("t"), TargetContainerName: "nope"}),
		"spec.ephemeralContainers[2].targetContainerName", "Not found")

	// A plain update may not add one.
	p, err := pods.Get(ctx, "debugged", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, corev1.EphemeralContainer{EphemeralContainerCommon: common("plain")})
	if _, err := pods.Update(ctx, p, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("plain update adding an ephemeral container: %v, want 422", err)
	}

	// Authorized as pods/ephemeralcontainers: patch on pods is not enough.
	s.grantRole(ctx, "default", "pod-debugger", "debugger", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "patch", "update"}})
	debugger := s.impersonating("debugger")
	third := `{"spec":{"ephemeralContainers":[{"name":"debugger3","image":"busybox"}]}}`
	if _, err := debugger.CoreV1().Pods("default").Patch(ctx, "debugged", types.StrategicMergePatchType, []byte(third), metav1.PatchOptions{}, "ephemeralcontainers"); !apierrors.IsForbidden(err) ||
		!strings.Contains(err.Error(), `cannot patch resource "pods/ephemeralcontainers"`) {
		t.Fatalf("without pods/ephemeralcontainers: %v, want RBAC's 403", err)
	}
	role, err := cs.RbacV1().Roles("default").Get(ctx, "pod-debugger", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	role.Rules[0].Resources = append(role.Rules[0].Resources, "pods/ephemeralcontainers")
	if _, err := cs.RbacV1().Roles("default").Update(ctx, role, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := debugger.CoreV1().Pods("default").Patch(ctx, "debugged", types.StrategicMergePatchType, []byte(third), metav1.PatchOptions{}, "ephemeralcontainers")
		return err == nil, nil
	}); err != nil {
		t.Fatal("with pods/ephemeralcontainers granted still refused")
	}
	if p, err = pods.Get(ctx, "debugged", metav1.GetOptions{}); err != nil || len(p.Spec.EphemeralContainers) != 3 {
		t.Fatalf("after the granted patch: %v, %d ephemeral containers; want 3", err, len(p.Spec.EphemeralContainers))
	}
}
