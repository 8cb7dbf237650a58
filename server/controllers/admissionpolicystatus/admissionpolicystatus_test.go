package admissionpolicystatus

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

// fixedChecker warns of every policy named "confused".
type fixedChecker struct {
	mu      sync.Mutex
	checked []string
}

func (c *fixedChecker) Check(p *admissionregistrationv1.ValidatingAdmissionPolicy) []admissionregistrationv1.ExpressionWarning {
	c.mu.Lock()
	c.checked = append(c.checked, p.Name)
	c.mu.Unlock()
	if p.Name == "confused" {
		return []admissionregistrationv1.ExpressionWarning{{FieldRef: "spec.validations[0].expression", Warning: "no matching overload"}}
	}
	return nil
}

func TestStatusAppliedPerGeneration(t *testing.T) {
	policy := func(name string, gen, observed int64) *admissionregistrationv1.ValidatingAdmissionPolicy {
		return &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: gen},
			Status: admissionregistrationv1.ValidatingAdmissionPolicyStatus{ObservedGeneration: observed}}
	}
	client := fake.NewSimpleClientset(policy("confused", 2, 1), policy("fine", 1, 0), policy("seen", 3, 3))
	var mu sync.Mutex
	applied := map[string]admissionregistrationv1.ValidatingAdmissionPolicy{}
	client.PrependReactor("patch", "validatingadmissionpolicies", func(a clienttesting.Action) (bool, runtime.Object, error) {
		pa := a.(clienttesting.PatchAction)
		if pa.GetSubresource() != "status" || pa.GetPatchType() != types.ApplyPatchType {
			t.Errorf("want a server-side apply of /status, got %s %s", pa.GetPatchType(), pa.GetSubresource())
		}
		var p admissionregistrationv1.ValidatingAdmissionPolicy
		if err := json.Unmarshal(pa.GetPatch(), &p); err != nil {
			t.Error(err)
		}
		mu.Lock()
		applied[pa.GetName()] = p
		mu.Unlock()
		return true, &p, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	checker := &fixedChecker{}
	c := NewWithChecker(client, factory, checker)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	go c.Run(ctx, 1)
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := len(applied)
		mu.Unlock()
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("statuses applied: %v", applied)
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	confused := applied["confused"].Status
	if confused.ObservedGeneration != 2 || confused.TypeChecking == nil || len(confused.TypeChecking.ExpressionWarnings) != 1 ||
		confused.TypeChecking.ExpressionWarnings[0].FieldRef != "spec.validations[0].expression" {
		t.Fatalf("confused policy's status: %+v", confused)
	}
	// no warning is an empty type checking, which tells clients it is done
	fine := applied["fine"].Status
	if fine.ObservedGeneration != 1 || fine.TypeChecking == nil || len(fine.TypeChecking.ExpressionWarnings) != 0 {
		t.Fatalf("fine policy's status: %+v", fine)
	}
	if _, ok := applied["seen"]; ok {
		t.Fatal("a policy whose generation was observed was checked again")
	}
}
