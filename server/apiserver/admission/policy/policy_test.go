package policy

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/discovery"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/openapi"
	"k8s.io/client-go/openapi/openapitest"

	"github.com/kelp-project/kelp/server/apiserver/admission"
	"github.com/kelp-project/kelp/server/apiserver/auth"
)

// clientWithOpenAPI is the fake clientset with an /openapi/v3 (upstream's
// own documents, embedded in client-go's openapitest), which the mutating
// plugin types its apply configurations from.
type clientWithOpenAPI struct {
	*fake.Clientset
}

type discoveryWithOpenAPI struct {
	*fakediscovery.FakeDiscovery
}

func (c clientWithOpenAPI) Discovery() discovery.DiscoveryInterfaces {
	return discoveryWithOpenAPI{c.Clientset.Discovery().(*fakediscovery.FakeDiscovery)}
}

func (discoveryWithOpenAPI) OpenAPIV3() openapi.Client { return openapitest.NewEmbeddedFileClient() }

// recordingAuthorizer allows what it is told to and records what it was
// asked.
type recordingAuthorizer struct {
	asked []auth.Attributes
	users []*auth.User
}

func (r *recordingAuthorizer) Authorize(u *auth.User, a auth.Attributes) (auth.Decision, string) {
	r.asked, r.users = append(r.asked, a), append(r.users, u)
	if a.Verb == "get" && a.Resource == "secrets" {
		return auth.DecisionAllow, "secrets readable"
	}
	return auth.DecisionNoOpinion, "not this"
}

func startPolicies(t *testing.T, authz auth.Authorizer, objs ...runtime.Object) *Policies {
	t.Helper()
	objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Labels: map[string]string{"team": "a"}}})
	client := clientWithOpenAPI{fake.NewSimpleClientset(objs...)}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	p, err := New(Config{Stop: stop, Authorizer: authz})
	if err != nil {
		t.Fatal(err)
	}
	p.Start(kubernetes.Interface(client), dynamicfake.NewSimpleDynamicClient(scheme.Scheme))
	if !p.Armed() {
		t.Fatal("policies not started")
	}
	deadline := time.Now().Add(5 * time.Second)
	for !p.Synced() {
		if time.Now().After(deadline) {
			t.Fatal("binding informers never synced")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return p
}

// configMapMatch is a policy's matchConstraints as the API server stores
// them (defaulted): CREATE of ConfigMaps.
func configMapMatch() *admissionregistrationv1.MatchResources {
	equiv, all := admissionregistrationv1.Equivalent, admissionregistrationv1.AllScopes
	return &admissionregistrationv1.MatchResources{MatchPolicy: &equiv, NamespaceSelector: &metav1.LabelSelector{}, ObjectSelector: &metav1.LabelSelector{},
		ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{"CREATE"},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}, Scope: &all}}}}}
}

func configMapCreate(data map[string]string) *admission.Attributes {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "ns"}, Data: data}
	return &admission.Attributes{Operation: "CREATE", Resource: corev1.SchemeGroupVersion.WithResource("configmaps"), Namespace: "ns", Name: "cm",
		Object: cm, User: &auth.User{Name: "alice", Groups: []string{"devs"}}}
}

// eventually retries f while it fails (the plugins' sources compile the
// policies they have seen in the background).
func eventually(t *testing.T, f func() error) error {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestValidatingPolicyDeniesWithUpstreamStatus(t *testing.T) {
	fail := admissionregistrationv1.Fail
	authz := &recordingAuthorizer{}
	p := startPolicies(t, authz,
		&admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "owner.example.com"},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{FailurePolicy: &fail, MatchConstraints: configMapMatch(),
				Validations: []admissionregistrationv1.Validation{
					{Expression: "has(object.data) && 'owner' in object.data", MessageExpression: "'no owner in ' + object.metadata.name"},
					// the authorizer variable is kelp's chain
					{Expression: "authorizer.group('').resource('secrets').namespace('ns').check('get').allowed()", Message: "cannot read secrets"},
				}}},
		&admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "owner-binding"},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "owner.example.com",
				ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}}})
	ctx := context.Background()
	err := eventually(t, func() error {
		if err := p.Validate(ctx, configMapCreate(nil)); err != nil {
			return nil
		}
		return context.DeadlineExceeded
	})
	if err != nil {
		t.Fatal("a ConfigMap without an owner was never denied")
	}
	err = p.Validate(ctx, configMapCreate(nil))
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "no owner in cm") {
		t.Fatalf("want upstream's 422 with the message expression, got %v", err)
	}
	if err := p.Validate(ctx, configMapCreate(map[string]string{"owner": "bob"})); err != nil {
		t.Fatalf("a ConfigMap with an owner was refused: %v", err)
	}
	var sawCheck bool
	for i, a := range authz.asked {
		if a.Resource == "secrets" && a.Verb == "get" && a.Namespace == "ns" && a.IsResource && authz.users[i].Name == "alice" {
			sawCheck = true
		}
	}
	if !sawCheck {
		t.Fatalf("the authorizer was not asked for alice's get of secrets: %+v", authz.asked)
	}
	// a DELETE matches no rule of the policy
	del := configMapCreate(nil)
	del.Operation, del.Object, del.OldObject = "DELETE", nil, del.Object
	if err := p.Validate(ctx, del); err != nil {
		t.Fatalf("a DELETE the policy does not match was refused: %v", err)
	}
}

func TestMutatingPolicyPatchesTheRequestObject(t *testing.T) {
	fail := admissionregistrationv1.Fail
	p := startPolicies(t, &recordingAuthorizer{},
		&admissionregistrationv1.MutatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "label.example.com"},
			Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{FailurePolicy: &fail, MatchConstraints: configMapMatch(),
				ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
				Mutations: []admissionregistrationv1.Mutation{{PatchType: admissionregistrationv1.PatchTypeApplyConfiguration,
					ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{
						Expression: `Object{metadata: Object.metadata{labels: {"mutated": "yes"}}, data: {"added": "by-policy"}}`}}}}},
		&admissionregistrationv1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "label-binding"},
			Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: "label.example.com"}})
	var a *admission.Attributes
	err := eventually(t, func() error {
		a = configMapCreate(map[string]string{"kept": "1"})
		if err := p.Admit(context.Background(), a); err != nil {
			return err
		}
		if a.Object.(*corev1.ConfigMap).Labels["mutated"] != "yes" {
			return context.DeadlineExceeded
		}
		return nil
	})
	if err != nil {
		t.Fatalf("the ConfigMap was never mutated: %v", err)
	}
	// the request's own object is changed in place, as the webhooks'
	cm := a.Object.(*corev1.ConfigMap)
	if cm.Data["added"] != "by-policy" || cm.Data["kept"] != "1" {
		t.Fatalf("apply configuration not merged into the object: %+v", cm.Data)
	}
}

// With no binding of a kind, its plugin is not asked: a write pays
// nothing for the policies.
func TestNoBindingsCostNothing(t *testing.T) {
	p := startPolicies(t, &recordingAuthorizer{})
	ctx := context.Background()
	a := configMapCreate(nil)
	allocs := testing.AllocsPerRun(100, func() {
		if err := p.Admit(ctx, a); err != nil {
			t.Fatal(err)
		}
		if err := p.Validate(ctx, a); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("admission with no policy binding: %v allocations", allocs)
	}
}

// Before Start (the API server has no loopback client yet) everything is
// admitted.
func TestNotStartedAdmitsEverything(t *testing.T) {
	p, err := New(Config{Stop: make(chan struct{})})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Admit(context.Background(), configMapCreate(nil)); err != nil {
		t.Fatal(err)
	}
	if err := p.Validate(context.Background(), configMapCreate(nil)); err != nil {
		t.Fatal(err)
	}
}

func TestUpstreamAuthorizerDecisions(t *testing.T) {
	rec := &recordingAuthorizer{}
	u := upstreamAuthorizer{rec}
	attrs := authorizer.AttributesRecord{User: &user.DefaultInfo{Name: "bob", Groups: []string{"g"}, Extra: map[string][]string{"k": {"v"}}},
		Verb: "get", Namespace: "ns", APIGroup: "", APIVersion: "v1", Resource: "secrets", Name: "s", ResourceRequest: true}
	d, reason, err := u.Authorize(context.Background(), attrs)
	if err != nil || d != authorizer.DecisionAllow || reason != "secrets readable" {
		t.Fatalf("allowed check: %v %q %v", d, reason, err)
	}
	got := rec.asked[0]
	if !reflect.DeepEqual(got, auth.Attributes{IsResource: true, Verb: "get", Version: "v1", Namespace: "ns", Resource: "secrets", Name: "s"}) ||
		rec.users[0].Name != "bob" || rec.users[0].Extra["k"][0] != "v" {
		t.Fatalf("attributes not carried over: %+v %+v", got, rec.users[0])
	}
	attrs.Verb = "delete"
	if d, _, _ := u.Authorize(context.Background(), attrs); d != authorizer.DecisionNoOpinion {
		t.Fatalf("no opinion became %v", d)
	}
	if d, _, _ := (upstreamAuthorizer{}).Authorize(context.Background(), attrs); d != authorizer.DecisionNoOpinion {
		t.Fatalf("without an authorizer: %v", d)
	}
}
