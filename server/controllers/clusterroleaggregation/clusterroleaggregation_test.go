package clusterroleaggregation

import (
	"context"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

func role(name string, labels map[string]string, resources ...string) *rbacv1.ClusterRole {
	r := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	for _, res := range resources {
		r.Rules = append(r.Rules, rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{res}})
	}
	return r
}

func aggregating(name, label string) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name},
		AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{label: "true"}}}}}
}

// An aggregating role gets the matched roles' rules, in name order and
// each once, and follows them as they change or go.
func TestAggregation(t *testing.T) {
	cs := fake.NewClientset(aggregating("view", "to-view"),
		role("b-pods", map[string]string{"to-view": "true"}, "pods", "services"),
		role("a-cms", map[string]string{"to-view": "true"}, "configmaps", "pods"),
		role("other", nil, "secrets"))
	f := informers.NewSharedInformerFactory(cs, 0)
	c := New(cs, f)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.Start(ctx.Done())
	go c.Run(ctx, 1)
	resources := func() []string {
		r, _ := cs.RbacV1().ClusterRoles().Get(ctx, "view", metav1.GetOptions{})
		var out []string
		for _, rule := range r.Rules {
			out = append(out, rule.Resources...)
		}
		return out
	}
	poll := func(what string, want ...string) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
			got := resources()
			if len(got) != len(want) {
				return false, nil
			}
			for i := range got {
				if got[i] != want[i] {
					return false, nil
				}
			}
			return true, nil
		})
		if err != nil {
			t.Fatalf("%s: rules of view are %v, want %v", what, resources(), want)
		}
	}
	poll("at start", "configmaps", "pods", "services")
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role("c-nodes", map[string]string{"to-view": "true"}, "nodes"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll("after a new labelled role", "configmaps", "pods", "services", "nodes")
	if err := cs.RbacV1().ClusterRoles().Delete(ctx, "a-cms", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll("after a role went", "pods", "services", "nodes")
}

func TestAggregateBadSelector(t *testing.T) {
	r := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "x"}, AggregationRule: &rbacv1.AggregationRule{
		ClusterRoleSelectors: []metav1.LabelSelector{{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Bogus"}}}}}}
	if _, err := Aggregate(r, nil); err == nil {
		t.Error("a bad selector aggregated")
	}
}
