package webhook

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kelp-project/kelp/server/apiserver/admission"
	"github.com/kelp-project/kelp/server/apiserver/auth"
)

// hookServer counts the calls per path; /deny refuses, /patch adds the
// label patched=yes, anything else allows.
type hookServer struct {
	*httptest.Server
	mu    sync.Mutex
	calls map[string]int
}

func newHookServer(t *testing.T) *hookServer {
	h := &hookServer{calls: map[string]int{}}
	h.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "bad review", http.StatusBadRequest)
			return
		}
		h.mu.Lock()
		h.calls[r.URL.Path]++
		h.mu.Unlock()
		resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		switch r.URL.Path {
		case "/deny":
			resp.Allowed = false
			resp.Result = &metav1.Status{Message: "not this one"}
		case "/patch":
			pt := admissionv1.PatchTypeJSONPatch
			resp.PatchType = &pt
			resp.Patch = []byte(`[{"op":"add","path":"/metadata/labels","value":{"patched":"yes"}}]`)
		}
		review.Request, review.Response = nil, resp
		_ = json.NewEncoder(w).Encode(&review)
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hookServer) count(path string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls[path]
}

func (h *hookServer) clientConfig(path string) admissionregistrationv1.WebhookClientConfig {
	url := h.URL + path
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: h.Certificate().Raw})
	return admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: ca}
}

func rule(ops []admissionregistrationv1.OperationType, groups, versions, resources []string, scope admissionregistrationv1.ScopeType) []admissionregistrationv1.RuleWithOperations {
	return []admissionregistrationv1.RuleWithOperations{{Operations: ops,
		Rule: admissionregistrationv1.Rule{APIGroups: groups, APIVersions: versions, Resources: resources, Scope: &scope}}}
}

// validatingHook is a webhook as the API server stores it (defaulted).
func validatingHook(name string, cc admissionregistrationv1.WebhookClientConfig, rules []admissionregistrationv1.RuleWithOperations) admissionregistrationv1.ValidatingWebhook {
	fail, equiv := admissionregistrationv1.Fail, admissionregistrationv1.Equivalent
	none := admissionregistrationv1.SideEffectClassNone
	timeout := int32(5)
	return admissionregistrationv1.ValidatingWebhook{Name: name, ClientConfig: cc, Rules: rules, FailurePolicy: &fail, MatchPolicy: &equiv,
		NamespaceSelector: &metav1.LabelSelector{}, ObjectSelector: &metav1.LabelSelector{}, SideEffects: &none, TimeoutSeconds: &timeout,
		AdmissionReviewVersions: []string{"v1"}}
}

func startWebhooks(t *testing.T, objs ...runtime.Object) *Webhooks {
	t.Helper()
	objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Labels: map[string]string{"team": "a"}}})
	client := fake.NewSimpleClientset(objs...)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	w, err := New(Config{Stop: stop,
		Versions: func(gr schema.GroupResource) map[schema.GroupVersionResource]schema.GroupVersionKind {
			if gr == (schema.GroupResource{Group: "example.com", Resource: "widgets"}) {
				return map[schema.GroupVersionResource]schema.GroupVersionKind{
					{Group: "example.com", Version: "v1", Resource: "widgets"}: {Group: "example.com", Version: "v1", Kind: "Widget"},
					{Group: "example.com", Version: "v2", Resource: "widgets"}: {Group: "example.com", Version: "v2", Kind: "Widget"},
				}
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	w.Start(client)
	if !w.ready.Load() {
		t.Fatal("webhooks not started")
	}
	return w
}

var configMaps = corev1.SchemeGroupVersion.WithResource("configmaps")

func configMapAttrs(op string) *admission.Attributes {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "ns"}}
	a := &admission.Attributes{Operation: op, Resource: configMaps, Namespace: "ns", Name: "cm", Object: cm, User: &auth.User{Name: "alice"}}
	if op == "DELETE" {
		a.Object, a.OldObject = nil, cm
	}
	if op == "UPDATE" {
		a.OldObject = cm.DeepCopy()
	}
	return a
}

func TestRulesMatching(t *testing.T) {
	h := newHookServer(t)
	ops := func(o ...admissionregistrationv1.OperationType) []admissionregistrationv1.OperationType { return o }
	hooks := []admissionregistrationv1.ValidatingWebhook{
		validatingHook("create-configmaps.test.io", h.clientConfig("/create-configmaps"), rule(ops("CREATE"), []string{""}, []string{"v1"}, []string{"configmaps"}, "*")),
		validatingHook("all-core.test.io", h.clientConfig("/all-core"), rule(ops("*"), []string{""}, []string{"*"}, []string{"*"}, "*")),
		validatingHook("cluster-scoped.test.io", h.clientConfig("/cluster-scoped"), rule(ops("*"), []string{"*"}, []string{"*"}, []string{"*"}, "Cluster")),
		validatingHook("pod-status.test.io", h.clientConfig("/pod-status"), rule(ops("UPDATE"), []string{""}, []string{"v1"}, []string{"pods/status"}, "*")),
		validatingHook("apps.test.io", h.clientConfig("/apps"), rule(ops("*"), []string{"apps"}, []string{"v1"}, []string{"deployments"}, "Namespaced")),
		validatingHook("widgets-v1.test.io", h.clientConfig("/widgets-v1"), rule(ops("CREATE"), []string{"example.com"}, []string{"v1"}, []string{"widgets"}, "*")),
	}
	other := validatingHook("other-team.test.io", h.clientConfig("/other-team"), rule(ops("*"), []string{"*"}, []string{"*"}, []string{"*/*"}, "*"))
	other.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "b"}}
	labelled := validatingHook("labelled.test.io", h.clientConfig("/labelled"), rule(ops("*"), []string{"*"}, []string{"*"}, []string{"*"}, "*"))
	labelled.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"send": "yes"}}
	cond := validatingHook("cel.test.io", h.clientConfig("/cel"), rule(ops("CREATE"), []string{""}, []string{"v1"}, []string{"configmaps"}, "*"))
	cond.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "named", Expression: "object.metadata.name == 'cel'"}}
	hooks = append(hooks, other, labelled, cond)
	w := startWebhooks(t, &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "rules"}, Webhooks: hooks})

	ctx := context.Background()
	check := func(name string, a *admission.Attributes, want map[string]int) {
		t.Helper()
		before := map[string]int{}
		for _, p := range []string{"/create-configmaps", "/all-core", "/cluster-scoped", "/pod-status", "/apps", "/widgets-v1", "/other-team", "/labelled", "/cel"} {
			before[p] = h.count(p)
		}
		if err := w.Validate(ctx, a); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for p, n := range before {
			if got := h.count(p) - n; got != want[p] {
				t.Errorf("%s: %s called %d times, want %d", name, p, got, want[p])
			}
		}
	}
	check("create configmap", configMapAttrs("CREATE"), map[string]int{"/create-configmaps": 1, "/all-core": 1})
	check("delete configmap", configMapAttrs("DELETE"), map[string]int{"/all-core": 1})
	cel := configMapAttrs("CREATE")
	cel.Name = "cel"
	cel.Object.(*corev1.ConfigMap).Name = "cel"
	check("matchCondition true", cel, map[string]int{"/create-configmaps": 1, "/all-core": 1, "/cel": 1})
	sent := configMapAttrs("UPDATE")
	sent.Object.(*corev1.ConfigMap).Labels = map[string]string{"send": "yes"}
	check("objectSelector", sent, map[string]int{"/all-core": 1, "/labelled": 1})
	node := &admission.Attributes{Operation: "CREATE", Resource: corev1.SchemeGroupVersion.WithResource("nodes"), Name: "n1",
		Object: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}}
	// namespaceSelector leaves cluster-scoped objects in, as upstream.
	check("cluster-scoped node", node, map[string]int{"/all-core": 1, "/cluster-scoped": 1, "/other-team": 1})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
	status := &admission.Attributes{Operation: "UPDATE", Resource: corev1.SchemeGroupVersion.WithResource("pods"), Subresource: "status",
		Namespace: "ns", Name: "p", Object: pod, OldObject: pod.DeepCopy()}
	check("pods/status", status, map[string]int{"/pod-status": 1})
	// matchPolicy Equivalent: a rule for v1 takes a v2 request, converted.
	widget := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "example.com/v2", "kind": "Widget",
		"metadata": map[string]interface{}{"name": "w", "namespace": "ns"}}}
	check("equivalent version", &admission.Attributes{Operation: "CREATE", Resource: schema.GroupVersionResource{Group: "example.com", Version: "v2", Resource: "widgets"},
		Namespace: "ns", Name: "w", Object: widget}, map[string]int{"/widgets-v1": 1})
	if widget.GetAPIVersion() != "example.com/v2" {
		t.Errorf("the request's object was changed to %s", widget.GetAPIVersion())
	}
}

func TestPatchApplied(t *testing.T) {
	h := newHookServer(t)
	fail, equiv, never := admissionregistrationv1.Fail, admissionregistrationv1.Equivalent, admissionregistrationv1.NeverReinvocationPolicy
	none := admissionregistrationv1.SideEffectClassNone
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "patch"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "patch.test.io", ClientConfig: h.clientConfig("/patch"),
			Rules:         rule([]admissionregistrationv1.OperationType{"CREATE"}, []string{"*"}, []string{"*"}, []string{"*"}, "*"),
			FailurePolicy: &fail, MatchPolicy: &equiv, ReinvocationPolicy: &never, SideEffects: &none,
			NamespaceSelector: &metav1.LabelSelector{}, ObjectSelector: &metav1.LabelSelector{}, AdmissionReviewVersions: []string{"v1beta1", "v1"}}}}
	w := startWebhooks(t, mwc)
	defaulted := 0
	w.objects.defaulter = func(runtime.Object) { defaulted++ }

	// A built-in kind: the request's own object is patched in place (the
	// write path goes on with it) and defaulted again.
	a := configMapAttrs("CREATE")
	cm := a.Object.(*corev1.ConfigMap)
	if err := w.Admit(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if cm.Labels["patched"] != "yes" || defaulted != 1 {
		t.Errorf("configmap after the patch: labels %v, defaulted %d times", cm.Labels, defaulted)
	}
	// A custom resource, unstructured.
	widget := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]interface{}{"name": "w", "namespace": "ns"}, "spec": map[string]interface{}{"size": int64(3)}}}
	err := w.Admit(context.Background(), &admission.Attributes{Operation: "CREATE", Resource: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"},
		Namespace: "ns", Name: "w", Object: widget})
	if err != nil {
		t.Fatal(err)
	}
	if widget.GetLabels()["patched"] != "yes" || widget.Object["spec"].(map[string]interface{})["size"] != int64(3) {
		t.Errorf("custom resource after the patch: %v", widget.Object)
	}
	// A dry run reaches a webhook without side effects.
	dry := configMapAttrs("CREATE")
	dry.DryRun = true
	if err := w.Admit(context.Background(), dry); err != nil || dry.Object.(*corev1.ConfigMap).Labels["patched"] != "yes" {
		t.Errorf("dry run: %v", err)
	}
}

func TestFailurePolicyAndDenial(t *testing.T) {
	h := newHookServer(t)
	ignore := admissionregistrationv1.Ignore
	unreachable := "https://127.0.0.1:1/"
	configMapsRule := rule([]admissionregistrationv1.OperationType{"CREATE"}, []string{""}, []string{"v1"}, []string{"configmaps"}, "*")
	selected := func(hook admissionregistrationv1.ValidatingWebhook, v string) admissionregistrationv1.ValidatingWebhook {
		hook.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"case": v}}
		return hook
	}
	ignored := selected(validatingHook("ignore.test.io", admissionregistrationv1.WebhookClientConfig{URL: &unreachable}, configMapsRule), "ignore")
	ignored.FailurePolicy = &ignore
	failed := selected(validatingHook("fail.test.io", admissionregistrationv1.WebhookClientConfig{URL: &unreachable}, configMapsRule), "fail")
	denied := selected(validatingHook("deny.test.io", h.clientConfig("/deny"), configMapsRule), "deny")
	unknown := admissionregistrationv1.SideEffectClassUnknown
	sideEffects := selected(validatingHook("side-effects.test.io", h.clientConfig("/allow"), configMapsRule), "side-effects")
	sideEffects.SideEffects = &unknown
	w := startWebhooks(t, &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "failures"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{ignored, failed, denied, sideEffects}})
	attrs := func(c string, dry bool) *admission.Attributes {
		a := configMapAttrs("CREATE")
		a.Object.(*corev1.ConfigMap).Labels = map[string]string{"case": c}
		a.DryRun = dry
		return a
	}
	ctx := context.Background()
	if err := w.Validate(ctx, attrs("ignore", false)); err != nil {
		t.Errorf("failurePolicy Ignore: %v", err)
	}
	err := w.Validate(ctx, attrs("fail", false))
	if !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), `failed calling webhook "fail.test.io"`) {
		t.Errorf("failurePolicy Fail: %v", err)
	}
	err = w.Validate(ctx, attrs("deny", false))
	if status, ok := err.(apierrors.APIStatus); !ok || status.Status().Code != http.StatusBadRequest ||
		err.Error() != `admission webhook "deny.test.io" denied the request: not this one` {
		t.Errorf("denial: %v", err)
	}
	if err := w.Validate(ctx, attrs("side-effects", false)); err != nil {
		t.Errorf("side effects without dry run: %v", err)
	}
	err = w.Validate(ctx, attrs("side-effects", true))
	if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "does not support dry run") {
		t.Errorf("dry run to a webhook with side effects: %v", err)
	}
	// Webhook configurations are never sent to webhooks.
	allHook := validatingHook("all.test.io", h.clientConfig("/deny"), rule([]admissionregistrationv1.OperationType{"*"}, []string{"*"}, []string{"*"}, []string{"*"}, "*"))
	w2 := startWebhooks(t, &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "all"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{allHook}})
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "x"}}
	if err := w2.Validate(ctx, &admission.Attributes{Operation: "CREATE", Name: "x", Object: cfg,
		Resource: admissionregistrationv1.SchemeGroupVersion.WithResource("validatingwebhookconfigurations")}); err != nil {
		t.Errorf("a webhook configuration was sent to a webhook: %v", err)
	}
}

// reinvocationPolicy IfNeeded: a webhook called before another one changed
// the object is called once more; one with Never is not.
func TestReinvocation(t *testing.T) {
	h := newHookServer(t)
	fail, equiv := admissionregistrationv1.Fail, admissionregistrationv1.Equivalent
	ifNeeded, never := admissionregistrationv1.IfNeededReinvocationPolicy, admissionregistrationv1.NeverReinvocationPolicy
	none := admissionregistrationv1.SideEffectClassNone
	hook := func(name, path string, policy *admissionregistrationv1.ReinvocationPolicyType) admissionregistrationv1.MutatingWebhook {
		return admissionregistrationv1.MutatingWebhook{Name: name, ClientConfig: h.clientConfig(path),
			Rules:         rule([]admissionregistrationv1.OperationType{"CREATE"}, []string{""}, []string{"v1"}, []string{"configmaps"}, "*"),
			FailurePolicy: &fail, MatchPolicy: &equiv, ReinvocationPolicy: policy, SideEffects: &none,
			NamespaceSelector: &metav1.LabelSelector{}, ObjectSelector: &metav1.LabelSelector{}, AdmissionReviewVersions: []string{"v1"}}
	}
	// Configurations are called in name order, webhooks in list order.
	w := startWebhooks(t,
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "a"},
			Webhooks: []admissionregistrationv1.MutatingWebhook{hook("again.test.io", "/again", &ifNeeded), hook("once.test.io", "/once", &never)}},
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "b"},
			Webhooks: []admissionregistrationv1.MutatingWebhook{hook("patch.test.io", "/patch", &never)}})
	a := configMapAttrs("CREATE")
	if err := w.Admit(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if a.Object.(*corev1.ConfigMap).Labels["patched"] != "yes" {
		t.Errorf("not patched: %v", a.Object)
	}
	if again, once, patch := h.count("/again"), h.count("/once"), h.count("/patch"); again != 2 || once != 1 || patch != 1 {
		t.Errorf("calls: IfNeeded %d (want 2), Never %d (want 1), patching %d (want 1)", again, once, patch)
	}
}

// With no configuration of a kind, its plugin is not asked: a write pays
// nothing for the webhooks (upstream's dispatch copies the object and
// starts timers even with no webhook).
func TestNoConfigurationsCostNothing(t *testing.T) {
	w := startWebhooks(t)
	deadline := time.Now().Add(5 * time.Second)
	for !w.Synced() {
		if time.Now().After(deadline) {
			t.Fatal("configuration informers never synced")
		}
		time.Sleep(10 * time.Millisecond)
	}
	ctx := context.Background()
	a := configMapAttrs("CREATE")
	allocs := testing.AllocsPerRun(100, func() {
		if err := w.Admit(ctx, a); err != nil {
			t.Fatal(err)
		}
		if err := w.Validate(ctx, a); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("admission with no webhook configuration: %v allocations", allocs)
	}
}
