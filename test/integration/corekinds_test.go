package integration

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kelp-project/kelp/test/simkubelet"
)

// expectInvalid asserts a 422 whose causes include one at path.
func expectInvalid(t *testing.T, what string, err error, path string) {
	t.Helper()
	if !apierrors.IsInvalid(err) {
		t.Errorf("%s: got %v, want 422 Invalid", what, err)
		return
	}
	for _, c := range err.(apierrors.APIStatus).Status().Details.Causes {
		if c.Field == path {
			return
		}
	}
	t.Errorf("%s: no cause at %s in %v", what, path, err)
}

const rcManifest = `apiVersion: v1
kind: ReplicationController
metadata:
  name: update-demo
spec:
  template:
    metadata:
      labels: {name: update-demo}
    spec:
      containers:
      - name: nautilus
        image: registry.k8s.io/e2e-test-images/nautilus:1.7
`

// TestReplicationController: an RC made with kubectl gets upstream's
// defaults, is kept at its count by the ReplicaSet controller's logic
// (kubectl scale through /scale), prints and describes, refuses what
// upstream refuses, and its pods go with it.
func TestReplicationController(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	simkubelet.Start(t, cs, "node-1")
	rcs := cs.CoreV1().ReplicationControllers("default")

	if out, err := s.kubectlIn(rcManifest, nil, "create", "-f", "-"); err != nil {
		t.Fatalf("kubectl create: %v\n%s", err, out)
	}
	rc, err := rcs.Get(ctx, "update-demo", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rc.Spec.Selector["name"] != "update-demo" || rc.Labels["name"] != "update-demo" || ptr.Deref(rc.Spec.Replicas, 0) != 1 {
		t.Errorf("defaults: selector %v, labels %v, replicas %v", rc.Spec.Selector, rc.Labels, rc.Spec.Replicas)
	}
	readyPods := func(n int32) func() bool {
		return func() bool {
			cur, err := rcs.Get(ctx, "update-demo", metav1.GetOptions{})
			if err != nil || cur.Status.Replicas != n || cur.Status.ReadyReplicas != n || cur.Status.ObservedGeneration != cur.Generation {
				return false
			}
			return len(ownedPods(t, cs, "default", cur.UID)) == int(n)
		}
	}
	waitFor(t, "one ready pod", readyPods(1))

	if out := s.mustKubectl("scale", "rc", "update-demo", "--replicas=3"); !strings.Contains(out, "scaled") {
		t.Errorf("kubectl scale: %s", out)
	}
	waitFor(t, "three ready pods", readyPods(3))
	scale, err := rcs.GetScale(ctx, "update-demo", metav1.GetOptions{})
	if err != nil || scale.Spec.Replicas != 3 || scale.Status.Replicas != 3 || scale.Status.Selector != "name=update-demo" {
		t.Errorf("scale: %+v, %v", scale, err)
	}
	out := s.mustKubectl("get", "rc", "update-demo")
	if !strings.Contains(out, "DESIRED") || !strings.Contains(strings.Join(strings.Fields(out), " "), "update-demo 3 3 3") {
		t.Errorf("kubectl get rc:\n%s", out)
	}
	out = s.mustKubectl("describe", "rc", "update-demo")
	for _, want := range []string{"Replicas:", "3 current / 3 desired", "SuccessfulCreate"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl describe rc: no %q in\n%s", want, out)
		}
	}
	s.mustKubectl("scale", "rc", "update-demo", "--replicas=1")
	waitFor(t, "back to one pod", readyPods(1))

	// The selector of a ReplicationController may change (unlike a
	// ReplicaSet's), but must still pick the template.
	cur, _ := rcs.Get(ctx, "update-demo", metav1.GetOptions{})
	cur.Spec.Selector = map[string]string{"name": "other"}
	_, err = rcs.Update(ctx, cur, metav1.UpdateOptions{})
	expectInvalid(t, "selector not matching the template", err, "spec.template.metadata.labels")
	bad := rc.DeepCopy()
	bad.ObjectMeta = metav1.ObjectMeta{Name: "never"}
	bad.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
	_, err = rcs.Create(ctx, bad, metav1.CreateOptions{})
	expectInvalid(t, "restartPolicy Never", err, "spec.template.spec.restartPolicy")
	cur, _ = rcs.Get(ctx, "update-demo", metav1.GetOptions{})
	cur.Status.ReadyReplicas = cur.Status.Replicas + 1
	_, err = rcs.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
	expectInvalid(t, "readyReplicas above replicas", err, "status.readyReplicas")

	// An orphan matching the selector is adopted; deletion cascades.
	orphan := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "orphan", Labels: map[string]string{"name": "update-demo"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, orphan, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "one pod again, the orphan adopted or a surplus deleted", readyPods(1))
	s.mustKubectl("delete", "rc", "update-demo")
	waitFor(t, "the pods collected with the RC", func() bool {
		l, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "name=update-demo"})
		return err == nil && len(l.Items) == 0
	})
}

func ownedPods(t *testing.T, cs kubernetes.Interface, ns string, owner types.UID) []corev1.Pod {
	t.Helper()
	l, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range l.Items {
		if ref := metav1.GetControllerOf(&p); ref != nil && ref.Kind == "ReplicationController" && ref.UID == owner &&
			p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// TestPodTemplate: CRUD, upstream's template validation, kubectl's columns.
func TestPodTemplate(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	pts := cs.CoreV1().PodTemplates("default")
	pt := &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "nginx"}, Template: corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "nginx"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx:1.27"}}}}}
	created, err := pts.Create(ctx, pt, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Defaulted as a pod's spec is.
	if created.Template.Spec.RestartPolicy != corev1.RestartPolicyAlways || created.Template.Spec.Containers[0].TerminationMessagePath == "" {
		t.Errorf("template not defaulted: %+v", created.Template.Spec)
	}
	out := s.mustKubectl("get", "podtemplates")
	if !strings.Contains(out, "POD LABELS") || !strings.Contains(strings.Join(strings.Fields(out), " "), "nginx nginx nginx:1.27 app=nginx") {
		t.Errorf("kubectl get podtemplates:\n%s", out)
	}
	created.Labels = map[string]string{"updated": "true"}
	created.Template.Spec.Containers[0].Image = "nginx:1.28"
	if _, err := pts.Update(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Errorf("update: %v", err)
	}
	bad := pt.DeepCopy()
	bad.Name = "bad"
	bad.Template.Spec.Containers = nil
	_, err = pts.Create(ctx, bad, metav1.CreateOptions{})
	expectInvalid(t, "no containers", err, "template.spec.containers")
	if err := pts.Delete(ctx, "nginx", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if l, err := pts.List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 0 {
		t.Errorf("after delete: %v, %v", l, err)
	}
}

// TestRuntimeClass: CRUD and validation, and admission: a pod naming a
// class gets its overhead and scheduling; one naming a missing class is
// refused.
func TestRuntimeClass(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	classes := cs.NodeV1().RuntimeClasses()
	overhead := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("120Mi")}
	rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "sandboxed"}, Handler: "test-handler",
		Overhead: &nodev1.Overhead{PodFixed: overhead},
		Scheduling: &nodev1.Scheduling{NodeSelector: map[string]string{"sandbox": "yes"},
			Tolerations: []corev1.Toleration{{Key: "sandbox", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}}}
	if _, err := classes.Create(ctx, rc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	out := s.mustKubectl("get", "runtimeclass")
	if !strings.Contains(out, "HANDLER") || !strings.Contains(strings.Join(strings.Fields(out), " "), "sandboxed test-handler") {
		t.Errorf("kubectl get runtimeclass:\n%s", out)
	}

	pods := cs.CoreV1().Pods("default")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{RuntimeClassName: ptr.To("sandboxed"),
		NodeSelector: map[string]string{"disk": "ssd"}, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	got, err := pods.Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.Overhead.Cpu().String() != "250m" || got.Spec.Overhead.Memory().String() != "120Mi" {
		t.Errorf("overhead %v", got.Spec.Overhead)
	}
	if got.Spec.NodeSelector["sandbox"] != "yes" || got.Spec.NodeSelector["disk"] != "ssd" {
		t.Errorf("nodeSelector %v", got.Spec.NodeSelector)
	}
	tolerated := false
	for _, tol := range got.Spec.Tolerations {
		tolerated = tolerated || tol.Key == "sandbox"
	}
	if !tolerated {
		t.Errorf("tolerations %v lack the class's", got.Spec.Tolerations)
	}

	missing := pod.DeepCopy()
	missing.Name, missing.Spec.RuntimeClassName = "q", ptr.To("nonexistent")
	_, err = pods.Create(ctx, missing, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `RuntimeClass "nonexistent" not found`) {
		t.Errorf("missing class: %v, want 403", err)
	}
	own := pod.DeepCopy()
	own.Name, own.Spec.Overhead = "r", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	_, err = pods.Create(ctx, own, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "Overhead doesn't match") {
		t.Errorf("own overhead: %v, want 403", err)
	}

	bad := rc.DeepCopy()
	bad.Name, bad.Handler = "bad", "Not_A_Label"
	_, err = classes.Create(ctx, bad, metav1.CreateOptions{})
	expectInvalid(t, "handler not a DNS label", err, "handler")
	cur, _ := classes.Get(ctx, "sandboxed", metav1.GetOptions{})
	cur.Handler = "runc"
	_, err = classes.Update(ctx, cur, metav1.UpdateOptions{})
	expectInvalid(t, "handler changed", err, "handler")
	if err := classes.Delete(ctx, "sandboxed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Deleted: the next pod naming it is refused (the conformance spec's
	// "deleted RuntimeClass").
	again := pod.DeepCopy()
	again.Name = "s"
	waitFor(t, "a pod naming the deleted class refused", func() bool {
		_, err := pods.Create(ctx, again, metav1.CreateOptions{})
		return apierrors.IsForbidden(err)
	})
}

// TestIngressClass: CRUD and validation, and the default class given at
// admission to an Ingress that names none.
func TestIngressClass(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	classes := cs.NetworkingV1().IngressClasses()
	ic := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "traefik",
		Annotations: map[string]string{networkingv1.AnnotationIsDefaultIngressClass: "true"}},
		Spec: networkingv1.IngressClassSpec{Controller: "traefik.io/ingress-controller"}}
	if _, err := classes.Create(ctx, ic, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	out := s.mustKubectl("get", "ingressclass")
	if !strings.Contains(out, "CONTROLLER") || !strings.Contains(strings.Join(strings.Fields(out), " "), "traefik traefik.io/ingress-controller <none>") {
		t.Errorf("kubectl get ingressclass:\n%s", out)
	}
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: networkingv1.IngressSpec{
		DefaultBackend: &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web",
			Port: networkingv1.ServiceBackendPort{Number: 80}}}}}
	got, err := cs.NetworkingV1().Ingresses("default").Create(ctx, ing, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(got.Spec.IngressClassName, "") != "traefik" {
		t.Errorf("ingressClassName %v, want the default traefik", got.Spec.IngressClassName)
	}

	bad := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "bad"}, Spec: networkingv1.IngressClassSpec{
		Controller: "no-domain", Parameters: &networkingv1.IngressClassParametersReference{Kind: "Config", Name: "x",
			Scope: ptr.To("Namespace")}}}
	_, err = classes.Create(ctx, bad, metav1.CreateOptions{})
	expectInvalid(t, "bad class", err, "spec.parameters.namespace")
	cur, _ := classes.Get(ctx, "traefik", metav1.GetOptions{})
	cur.Spec.Controller = "example.com/other"
	_, err = classes.Update(ctx, cur, metav1.UpdateOptions{})
	expectInvalid(t, "controller changed", err, field.NewPath("spec", "controller").String())
}

// TestLimitRange: a namespace's LimitRange defaults a new pod's container
// resources (with the limit-ranger annotation) and refuses a pod beyond
// its max with 403, through the real admission chain.
func TestLimitRange(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	lr := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "limits"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
		Type: corev1.LimitTypeContainer,
		Max:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")},
		DefaultRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"),
			corev1.ResourceMemory: resource.MustParse("64Mi")},
	}}}}
	if _, err := cs.CoreV1().LimitRanges("default").Create(ctx, lr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := func(name string, res corev1.ResourceRequirements) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox", Resources: res}}}}
	}
	got, err := cs.CoreV1().Pods("default").Create(ctx, pod("plain", corev1.ResourceRequirements{}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := got.Spec.Containers[0].Resources
	// The max is the default limit (LimitRange defaulting), 100m the
	// default request.
	if r.Limits.Cpu().String() != "500m" || r.Requests.Cpu().String() != "100m" || r.Requests.Memory().String() != "64Mi" {
		t.Errorf("defaulted resources %v", r)
	}
	if !strings.Contains(got.Annotations["kubernetes.io/limit-ranger"], "cpu, memory request for container c") {
		t.Errorf("annotations %v", got.Annotations)
	}
	_, err = cs.CoreV1().Pods("default").Create(ctx, pod("big", corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}), metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "maximum cpu usage per Container is 500m, but limit is 1") {
		t.Errorf("a pod over the max: %v", err)
	}
}
