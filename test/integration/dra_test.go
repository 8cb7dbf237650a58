package integration

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/kelp-project/kelp/test/simkubelet"
)

// TestDRAKinds: the resource.k8s.io/v1 kinds are served with discovery,
// upstream's defaults and validation (422 with causes, CEL selectors
// compiled), status subresources, selectable fields, watch and
// deletecollection, and kubectl's columns; nothing allocates a claim.
func TestDRAKinds(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	rs := cs.ResourceV1()

	// Discovery lists every kind and the two status subresources.
	list, err := cs.Discovery().ServerResourcesForGroupVersion("resource.k8s.io/v1")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range list.APIResources {
		names = append(names, r.Name)
	}
	for _, want := range []string{"deviceclasses", "resourceclaims", "resourceclaims/status", "resourceclaimtemplates", "resourceslices", "devicetaintrules", "devicetaintrules/status"} {
		if !slices.Contains(names, want) {
			t.Errorf("discovery of resource.k8s.io/v1 lacks %s: %v", want, names)
		}
	}

	// DeviceClass: CEL selectors are compiled; a bad one is 422.
	class, err := rs.DeviceClasses().Create(ctx, &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu.example.com"},
		Spec:       resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "gpu.example.com"`}}}},
	}, metav1.CreateOptions{FieldValidation: "Strict"})
	if err != nil {
		t.Fatal(err)
	}
	class.Spec.Selectors[0].CEL.Expression = "1 == 0"
	if class, err = rs.DeviceClasses().Update(ctx, class, metav1.UpdateOptions{}); err != nil || class.Generation != 2 {
		t.Fatalf("update DeviceClass: generation %d, %v", class.Generation, err)
	}
	_, err = rs.DeviceClasses().Create(ctx, &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: "bad.example.com"},
		Spec:       resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: "device.driver =="}}}},
	}, metav1.CreateOptions{})
	expectInvalid(t, "a DeviceClass with a bad CEL selector", err, "spec.selectors[0].cel.expression")

	// ResourceClaim: defaulted, its spec immutable, its status written
	// through /status only.
	claim := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "claim", Labels: map[string]string{"dra": "test"}},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "req-0", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.example.com"},
		}}}},
	}
	w, err := rs.ResourceClaims("default").Watch(ctx, metav1.ListOptions{LabelSelector: "dra=test"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	claim.Status.Allocation = &resourcev1.AllocationResult{} // dropped on create
	c, err := rs.ResourceClaims("default").Create(ctx, claim, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if e := c.Spec.Devices.Requests[0].Exactly; e.AllocationMode != resourcev1.DeviceAllocationModeExactCount || e.Count != 1 || c.Status.Allocation != nil {
		t.Fatalf("claim not defaulted or status kept: %+v %+v", e, c.Status)
	}
	c.Spec.Devices.Requests[0].Exactly.Count = 2
	_, err = rs.ResourceClaims("default").Update(ctx, c, metav1.UpdateOptions{})
	expectInvalid(t, "a change to a claim's spec", err, "spec")
	if c, err = rs.ResourceClaims("default").Get(ctx, "claim", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	c.Status.Allocation = &resourcev1.AllocationResult{}
	if c, err = rs.ResourceClaims("default").UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil || c.Status.Allocation == nil {
		t.Fatalf("update status: %v", err)
	}
	c.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: "u1"}, {Resource: "pods", Name: "q", UID: "u1"}}
	_, err = rs.ResourceClaims("default").UpdateStatus(ctx, c, metav1.UpdateOptions{})
	expectInvalid(t, "a claim reserved twice for one UID", err, "status.reservedFor[1]")
	// A status patch through the main endpoint changes nothing.
	if c, err = rs.ResourceClaims("default").Patch(ctx, "claim", types.MergePatchType, []byte(`{"status":{"allocation":null},"metadata":{"labels":{"patched":"yes"}}}`), metav1.PatchOptions{}); err != nil ||
		c.Status.Allocation == nil || c.Labels["patched"] != "yes" {
		t.Fatalf("main-endpoint patch: %v, %+v", err, c)
	}
	waitForEvent(t, w, watch.Modified, func(obj *resourcev1.ResourceClaim) bool { return obj.Labels["patched"] == "yes" })

	// ResourceClaimTemplate: a template's claim metadata is labels and
	// annotations only.
	tmpl := &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "tmpl"},
		Spec:       resourcev1.ResourceClaimTemplateSpec{Spec: claim.Spec},
	}
	if _, err := rs.ResourceClaimTemplates("default").Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tmpl.Name, tmpl.Spec.Name = "tmpl-bad", "fixed"
	_, err = rs.ResourceClaimTemplates("default").Create(ctx, tmpl, metav1.CreateOptions{})
	expectInvalid(t, "a template naming its claims", err, "spec.metadata.name")

	// ResourceSlice: selectable by node and driver.
	for _, sl := range []struct{ name, node, driver string }{{"a", "n1", "gpu.example.com"}, {"b", "n2", "gpu.example.com"}, {"c", "n1", "nic.example.com"}} {
		_, err := rs.ResourceSlices().Create(ctx, &resourcev1.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: "slice-" + sl.name},
			Spec: resourcev1.ResourceSliceSpec{Driver: sl.driver, NodeName: ptr.To(sl.node),
				Pool:    resourcev1.ResourcePool{Name: sl.node, Generation: 1, ResourceSliceCount: 1},
				Devices: []resourcev1.Device{{Name: "dev-0", Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"model": {StringValue: ptr.To("x")}}}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	for sel, want := range map[string]string{"spec.nodeName=n1": "slice-a,slice-c", "spec.driver=gpu.example.com": "slice-a,slice-b", "spec.nodeName=n1,spec.driver=nic.example.com": "slice-c"} {
		l, err := rs.ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			t.Fatalf("list %s: %v", sel, err)
		}
		var got []string
		for _, i := range l.Items {
			got = append(got, i.Name)
		}
		slices.Sort(got)
		if strings.Join(got, ",") != want {
			t.Errorf("slices with %s: %v, want %s", sel, got, want)
		}
	}
	if _, err := rs.ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.devices=x"}); !apierrors.IsBadRequest(err) {
		t.Errorf("unknown field selector: %v", err)
	}
	_, err = rs.ResourceSlices().Create(ctx, &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "slice-nowhere"},
		Spec:       resourcev1.ResourceSliceSpec{Driver: "gpu.example.com", Pool: resourcev1.ResourcePool{Name: "p", ResourceSliceCount: 1}},
	}, metav1.CreateOptions{})
	expectInvalid(t, "a slice on no node", err, "spec")

	// DeviceTaintRule: timeAdded defaulted; conditions through /status.
	rule, err := rs.DeviceTaintRules().Create(ctx, &resourcev1.DeviceTaintRule{
		ObjectMeta: metav1.ObjectMeta{Name: "rule"},
		Spec:       resourcev1.DeviceTaintRuleSpec{Taint: resourcev1.DeviceTaint{Key: "testing", Effect: resourcev1.DeviceTaintEffectNone}},
	}, metav1.CreateOptions{})
	if err != nil || rule.Spec.Taint.TimeAdded == nil {
		t.Fatalf("create DeviceTaintRule: %v %+v", err, rule)
	}
	cond := metav1.Condition{Type: "Testing", Status: metav1.ConditionTrue, LastTransitionTime: metav1.Now(), Reason: "Test", Message: "m"}
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"conditions": []metav1.Condition{cond}}})
	if rule, err = rs.DeviceTaintRules().Patch(ctx, "rule", types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil || len(rule.Status.Conditions) != 1 {
		t.Fatalf("status patch: %v %+v", err, rule)
	}
	_, err = rs.DeviceTaintRules().Patch(ctx, "rule", types.MergePatchType, []byte(`{"spec":{"taint":{"effect":"Sometimes"}}}`), metav1.PatchOptions{})
	expectInvalid(t, "an unknown taint effect", err, "spec.taint.effect")

	// kubectl's columns, as upstream's printers.
	for res, header := range map[string]string{
		"deviceclasses":          "NAME AGE",
		"resourceclaims":         "NAME STATE AGE",
		"resourceclaimtemplates": "NAME AGE",
		"resourceslices":         "NAME NODE DRIVER POOL AGE",
		"devicetaintrules":       "NAME KEY VALUE EFFECT TIMEADDED AGE",
	} {
		out := s.mustKubectl("get", res)
		if got := strings.Join(strings.Fields(strings.SplitN(out, "\n", 2)[0]), " "); got != header {
			t.Errorf("kubectl get %s: header %q, want %q\n%s", res, got, header, out)
		}
	}
	if out := s.mustKubectl("get", "resourceclaims", "claim", "--no-headers"); !strings.Contains(out, "allocated") {
		t.Errorf("claim state: %s", out)
	}
	// kubectl explain reads the kinds' OpenAPI.
	if out := s.mustKubectl("explain", "resourceslices.spec.pool"); !strings.Contains(out, "resourceSliceCount") {
		t.Errorf("kubectl explain resourceslices.spec.pool:\n%s", out)
	}

	// deletecollection by label, seen by the watch.
	if err := rs.ResourceClaims("default").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "dra=test"}); err != nil {
		t.Fatal(err)
	}
	waitForEvent(t, w, watch.Deleted, func(obj *resourcev1.ResourceClaim) bool { return obj.Name == "claim" })
}

// TestDRAPodStaysPending: kelp allocates no claims, so a pod naming one
// is never bound; its FailedScheduling event and PodScheduled condition
// say why. A pod beside it without claims is scheduled.
func TestDRAPodStaysPending(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	simkubelet.Start(t, cs, "sim-a")
	waitFor(t, "node", func() bool {
		n, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		return err == nil && len(n.Items) == 1
	})
	// kubectl shows the warning that nothing allocates the claim.
	out, err := s.kubectlIn(`{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"gpu","namespace":"default"},
		"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpu.example.com"}}]}}}`, nil, "create", "-f", "-")
	if err != nil || !strings.Contains(out, "kelp does not allocate dynamic resources") {
		t.Fatalf("kubectl create claim: %v\n%s", err, out)
	}
	pod := func(name string, claims ...string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
		for _, c := range claims {
			p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: c, ResourceClaimName: ptr.To(c)})
			p.Spec.Containers[0].Resources.Claims = append(p.Spec.Containers[0].Resources.Claims, corev1.ResourceClaim{Name: c})
		}
		return p
	}
	for _, p := range []*corev1.Pod{pod("with-claim", "gpu"), pod("plain")} {
		if _, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	want := "0/1 nodes are available: pod uses resource claims (gpu), and kelp does not allocate dynamic resources (DRA). " +
		"preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.."
	waitFor(t, "FailedScheduling for with-claim", func() bool {
		return hasPodEvent(ctx, cs, "with-claim", "FailedScheduling", want)
	})
	waitFor(t, "plain bound", func() bool {
		p, err := cs.CoreV1().Pods("default").Get(ctx, "plain", metav1.GetOptions{})
		return err == nil && p.Spec.NodeName == "sim-a"
	})
	p, err := cs.CoreV1().Pods("default").Get(ctx, "with-claim", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Spec.NodeName != "" || p.Status.Phase != corev1.PodPending {
		t.Fatalf("pod with a claim: node %q, phase %s", p.Spec.NodeName, p.Status.Phase)
	}
	var scheduled *corev1.PodCondition
	for i, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			scheduled = &p.Status.Conditions[i]
		}
	}
	if scheduled == nil || scheduled.Status != corev1.ConditionFalse || scheduled.Reason != corev1.PodReasonUnschedulable || scheduled.Message != want {
		t.Fatalf("PodScheduled condition %+v", scheduled)
	}
}

// waitForEvent reads the watch until an event of the type whose object
// matches arrives.
func waitForEvent[T any](t *testing.T, w watch.Interface, typ watch.EventType, match func(T) bool) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch closed before a %s event", typ)
			}
			if obj, isT := any(ev.Object).(T); isT && ev.Type == typ && match(obj) {
				return
			}
		case <-deadline:
			t.Fatalf("no matching %s event within 20s", typ)
		}
	}
}
