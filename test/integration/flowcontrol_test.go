package integration

import (
	"net/http"
	"strings"
	"testing"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

// API Priority and Fairness's configuration is served and kept, as
// upstream's API server keeps it: the mandatory and suggested objects are
// there at start (a mandatory spec cannot be changed, and a deleted one
// comes back), each FlowSchema gets its Dangling condition, invalid
// objects are 422, and kubectl prints upstream's columns. No request is
// classified, so responses carry no APF headers.
func TestFlowControl(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	fsc, plc := cs.FlowcontrolV1().FlowSchemas(), cs.FlowcontrolV1().PriorityLevelConfigurations()

	for _, name := range []string{"exempt", "catch-all", "system", "leader-election", "workload-high", "workload-low", "global-default", "node-high"} {
		pl, err := plc.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("priority level %s: %v", name, err)
		}
		if pl.Annotations[flowcontrolv1.AutoUpdateAnnotationKey] != "true" {
			t.Errorf("%s: autoupdate annotation %q", name, pl.Annotations[flowcontrolv1.AutoUpdateAnnotationKey])
		}
	}
	for _, name := range []string{"exempt", "catch-all", "probes", "system-leader-election", "system-node-high", "system-nodes", "kube-controller-manager", "kube-scheduler", "service-accounts", "global-default"} {
		if _, err := fsc.Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Fatalf("flow schema %s: %v", name, err)
		}
	}

	// The Dangling condition: False for a schema whose level exists, True
	// for one whose level does not.
	found, err := fsc.Create(ctx, &flowcontrolv1.FlowSchema{ObjectMeta: metav1.ObjectMeta{Name: "found"},
		Spec: flowcontrolv1.FlowSchemaSpec{PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "global-default"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if found.Spec.MatchingPrecedence != 1000 || found.Generation != 1 {
		t.Errorf("created: precedence %d, generation %d", found.Spec.MatchingPrecedence, found.Generation)
	}
	if _, err := fsc.Create(ctx, &flowcontrolv1.FlowSchema{ObjectMeta: metav1.ObjectMeta{Name: "lost"},
		Spec: flowcontrolv1.FlowSchemaSpec{MatchingPrecedence: 500, PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "nowhere"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dangling := func(name string) flowcontrolv1.ConditionStatus {
		fs, err := fsc.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return ""
		}
		for _, c := range fs.Status.Conditions {
			if c.Type == flowcontrolv1.FlowSchemaConditionDangling {
				return c.Status
			}
		}
		return ""
	}
	waitFor(t, "found's Dangling=False", func() bool { return dangling("found") == flowcontrolv1.ConditionFalse })
	waitFor(t, "lost's Dangling=True", func() bool { return dangling("lost") == flowcontrolv1.ConditionTrue })
	// The level appearing turns it to False.
	if _, err := plc.Create(ctx, &flowcontrolv1.PriorityLevelConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "nowhere"},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeQueue,
				Queuing: &flowcontrolv1.QueuingConfiguration{}}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "lost's Dangling=False once its level exists", func() bool { return dangling("lost") == flowcontrolv1.ConditionFalse })
	lost, _ := fsc.Get(ctx, "lost", metav1.GetOptions{})
	if m := lost.ManagedFields; len(m) == 0 || !strings.Contains(managers(m), "api-priority-and-fairness-config-consumer-v1") {
		t.Errorf("managed fields: %s", managers(m))
	}
	pl, _ := plc.Get(ctx, "nowhere", metav1.GetOptions{})
	if l := pl.Spec.Limited; *l.NominalConcurrencyShares != 30 || l.LimitResponse.Queuing.Queues != 64 || l.LimitResponse.Queuing.HandSize != 8 {
		t.Errorf("level not defaulted: %+v %+v", l, l.LimitResponse.Queuing)
	}

	// /status writes change conditions only.
	patched, err := fsc.Patch(ctx, "found", types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"x":"y"}},"spec":{"matchingPrecedence":42},"status":{"conditions":[{"type":"Mine","status":"True"}]}}`), metav1.PatchOptions{}, "status")
	if err != nil {
		t.Fatal(err)
	}
	if patched.Spec.MatchingPrecedence != 1000 || patched.Labels["x"] != "" || len(patched.Status.Conditions) == 0 {
		t.Errorf("status patch: precedence %d labels %v conditions %v", patched.Spec.MatchingPrecedence, patched.Labels, patched.Status.Conditions)
	}

	// Bad input is 422 with upstream's field errors.
	_, err = fsc.Create(ctx, &flowcontrolv1.FlowSchema{ObjectMeta: metav1.ObjectMeta{Name: "bad"},
		Spec: flowcontrolv1.FlowSchemaSpec{MatchingPrecedence: 1, Rules: []flowcontrolv1.PolicyRulesWithSubjects{{}}}}, metav1.CreateOptions{})
	for _, want := range []string{"spec.matchingPrecedence: Invalid value: 1: only the schema named 'exempt' may have matchingPrecedence 1",
		"spec.priorityLevelConfiguration.name: Required value: must reference a priority level",
		"spec.rules[0].subjects: Required value"} {
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("invalid schema: want %q in %v", want, err)
		}
	}
	// A mandatory spec is fixed; a deleted mandatory object comes back.
	_, err = plc.Patch(ctx, "catch-all", types.MergePatchType, []byte(`{"spec":{"limited":{"nominalConcurrencyShares":50}}}`), metav1.PatchOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec of 'catch-all' must equal the fixed value") {
		t.Errorf("changing catch-all: %v", err)
	}
	old, _ := fsc.Get(ctx, "catch-all", metav1.GetOptions{})
	if err := fsc.Delete(ctx, "catch-all", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "catch-all recreated", func() bool {
		fs, err := fsc.Get(ctx, "catch-all", metav1.GetOptions{})
		return err == nil && fs.UID != old.UID
	})
	// A suggested level whose spec an administrator changed and marked
	// autoupdate false is left alone.
	if _, err := plc.Patch(ctx, "workload-low", types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"apf.kubernetes.io/autoupdate-spec":"false"}},"spec":{"limited":{"nominalConcurrencyShares":7}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if wl, _ := plc.Get(ctx, "workload-low", metav1.GetOptions{}); *wl.Spec.Limited.NominalConcurrencyShares != 7 {
		t.Errorf("workload-low: %d shares", *wl.Spec.Limited.NominalConcurrencyShares)
	}

	// Discovery and kubectl.
	rl, err := cs.Discovery().ServerResourcesForGroupVersion("flowcontrol.apiserver.k8s.io/v1")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range rl.APIResources {
		names = append(names, r.Name)
	}
	if got := strings.Join(names, " "); got != "flowschemas flowschemas/status prioritylevelconfigurations prioritylevelconfigurations/status" {
		t.Errorf("discovery: %s", got)
	}
	out := s.mustKubectl("get", "flowschemas")
	lines := strings.Split(out, "\n")
	if strings.Join(strings.Fields(lines[0]), " ") != "NAME PRIORITYLEVEL MATCHINGPRECEDENCE DISTINGUISHERMETHOD AGE MISSINGPL" ||
		!strings.HasPrefix(lines[1], "exempt ") {
		t.Errorf("kubectl get flowschemas:\n%s", out)
	}
	out = s.mustKubectl("get", "prioritylevelconfigurations", "workload-high")
	if f := strings.Fields(out); strings.Join(f[:7], " ") != "NAME TYPE NOMINALCONCURRENCYSHARES QUEUES HANDSIZE QUEUELENGTHLIMIT AGE" ||
		strings.Join(f[7:13], " ") != "workload-high Limited 40 128 6 50" {
		t.Errorf("kubectl get prioritylevelconfigurations:\n%s", out)
	}

	// kelp does not classify requests: no APF response headers.
	hc, err := rest.HTTPClientFor(s.config)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Get(s.config.Host + "/api/v1/namespaces")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET namespaces: %d", resp.StatusCode)
	}
	for _, h := range []string{"X-Kubernetes-Pf-Flowschema-Uid", "X-Kubernetes-Pf-Prioritylevel-Uid"} {
		if v := resp.Header.Get(h); v != "" {
			t.Errorf("response carries %s: %s", h, v)
		}
	}
}

func managers(m []metav1.ManagedFieldsEntry) string {
	var out []string
	for _, e := range m {
		out = append(out, e.Manager+"/"+e.Subresource)
	}
	return strings.Join(out, ",")
}
