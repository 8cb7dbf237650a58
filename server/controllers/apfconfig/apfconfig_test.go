package apfconfig

import (
	"context"
	"testing"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

// Ensure creates every mandatory and suggested object; a second run
// writes nothing.
func TestEnsureCreatesTheConfiguration(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	if err := Ensure(ctx, client.FlowcontrolV1()); err != nil {
		t.Fatal(err)
	}
	fs, _ := client.FlowcontrolV1().FlowSchemas().List(ctx, metav1.ListOptions{})
	pl, _ := client.FlowcontrolV1().PriorityLevelConfigurations().List(ctx, metav1.ListOptions{})
	if want := len(bootstrap.MandatoryFlowSchemas) + len(bootstrap.SuggestedFlowSchemas); len(fs.Items) != want {
		t.Errorf("%d FlowSchemas, want %d", len(fs.Items), want)
	}
	if want := len(bootstrap.MandatoryPriorityLevelConfigurations) + len(bootstrap.SuggestedPriorityLevelConfigurations); len(pl.Items) != want {
		t.Errorf("%d PriorityLevelConfigurations, want %d", len(pl.Items), want)
	}
	for _, item := range fs.Items {
		if item.Annotations[flowcontrolv1.AutoUpdateAnnotationKey] != "true" {
			t.Errorf("%s: annotation %q", item.Name, item.Annotations[flowcontrolv1.AutoUpdateAnnotationKey])
		}
	}
	writes := len(client.Actions())
	if err := Ensure(ctx, client.FlowcontrolV1()); err != nil {
		t.Fatal(err)
	}
	for _, a := range client.Actions()[writes:] {
		if v := a.GetVerb(); v != "get" && v != "list" {
			t.Errorf("second Ensure wrote: %s %s", v, a.GetResource().Resource)
		}
	}
}

// upstream's strategy: a mandatory spec is put back whatever the
// annotation says; a suggested one only while it is auto-updated (true, or
// no annotation and generation 1); an auto-updated object upstream does
// not name is deleted, the administrator's are kept.
func TestEnsureStrategy(t *testing.T) {
	ctx := context.Background()
	catchAll := bootstrap.MandatoryPriorityLevelConfigurationCatchAll.DeepCopy()
	catchAll.Spec.Limited.NominalConcurrencyShares = ptr.To(int32(99))
	catchAll.Annotations[flowcontrolv1.AutoUpdateAnnotationKey] = "false"
	workloadLow := bootstrap.SuggestedPriorityLevelConfigurationWorkloadLow.DeepCopy()
	workloadLow.Spec.Limited.NominalConcurrencyShares = ptr.To(int32(7))
	workloadLow.Annotations[flowcontrolv1.AutoUpdateAnnotationKey] = "false"
	workloadHigh := bootstrap.SuggestedPriorityLevelConfigurationWorkloadHigh.DeepCopy()
	workloadHigh.Spec.Limited.NominalConcurrencyShares = ptr.To(int32(7))
	delete(workloadHigh.Annotations, flowcontrolv1.AutoUpdateAnnotationKey)
	workloadHigh.Generation = 1
	globalDefault := bootstrap.SuggestedPriorityLevelConfigurationGlobalDefault.DeepCopy()
	globalDefault.Spec.Limited.NominalConcurrencyShares = ptr.To(int32(7))
	delete(globalDefault.Annotations, flowcontrolv1.AutoUpdateAnnotationKey)
	globalDefault.Generation = 2
	retired := &flowcontrolv1.PriorityLevelConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "retired",
		Annotations: map[string]string{flowcontrolv1.AutoUpdateAnnotationKey: "true"}}}
	mine := &flowcontrolv1.PriorityLevelConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "mine"}}
	client := fake.NewClientset(catchAll, workloadLow, workloadHigh, globalDefault, retired, mine)
	if err := Ensure(ctx, client.FlowcontrolV1()); err != nil {
		t.Fatal(err)
	}
	get := func(name string) *flowcontrolv1.PriorityLevelConfiguration {
		pl, err := client.FlowcontrolV1().PriorityLevelConfigurations().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil
		}
		return pl
	}
	shares := func(name string) int32 { return *get(name).Spec.Limited.NominalConcurrencyShares }
	annotation := func(name string) string { return get(name).Annotations[flowcontrolv1.AutoUpdateAnnotationKey] }
	if shares("catch-all") != 5 || annotation("catch-all") != "true" {
		t.Errorf("catch-all: %d shares, annotation %q; want upstream's 5, true", shares("catch-all"), annotation("catch-all"))
	}
	if shares("workload-low") != 7 || annotation("workload-low") != "false" {
		t.Errorf("workload-low (autoupdate false) changed: %d, %q", shares("workload-low"), annotation("workload-low"))
	}
	if shares("workload-high") != 40 || annotation("workload-high") != "true" {
		t.Errorf("workload-high (generation 1): %d, %q; want 40, true", shares("workload-high"), annotation("workload-high"))
	}
	if shares("global-default") != 7 || annotation("global-default") != "false" {
		t.Errorf("global-default (edited): %d, %q; want 7 kept, false", shares("global-default"), annotation("global-default"))
	}
	if get("retired") != nil {
		t.Error("an auto-updated level upstream does not name was kept")
	}
	if get("mine") == nil {
		t.Error("the administrator's level was deleted")
	}
}

// The Dangling condition follows the level a schema names: True while it
// is missing, False once it exists, written by apply with upstream's field
// manager.
func TestDanglingCondition(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fs := &flowcontrolv1.FlowSchema{ObjectMeta: metav1.ObjectMeta{Name: "mine"},
		Spec: flowcontrolv1.FlowSchemaSpec{PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "nowhere"}}}
	client := fake.NewClientset(fs)
	factory := informers.NewSharedInformerFactory(client, 0)
	c := New(client.FlowcontrolV1(), factory.Flowcontrol().V1().FlowSchemas(), factory.Flowcontrol().V1().PriorityLevelConfigurations())
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	if err := c.syncDangling(ctx, "mine"); err != nil {
		t.Fatal(err)
	}
	applied := lastApply(t, client)
	if applied.Status != flowcontrolv1.ConditionTrue || applied.Reason != "NotFound" ||
		applied.Message != `This FlowSchema references the PriorityLevelConfiguration object named "nowhere" but there is no such object` {
		t.Errorf("missing level: %+v", applied)
	}

	level := &flowcontrolv1.PriorityLevelConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "nowhere"}}
	if err := factory.Flowcontrol().V1().PriorityLevelConfigurations().Informer().GetStore().Add(level); err != nil {
		t.Fatal(err)
	}
	if err := c.syncDangling(ctx, "mine"); err != nil {
		t.Fatal(err)
	}
	if applied := lastApply(t, client); applied.Status != flowcontrolv1.ConditionFalse || applied.Reason != "Found" {
		t.Errorf("existing level: %+v", applied)
	}

	// A schema whose condition is already right is not written.
	current := fs.DeepCopy()
	current.Status.Conditions = []flowcontrolv1.FlowSchemaCondition{danglingCondition(fs, true)}
	if err := factory.Flowcontrol().V1().FlowSchemas().Informer().GetStore().Update(current); err != nil {
		t.Fatal(err)
	}
	n := len(client.Actions())
	if err := c.syncDangling(ctx, "mine"); err != nil {
		t.Fatal(err)
	}
	if len(client.Actions()) != n {
		t.Errorf("wrote an unchanged condition: %v", client.Actions()[n:])
	}
}

// lastApply is the condition of the last apply patch on flowschemas/status.
func lastApply(t *testing.T, client *fake.Clientset) flowcontrolv1.FlowSchemaCondition {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		acts := client.Actions()
		for i := len(acts) - 1; i >= 0; i-- {
			if acts[i].GetVerb() == "patch" && acts[i].GetSubresource() == "status" {
				fs, err := client.FlowcontrolV1().FlowSchemas().Get(context.Background(), "mine", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range fs.Status.Conditions {
					if c.Type == flowcontrolv1.FlowSchemaConditionDangling {
						return c
					}
				}
				t.Fatalf("no Dangling condition after the apply: %+v", fs.Status)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no apply of flowschemas/status")
	return flowcontrolv1.FlowSchemaCondition{}
}
