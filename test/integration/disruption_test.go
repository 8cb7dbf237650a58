package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubectl/pkg/util/podutils"

	"github.com/kelp-project/kelp/test/simkubelet"
)

func webPods(t *testing.T, cs kubernetes.Interface, node string) (live, ready []corev1.Pod) {
	t.Helper()
	opts := metav1.ListOptions{LabelSelector: "app=container-lab"}
	if node != "" {
		opts.FieldSelector = "spec.nodeName=" + node
	}
	list, err := cs.CoreV1().Pods("default").List(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range list.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		live = append(live, p)
		if podutils.IsPodReady(&p) {
			ready = append(ready, p)
		}
	}
	return live, ready
}

func waitBudget(t *testing.T, cs kubernetes.Interface, what string, ok func(*policyv1.PodDisruptionBudget) bool) *policyv1.PodDisruptionBudget {
	t.Helper()
	var pdb *policyv1.PodDisruptionBudget
	waitWithin(t, 30*time.Second, what, func() bool {
		var err error
		pdb, err = cs.PolicyV1().PodDisruptionBudgets("default").Get(context.Background(), "web", metav1.GetOptions{})
		return err == nil && ok(pdb)
	})
	return pdb
}

// A Deployment of 3 under a budget of minAvailable 2: the disruption
// controller allows 1; pods/eviction spends it, and refuses the next at
// once with upstream's 429; kubectl drain of the node holding two of the
// pods must wait for the first replacement to be Ready before the second
// eviction goes through, so no moment has fewer than 2 Ready.
func TestDisruptionBudgetEvictionAndDrain(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	k := simkubelet.Start(t, cs, "node-1")

	if _, err := cs.AppsV1().Deployments("default").Create(ctx, seedDeployment(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rolloutStatus(t, s, "default", "container-lab")
	two := intstr.FromInt32(2)
	if _, err := cs.PolicyV1().PodDisruptionBudgets("default").Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &two,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "container-lab"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pdb := waitBudget(t, cs, "budget status with 1 disruption allowed", func(p *policyv1.PodDisruptionBudget) bool {
		return p.Status.ObservedGeneration == p.Generation && p.Status.DisruptionsAllowed == 1
	})
	st := pdb.Status
	cond := findCondition(st.Conditions, policyv1.DisruptionAllowedCondition)
	if st.CurrentHealthy != 3 || st.DesiredHealthy != 2 || st.ExpectedPods != 3 || cond == nil ||
		cond.Status != metav1.ConditionTrue || cond.Reason != policyv1.SufficientPodsReason {
		t.Fatalf("budget status %+v", st)
	}

	// A second node for the replacements, once all 3 pods are on node-1.
	k.AddNode(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-2"}}, "4", "8Gi")
	_, ready := webPods(t, cs, "node-1")
	if len(ready) != 3 {
		t.Fatalf("%d Ready pods on node-1, want 3", len(ready))
	}
	evict := func(name string) error {
		return cs.PolicyV1().Evictions("default").Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}})
	}
	if err := evict(ready[0].Name); err != nil {
		t.Fatalf("first eviction: %v", err)
	}
	err := evict(ready[1].Name)
	if !apierrors.IsTooManyRequests(err) || !strings.Contains(err.Error(), "Cannot evict pod as it would violate the pod's disruption budget.") {
		t.Fatalf("second eviction: want 429 with upstream's message, got %v", err)
	}
	var se *apierrors.StatusError
	if ok := asStatus(err, &se); !ok || se.ErrStatus.Details == nil || len(se.ErrStatus.Details.Causes) == 0 ||
		se.ErrStatus.Details.Causes[0].Type != policyv1.DisruptionBudgetCause {
		t.Fatalf("second eviction: want a DisruptionBudget cause, got %#v", err)
	}
	pdb, _ = cs.PolicyV1().PodDisruptionBudgets("default").Get(ctx, "web", metav1.GetOptions{})
	if _, ok := pdb.Status.DisruptedPods[ready[0].Name]; !ok && pdb.Status.DisruptionsAllowed != 0 {
		t.Errorf("after an eviction the budget neither records it nor has 0 allowed: %+v", pdb.Status)
	}

	// The replacement lands on node-2: node-1 then holds 2 of the 3.
	waitBudget(t, cs, "budget back to 1 allowed with 3 healthy", func(p *policyv1.PodDisruptionBudget) bool {
		return p.Status.CurrentHealthy == 3 && p.Status.DisruptionsAllowed == 1
	})
	// A DaemonSet's pod on node-1, which --ignore-daemonsets leaves
	// there. OnDelete and a node selector keep a DaemonSet controller, if
	// one runs, to this one pod.
	dsLabels := map[string]string{"app": "node-agent"}
	ds, err := cs.AppsV1().DaemonSets("default").Create(ctx, &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "node-agent"},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: dsLabels},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: dsLabels}, Spec: corev1.PodSpec{
				NodeSelector: map[string]string{"kubernetes.io/hostname": "node-1"},
				Containers:   []corev1.Container{{Name: "agent", Image: "busybox:1.35"}}}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	yes := true
	if _, err := cs.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "node-agent-1", Labels: dsLabels,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID, Controller: &yes}}},
		Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "agent", Image: "busybox:1.35"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b := watchPodBounds(t, cs, "default", "app=container-lab")
	out, err := s.kubectl("drain", "node-1", "--ignore-daemonsets", "--timeout=60s")
	if err != nil {
		t.Fatalf("kubectl drain: %v\n%s", err, out)
	}
	t.Logf("kubectl drain:\n%s", out)
	for _, want := range []string{"node/node-1 cordoned", "violate the pod's disruption budget", "node/node-1 drained"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl drain output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(out, "ignoring DaemonSet-managed Pods") {
		t.Errorf("drain did not skip the DaemonSet's pod:\n%s", out)
	}
	if dsPods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=node-agent", FieldSelector: "spec.nodeName=node-1"}); err != nil || len(dsPods.Items) == 0 {
		t.Errorf("the DaemonSet's pod left node-1: %v", err)
	}
	if _, least := b.get(); least < 2 {
		t.Errorf("drain went below the budget: %d Ready at one point\n%s", least, b)
	}
	if live, _ := webPods(t, cs, "node-1"); len(live) != 0 {
		t.Errorf("%d pods left on the drained node", len(live))
	}
	waitFor(t, "3 Ready pods on node-2", func() bool { _, r := webPods(t, cs, "node-2"); return len(r) == 3 })
	n, err := cs.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{})
	if err != nil || !n.Spec.Unschedulable {
		t.Fatalf("drained node not cordoned: %v %+v", err, n.Spec)
	}
	if out := s.mustKubectl("uncordon", "node-1"); !strings.Contains(out, "node/node-1 uncordoned") {
		t.Errorf("uncordon: %s", out)
	}
	if n, err := cs.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{}); err != nil || n.Spec.Unschedulable {
		t.Errorf("uncordoned node still unschedulable: %v %+v", err, n.Spec)
	}

	// edit (and so admin) may evict, as upstream's bootstrap policy; view
	// may not. A dry run takes nothing from the budget and deletes nothing.
	for user, role := range map[string]string{"alice": "edit", "bob": "view"} {
		if _, err := cs.RbacV1().RoleBindings("default").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	_, ready = webPods(t, cs, "node-2")
	victim := ready[0]
	dryEvict := func(c kubernetes.Interface) error {
		return c.PolicyV1().Evictions("default").Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: victim.Name, Namespace: "default"},
			DeleteOptions: &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}})
	}
	waitBudget(t, cs, "budget back to 1 allowed after the drain", func(p *policyv1.PodDisruptionBudget) bool { return p.Status.DisruptionsAllowed == 1 })
	var aliceErr error
	waitWithin(t, 20*time.Second, "edit's aggregated rules to allow alice's eviction", func() bool {
		aliceErr = dryEvict(s.impersonating("alice"))
		return !apierrors.IsForbidden(aliceErr)
	})
	if aliceErr != nil {
		t.Fatalf("dry-run eviction as edit: %v", aliceErr)
	}
	if err := dryEvict(s.impersonating("bob")); !apierrors.IsForbidden(err) {
		t.Errorf("eviction as view: want 403, got %v", err)
	}
	if p, err := cs.CoreV1().Pods("default").Get(ctx, victim.Name, metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil {
		t.Errorf("dry-run eviction deleted the pod: %v", err)
	}
	if pdb, _ := cs.PolicyV1().PodDisruptionBudgets("default").Get(ctx, "web", metav1.GetOptions{}); pdb.Status.DisruptionsAllowed != 1 {
		t.Errorf("dry-run eviction took a disruption: %+v", pdb.Status)
	}
}

func findCondition(conds []metav1.Condition, typ string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}

func statusCode(err error) int32 {
	if se, ok := err.(apierrors.APIStatus); ok {
		return se.Status().Code
	}
	return 0
}

func asStatus(err error, into **apierrors.StatusError) bool {
	se, ok := err.(*apierrors.StatusError)
	*into = se
	return ok
}

// Bodies pods/eviction cannot take get upstream's answers: a body that
// does not decode is 400, a name other than the URL's is 400, a missing
// pod is 404; the subresource is in discovery as kubectl drain looks for it.
func TestEvictionBadInput(t *testing.T) {
	s := startServer(t, "--disable-controller-manager")
	cs := s.client()
	ctx := ctxT(t)
	rc := cs.CoreV1().RESTClient()
	post := func(pod, body string) error {
		return rc.Post().AbsPath("/api/v1/namespaces/default/pods", pod, "eviction").
			SetHeader("Content-Type", "application/json").Body([]byte(body)).Do(ctx).Error()
	}
	for _, body := range []string{"{", "not json", `{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":7}}`, "\x00\xff"} {
		if err := post("p", body); !apierrors.IsBadRequest(err) {
			t.Errorf("body %q: want 400, got %v", body, err)
		}
	}
	err := post("p", `{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"q","namespace":"default"}}`)
	if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "name in URL does not match name in Eviction object") {
		t.Errorf("wrong name: want upstream's 400, got %v", err)
	}
	err = post("p", `{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"p","namespace":"default"}}`)
	if !apierrors.IsNotFound(err) {
		t.Errorf("missing pod: want 404, got %v", err)
	}
	// A running pod under a budget no controller has looked at yet: 429
	// "still being processed"; under two budgets: upstream's 500.
	// No controller manager runs here, so no ServiceAccount controller.
	if _, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p, err := cs.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"app": "p"}},
		Spec: corev1.PodSpec{NodeName: "n", Containers: []corev1.Container{{Name: "c", Image: "busybox:1.35"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.Phase = corev1.PodRunning
	if _, err := cs.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	one := intstr.FromInt32(1)
	for _, name := range []string{"first", "second"} {
		if _, err := cs.PolicyV1().PodDisruptionBudgets("default").Create(ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "p"}}}},
			metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		err = post("p", `{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"p","namespace":"default"}}`)
		switch name {
		case "first":
			if !apierrors.IsTooManyRequests(err) || !strings.Contains(err.Error(), "violate the pod's disruption budget") {
				t.Errorf("budget not yet observed: want 429, got %v", err)
			}
		case "second":
			if code := statusCode(err); code != 500 || !strings.Contains(err.Error(), "more than one PodDisruptionBudget") {
				t.Errorf("two budgets: want upstream's 500, got %d %v", code, err)
			}
		}
	}
	if _, err := cs.CoreV1().Pods("default").Get(ctx, "p", metav1.GetOptions{}); err != nil {
		t.Errorf("a refused eviction deleted the pod: %v", err)
	}

	res, err := cs.Discovery().ServerResourcesForGroupVersion("v1")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range res.APIResources {
		if r.Name == "pods/eviction" {
			found = r.Group == "policy" && r.Version == "v1" && r.Kind == "Eviction"
		}
	}
	if !found {
		t.Error("pods/eviction missing from /api/v1 discovery as policy/v1 Eviction")
	}
}

// The pod garbage collector force-deletes a pod whose Node was deleted,
// once the (shortened) quarantine is over.
func TestPodGCDeletesOrphans(t *testing.T) {
	s := startServer(t, "--pod-gc-quarantine=1s")
	cs := s.client()
	ctx := ctxT(t)
	k := simkubelet.Start(t, cs, "node-gc")
	pod, err := cs.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "orphan"},
		Spec:       corev1.PodSpec{NodeName: "node-gc", Containers: []corev1.Container{{Name: "app", Image: "username/container-lab:v2"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the pod Running", func() bool {
		p, err := cs.CoreV1().Pods("default").Get(ctx, "orphan", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning
	})
	k.CutOff("node-gc", true)
	if err := cs.CoreV1().Nodes().Delete(ctx, "node-gc", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// One collection pass sees the node missing, the next (20 s later)
	// finds the quarantine over.
	waitWithin(t, 60*time.Second, "the orphaned pod deleted", func() bool {
		p, err := cs.CoreV1().Pods("default").Get(ctx, "orphan", metav1.GetOptions{})
		return apierrors.IsNotFound(err) || (err == nil && p.UID != pod.UID)
	})
}
