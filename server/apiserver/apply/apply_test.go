package apply

import (
	"bytes"
	"errors"
	"fmt"
	"k8s.io/utils/ptr"
	"os"
	"os/exec"
	"regexp"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"

	"github.com/kelp-project/kelp/server/apiserver/defaults/defaultstest"
)

var (
	cmGVK     = corev1.SchemeGroupVersion.WithKind("ConfigMap")
	podGVK    = corev1.SchemeGroupVersion.WithKind("Pod")
	deployGVK = appsv1.SchemeGroupVersion.WithKind("Deployment")
)

const deployYAML = `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
  labels:
    app: web
spec:
  replicas: %d
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: nginx
        image: %s
        ports:
        - containerPort: 80
`

func deploy(replicas int, image string) []byte {
	return []byte(fmt.Sprintf(deployYAML, replicas, image))
}

// emptyLive is what the API server passes to Apply when nothing is stored.
func emptyLive(gvk schema.GroupVersionKind, ns, name string) runtime.Object {
	obj, _ := scheme.Scheme.New(gvk)
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	acc, _ := meta.Accessor(obj)
	acc.SetNamespace(ns)
	acc.SetName(name)
	return obj
}

// stored mimics the create path: the store fills the system fields.
func stored(t testing.TB, obj runtime.Object) runtime.Object {
	t.Helper()
	acc, err := meta.Accessor(obj)
	if err != nil {
		t.Fatal(err)
	}
	if acc.GetUID() == "" {
		acc.SetUID(types.UID("uid-" + acc.GetName()))
		acc.SetCreationTimestamp(metav1.Now())
	}
	acc.SetResourceVersion(fmt.Sprint(time.Now().UnixNano()))
	return obj
}

func mustApply(t testing.TB, m *Manager, gvk schema.GroupVersionKind, sub string, live runtime.Object, patch []byte, manager string, force bool) runtime.Object {
	t.Helper()
	out, err := m.Apply(gvk, sub, live, patch, manager, force)
	if err != nil {
		t.Fatalf("apply by %q: %v", manager, err)
	}
	return out
}

func entry(t *testing.T, obj runtime.Object, manager, sub string) *metav1.ManagedFieldsEntry {
	t.Helper()
	acc, _ := meta.Accessor(obj)
	for i, e := range acc.GetManagedFields() {
		if e.Manager == manager && e.Subresource == sub {
			return &acc.GetManagedFields()[i]
		}
	}
	return nil
}

func fieldSet(t *testing.T, e *metav1.ManagedFieldsEntry) *fieldpath.Set {
	t.Helper()
	s := &fieldpath.Set{}
	if err := s.FromJSON(bytes.NewReader(e.FieldsV1.Raw)); err != nil {
		t.Fatal(err)
	}
	return s
}

// owns reports whether manager (on subresource sub) owns the field path.
func owns(t *testing.T, obj runtime.Object, manager, sub string, path ...interface{}) bool {
	t.Helper()
	e := entry(t, obj, manager, sub)
	if e == nil {
		return false
	}
	return fieldSet(t, e).Has(fieldpath.MakePathOrDie(path...))
}

// ownsUnder reports whether manager owns anything at or below prefix.
func ownsUnder(t *testing.T, obj runtime.Object, manager, sub string, prefix ...interface{}) bool {
	t.Helper()
	e := entry(t, obj, manager, sub)
	if e == nil {
		return false
	}
	p := fieldpath.MakePathOrDie(prefix...)
	found := false
	fieldSet(t, e).Iterate(func(q fieldpath.Path) {
		if len(q) >= len(p) && q[:len(p)].Equals(p) {
			found = true
		}
	})
	return found
}

func container(name string) *value.FieldList {
	return &value.FieldList{{Name: "name", Value: value.NewValueInterface(name)}}
}

func statusCode(err error) int32 {
	if s, ok := err.(apierrors.APIStatus); ok {
		return s.Status().Code
	}
	return 0
}

func TestApplyCreatesConfigMap(t *testing.T) {
	m := New(defaultstest.Apply)
	live := emptyLive(cmGVK, "default", "cfg")
	out := mustApply(t, m, cmGVK, "", live, []byte(`
apiVersion: v1
kind: ConfigMap
metadata:
  name: cfg
  labels: {team: a}
data:
  a: "1"
  b: "2"
`), "ops", false)

	cm, ok := out.(*corev1.ConfigMap)
	if !ok {
		t.Fatalf("result is %T, want *corev1.ConfigMap", out)
	}
	if cm.Data["a"] != "1" || cm.Data["b"] != "2" || cm.Labels["team"] != "a" {
		t.Errorf("merged object = %+v", cm)
	}
	if cm.Name != "cfg" || cm.Namespace != "default" {
		t.Errorf("name/namespace = %s/%s", cm.Namespace, cm.Name)
	}
	if cm.APIVersion != "v1" || cm.Kind != "ConfigMap" {
		t.Errorf("TypeMeta = %+v, want v1 ConfigMap", cm.TypeMeta)
	}
	if len(cm.ManagedFields) != 1 {
		t.Fatalf("managedFields = %+v, want one entry", cm.ManagedFields)
	}
	e := cm.ManagedFields[0]
	if e.Manager != "ops" || e.Operation != metav1.ManagedFieldsOperationApply || e.APIVersion != "v1" ||
		e.FieldsType != "FieldsV1" || e.Time == nil || e.Subresource != "" {
		t.Errorf("entry = %+v", e)
	}
	for _, p := range [][]interface{}{{"data", "a"}, {"data", "b"}, {"metadata", "labels", "team"}} {
		if !owns(t, cm, "ops", "", p...) {
			t.Errorf("ops does not own %v: %s", p, e.FieldsV1.Raw)
		}
	}
	// apiVersion, kind, name, namespace are never tracked (stripmeta).
	if owns(t, cm, "ops", "", "metadata", "name") || owns(t, cm, "ops", "", "kind") {
		t.Errorf("identity fields tracked: %s", e.FieldsV1.Raw)
	}
	if !apiequality.Semantic.DeepEqual(live, emptyLive(cmGVK, "default", "cfg")) {
		t.Errorf("live was modified: %+v", live)
	}
}

func TestApplyCreatesDeployment(t *testing.T) {
	m := New(defaultstest.Apply)
	out := mustApply(t, m, deployGVK, "", emptyLive(deployGVK, "default", "web"), deploy(2, "nginx:1.27"), "kubectl", false)
	d, ok := out.(*appsv1.Deployment)
	if !ok {
		t.Fatalf("result is %T", out)
	}
	if *d.Spec.Replicas != 2 || d.Spec.Template.Spec.Containers[0].Image != "nginx:1.27" {
		t.Errorf("spec = %+v", d.Spec)
	}
	// kelp's defaults ran on the merged object.
	if d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || d.Spec.ProgressDeadlineSeconds == nil ||
		d.Spec.Template.Spec.Containers[0].TerminationMessagePath != "/dev/termination-log" {
		t.Errorf("defaults not applied: %+v", d.Spec)
	}
	if d.APIVersion != "apps/v1" || d.Kind != "Deployment" {
		t.Errorf("TypeMeta = %+v", d.TypeMeta)
	}
	e := entry(t, d, "kubectl", "")
	if e == nil || len(d.ManagedFields) != 1 || e.Operation != metav1.ManagedFieldsOperationApply || e.APIVersion != "apps/v1" {
		t.Fatalf("managedFields = %+v", d.ManagedFields)
	}
	for _, p := range [][]interface{}{
		{"spec", "replicas"},
		{"spec", "selector"},
		{"spec", "template", "spec", "containers", container("nginx"), "image"},
		{"spec", "template", "spec", "containers", container("nginx"), "ports", &value.FieldList{
			{Name: "containerPort", Value: value.NewValueInterface(int64(80))},
			{Name: "protocol", Value: value.NewValueInterface("TCP")},
		}, "containerPort"},
	} {
		if !owns(t, d, "kubectl", "", p...) {
			t.Errorf("kubectl does not own %v: %s", p, e.FieldsV1.Raw)
		}
	}
	// Defaulted fields belong to nobody: the applier owns only what it sent.
	if owns(t, d, "kubectl", "", "spec", "progressDeadlineSeconds") || owns(t, d, "kubectl", "", "spec", "strategy") {
		t.Errorf("applier owns defaulted fields: %s", e.FieldsV1.Raw)
	}
}

func TestReapplyUpdatesField(t *testing.T) {
	m := New(defaultstest.Apply)
	live := stored(t, mustApply(t, m, deployGVK, "", emptyLive(deployGVK, "default", "web"), deploy(2, "nginx:1.27"), "kubectl", false))
	out := mustApply(t, m, deployGVK, "", live, deploy(3, "nginx:1.28"), "kubectl", false)
	d := out.(*appsv1.Deployment)
	if *d.Spec.Replicas != 3 || d.Spec.Template.Spec.Containers[0].Image != "nginx:1.28" {
		t.Errorf("spec not updated: replicas=%d image=%s", *d.Spec.Replicas, d.Spec.Template.Spec.Containers[0].Image)
	}
	if len(d.ManagedFields) != 1 || !owns(t, d, "kubectl", "", "spec", "replicas") {
		t.Errorf("managedFields = %+v", d.ManagedFields)
	}
	if d.UID != live.(*appsv1.Deployment).UID {
		t.Errorf("uid lost on update")
	}
	if *live.(*appsv1.Deployment).Spec.Replicas != 2 {
		t.Errorf("live was modified")
	}

	// Re-applying the same configuration is a no-op that still returns a
	// full typed object.
	again := mustApply(t, m, deployGVK, "", stored(t, out), deploy(3, "nginx:1.28"), "kubectl", false)
	if ad := again.(*appsv1.Deployment); ad.Kind != "Deployment" || *ad.Spec.Replicas != 3 || len(ad.ManagedFields) != 1 {
		t.Errorf("no-op apply = %+v", ad)
	}
}

func TestApplyConflictAndForce(t *testing.T) {
	m := New(defaultstest.Apply)
	live := stored(t, mustApply(t, m, deployGVK, "", emptyLive(deployGVK, "default", "web"), deploy(2, "nginx:1.27"), "alice", false))

	_, err := m.Apply(deployGVK, "", live, deploy(5, "nginx:1.27"), "bob", false)
	if !apierrors.IsConflict(err) || statusCode(err) != 409 {
		t.Fatalf("err = %v, want 409 Conflict", err)
	}
	want := `Apply failed with 1 conflict: conflict with "alice": .spec.replicas`
	if err.Error() != want {
		t.Errorf("message = %q, want %q", err.Error(), want)
	}
	st := err.(apierrors.APIStatus).Status()
	if st.Details == nil || len(st.Details.Causes) != 1 || st.Details.Causes[0].Field != ".spec.replicas" ||
		st.Details.Causes[0].Type != metav1.CauseTypeFieldManagerConflict {
		t.Errorf("causes = %+v", st.Details)
	}

	// Applying the same value is not a conflict: ownership is shared.
	if _, err := m.Apply(deployGVK, "", live, deploy(2, "nginx:1.27"), "bob", false); err != nil {
		t.Errorf("same-value apply: %v", err)
	}

	out := mustApply(t, m, deployGVK, "", live, deploy(5, "nginx:1.27"), "bob", true)
	d := out.(*appsv1.Deployment)
	if *d.Spec.Replicas != 5 {
		t.Errorf("replicas = %d, want 5 after force", *d.Spec.Replicas)
	}
	if !owns(t, d, "bob", "", "spec", "replicas") || owns(t, d, "alice", "", "spec", "replicas") {
		t.Errorf("ownership after force: %+v", d.ManagedFields)
	}
	if !owns(t, d, "alice", "", "spec", "template", "spec", "containers", container("nginx"), "image") {
		t.Errorf("alice lost fields that were not forced: %+v", d.ManagedFields)
	}
}

func TestApplyConflictWithUpdater(t *testing.T) {
	m := New(defaultstest.Apply)
	live := stored(t, mustApply(t, m, deployGVK, "", emptyLive(deployGVK, "default", "web"), deploy(2, "nginx:1.27"), "alice", false))
	// kubectl scale (an Update) takes spec.replicas.
	scaled := live.DeepCopyObject().(*appsv1.Deployment)
	scaled.Spec.Replicas = ptr.To(int32(7))
	live = stored(t, m.Update(deployGVK, "", live, scaled, "kubectl-scale"))

	_, err := m.Apply(deployGVK, "", live, deploy(3, "nginx:1.27"), "alice", false)
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), `conflict with "kubectl-scale" using apps/v1: .spec.replicas`) {
		t.Fatalf("err = %v", err)
	}
	cmLive := stored(t, mustApply(t, m, cmGVK, "", emptyLive(cmGVK, "default", "c"), []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"a":"1","b":"1"}}`), "x", false))
	_, err = m.Apply(cmGVK, "", cmLive, []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"a":"2","b":"2"}}`), "y", false)
	if !apierrors.IsConflict(err) || !strings.HasPrefix(err.Error(), "Apply failed with 2 conflicts: conflicts with \"x\":\n- .data.a\n- .data.b") {
		t.Errorf("err = %q", err)
	}
}

func TestApplyRemovesDroppedFields(t *testing.T) {
	m := New(defaultstest.Apply)
	cfg := func(data string) []byte {
		return []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n" + data)
	}
	live := stored(t, mustApply(t, m, cmGVK, "", emptyLive(cmGVK, "default", "c"), cfg("  a: '1'\n  b: '2'\n  c: '3'\n"), "alice", false))
	// bob also applies c (same value): c is now co-owned.
	live = stored(t, mustApply(t, m, cmGVK, "", live, cfg("  c: '3'\n"), "bob", false))

	// alice drops b (sole owner: removed) and c (co-owned: kept).
	out := mustApply(t, m, cmGVK, "", live, cfg("  a: '1'\n"), "alice", false)
	cm := out.(*corev1.ConfigMap)
	if _, ok := cm.Data["b"]; ok {
		t.Errorf("b still present: %v", cm.Data)
	}
	if cm.Data["a"] != "1" || cm.Data["c"] != "3" {
		t.Errorf("data = %v, want a and c kept", cm.Data)
	}
	if owns(t, cm, "alice", "", "data", "c") || !owns(t, cm, "bob", "", "data", "c") {
		t.Errorf("managedFields = %+v", cm.ManagedFields)
	}

	// A field set by an Update is not removed when an applier stops sending
	// it, as long as the updater still owns it.
	edited := stored(t, out).DeepCopyObject().(*corev1.ConfigMap)
	edited.Data["d"] = "4"
	live = stored(t, m.Update(cmGVK, "", out, edited, "kubectl-edit"))
	out = mustApply(t, m, cmGVK, "", live, cfg("  a: '1'\n"), "alice", false)
	if out.(*corev1.ConfigMap).Data["d"] != "4" {
		t.Errorf("updater's field removed: %v", out.(*corev1.ConfigMap).Data)
	}
}

func TestUpdateRecordsEntries(t *testing.T) {
	m := New(defaultstest.Apply)
	// Create: live is nil; obj has been defaulted by the write path.
	obj := &appsv1.Deployment{}
	if err := runtime.DecodeInto(scheme.Codecs.UniversalDecoder(appsv1.SchemeGroupVersion), toJSON(t, deploy(2, "nginx:1.27")), obj); err != nil {
		t.Fatal(err)
	}
	obj.SetGroupVersionKind(deployGVK)
	defaultstest.Apply(obj)
	created := m.Update(deployGVK, "", nil, obj, "kubectl-create")
	if created != runtime.Object(obj) {
		t.Errorf("Update did not return obj")
	}
	e := entry(t, created, "kubectl-create", "")
	if e == nil || e.Operation != metav1.ManagedFieldsOperationUpdate || e.APIVersion != "apps/v1" || e.FieldsType != "FieldsV1" || e.Time == nil {
		t.Fatalf("managedFields = %+v", obj.ManagedFields)
	}
	// As upstream: the creator owns everything set, defaults included.
	for _, p := range [][]interface{}{{"spec", "replicas"}, {"spec", "progressDeadlineSeconds"}, {"metadata", "labels", "app"},
		{"spec", "template", "spec", "containers", container("nginx"), "terminationMessagePath"}} {
		if !owns(t, created, "kubectl-create", "", p...) {
			t.Errorf("creator does not own %v: %s", p, e.FieldsV1.Raw)
		}
	}

	// Update by another manager moves ownership of the changed field.
	live := stored(t, created)
	next := live.DeepCopyObject().(*appsv1.Deployment)
	next.Spec.Replicas = ptr.To(int32(4))
	next.ResourceVersion = ""
	updated := m.Update(deployGVK, "", live, next, "kubectl-edit")
	if !owns(t, updated, "kubectl-edit", "", "spec", "replicas") || owns(t, updated, "kubectl-create", "", "spec", "replicas") {
		t.Errorf("managedFields after update = %+v", next.ManagedFields)
	}
	if entry(t, updated, "kubectl-edit", "").Operation != metav1.ManagedFieldsOperationUpdate {
		t.Errorf("not an Update entry")
	}
	if len(live.(*appsv1.Deployment).ManagedFields) != 1 {
		t.Errorf("live was modified")
	}

	// An update that changes nothing adds no entry.
	same := stored(t, updated).DeepCopyObject()
	if got := m.Update(deployGVK, "", updated, same, "noop"); entry(t, got, "noop", "") != nil {
		t.Errorf("no-op update recorded an entry")
	}

	// Subresource entries carry the subresource name; the empty manager is "unknown".
	st := stored(t, updated).DeepCopyObject().(*appsv1.Deployment)
	st.Status.Replicas = 4
	got := m.Update(deployGVK, "status", updated, st, "")
	if e := entry(t, got, "unknown", "status"); e == nil || !owns(t, got, "unknown", "status", "status", "replicas") {
		t.Errorf("status entry missing: %+v", st.ManagedFields)
	}
}

func TestUpdateNeverFails(t *testing.T) {
	m := New(defaultstest.Apply)
	// Unknown kind: obj comes back untouched.
	obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}
	if got := m.Update(schema.GroupVersionKind{Group: "nope", Version: "v1", Kind: "Nope"}, "", nil, obj, "m"); got != runtime.Object(obj) || len(obj.ManagedFields) != 0 {
		t.Errorf("unknown kind: %+v", got)
	}

	// A managedFields entry of another version of the kind (which kelp
	// cannot convert) is dropped instead of failing the whole update.
	live := stored(t, m.Update(deployGVK, "", nil, &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "default", Labels: map[string]string{"a": "b"}},
	}, "creator"))
	next := live.DeepCopyObject().(*appsv1.Deployment)
	next.ManagedFields = append(next.ManagedFields, metav1.ManagedFieldsEntry{
		Manager: "old", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "apps/v1beta2",
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:paused":{}}}`)},
	})
	next.Labels["c"] = "d"
	got := m.Update(deployGVK, "", live, next, "editor")
	if !owns(t, got, "editor", "", "metadata", "labels", "c") {
		t.Errorf("update failed: %+v", next.ManagedFields)
	}
	if entry(t, got, "old", "") != nil {
		t.Errorf("unconvertible entry kept: %+v", next.ManagedFields)
	}
}

func TestStatusResetFields(t *testing.T) {
	m := New(defaultstest.Apply)
	withStatus := append(deploy(2, "nginx:1.27"), []byte("status:\n  replicas: 9\n")...)

	// The main resource's applier never owns status.
	out := mustApply(t, m, deployGVK, "", emptyLive(deployGVK, "default", "web"), withStatus, "kubectl", false)
	if ownsUnder(t, out, "kubectl", "", "status") || !owns(t, out, "kubectl", "", "spec", "replicas") {
		t.Errorf("main resource: %s", entry(t, out, "kubectl", "").FieldsV1.Raw)
	}
	live := stored(t, out)
	live.(*appsv1.Deployment).Status = appsv1.DeploymentStatus{} // the registry resets it

	// The status subresource's applier owns only status, even when its
	// configuration also carries spec (and, for deployments, labels).
	statusPatch := []byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","labels":{"x":"y"}},
		"spec":{"replicas":8},"status":{"replicas":2,"readyReplicas":1}}`)
	out = mustApply(t, m, deployGVK, "status", live, statusPatch, "controller", false)
	if !owns(t, out, "controller", "status", "status", "readyReplicas") {
		t.Errorf("status applier does not own status: %+v", out.(*appsv1.Deployment).ManagedFields)
	}
	if ownsUnder(t, out, "controller", "status", "spec") || ownsUnder(t, out, "controller", "status", "metadata") {
		t.Errorf("status applier owns spec/labels: %s", entry(t, out, "controller", "status").FieldsV1.Raw)
	}
	// ... and does not conflict with the spec owner when it sends spec.
	if e := entry(t, out, "controller", "status"); e.Operation != metav1.ManagedFieldsOperationApply {
		t.Errorf("entry = %+v", e)
	}

	// Same for Update through /status, and pod-specific resets.
	pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}
	defaultstest.Apply(pod)
	livePod := stored(t, m.Update(podGVK, "", nil, pod, "creator"))
	next := livePod.DeepCopyObject().(*corev1.Pod)
	next.Status.Phase = corev1.PodRunning
	next.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "n", UID: "u"}}
	next.Spec.ActiveDeadlineSeconds = ptr.To(int64(5))
	got := m.Update(podGVK, "status", livePod, next, "kubelet")
	if !owns(t, got, "kubelet", "status", "status", "phase") ||
		ownsUnder(t, got, "kubelet", "status", "spec") || ownsUnder(t, got, "kubelet", "status", "metadata") {
		t.Errorf("kubelet entry: %s", entry(t, got, "kubelet", "status").FieldsV1.Raw)
	}

	// Kinds without status reset nothing.
	if resetFields(cmGVK, "") != nil || resetFields(cmGVK, "status") != nil {
		t.Errorf("ConfigMap has reset fields")
	}
}

func TestApplyErrors(t *testing.T) {
	m := New(defaultstest.Apply)
	live := emptyLive(cmGVK, "default", "c")
	cm := func(s string) []byte { return []byte(`{"apiVersion":"v1","kind":"ConfigMap",` + s + `}`) }
	for _, tc := range []struct {
		name    string
		gvk     schema.GroupVersionKind
		live    runtime.Object
		patch   []byte
		manager string
		code    int32
		reason  metav1.StatusReason
		msg     string
	}{
		{"no manager", cmGVK, live, cm(`"metadata":{"name":"c"}`), "", 422, metav1.StatusReasonInvalid,
			`PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch`},
		{"unprintable manager", cmGVK, live, cm(`"metadata":{"name":"c"}`), "a\x00b", 422, metav1.StatusReasonInvalid, "invalid character"},
		{"not yaml", cmGVK, live, []byte("{"), "m", 400, metav1.StatusReasonBadRequest, "error decoding YAML"},
		{"yaml list", cmGVK, live, []byte("- a\n- b\n"), "m", 400, metav1.StatusReasonBadRequest, "error decoding YAML"},
		{"wrong kind", cmGVK, live, []byte(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"c"}}`), "m", 400, metav1.StatusReasonBadRequest,
			"invalid object type: /v1, Kind=Secret"},
		{"wrong version", deployGVK, emptyLive(deployGVK, "default", "web"), []byte(`{"apiVersion":"apps/v1beta2","kind":"Deployment","metadata":{"name":"web"}}`),
			"m", 400, metav1.StatusReasonBadRequest, "invalid object type: apps/v1beta2, Kind=Deployment"},
		{"no apiVersion", cmGVK, live, []byte(`{"metadata":{"name":"c"}}`), "m", 400, metav1.StatusReasonBadRequest, "invalid object type"},
		{"unknown field", cmGVK, live, cm(`"metadata":{"name":"c"},"dta":{"a":"b"}`), "m", 400, metav1.StatusReasonBadRequest,
			".dta: field not declared in schema"},
		{"wrong type", cmGVK, live, cm(`"metadata":{"name":"c"},"data":{"a":1}`), "m", 400, metav1.StatusReasonBadRequest, ".data.a: expected string"},
		{"duplicate key", deployGVK, emptyLive(deployGVK, "default", "web"), []byte(strings.Replace(string(deploy(1, "x")),
			"      - name: nginx\n", "      - name: nginx\n        image: a\n      - name: nginx\n", 1)), "m", 400, metav1.StatusReasonBadRequest, "duplicate entries for key"},
		{"managedFields set", cmGVK, live, cm(`"metadata":{"name":"c","managedFields":[{"manager":"x"}]}`), "m", 400, metav1.StatusReasonBadRequest,
			"metadata.managedFields must be nil"},
		{"name mismatch", cmGVK, live, cm(`"metadata":{"name":"other"}`), "m", 400, metav1.StatusReasonBadRequest,
			"the name of the object (other) does not match the name on the URL (c)"},
		{"no name on create", cmGVK, live, cm(`"data":{"a":"b"}`), "m", 400, metav1.StatusReasonBadRequest,
			"the name of the object () does not match the name on the URL (c)"},
		{"namespace mismatch", cmGVK, live, cm(`"metadata":{"name":"c","namespace":"kube-system"}`), "m", 400, metav1.StatusReasonBadRequest,
			"the namespace of the provided object does not match the namespace sent on the request"},
		{"uid on create", cmGVK, live, cm(`"metadata":{"name":"c","uid":"123"}`), "m", 409, metav1.StatusReasonConflict,
			`Operation cannot be fulfilled on configmaps "c": uid mismatch: the provided object specified uid 123, and no existing object was found`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := m.Apply(tc.gvk, "", tc.live, tc.patch, tc.manager, false)
			if err == nil {
				t.Fatal("no error")
			}
			st, ok := err.(apierrors.APIStatus)
			if !ok {
				t.Fatalf("%T is not a StatusError: %v", err, err)
			}
			if st.Status().Code != tc.code || st.Status().Reason != tc.reason || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("got %d %s %q, want %d %s containing %q", st.Status().Code, st.Status().Reason, err, tc.code, tc.reason, tc.msg)
			}
		})
	}

	// A live object that does not match the schema is the server's problem:
	// 500 with upstream's message.
	bad := stored(t, emptyLive(podGVK, "default", "p")).(*corev1.Pod)
	bad.Spec.Containers = []corev1.Container{{Name: "a"}, {Name: "a"}} // duplicate list key is fine in live...
	bad.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "x", Operation: "Bogus", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{`)}}}
	_, err := m.Apply(podGVK, "", bad, []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`), "m", false)
	if statusCode(err) != 500 || !strings.Contains(err.Error(), "failed to decode managed fields") {
		t.Errorf("corrupt live managedFields: %v (%d)", err, statusCode(err))
	}
}

func TestApplyNamespaceAndSystemFields(t *testing.T) {
	m := New(defaultstest.Apply)
	// Cluster-scoped: a namespace in the configuration is dropped.
	nsGVK := corev1.SchemeGroupVersion.WithKind("Namespace")
	out := mustApply(t, m, nsGVK, "", emptyLive(nsGVK, "", "team"), []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team","namespace":"x","labels":{"a":"b"}}}`), "m", false)
	if acc, _ := meta.Accessor(out); acc.GetNamespace() != "" || acc.GetLabels()["a"] != "b" {
		t.Errorf("namespace = %q", acc.GetNamespace())
	}
	// Create: system fields from the configuration are wiped.
	out = mustApply(t, m, cmGVK, "", emptyLive(cmGVK, "default", "c"), []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"default","creationTimestamp":"2020-01-01T00:00:00Z","selfLink":"/x"}}`), "m", false)
	if acc, _ := meta.Accessor(out); !acc.GetCreationTimestamp().Time.IsZero() || acc.GetSelfLink() != "" {
		t.Errorf("system fields kept: %+v", acc)
	}
}

func TestApplyJSONBodyAndNilLive(t *testing.T) {
	m := New(nil)
	out, err := m.Apply(cmGVK, "", nil, []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"j"},"data":{"k":"v"}}`), "m", false)
	if err != nil {
		t.Fatal(err)
	}
	if cm := out.(*corev1.ConfigMap); cm.Data["k"] != "v" || cm.Name != "j" || !owns(t, cm, "m", "", "data", "k") {
		t.Errorf("out = %+v", cm)
	}
}

func TestLiveNotMutated(t *testing.T) {
	m := New(defaultstest.Apply)
	live := stored(t, mustApply(t, m, deployGVK, "", emptyLive(deployGVK, "default", "web"), deploy(2, "nginx:1.27"), "a", false))
	snapshot := live.DeepCopyObject()
	if _, err := m.Apply(deployGVK, "", live, deploy(3, "nginx:1.28"), "a", false); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Apply(deployGVK, "", live, deploy(2, "nginx:1.27"), "a", false); err != nil { // no-op
		t.Fatal(err)
	}
	next := live.DeepCopyObject().(*appsv1.Deployment)
	next.Spec.Paused = true
	m.Update(deployGVK, "", live, next, "b")
	// TypeMeta-less live (e.g. decoded without kind) is not written to either.
	bare := live.DeepCopyObject().(*appsv1.Deployment)
	bare.TypeMeta = metav1.TypeMeta{}
	bareSnap := bare.DeepCopy()
	if _, err := m.Apply(deployGVK, "", bare, deploy(4, "nginx:1.27"), "a", false); err != nil {
		t.Fatal(err)
	}
	if !apiequality.Semantic.DeepEqual(live, snapshot) || !apiequality.Semantic.DeepEqual(bare, bareSnap) {
		t.Errorf("live object modified")
	}
}

func TestManagerName(t *testing.T) {
	for ua, want := range map[string]string{
		"kubectl/v1.31.0 (linux/amd64) kubernetes/9a7b3c2":                             "kubectl",
		"kubectl-client-side-apply/v1.31.0 (linux/amd64) kubernetes/9a7b3c2":           "kubectl-client-side-apply",
		"kube-controller-manager/v1.31.0 (linux/amd64) kubernetes/abc/leader-election": "kube-controller-manager",
		"Go-http-client/1.1":            "Go-http-client",
		"curl/8.5.0":                    "curl",
		"my\tagent\x01":                 "myagent",
		"":                              "",
		strings.Repeat("é", 100) + "/1": strings.Repeat("é", 64),
	} {
		if got := ManagerName(ua); got != want {
			t.Errorf("ManagerName(%q) = %q, want %q", ua, got, want)
		}
	}
}

// Every kind of the scheme with object metadata (not just the ones kelp
// serves) is known to client-go's type converter: a create through Update
// records the labels it sets. This is the end-to-end check of
// applyconfigurations.NewTypeConverter(scheme.Scheme).
func TestAllSchemeKindsTracked(t *testing.T) {
	// Kinds client-go has no apply configuration for: request/response
	// types that are never stored, and Scale (upstream tracks /scale
	// writes on the parent).
	neverStored := map[string]bool{
		"TokenReview": true, "TokenRequest": true, "SelfSubjectReview": true,
		"SubjectAccessReview": true, "LocalSubjectAccessReview": true,
		"SelfSubjectAccessReview": true, "SelfSubjectRulesReview": true,
		"Scale": true, "Binding": true, "RangeAllocation": true,
	}
	m := New(defaultstest.Apply)
	n := 0
	for gvk := range scheme.Scheme.AllKnownTypes() {
		if strings.HasSuffix(gvk.Kind, "List") || gvk.Version == runtime.APIVersionInternal {
			continue
		}
		obj, err := newEmpty(gvk)
		if err != nil {
			continue
		}
		acc, err := meta.Accessor(obj)
		if err != nil || gvk.Kind == "Status" || strings.HasSuffix(gvk.Kind, "Options") || gvk.Kind == "WatchEvent" {
			continue // no ObjectMeta: not a stored resource
		}
		acc.SetName("x")
		acc.SetLabels(map[string]string{"k": "v"})
		fm, err := m.fieldManager(gvk, "")
		if errors.Is(err, errUnsupported) {
			if !neverStored[gvk.Kind] {
				t.Errorf("%v: %v", gvk, err)
			}
			if got := m.Update(gvk, "", nil, obj, "m"); got != obj || len(acc.GetManagedFields()) != 0 {
				t.Errorf("%v: Update touched an unsupported kind", gvk)
			}
			if _, err := m.Apply(gvk, "", nil, []byte("{}"), "m", false); statusCode(err) != 405 {
				t.Errorf("%v: Apply = %v, want 405", gvk, err)
			}
			continue
		} else if err != nil {
			t.Errorf("%v: %v", gvk, err)
			continue
		}
		empty, _ := newEmpty(gvk)
		got, err := fm.Update(empty, obj, "m")
		if err != nil {
			t.Errorf("%v: %v", gvk, err)
			continue
		}
		if !owns(t, got, "m", "", "metadata", "labels", "k") {
			t.Errorf("%v: label not tracked", gvk)
		}
		n++
	}
	if n < 100 {
		t.Errorf("only %d kinds checked", n)
	}
	t.Logf("%d kinds tracked", n)
}

func TestConcurrentUse(t *testing.T) {
	m := New(defaultstest.Apply)
	live := stored(t, mustApply(t, m, deployGVK, "", emptyLive(deployGVK, "default", "web"), deploy(2, "nginx:1.27"), "a", false))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mgr := fmt.Sprintf("m%d", i)
			for j := range 20 {
				out, err := m.Apply(deployGVK, "", live, deploy(2, fmt.Sprintf("nginx:%d", j)), mgr, true)
				if err != nil {
					t.Error(err)
					return
				}
				if !owns(t, out, mgr, "", "spec", "template", "spec", "containers", container("nginx"), "image") {
					t.Errorf("%s: image not owned", mgr)
				}
				next := live.DeepCopyObject().(*appsv1.Deployment)
				next.Labels["run"] = mgr
				m.Update(deployGVK, "", live, next, mgr)
				cm := emptyLive(cmGVK, "default", mgr)
				if _, err := m.Apply(cmGVK, "status", cm, []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"`+mgr+`"}}`), mgr, false); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
}

// The first use builds the type converter, which parses client-go's
// embedded schema. Measured in a fresh process, since the result is
// cached process-wide.
func TestTypeConverterColdStart(t *testing.T) {
	if os.Getenv("KELP_APPLY_COLD") == "1" {
		var before, after goruntime.MemStats
		goruntime.ReadMemStats(&before)
		start := time.Now()
		typeConverter()
		built := time.Since(start)
		goruntime.ReadMemStats(&after)
		start = time.Now()
		m := New(defaultstest.Apply)
		if _, err := m.Apply(cmGVK, "", nil, []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}`), "m", false); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("COLD converter=%dus firstApply=%dus alloc=%dKB heap=%dKB\n", built.Microseconds(), time.Since(start).Microseconds(),
			(after.TotalAlloc-before.TotalAlloc)>>10, after.HeapAlloc>>10)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestTypeConverterColdStart$")
	cmd.Env = append(os.Environ(), "KELP_APPLY_COLD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	mm := regexp.MustCompile(`COLD converter=(\d+)us firstApply=(\d+)us alloc=(\d+)KB heap=(\d+)KB`).FindSubmatch(out)
	if mm == nil {
		t.Fatalf("no measurement in %s", out)
	}
	t.Logf("type converter build: %sus (%sKB allocated, heap %sKB after); first Apply after it: %sus", mm[1], mm[3], mm[4], mm[2])
}

func toJSON(tb testing.TB, y []byte) []byte {
	tb.Helper()
	j, err := utilyaml.ToJSON(y)
	if err != nil {
		tb.Fatal(err)
	}
	return j
}

// --- benchmarks ---

// BenchmarkApplyDeployment: a server-side apply that changes a field of a
// stored Deployment (the image alternates), with its managedFields from a
// previous apply and an update.
func BenchmarkApplyDeployment(b *testing.B) {
	m := New(defaultstest.Apply)
	live := stored(b, mustApply(b, m, deployGVK, "", emptyLive(deployGVK, "default", "web"), deploy(2, "nginx:1.27"), "kubectl", false))
	patches := [][]byte{deploy(2, "nginx:1.28"), deploy(2, "nginx:1.29")}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := m.Apply(deployGVK, "", live, patches[i%2], "kubectl", false); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUpdateDeployment: managedFields bookkeeping for an update of a
// stored Deployment (replicas changed) by another manager.
func BenchmarkUpdateDeployment(b *testing.B) {
	m := New(defaultstest.Apply)
	live := stored(b, mustApply(b, m, deployGVK, "", emptyLive(deployGVK, "default", "web"), deploy(2, "nginx:1.27"), "kubectl", false))
	next := live.DeepCopyObject().(*appsv1.Deployment)
	next.Spec.Replicas = ptr.To(int32(5))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		obj := next.DeepCopy()
		b.StartTimer()
		m.Update(deployGVK, "", live, obj, "kubectl-scale")
	}
}

// BenchmarkCreateDeployment: Update on create (live nil).
func BenchmarkCreateDeployment(b *testing.B) {
	m := New(defaultstest.Apply)
	obj := &appsv1.Deployment{}
	if err := runtime.DecodeInto(scheme.Codecs.UniversalDecoder(appsv1.SchemeGroupVersion), toJSON(b, deploy(2, "nginx:1.27")), obj); err != nil {
		b.Fatal(err)
	}
	obj.SetGroupVersionKind(deployGVK)
	defaultstest.Apply(obj)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		o := obj.DeepCopy()
		b.StartTimer()
		m.Update(deployGVK, "", nil, o, "kubectl-create")
	}
}
