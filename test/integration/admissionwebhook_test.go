package integration

import (
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
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// webhookServer is an HTTPS admission webhook in the test process, with
// httptest's certificate (its own CA): /deny refuses, /mutate adds a label
// and warns, /slow waits 3 s, /allow allows. It answers in the
// AdmissionReview version it is sent.
type webhookServer struct {
	url      string
	caBundle []byte
	mu       sync.Mutex
	versions map[string]string // path -> last AdmissionReview apiVersion
}

func startWebhookServer(t *testing.T) *webhookServer {
	t.Helper()
	ws := &webhookServer{versions: map[string]string{}}
	srv := httptest.NewTLSServer(http.HandlerFunc(ws.serve))
	t.Cleanup(srv.Close)
	ws.url = srv.URL
	ws.caBundle = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return ws
}

func (ws *webhookServer) serve(w http.ResponseWriter, r *http.Request) {
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, "bad review", http.StatusBadRequest)
		return
	}
	ws.mu.Lock()
	ws.versions[r.URL.Path] = review.APIVersion
	ws.mu.Unlock()
	resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	switch r.URL.Path {
	case "/deny":
		resp.Allowed = false
		resp.Result = &metav1.Status{Code: http.StatusForbidden, Message: "no configmaps here"}
	case "/mutate":
		patch := `[{"op":"add","path":"/metadata/labels/mutated","value":"yes"}]`
		pt := admissionv1.PatchTypeJSONPatch
		resp.Patch, resp.PatchType = []byte(patch), &pt
		resp.Warnings = []string{"mutated by the test webhook"}
	case "/slow":
		time.Sleep(3 * time.Second)
	}
	review.Response = resp
	review.Request = nil
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&review)
}

func (ws *webhookServer) version(path string) string {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return ws.versions[path]
}

func webhookClientConfig(url string, ca []byte) admissionregistrationv1.WebhookClientConfig {
	return admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: ca}
}

func ptrTo[T any](v T) *T { return &v }

func configMapRule(ops ...admissionregistrationv1.OperationType) []admissionregistrationv1.RuleWithOperations {
	return []admissionregistrationv1.RuleWithOperations{{Operations: ops,
		Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}}
}

func labelSelector(k, v string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{k: v}}
}

// createUntil creates a ConfigMap until check accepts the outcome (the
// webhook configurations are followed through an informer, so a new one
// takes effect a moment after it is written); it fails after 5 s.
func createUntil(t *testing.T, cs kubernetes.Interface, cm *corev1.ConfigMap, check func(*corev1.ConfigMap, error) bool) (*corev1.ConfigMap, error) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for i := 0; ; i++ {
		c := cm.DeepCopy()
		c.Name = cm.Name + "-" + string(rune('a'+i%26)) + time.Now().Format("150405.000000")[7:]
		out, err := cs.CoreV1().ConfigMaps(c.Namespace).Create(ctxT(t), c, metav1.CreateOptions{})
		if check(out, err) {
			return out, err
		}
		if time.Now().After(deadline) {
			t.Fatalf("creating %s: outcome never as expected: %v, %v", cm.Name, out, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestAdmissionWebhook(t *testing.T) {
	s := startServer(t)
	ws := startWebhookServer(t)
	cfg := rest.CopyConfig(s.config)
	var warnMu sync.Mutex
	var warnings []string
	cfg.WarningHandler = warningFunc(func(msg string) {
		warnMu.Lock()
		warnings = append(warnings, msg)
		warnMu.Unlock()
	})
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	for _, ns := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: "wh-on", Labels: map[string]string{"webhooks": "on"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "wh-off"}},
	} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	none := ptrTo(admissionregistrationv1.SideEffectClassNone)
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "test-validating"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			{Name: "deny.kelp.test", ClientConfig: webhookClientConfig(ws.url+"/deny", ws.caBundle), Rules: configMapRule("CREATE"),
				NamespaceSelector: labelSelector("webhooks", "on"), ObjectSelector: labelSelector("test", "deny"),
				SideEffects: none, AdmissionReviewVersions: []string{"v1"}},
			{Name: "unreachable-ignore.kelp.test", ClientConfig: webhookClientConfig("https://127.0.0.1:1/x", ws.caBundle), Rules: configMapRule("CREATE"),
				ObjectSelector: labelSelector("test", "unreachable-ignore"), FailurePolicy: ptrTo(admissionregistrationv1.Ignore),
				SideEffects: none, AdmissionReviewVersions: []string{"v1"}},
			{Name: "unreachable-fail.kelp.test", ClientConfig: webhookClientConfig("https://127.0.0.1:1/x", ws.caBundle), Rules: configMapRule("CREATE"),
				ObjectSelector: labelSelector("test", "unreachable-fail"), FailurePolicy: ptrTo(admissionregistrationv1.Fail),
				SideEffects: none, AdmissionReviewVersions: []string{"v1"}},
			{Name: "slow.kelp.test", ClientConfig: webhookClientConfig(ws.url+"/slow", ws.caBundle), Rules: configMapRule("CREATE"),
				ObjectSelector: labelSelector("test", "slow"), TimeoutSeconds: ptrTo(int32(1)),
				SideEffects: none, AdmissionReviewVersions: []string{"v1"}},
			{Name: "untrusted.kelp.test", ClientConfig: webhookClientConfig(ws.url+"/allow", nil), Rules: configMapRule("CREATE"),
				ObjectSelector: labelSelector("test", "untrusted"), SideEffects: none, AdmissionReviewVersions: []string{"v1"}},
			// Webhook configurations are never sent to webhooks.
			{Name: "deny-configs.kelp.test", ClientConfig: webhookClientConfig(ws.url+"/deny", ws.caBundle),
				Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{"*"},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{"admissionregistration.k8s.io"}, APIVersions: []string{"*"}, Resources: []string{"*"}}}},
				SideEffects: none, AdmissionReviewVersions: []string{"v1"}},
		},
	}
	created, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Upstream's defaults.
	if w := created.Webhooks[0]; *w.FailurePolicy != admissionregistrationv1.Fail || *w.MatchPolicy != admissionregistrationv1.Equivalent ||
		*w.TimeoutSeconds != 10 || *w.Rules[0].Scope != admissionregistrationv1.AllScopes {
		t.Errorf("defaults not applied: %+v", w)
	}

	t.Run("deny", func(t *testing.T) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "denied", Namespace: "wh-on", Labels: map[string]string{"test": "deny"}}}
		_, err := createUntil(t, cs, cm, func(_ *corev1.ConfigMap, err error) bool { return err != nil })
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `admission webhook "deny.kelp.test" denied the request: no configmaps here`) {
			t.Fatalf("denial: %v", err)
		}
		if v := ws.version("/deny"); v != "admission.k8s.io/v1" {
			t.Errorf("review version %q", v)
		}
		// namespaceSelector: the other namespace is not sent.
		cm.Namespace = "wh-off"
		if _, err := cs.CoreV1().ConfigMaps("wh-off").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatalf("a namespace the selector leaves out: %v", err)
		}
		// objectSelector: an unlabelled object is not sent.
		if _, err := cs.CoreV1().ConfigMaps("wh-on").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "plain"}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("an object the selector leaves out: %v", err)
		}
	})

	t.Run("failurePolicy", func(t *testing.T) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ignored", Namespace: "wh-on", Labels: map[string]string{"test": "unreachable-ignore"}}}
		if _, err := cs.CoreV1().ConfigMaps("wh-on").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Errorf("failurePolicy Ignore with an unreachable webhook: %v", err)
		}
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "failed", Namespace: "wh-on", Labels: map[string]string{"test": "unreachable-fail"}}}
		_, err := cs.CoreV1().ConfigMaps("wh-on").Create(ctx, cm, metav1.CreateOptions{})
		if err == nil || !strings.Contains(err.Error(), `failed calling webhook "unreachable-fail.kelp.test"`) {
			t.Errorf("failurePolicy Fail with an unreachable webhook: %v", err)
		}
		// A webhook whose certificate the caBundle does not vouch for is
		// as unreachable.
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "untrusted", Namespace: "wh-on", Labels: map[string]string{"test": "untrusted"}}}
		_, err = cs.CoreV1().ConfigMaps("wh-on").Create(ctx, cm, metav1.CreateOptions{})
		if err == nil || !strings.Contains(err.Error(), `failed calling webhook "untrusted.kelp.test"`) {
			t.Errorf("a webhook without the caBundle's trust: %v", err)
		}
	})

	t.Run("timeout", func(t *testing.T) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "slow", Namespace: "wh-on", Labels: map[string]string{"test": "slow"}}}
		start := time.Now()
		_, err := cs.CoreV1().ConfigMaps("wh-on").Create(ctx, cm, metav1.CreateOptions{})
		if took := time.Since(start); err == nil || took > 2500*time.Millisecond {
			t.Fatalf("a webhook slower than its 1 s timeout: %v after %s", err, took)
		}
		if !strings.Contains(err.Error(), `failed calling webhook "slow.kelp.test"`) {
			t.Errorf("timeout error: %v", err)
		}
	})

	t.Run("mutate", func(t *testing.T) {
		mwc := &admissionregistrationv1.MutatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: "test-mutating"},
			Webhooks: []admissionregistrationv1.MutatingWebhook{{
				Name: "mutate.kelp.test", ClientConfig: webhookClientConfig(ws.url+"/mutate", ws.caBundle), Rules: configMapRule("CREATE"),
				ObjectSelector:          labelSelector("test", "mutate"),
				MatchConditions:         []admissionregistrationv1.MatchCondition{{Name: "not-skipped", Expression: "object.metadata.name != 'skip-me'"}},
				SideEffects:             none,
				AdmissionReviewVersions: []string{"v1beta1"},
			}, {
				// and for TokenRequests.
				Name: "deny-token.kelp.test", ClientConfig: webhookClientConfig(ws.url+"/deny", ws.caBundle),
				Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{"CREATE"},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"serviceaccounts/token"}}}},
				NamespaceSelector: labelSelector("webhooks", "on"), SideEffects: none, AdmissionReviewVersions: []string{"v1"},
			}, {
				// Mutating webhooks are called for deletes too.
				Name: "deny-delete.kelp.test", ClientConfig: webhookClientConfig(ws.url+"/deny", ws.caBundle), Rules: configMapRule("DELETE"),
				ObjectSelector: labelSelector("test", "deny-delete"), SideEffects: none, AdmissionReviewVersions: []string{"v1"},
			}},
		}
		if _, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, mwc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "mutated", Namespace: "wh-off", Labels: map[string]string{"test": "mutate"}}}
		out, _ := createUntil(t, cs, cm, func(out *corev1.ConfigMap, err error) bool { return err == nil && out.Labels["mutated"] == "yes" })
		got, err := cs.CoreV1().ConfigMaps("wh-off").Get(ctx, out.Name, metav1.GetOptions{})
		if err != nil || got.Labels["mutated"] != "yes" {
			t.Errorf("stored object not mutated: %v %v", got.Labels, err)
		}
		if v := ws.version("/mutate"); v != "admission.k8s.io/v1beta1" {
			t.Errorf("review version %q, want v1beta1", v)
		}
		warnMu.Lock()
		w := strings.Join(warnings, "\n")
		warnMu.Unlock()
		if !strings.Contains(w, "mutated by the test webhook") {
			t.Errorf("webhook warning not passed on: %q", w)
		}
		// matchConditions: a false condition skips the webhook.
		skip := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "skip-me", Namespace: "wh-off", Labels: map[string]string{"test": "mutate"}}}
		out, err = cs.CoreV1().ConfigMaps("wh-off").Create(ctx, skip, metav1.CreateOptions{})
		if err != nil || out.Labels["mutated"] != "" {
			t.Errorf("matchCondition false: %v %v", out.Labels, err)
		}
		// A delete goes through the mutating phase.
		kept := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kept", Namespace: "wh-off", Labels: map[string]string{"test": "deny-delete"}}}
		if _, err := cs.CoreV1().ConfigMaps("wh-off").Create(ctx, kept, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		err = cs.CoreV1().ConfigMaps("wh-off").Delete(ctx, "kept", metav1.DeleteOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `admission webhook "deny-delete.kelp.test" denied the request`) {
			t.Errorf("delete refused by a mutating webhook: %v", err)
		}
		// A TokenRequest goes through the mutating phase.
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "tokens", Namespace: "wh-on"}}
		if _, err := cs.CoreV1().ServiceAccounts("wh-on").Create(ctx, sa, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		_, err = cs.CoreV1().ServiceAccounts("wh-on").CreateToken(ctx, "tokens", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `admission webhook "deny-token.kelp.test" denied the request`) {
			t.Errorf("token request refused by a mutating webhook: %v", err)
		}
		// A dry run is sent to a webhook without side effects, and
		// stores nothing.
		dry := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dry", Namespace: "wh-off", Labels: map[string]string{"test": "mutate"}}}
		out, err = cs.CoreV1().ConfigMaps("wh-off").Create(ctx, dry, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil || out.Labels["mutated"] != "yes" {
			t.Errorf("dry run: %v %v", out, err)
		}
	})

	t.Run("proxy CONNECT", func(t *testing.T) {
		// A request through services/proxy is admitted as a CONNECT with
		// its ServiceProxyOptions, as upstream's connect handler does.
		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: "test-connect"},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{
				Name: "deny-proxy.kelp.test", ClientConfig: webhookClientConfig(ws.url+"/deny", ws.caBundle),
				Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{"CONNECT"},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"services/proxy", "pods/proxy"}}}},
				NamespaceSelector: labelSelector("webhooks", "on"), SideEffects: none, AdmissionReviewVersions: []string{"v1"},
			}},
		}
		if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		defer cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, "test-connect", metav1.DeleteOptions{})
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "proxied"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
		if _, err := cs.CoreV1().Services("wh-on").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			var code int
			body, _ := cs.CoreV1().RESTClient().Get().Namespace("wh-on").Resource("services").SubResource("proxy").Name("proxied:http").
				Suffix("x").Do(ctx).StatusCode(&code).Raw()
			if code == http.StatusForbidden && strings.Contains(string(body), `admission webhook \"deny-proxy.kelp.test\" denied the request`) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("services/proxy under a webhook denying CONNECT: %d %s", code, body)
			}
		}
	})

	t.Run("configurations exempt", func(t *testing.T) {
		// deny-configs.kelp.test matches every webhook configuration
		// write; none is sent to it.
		if err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, "test-mutating", metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting a mutating configuration: %v", err)
		}
		if err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, "test-validating", metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting a validating configuration: %v", err)
		}
		// Once gone, its webhooks are no longer called.
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after", Namespace: "wh-on", Labels: map[string]string{"test": "deny"}}}
		createUntil(t, cs, cm, func(_ *corev1.ConfigMap, err error) bool { return err == nil })
	})

	t.Run("validation", func(t *testing.T) {
		bad := &admissionregistrationv1.ValidatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: "bad"},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "short", ClientConfig: webhookClientConfig("http://x/", nil),
				Rules: configMapRule("CREATE"), AdmissionReviewVersions: []string{"v2"}, TimeoutSeconds: ptrTo(int32(31))}},
		}
		_, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, bad, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) {
			t.Fatalf("invalid configuration: %v", err)
		}
		for _, want := range []string{"webhooks[0].name", "webhooks[0].sideEffects", "webhooks[0].timeoutSeconds",
			"webhooks[0].admissionReviewVersions", "webhooks[0].clientConfig.url"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("no error about %s in %v", want, err)
			}
		}
	})
}

type warningFunc func(string)

func (f warningFunc) HandleWarningHeader(code int, agent, text string) { f(text) }
