package integration

import (
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// policyDeployment is a Deployment of n replicas in ns (no pods: the
// server runs without an agent, and the policies judge the object).
func policyDeployment(ns, name string, n int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{Replicas: &n, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}},
	}
}

func deploymentRules(ops ...admissionregistrationv1.OperationType) *admissionregistrationv1.MatchResources {
	return &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
		RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: ops,
			Rule: admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}}}}}}
}

// namespaceBinding matches the namespace labelled policy-test=<ns>.
func namespaceBinding(ns string) *admissionregistrationv1.MatchResources {
	return &admissionregistrationv1.MatchResources{NamespaceSelector: labelSelector("policy-test", ns)}
}

// untilDeployment creates a Deployment (under a new name each try) until
// check accepts the outcome: policies and bindings are followed through
// informers, so a new one takes effect a moment after it is written.
func untilDeployment(t *testing.T, cs kubernetes.Interface, d *appsv1.Deployment, check func(*appsv1.Deployment, error) bool) (*appsv1.Deployment, error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; ; i++ {
		c := d.DeepCopy()
		c.Name = d.Name + "-" + time.Now().Format("150405.000000")[7:]
		out, err := cs.AppsV1().Deployments(c.Namespace).Create(ctxT(t), c, metav1.CreateOptions{})
		if check(out, err) {
			return out, err
		}
		if time.Now().After(deadline) {
			t.Fatalf("creating %s: outcome never as expected: %v", d.Name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestAdmissionPolicies(t *testing.T) {
	s := startServer(t)
	cfg := rest.CopyConfig(s.config)
	var warnMu sync.Mutex
	var warnings []string
	cfg.WarningHandler = warningFunc(func(msg string) {
		warnMu.Lock()
		defer warnMu.Unlock()
		warnings = append(warnings, msg)
	})
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx := ctxT(t)
	policies := cs.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	vbindings := cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
	mpolicies := cs.AdmissionregistrationV1().MutatingAdmissionPolicies()
	mbindings := cs.AdmissionregistrationV1().MutatingAdmissionPolicyBindings()
	for _, ns := range []string{"vap", "map", "params"} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
			Labels: map[string]string{"policy-test": ns}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("validation refuses expressions that do not compile", func(t *testing.T) {
		_, err := policies.Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "broken.example.com"},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{MatchConstraints: deploymentRules("CREATE"),
				Validations: []admissionregistrationv1.Validation{{Expression: "object.spec.replicas >"}}},
		}, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.validations[0].expression") || !strings.Contains(err.Error(), "compilation failed") {
			t.Fatalf("a policy whose expression does not compile: want 422 naming spec.validations[0].expression, got %v", err)
		}
		_, err = mbindings.Create(ctx, &admissionregistrationv1.MutatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "bad-binding"},
			Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: "x.example.com",
				ParamRef: &admissionregistrationv1.ParamRef{Name: "p"}},
		}, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.paramRef.parameterNotFoundAction") {
			t.Fatalf("a binding without parameterNotFoundAction: want 422, got %v", err)
		}
	})

	t.Run("a validating policy denies, defaults and is type-checked", func(t *testing.T) {
		p, err := policies.Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "replicas.example.com"},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{MatchConstraints: deploymentRules("CREATE", "UPDATE"),
				Variables: []admissionregistrationv1.Variable{{Name: "replicas", Expression: "object.spec.replicas"}},
				Validations: []admissionregistrationv1.Validation{{Expression: "variables.replicas > 1",
					MessageExpression: "'wants replicas > 1, got ' + string(object.spec.replicas)"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Spec.FailurePolicy == nil || *p.Spec.FailurePolicy != admissionregistrationv1.Fail ||
			p.Spec.MatchConstraints.MatchPolicy == nil || *p.Spec.MatchConstraints.MatchPolicy != admissionregistrationv1.Equivalent ||
			p.Spec.MatchConstraints.ResourceRules[0].Scope == nil || p.Generation != 1 {
			t.Fatalf("policy not defaulted as upstream: %+v", p.Spec)
		}
		if _, err := vbindings.Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "replicas-binding"},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: p.Name, MatchResources: namespaceBinding("vap"),
				ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		_, err = untilDeployment(t, cs, policyDeployment("vap", "one", 1), func(_ *appsv1.Deployment, err error) bool { return err != nil })
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "wants replicas > 1, got 1") ||
			!strings.Contains(err.Error(), `ValidatingAdmissionPolicy 'replicas.example.com' with binding 'replicas-binding' denied request`) {
			t.Fatalf("one replica: want upstream's 422 with the message expression, got %v", err)
		}
		if _, err := cs.AppsV1().Deployments("vap").Create(ctx, policyDeployment("vap", "two", 2), metav1.CreateOptions{}); err != nil {
			t.Fatalf("two replicas pass the policy: %v", err)
		}
		// the binding selects namespace vap only
		if _, err := cs.AppsV1().Deployments("map").Create(ctx, policyDeployment("map", "elsewhere", 1), metav1.CreateOptions{}); err != nil {
			t.Fatalf("another namespace is not bound: %v", err)
		}
		// the status controller type-checks each generation
		waitTypeChecking := func(name string) *admissionregistrationv1.ValidatingAdmissionPolicy {
			t.Helper()
			deadline := time.Now().Add(15 * time.Second)
			for {
				got, err := policies.Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if got.Status.TypeChecking != nil && got.Status.ObservedGeneration == got.Generation {
					return got
				}
				if time.Now().After(deadline) {
					t.Fatalf("policy %s never type-checked: %+v", name, got.Status)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		if got := waitTypeChecking(p.Name); len(got.Status.TypeChecking.ExpressionWarnings) != 0 {
			t.Fatalf("a well-typed policy got warnings: %+v", got.Status.TypeChecking)
		}
		confused, err := policies.Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "confused.example.com"},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{MatchConstraints: deploymentRules("CREATE"),
				Validations: []admissionregistrationv1.Validation{{Expression: "object.spec.replicas > '1'",
					MessageExpression: "'wants replicas > 1, got ' + object.spec.replicas"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got := waitTypeChecking(confused.Name)
		w := got.Status.TypeChecking.ExpressionWarnings
		if len(w) != 2 || w[0].FieldRef != "spec.validations[0].expression" || !strings.Contains(w[0].Warning, "found no matching overload for '_>_' applied to '(int, string)'") ||
			w[1].FieldRef != "spec.validations[0].messageExpression" || !strings.Contains(w[1].Warning, "found no matching overload for '_+_' applied to '(string, int)'") {
			t.Fatalf("type confusion: want upstream's two warnings, got %+v", w)
		}
		// a status write through the main endpoint is ignored
		got.Status.Conditions = []metav1.Condition{{Type: "Ignored", Status: metav1.ConditionTrue, Reason: "Test", LastTransitionTime: metav1.Now()}}
		upd, err := policies.Update(ctx, got, metav1.UpdateOptions{})
		if err != nil || len(upd.Status.Conditions) != 0 {
			t.Fatalf("main endpoint changed status: %v %+v", err, upd.Status)
		}
		if err := policies.Delete(ctx, confused.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a Warn binding warns and admits", func(t *testing.T) {
		if _, err := policies.Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "labels.example.com"},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{MatchConstraints: deploymentRules("CREATE"),
				Validations: []admissionregistrationv1.Validation{{Expression: "has(object.metadata.labels) && 'team' in object.metadata.labels", Message: "deployments need a team label"}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := vbindings.Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "labels-binding"},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "labels.example.com", MatchResources: namespaceBinding("map"),
				ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Warn}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		untilDeployment(t, cs, policyDeployment("map", "warned", 2), func(_ *appsv1.Deployment, err error) bool {
			if err != nil {
				t.Fatalf("a Warn binding refused: %v", err)
			}
			warnMu.Lock()
			defer warnMu.Unlock()
			for _, w := range warnings {
				if strings.Contains(w, "deployments need a team label") {
					return true
				}
			}
			return false
		})
		if err := vbindings.Delete(ctx, "labels-binding", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a mutating policy applies its configuration", func(t *testing.T) {
		p, err := mpolicies.Create(ctx, &admissionregistrationv1.MutatingAdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "annotate.example.com"},
			Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{MatchConstraints: deploymentRules("CREATE"),
				ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
				Mutations: []admissionregistrationv1.Mutation{{PatchType: admissionregistrationv1.PatchTypeApplyConfiguration,
					ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{
						Expression: `Object{metadata: Object.metadata{annotations: {"mutated-by": "policy"}}, spec: Object.spec{replicas: 7}}`}}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Spec.FailurePolicy == nil || *p.Spec.FailurePolicy != admissionregistrationv1.Fail {
			t.Fatalf("mutating policy not defaulted: %+v", p.Spec)
		}
		if _, err := mbindings.Create(ctx, &admissionregistrationv1.MutatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "annotate-binding"},
			Spec:       admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: p.Name, MatchResources: namespaceBinding("map")},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		d, err := untilDeployment(t, cs, policyDeployment("map", "mutated", 1), func(d *appsv1.Deployment, err error) bool {
			return err != nil || d.Annotations["mutated-by"] == "policy"
		})
		if err != nil || *d.Spec.Replicas != 7 {
			t.Fatalf("mutated Deployment: %v %+v", err, d)
		}
		// a DELETE is no mutating policy's
		_, err = mpolicies.Create(ctx, &admissionregistrationv1.MutatingAdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "delete.example.com"},
			Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{MatchConstraints: deploymentRules("DELETE"),
				ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
				Mutations: []admissionregistrationv1.Mutation{{PatchType: admissionregistrationv1.PatchTypeJSONPatch,
					JSONPatch: &admissionregistrationv1.JSONPatch{Expression: "[]"}}}},
		}, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.matchConstraints.resourceRules.operations") {
			t.Fatalf("a mutating policy on DELETE: want 422, got %v", err)
		}
	})

	t.Run("parameters come from the bound ConfigMap", func(t *testing.T) {
		if _, err := cs.CoreV1().ConfigMaps("params").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "limits"},
			Data: map[string]string{"max": "3"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := policies.Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "max.example.com"},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{MatchConstraints: deploymentRules("CREATE"),
				ParamKind:   &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"},
				Validations: []admissionregistrationv1.Validation{{Expression: "object.spec.replicas <= int(params.data.max)", Message: "too many replicas"}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		deny := admissionregistrationv1.DenyAction
		if _, err := vbindings.Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "max-binding"},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "max.example.com", MatchResources: namespaceBinding("params"),
				ParamRef:          &admissionregistrationv1.ParamRef{Name: "limits", ParameterNotFoundAction: &deny},
				ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		_, err := untilDeployment(t, cs, policyDeployment("params", "many", 5), func(_ *appsv1.Deployment, err error) bool { return err != nil })
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "too many replicas") {
			t.Fatalf("five replicas over a limit of 3: want 422, got %v", err)
		}
		if _, err := cs.AppsV1().Deployments("params").Create(ctx, policyDeployment("params", "few", 3), metav1.CreateOptions{}); err != nil {
			t.Fatalf("three replicas within the limit: %v", err)
		}
	})

	t.Run("kubectl prints upstream's columns", func(t *testing.T) {
		out := s.mustKubectl("get", "validatingadmissionpolicies,validatingadmissionpolicybindings,mutatingadmissionpolicies,mutatingadmissionpolicybindings")
		for _, want := range []string{"VALIDATIONS", "PARAMKIND", "v1/ConfigMap", "POLICYNAME", "PARAMREF", "*/limits", "MUTATIONS", "annotate-binding"} {
			if !strings.Contains(out, want) {
				t.Fatalf("kubectl get: no %q in\n%s", want, out)
			}
		}
	})
}
