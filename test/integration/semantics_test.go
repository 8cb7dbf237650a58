package integration

import (
	"errors"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func seedDeployment() *appsv1.Deployment {
	replicas := int32(3)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "container-lab"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "container-lab"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "container-lab"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "username/container-lab:v2"}}},
			},
		},
	}
}

// generation counts spec changes only; status is written through /status
// alone, and the main endpoint ignores it.
func TestGenerationAndStatusSubresource(t *testing.T) {
	// No controller manager: the deployment controller would write the
	// status this test writes, and its updates race the test's
	// read-modify-writes into 409s.
	s := startServer(t, "--disable-controller-manager")
	cs := s.client()
	ctx := ctxT(t)
	d, err := cs.AppsV1().Deployments("default").Create(ctx, seedDeployment(), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Generation != 1 || d.UID == "" || d.CreationTimestamp.IsZero() {
		t.Fatalf("created: generation %d uid %q", d.Generation, d.UID)
	}
	if d.Spec.RevisionHistoryLimit == nil || *d.Spec.RevisionHistoryLimit != 10 || d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType {
		t.Fatalf("defaults not applied: %+v", d.Spec)
	}
	d.Labels = map[string]string{"only": "metadata"}
	d.Status.Replicas = 99
	d, err = cs.AppsV1().Deployments("default").Update(ctx, d, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Generation != 1 {
		t.Errorf("metadata change bumped generation to %d", d.Generation)
	}
	if d.Status.Replicas != 0 {
		t.Errorf("main endpoint wrote status: replicas %d", d.Status.Replicas)
	}
	d.Status.Replicas = 3
	d.Status.ObservedGeneration = 1
	d.Spec.Paused = true
	d, err = cs.AppsV1().Deployments("default").UpdateStatus(ctx, d, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Status.Replicas != 3 || d.Spec.Paused || d.Generation != 1 {
		t.Errorf("status update: replicas %d paused %v generation %d", d.Status.Replicas, d.Spec.Paused, d.Generation)
	}
	d.Spec.Template.Spec.Containers[0].Image = "username/container-lab:v3"
	d, err = cs.AppsV1().Deployments("default").Update(ctx, d, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Generation != 2 || d.Status.Replicas != 3 {
		t.Errorf("spec change: generation %d, status replicas %d", d.Generation, d.Status.Replicas)
	}
	// The selector is immutable in apps/v1.
	d.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}}
	d.Spec.Template.Labels = map[string]string{"app": "other"}
	_, err = cs.AppsV1().Deployments("default").Update(ctx, d, metav1.UpdateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.selector") {
		t.Errorf("selector change: %v", err)
	}
	// The scale subresource reads and writes spec.replicas.
	sc, err := cs.AppsV1().Deployments("default").GetScale(ctx, "container-lab", metav1.GetOptions{})
	if err != nil || sc.Spec.Replicas != 3 || sc.Status.Selector != "app=container-lab" {
		t.Fatalf("get scale: %v %+v", err, sc)
	}
	sc.Spec.Replicas = 7
	if _, err := cs.AppsV1().Deployments("default").UpdateScale(ctx, "container-lab", sc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	d, _ = cs.AppsV1().Deployments("default").Get(ctx, "container-lab", metav1.GetOptions{})
	if *d.Spec.Replicas != 7 || d.Generation != 3 {
		t.Errorf("after scale: replicas %d generation %d", *d.Spec.Replicas, d.Generation)
	}
}

func TestServiceAllocation(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	mk := func(name string, typ corev1.ServiceType, ip string, nodePort int32) (*corev1.Service, error) {
		return cs.CoreV1().Services("default").Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.ServiceSpec{Type: typ, ClusterIP: ip, Selector: map[string]string{"app": name},
				Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080), NodePort: nodePort}}},
		}, metav1.CreateOptions{})
	}
	a, err := mk("a", corev1.ServiceTypeClusterIP, "", 0)
	if err != nil || !strings.HasPrefix(a.Spec.ClusterIP, "10.43.") || a.Spec.ClusterIPs[0] != a.Spec.ClusterIP {
		t.Fatalf("allocated %v %+v", err, a.Spec)
	}
	if _, err := mk("b", corev1.ServiceTypeClusterIP, a.Spec.ClusterIP, 0); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "already allocated") {
		t.Errorf("duplicate clusterIP: %v", err)
	}
	if _, err := mk("c", corev1.ServiceTypeClusterIP, "10.43.0.1", 0); !apierrors.IsInvalid(err) {
		t.Errorf("10.43.0.1 belongs to default/kubernetes: %v", err)
	}
	np, err := mk("np", corev1.ServiceTypeNodePort, "", 0)
	if err != nil || np.Spec.Ports[0].NodePort < 30000 || np.Spec.Ports[0].NodePort > 32767 {
		t.Fatalf("node port: %v %+v", err, np.Spec.Ports)
	}
	if _, err := mk("np2", corev1.ServiceTypeNodePort, "", np.Spec.Ports[0].NodePort); !apierrors.IsInvalid(err) {
		t.Errorf("duplicate nodePort: %v", err)
	}
	// The clusterIP is immutable.
	origIP := a.Spec.ClusterIP
	a.Spec.ClusterIP, a.Spec.ClusterIPs = "10.43.99.99", []string{"10.43.99.99"}
	if _, err := cs.CoreV1().Services("default").Update(ctx, a, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("clusterIP change: %v", err)
	}
	// Deleting frees the address for reuse.
	if err := cs.CoreV1().Services("default").Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := mk("reuse", corev1.ServiceTypeClusterIP, origIP, 0); err != nil {
		t.Errorf("freed clusterIP not reusable: %v", err)
	}
	old, _ := cs.CoreV1().Services("default").Get(ctx, "np", metav1.GetOptions{})
	if err := cs.CoreV1().Services("default").Delete(ctx, "np", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := mk("np3", corev1.ServiceTypeNodePort, old.Spec.ClusterIP, old.Spec.Ports[0].NodePort); err != nil {
		t.Errorf("freed clusterIP and nodePort not reusable: %v", err)
	}
}

func TestFinalizersAndGracefulPodDeletion(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	cm, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "held", Finalizers: []string{"example.com/hold"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().ConfigMaps("default").Delete(ctx, "held", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	cm, err = cs.CoreV1().ConfigMaps("default").Get(ctx, "held", metav1.GetOptions{})
	if err != nil || cm.DeletionTimestamp == nil {
		t.Fatalf("finalized object should remain with deletionTimestamp: %v %v", err, cm)
	}
	cm.Finalizers = nil
	if _, err := cs.CoreV1().ConfigMaps("default").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "held", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("removing the last finalizer should delete: %v", err)
	}

	// UID precondition.
	cm2, _ := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "pre"}}, metav1.CreateOptions{})
	wrong := types.UID("not-the-uid")
	err = cs.CoreV1().ConfigMaps("default").Delete(ctx, "pre", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &wrong}})
	if !apierrors.IsConflict(err) {
		t.Errorf("UID precondition: %v", err)
	}
	if err := cs.CoreV1().ConfigMaps("default").Delete(ctx, "pre", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &cm2.UID, ResourceVersion: &cm2.ResourceVersion}}); err != nil {
		t.Errorf("matching preconditions: %v", err)
	}

	// A bound pod is deleted gracefully: it stays until its kubelet
	// confirms with grace 0.
	pod, err := cs.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox:1.36"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Status.Phase != corev1.PodPending || pod.Spec.ServiceAccountName != "default" || pod.Status.QOSClass != corev1.PodQOSBestEffort {
		t.Errorf("new pod: phase %q sa %q qos %q", pod.Status.Phase, pod.Spec.ServiceAccountName, pod.Status.QOSClass)
	}
	// DefaultTolerationSeconds admission: 300 s for not-ready and unreachable.
	got := map[string]int64{}
	for _, tol := range pod.Spec.Tolerations {
		if tol.Effect == corev1.TaintEffectNoExecute && tol.TolerationSeconds != nil {
			got[tol.Key] = *tol.TolerationSeconds
		}
	}
	if got["node.kubernetes.io/not-ready"] != 300 || got["node.kubernetes.io/unreachable"] != 300 {
		t.Errorf("default tolerations: %v", pod.Spec.Tolerations)
	}
	if err := cs.CoreV1().Pods("default").Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Pods("default").Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Target: corev1.ObjectReference{Kind: "Node", Name: "node-2"}}, metav1.CreateOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("second binding: %v", err)
	}
	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=node-1"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("field selector spec.nodeName: %v %d", err, len(pods.Items))
	}
	if !hasScheduled(&pods.Items[0]) {
		t.Errorf("binding did not set PodScheduled")
	}
	if err := cs.CoreV1().Pods("default").Delete(ctx, "p", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	pod, err = cs.CoreV1().Pods("default").Get(ctx, "p", metav1.GetOptions{})
	if err != nil || pod.DeletionTimestamp == nil || pod.DeletionGracePeriodSeconds == nil || *pod.DeletionGracePeriodSeconds != 30 {
		t.Fatalf("graceful delete: %v %+v", err, pod.ObjectMeta)
	}
	if time.Until(pod.DeletionTimestamp.Time) < 20*time.Second {
		t.Errorf("deletionTimestamp should be ~30s ahead, is %s", time.Until(pod.DeletionTimestamp.Time))
	}
	zero := int64(0)
	if err := cs.CoreV1().Pods("default").Delete(ctx, "p", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Pods("default").Get(ctx, "p", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("grace 0 confirmation should delete: %v", err)
	}
	if _, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{FieldSelector: "spec.bogus=1"}); !apierrors.IsBadRequest(err) {
		t.Errorf("unknown field selector: %v", err)
	}
	// Creating in a missing namespace is refused.
	if _, err := cs.CoreV1().ConfigMaps("nowhere").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("create in a missing namespace: %v", err)
	}
	// generateName.
	g, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "gen-"}}, metav1.CreateOptions{})
	if err != nil || !strings.HasPrefix(g.Name, "gen-") || len(g.Name) != len("gen-")+5 {
		t.Errorf("generateName: %v %q", err, g.Name)
	}
}

func hasScheduled(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// Both Event APIs share storage: an events.k8s.io/v1 Event is a core/v1
// Event, and the reverse.
func TestEventAPIsShareStorage(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	now := metav1.NowMicro()
	_, err := cs.EventsV1().Events("default").Create(ctx, &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: "e1"}, EventTime: now, ReportingController: "kelp.io/test", ReportingInstance: "test-1",
		Action: "Testing", Reason: "Tested", Note: "written through events.k8s.io", Type: "Normal",
		Regarding: corev1.ObjectReference{Kind: "ConfigMap", Namespace: "default", Name: "x", APIVersion: "v1"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	core, err := cs.CoreV1().Events("default").Get(ctx, "e1", metav1.GetOptions{})
	if err != nil || core.Message != "written through events.k8s.io" || core.InvolvedObject.Name != "x" || core.ReportingController != "kelp.io/test" {
		t.Fatalf("core view: %v %+v", err, core)
	}
	list, err := cs.EventsV1().Events("default").List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 || list.Items[0].Note != core.Message {
		t.Fatalf("events.k8s.io list: %v %+v", err, list)
	}
	out := s.mustKubectl("get", "events")
	if !strings.Contains(out, "Tested") || !strings.Contains(out, "configmap/x") {
		t.Errorf("kubectl get events: %s", out)
	}
	if err := cs.EventsV1().Events("default").Delete(ctx, "e1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Events("default").Get(ctx, "e1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("deleted through one API, still in the other: %v", err)
	}
}

// A review asked for as a Table is 406, as upstream's (the Table
// transformation conformance spec): reviews convert to no Table. Asked
// plainly, it is answered.
func TestReviewAsTableIsNotAcceptable(t *testing.T) {
	s := startServer(t)
	ctx := ctxT(t)
	sar := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/", Verb: "get"}}}
	err := s.client().AuthorizationV1().RESTClient().Post().Resource("selfsubjectaccessreviews").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").Body(sar).Do(ctx).Error()
	var st apierrors.APIStatus
	if !errors.As(err, &st) || st.Status().Code != 406 {
		t.Fatalf("a review as a Table: %v, want 406", err)
	}
	got, err := s.client().AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil || !got.Status.Allowed {
		t.Fatalf("the review itself: %+v %v", got, err)
	}
}
